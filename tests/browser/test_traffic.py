"""The "Your traffic" panel in real Chromium: a probe of a built-in set and an uploaded file,
shared and opened from its link, bad files explained, the pasted vLLM metrics, and "Use these
numbers"."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect
from support.browser import checked_page
from support.live_server import LiveServer

from app.main import create_app

pytestmark = pytest.mark.browser

METRICS = "\n".join(
    ['vllm:spec_decode_num_drafts_total{model_name="m",engine="0"} 10',
     'vllm:spec_decode_num_draft_tokens_total{model_name="m",engine="0"} 30',
     'vllm:spec_decode_num_accepted_tokens_total{model_name="m",engine="0"} 15']
    + [f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{model_name="m",engine="0",'
       f'position="{i}"}} {n}' for i, n in enumerate((7, 5, 3))]) + "\n"


@pytest.fixture
def page(browser, live_server) -> Page:
    with checked_page(browser, live_server.url, allow_4xx=True) as page:
        yield page


def test_probe_a_set_and_a_file_share_it_then_use_a_row(page, browser, live_server, tmp_path):
    page.goto("/?probe_set=&probe_set=python&probe_t=0&probe_t=1&probe_k=3&probe_tokens=5"
              "&probe_prompts=2")
    expect(page.locator('input[name="probe_set"][value="python"]')).to_be_checked()
    expect(page.locator('input[name="probe_set"][value="jargon"]')).not_to_be_checked()
    upload = tmp_path / "tickets.jsonl"
    upload.write_text('{"text": "the quick brown fox", "domain": "tickets"}\n', encoding="utf-8")
    page.locator("#probe-file").set_input_files(str(upload))
    page.locator("#run-probe").click()
    table = page.locator("#probe-result .probe-table:not(.positions-table)")
    expect(table).to_be_visible(timeout=60_000)
    expect(page.locator("#probe-status")).to_have_text("Done.")
    rows = table.locator("tbody tr")
    assert rows.count() == 4  # python and tickets at T = 0 and 1
    assert set(rows.evaluate_all("rs => rs.map(r => r.dataset.domain)")) == {"python", "tickets"}
    assert page.locator("#probe-result svg.chart").count() == 2
    expect(page.locator("#probe-result .domain-legend li")).to_have_count(2)
    assert page.locator("#probe-progress").evaluate("p => p.value === p.max && p.max === 6")

    share = page.locator("#share-probe")
    expect(share).to_have_text("Share this probe")
    href = share.get_attribute("href")
    assert re.fullmatch(r"/probes/[A-Za-z0-9_-]{22}", href)
    expect(page.locator("#share-probe-url")).to_have_value(live_server.url + href)
    share.click()  # copies the link (no clipboard here: the address is selected instead)
    expect(page.locator("#share-probe-status")).not_to_be_empty()
    fresh = browser.new_context(base_url=live_server.url)  # someone the link was sent to
    try:
        stored = fresh.new_page()
        stored.goto(href)
        kept = stored.locator("#probe-result .probe-table:not(.positions-table) tbody tr")
        assert kept.count() == 4
        assert kept.evaluate_all("rs => rs.map(r => r.dataset.alpha)") == \
            rows.evaluate_all("rs => rs.map(r => r.dataset.alpha)")
        assert stored.locator("#probe-result svg.chart").count() == 2
        expect(stored.locator("#probe-title")).to_contain_text(
            re.compile(r"Saved probe: α from \d\.\d\d to \d\.\d\d across 2 kinds of text at 2 "
                       r"temperatures, 3 drafts a cycle"))
        expect(stored.locator(".run-facts")).to_contain_text("prompts from tickets.jsonl")
        with stored.expect_navigation():
            stored.locator("#probe-settings-link").click()
        expect(stored.locator('input[name="probe_set"][value="python"]')).to_be_checked()
        expect(stored.locator('input[name="probe_t"][value="1"]')).to_be_checked()
        expect(stored.locator("#probe_k")).to_have_value("3")
    finally:
        fresh.close()

    link = rows.nth(1).locator("a.use-numbers")
    alpha, k = link.get_attribute("data-alpha"), link.get_attribute("data-k")
    link.click()
    expect(page).to_have_url(re.compile(rf"alpha={float(alpha):g}&k={k}&"))
    expect(page.locator("#alpha")).to_have_value(f"{float(alpha):g}")
    assert "probe_t=1" in page.url  # the panel's state stays in the link


def test_a_bad_file_is_explained_on_the_page(page, tmp_path):
    page.goto("/?probe_set=&probe_t=0")
    bad = tmp_path / "latin1.txt"
    bad.write_bytes("café crème\n".encode("latin-1"))
    page.locator("#probe-file").set_input_files(str(bad))
    page.locator("#run-probe").click()
    status = page.locator("#probe-status")
    expect(status).to_contain_text("latin1.txt is not UTF-8 text")
    expect(status).to_have_class(re.compile("error"))


def test_paste_metrics_then_use_these_numbers(page):
    page.goto("/")
    page.locator("#metrics-before").fill(METRICS)
    page.locator("#run-calibrate").click()
    row = page.locator("#calibrate-result .calibrate-table tbody tr")
    expect(row).to_have_count(1)
    expect(row).to_have_attribute("data-alpha", "0.682")
    row.locator("a.use-numbers").click()
    expect(page).to_have_url(re.compile(r"alpha=0.68&k=3&"))
    page.locator("#metrics-before").fill("<html>502 Bad Gateway</html>")
    page.locator("#run-calibrate").click()
    expect(page.locator("#calibrate-result .calibrate-error")).to_contain_text(
        "not Prometheus text format")


def test_choosing_the_vllm_engine_puts_it_in_the_link(browser, live_settings):
    # The engine choice is offered only by a server configured with a vLLM server; nothing
    # is sent to it here.
    settings = live_settings.model_copy(update={"vllm_url": "http://127.0.0.1:9"})
    with LiveServer(create_app(settings)) as server, checked_page(browser, server.url) as page:
        page.goto("/")
        page.locator("#probe_engine").select_option("vllm")
        expect(page).to_have_url(re.compile(r"probe_engine=vllm(&|$)"))
        page.reload()
        expect(page.locator("#probe_engine")).to_have_value("vllm")
        page.locator("#probe_engine").select_option("specscope")
        expect(page).not_to_have_url(re.compile(r"probe_engine="))


def test_both_drafters_side_by_side_then_use_prompt_lookups_row(page):
    page.goto("/?probe_set=&probe_set=python&probe_t=0&probe_k=3&probe_tokens=8"
              "&probe_prompts=2")
    page.locator("#probe_drafter").select_option("both")
    expect(page).to_have_url(re.compile(r"probe_drafter=both"))
    page.locator("#run-probe").click()
    compare = page.locator("#probe-result .compare-table tbody tr")
    expect(compare).to_have_count(1, timeout=60_000)
    expect(page.locator("#probe-status")).to_have_text("Done.")
    expect(compare.first).to_have_attribute("data-winner", re.compile(r"^(model|ngram|neither)$"))
    expect(page.locator('#probe-result .probe-summary[data-drafter="model"]')).to_have_count(1)
    ngram = page.locator('#probe-result .probe-summary[data-drafter="ngram"]')
    expect(ngram).to_have_count(1)
    pi = ngram.locator('[data-figure="pi"]').first.inner_text()
    ngram.locator("a.use-numbers").first.click()
    expect(page.locator("#preset")).to_have_value("ngram")
    expect(page.locator("#pi")).to_be_visible()
    expect(page.locator("#pi-value")).to_have_text(pi)
    expect(page).to_have_url(re.compile(r"preset=ngram&pi="))
    expect(page.locator('[data-figure="cycle_cost"]')).to_contain_text(f"{pi} × ")
