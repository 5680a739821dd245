"""Share a live run and replay it in real Chromium: run, "Share this run", open the copied
link in a fresh browser context, and replay it cycle by cycle and in slow motion."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect
from support.browser import page_errors

pytestmark = pytest.mark.browser

CHIPS = "els => els.map(e => e.className + ':' + e.textContent)"
# A cycle's row: its chips, its times, and its timeline (draft and verification bars, the
# "target alone" tick), as drawn.
ROWS = """els => els.map(e => [
    [...e.querySelectorAll('.chip')].map(c => c.className + ':' + c.textContent).join(' '),
    e.querySelector('.cycle-ms').textContent.replace(/\\s+/g, ' ').trim(),
    [...e.querySelectorAll('svg.timeline, svg.timeline rect, svg.timeline line')].map(
        b => [...b.attributes].map(a => a.name + '=' + a.value).join(' ')).join(' | ')])"""


def test_run_share_open_in_a_fresh_context_and_replay(browser, live_server):
    context = browser.new_context(base_url=live_server.url,
                                  permissions=["clipboard-read", "clipboard-write"])
    page = context.new_page()
    errors = page_errors(page)
    page.goto("/?max_new_tokens=40&run_k=3&temperature=1&run_seed=2")
    page.locator("#prompt").fill("the quick brown fox")
    page.locator("#run-live").click()
    share = page.locator("#share-run")
    expect(share).to_be_visible(timeout=60_000)
    share.click()
    expect(page.locator("#share-status")).to_contain_text("Link copied")
    link = page.evaluate("navigator.clipboard.readText()")
    assert re.fullmatch(re.escape(live_server.url) + r"/runs/[A-Za-z0-9_-]{22}", link)
    expect(page.locator("#share-url")).to_have_value(link)
    live_chips = page.locator("#live-cycles .chip").evaluate_all(CHIPS)
    live_rows = page.locator("#live-cycles .cycle").evaluate_all(ROWS)
    assert all("draft-time" in bars and "alone-time" in bars for _, _, bars in live_rows)
    live_text = page.locator("#live-text").inner_text()
    measured = page.locator('#live-summary [data-summary="speedup_measured"]').inner_text()
    assert errors == []
    context.close()

    fresh = browser.new_context()  # nothing shared with the context that ran it
    page = fresh.new_page()
    errors = page_errors(page)
    page.goto(link)
    # The run as the live panel showed it: the same chips, text and figures.
    assert page.locator("#replay-cycles .chip").evaluate_all(CHIPS) == live_chips
    # Row by row, bars included: the saved run as the live panel drew it.
    assert page.locator("#replay-cycles .cycle").evaluate_all(ROWS) == live_rows
    assert page.locator("#replay-text").inner_text() == live_text
    assert page.locator('[data-summary="speedup_measured"]').inner_text() == measured
    total = page.locator("#replay-cycles .cycle").count()
    visible = page.locator("#replay-cycles .cycle:visible")

    # Cycle by cycle: the figures and the address follow each step.
    page.locator("#replay-step").click()
    expect(visible).to_have_count(1)
    expect(page.locator("#replay-status")).to_have_text(f"Cycle 1 of {total}.")
    expect(page.locator("#replay-summary")).to_be_hidden()
    page.locator("#replay-step").click()
    expect(visible).to_have_count(2)
    expect(page).to_have_url(re.compile(r"\?cycle=2&speed=1$"))
    tokens_after_two = page.locator('#replay-figures [data-live="tokens"]').inner_text()
    assert int(tokens_after_two) == page.locator("#replay-progress").evaluate("p => p.value")

    # Slow motion at x0.1 starts again from nothing (read in the click's own task, before
    # the first cycle's timer) and plays to the end.
    assert page.evaluate("""() => {
        document.querySelector('.replay-play[data-speed="0.1"]').click();
        return document.querySelectorAll('#replay-cycles .cycle:not([hidden])').length;
    }""") == 0
    expect(page.locator("#replay-status")).to_have_text(f"All {total} cycles.", timeout=30_000)
    expect(visible).to_have_count(total)
    expect(page.locator("#replay-summary")).to_be_visible()
    assert page.locator("#replay-text").inner_text() == live_text

    # The stepped position is a link of its own, and works without a script.
    page.goto(link + "?cycle=2&speed=0.25")
    expect(visible).to_have_count(2)
    fresh.close()
    assert errors == []


def test_a_saved_run_without_javascript_steps_by_links(browser, live_server):
    import httpx

    with httpx.stream("POST", live_server.url + "/api/runs", timeout=60, json={
            "prompt": "the lazy dog", "k": 2, "max_new_tokens": 10, "pair": "tiny"}) as r:
        saved = [line for line in r.iter_lines() if line.startswith("data: ")][-1]
    run_url = live_server.url + re.search(r'"url": "([^"]+)"', saved).group(1)
    context = browser.new_context(java_script_enabled=False)
    page = context.new_page()
    page.goto(run_url + "?cycle=0")
    expect(page.locator("#replay-cycles .cycle:visible")).to_have_count(0)
    page.locator("#replay-step").click()
    expect(page.locator("#replay-cycles .cycle:visible")).to_have_count(1)
    expect(page).to_have_url(re.compile(r"\?cycle=1&speed=1$"))
    context.close()
