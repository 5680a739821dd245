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
    # Chart text at least 10 px on the screen, and the domains named in a legend.
    sizes = page.evaluate(CHART_TEXT_PX, ".probe-summary svg.chart text")
    assert sizes and min(sizes) >= 10, sizes
    expect(page.locator(".domain-legend li").first).to_be_visible()
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


CHART_TEXT_PX = """sel => [...document.querySelectorAll(sel)].map(t => {
  const svg = t.ownerSVGElement, box = svg.viewBox.baseVal;
  const scale = box && box.width ? svg.getBoundingClientRect().width / box.width : 1;
  return parseFloat(getComputedStyle(t).fontSize) * scale;
})"""


def test_the_batch_section_reads_on_a_phone(browser, slider_server):
    """Each figure on one row, its value whole (not a word-wide column), and the chart's
    text 10 px or more once the chart is scaled to the screen."""
    context = browser.new_context(base_url=slider_server.url,
                                  viewport={"width": 390, "height": 844})
    page = context.new_page()
    page.goto("/?alpha=0.85&k=6#roofline")
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    # a value takes no more lines than its text needs at the list's full width
    figures = page.locator(".rl-stats dd").evaluate_all("""dds => dds.map(dd => {
        const box = dd.getBoundingClientRect(), list = dd.parentElement.getBoundingClientRect();
        const range = document.createRange();
        range.selectNodeContents(dd);
        const lines = new Set([...range.getClientRects()].map(r => Math.round(r.top))).size;
        const whole = dd.cloneNode(true);
        whole.style.cssText = "position:absolute;visibility:hidden;white-space:nowrap";
        dd.parentElement.appendChild(whole);
        const needs = Math.ceil(whole.getBoundingClientRect().width / list.width);
        whole.remove();
        return {text: dd.textContent, fits: box.right <= list.right + 1, lines, needs}; })""")
    assert figures and all(f["fits"] and f["lines"] <= f["needs"] for f in figures), figures
    sizes = page.evaluate(CHART_TEXT_PX, ".rl-chart text")
    assert sizes and min(sizes) >= 10, min(sizes)
    context.close()


@pytest.mark.parametrize("width", [1280, 1400])
def test_the_batch_sections_selects_show_their_whole_choice(browser, slider_server, width):
    context = browser.new_context(base_url=slider_server.url,
                                  viewport={"width": width, "height": 900})
    page = context.new_page()
    page.goto("/#roofline")
    cut = page.locator("#roofline-controls select").evaluate_all("""selects => {
        const probe = document.createElement("span");
        probe.style.cssText = "position:absolute;visibility:hidden;white-space:nowrap";
        document.body.appendChild(probe);
        return selects.flatMap(s => [...s.options].map(o => {
          probe.style.font = getComputedStyle(s).font;
          probe.textContent = o.text;
          // the text, the select's padding and its arrow (about 24 px)
          return probe.getBoundingClientRect().width + 24 > s.clientWidth ? o.text : null;
        })).filter(Boolean);
      }""")
    assert cut == []
    context.close()
