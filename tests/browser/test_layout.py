"""The probe panel's layout on a desktop and on a phone: inputs as tall as the page's others,
no box taller than its content, and a probe's results readable at 390 px."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect
from support.probes import FAST, probe

pytestmark = pytest.mark.browser


def test_probe_inputs_match_the_page_and_boxes_fit_their_content(browser, live_server):
    context = browser.new_context(base_url=live_server.url, viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.goto("/")
    heights = page.locator(".traffic-settings input[type=number]").evaluate_all(
        "els => els.map(e => e.getBoundingClientRect().height)")
    live = page.locator(".live-settings input[type=number]").first.bounding_box()["height"]
    assert heights and all(abs(h - live) <= 2 for h in heights), (heights, live)
    temperatures = page.locator(".traffic-form fieldset").nth(1)
    inner = temperatures.evaluate(
        "f => Math.max(...[...f.children].map(c => c.getBoundingClientRect().bottom))"
        " - f.getBoundingClientRect().top")
    assert temperatures.bounding_box()["height"] <= inner + 24
    context.close()


def test_a_probe_reads_on_a_phone(browser, live_server):
    saved = next(data for kind, data in probe(live_server, FAST) if kind == "saved")
    context = browser.new_context(base_url=live_server.url, viewport={"width": 390, "height": 800})
    page = context.new_page()
    page.goto(saved["url"])
    # The page itself never scrolls sideways; the table does, and says so.
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    expect(page.locator(".scroll-cue")).to_be_visible()
    scroller = page.locator(".probe-summary .table-scroll")
    assert scroller.evaluate("s => s.scrollWidth > s.clientWidth")
    # Scrolled to its end, the row names stay in view.
    scroller.evaluate("s => { s.scrollLeft = s.scrollWidth; }")
    name = page.locator(".probe-table tbody th[scope=row]").first.bounding_box()
    box = scroller.bounding_box()
    assert box["x"] - 1 <= name["x"] <= box["x"] + 20
    # Chart labels at least 8 px on the screen.
    sizes = page.locator(".probe-summary svg.chart text").evaluate_all(
        "els => els.filter(e => e.textContent.trim()).map(e => e.getBoundingClientRect().height)")
    assert sizes and min(sizes) >= 8, sizes
    context.close()


def test_a_calibration_reads_on_a_phone_without_javascript(browser, live_server):
    context = browser.new_context(base_url=live_server.url, java_script_enabled=False,
                                  viewport={"width": 390, "height": 800})
    page = context.new_page()
    page.goto("/")
    page.locator("#metrics-before").fill(
        'vllm:spec_decode_num_drafts_total{model_name="m"} 10\n'
        'vllm:spec_decode_num_draft_tokens_total{model_name="m"} 30\n'
        'vllm:spec_decode_num_accepted_tokens_total{model_name="m"} 15\n')
    page.locator("#run-calibrate").click()
    expect(page.locator(".calibrate-table")).to_be_visible()
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    expect(page.locator(".scroll-cue")).to_be_visible()
    context.close()
