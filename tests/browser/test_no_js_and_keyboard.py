"""The page with JavaScript off, and by keyboard alone: every form still does its job, the
host guard tells this page's own form posts from another site's, focus never falls to the
page's body, and keys held on a slider log no errors."""

from __future__ import annotations

import re

import httpx
import pytest
from playwright.sync_api import Page, expect
from support.browser import checked_page, page_errors

pytestmark = pytest.mark.browser

METRICS = "\n".join(
    ['vllm:spec_decode_num_drafts_total{model_name="m"} 10',
     'vllm:spec_decode_num_draft_tokens_total{model_name="m"} 30',
     'vllm:spec_decode_num_accepted_tokens_total{model_name="m"} 15']) + "\n"


@pytest.fixture
def no_js(browser, live_server) -> Page:
    context = browser.new_context(base_url=live_server.url, java_script_enabled=False)
    page = context.new_page()
    errors = page_errors(page)
    yield page
    context.close()
    assert errors == []


def test_every_form_on_the_page_works_without_javascript(no_js):
    no_js.goto("/")
    forms = no_js.locator("form").evaluate_all("fs => fs.map(f => f.id)")
    assert {"controls", "live-form", "traffic-form", "calibrate-form"} <= set(forms)
    for form_id in forms:
        no_js.goto("/")
        form = no_js.locator(f"form#{form_id}")
        if form.locator('textarea[name="before"]').count():
            form.locator('textarea[name="before"]').fill(METRICS)
        submit = form.locator('button[type="submit"]:enabled').first
        with no_js.expect_navigation() as navigation:
            submit.click()
        response = navigation.value
        assert response is not None and response.status == 200, (form_id, response.status)
        assert "may not" not in no_js.content(), form_id
    # The calibration's answer is a page of its own, with the figures.
    no_js.goto("/")
    no_js.locator("#metrics-before").fill(METRICS)
    no_js.locator("#run-calibrate").click()
    expect(no_js.locator(".calibrate-table")).to_be_visible()
    expect(no_js.locator(".calibrate-table")).to_contain_text("0.5")


def test_a_cross_site_form_post_is_refused_and_says_what_was_refused(browser, live_server):
    """A page on another origin posting a form to this server, as a browser sends it."""
    for origin, fetch_site in (("http://evil.example", "cross-site"), ("null", "cross-site")):
        response = httpx.post(live_server.url + "/calibrate", data={"before": METRICS},
                              headers={"Origin": origin, "Sec-Fetch-Site": fetch_site})
        assert response.status_code == 403
        assert "may not read vLLM counters (calibrate) here" in response.json()["message"]


@pytest.fixture
def page(browser, live_server) -> Page:
    with checked_page(browser, live_server.url) as page:
        yield page


def test_enter_on_run_live_moves_focus_to_stop_and_back(page):
    page.goto("/?temperature=1&run_k=3&max_new_tokens=40&run_seed=2&repeats=1&slow=1")
    page.locator("#prompt").fill("the quick brown fox")
    page.locator("#run-live").focus()
    page.keyboard.press("Enter")
    expect(page.locator("#stop-live")).to_be_focused()
    expect(page.locator("#live-status")).to_have_text("Done.", timeout=60_000)
    expect(page.locator("#run-live")).to_be_focused()
    # Stopping by keyboard gives it back too.
    page.keyboard.press("Enter")
    expect(page.locator("#stop-live")).to_be_focused()
    page.keyboard.press("Enter")
    expect(page.locator("#live-status")).to_have_text(re.compile("Stopped|Done"))
    expect(page.locator("#run-live")).to_be_focused()


def test_the_first_tab_reaches_a_skip_link_to_the_controls(page):
    page.goto("/")
    page.keyboard.press("Tab")
    skip = page.locator("a.skip-link")
    expect(skip).to_be_focused()
    expect(skip).to_be_visible()
    page.keyboard.press("Enter")
    page.keyboard.press("Tab")
    expect(page.locator("#controls input").first).to_be_focused()


def test_ten_quick_arrow_presses_on_a_slider_log_no_errors(page):
    page.goto("/")
    page.locator("#alpha").focus()
    start = float(page.locator("#alpha").input_value())
    for _ in range(10):
        page.keyboard.press("ArrowRight")
    expect(page).to_have_url(re.compile(rf"alpha={start + 0.1:.2f}".rstrip("0")))
    expect(page.locator("#alpha-value")).to_have_text(f"{start + 0.1:.2f}")
    page.wait_for_load_state("networkidle")
    # checked_page fails the test on any console error, htmx's aborted requests included.
