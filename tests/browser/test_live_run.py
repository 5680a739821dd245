"""Run live in real Chromium: streamed chips of every kind, the summary, and "Use these
numbers" moving the sliders and the address bar."""

from __future__ import annotations

import dataclasses
import re
import time

import pytest
from playwright.sync_api import Page, expect
from support.browser import checked_page

pytestmark = pytest.mark.browser


@pytest.fixture
def page(browser, live_server) -> Page:
    with checked_page(browser, live_server.url, allow_4xx=True) as page:
        yield page


def start_run(page: Page, prompt: str, **fields: str) -> None:
    page.locator("#prompt").fill(prompt)
    for name, value in fields.items():
        page.locator(f"#{name}").fill(value)
    page.locator("#run-live").click()


def test_run_live_streams_every_kind_and_fills_the_summary(page):
    page.goto("/?temperature=1&run_k=4&max_new_tokens=60&run_seed=3")
    start_run(page, "the quick brown fox")
    expect(page.locator("#live-status")).to_have_text("Done.", timeout=60_000)
    expect(page.locator("#live-summary .live-summary")).to_be_visible()
    chips = page.locator("#live-cycles .chip")
    kinds = set(chips.evaluate_all("els => els.map(e => e.classList[1])"))
    assert kinds == {"accepted", "rejected", "discarded", "target"}
    assert page.locator("#live-progress").evaluate("p => p.value") == 60
    assert page.locator("#live-text").inner_text().startswith("the quick brown fox")
    for figure in ("speedup_measured", "speedup_predicted", "alpha_counted", "c", "v"):
        assert page.locator(f'[data-summary="{figure}"]').inner_text().strip()
    assert page.locator(".live-summary svg.bar-chart").count() == 2


def test_use_these_numbers_moves_the_sliders_and_the_link(page):
    page.goto("/?max_new_tokens=30&run_k=3")
    start_run(page, "the lazy dog")
    button = page.locator("#use-numbers")
    expect(button).to_be_visible(timeout=60_000)
    alpha, c = button.get_attribute("data-alpha"), button.get_attribute("data-c")
    button.click()
    expect(page).to_have_url(re.compile(rf"alpha={float(alpha):g}&k=3&c={float(c):g}&"))
    expect(page.locator("#alpha")).to_have_value(f"{float(alpha):g}")
    expect(page.locator("#alpha-value")).to_have_text(f"{float(alpha):.2f}")
    expect(page.locator('[data-figure="headline"]')).to_contain_text(f"α = {float(alpha):.2f}")
    # The live output stays on the page: nothing was reloaded.
    assert page.locator("#live-cycles .chip").count() > 0


def test_markup_in_the_prompt_is_shown_as_text(page):
    page.goto("/?max_new_tokens=5")
    start_run(page, "<img src=x onerror=alert(1)><b>bold</b>")
    expect(page.locator("#live-status")).to_have_text("Done.", timeout=60_000)
    assert page.locator("#live-text img, #live-text b").count() == 0
    assert "<b>bold</b>" in page.locator("#live-text").inner_text()


def test_bad_settings_show_the_servers_message(page):
    page.goto("/")
    page.locator("#prompt").fill("   ")
    page.locator("#run-live").click()
    expect(page.locator("#live-status")).to_contain_text("prompt")
    expect(page.locator("#live-status")).to_have_class(re.compile("error"))


def test_stop_ends_the_run(page, live_server, app_state):
    # Every target pass slowed and no end of sequence: the run cannot finish before Stop.
    runs = app_state.runs
    pair = runs.pairs["tiny"]
    hook = pair.target.register_forward_hook(lambda *_: time.sleep(0.05))
    runs.pairs["tiny"] = dataclasses.replace(pair, stop_token_ids=frozenset())
    try:
        page.goto("/?max_new_tokens=256&run_k=1")
        start_run(page, "the quick brown fox jumps")
        expect(page.locator("#live-cycles .cycle").first).to_be_visible(timeout=60_000)
        page.locator("#stop-live").click()
        expect(page.locator("#live-status")).to_have_text("Stopped.")
        expect(page.locator("#run-live")).to_be_enabled()
        deadline = time.monotonic() + 5
        while runs.status()["running"] and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not runs.status()["running"]  # the engine was freed, not left to finish
        assert page.locator("#live-cycles .cycle").count() < 100  # of ~128 cycles
    finally:
        runs.pairs["tiny"] = pair
        hook.remove()


def test_live_settings_are_part_of_the_link(page):
    page.goto("/?alpha=0.6&prompt=hello%20there&run_k=7&temperature=0.3")
    expect(page.locator("#prompt")).to_have_value("hello there")
    expect(page.locator("#run_k")).to_have_value("7")
    page.locator("#temperature").fill("0.5")
    expect(page).to_have_url(re.compile(r"temperature=0\.5"))
    assert "alpha=0.6" in page.url and "prompt=hello+there" in page.url


def test_phone_width_never_scrolls_sideways_after_a_run(browser, live_server):
    page = browser.new_page(viewport={"width": 390, "height": 844})
    page.goto(live_server.url + "/?temperature=1&run_k=6&max_new_tokens=120&run_seed=2")
    page.locator("#run-live").click()
    expect(page.locator("#live-summary .live-summary")).to_be_visible(timeout=60_000)
    expect(page.locator("#share-run")).to_be_visible()  # the last thing the run adds
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    page.close()


def test_cycle_list_follows_the_newest_cycle(page):
    page.goto("/?temperature=1&run_k=1&max_new_tokens=200&run_seed=2")
    start_run(page, "the quick brown fox")
    expect(page.locator("#live-status")).to_have_text("Done.", timeout=60_000)
    cycles = page.locator("#live-cycles")
    assert cycles.evaluate("l => l.scrollHeight > l.clientHeight")  # it did overflow
    page.wait_for_function("""() => { const l = document.getElementById('live-cycles');
        return l.scrollHeight - l.scrollTop - l.clientHeight < 2; }""")
    last = page.locator("#live-cycles .cycle").last.bounding_box()
    box = cycles.bounding_box()
    assert box["y"] <= last["y"] and last["y"] + last["height"] <= box["y"] + box["height"] + 1


def test_live_panel_labels_and_defines_its_figures(page):
    page.goto("/?max_new_tokens=20")
    start_run(page, "the quick brown fox")
    expect(page.locator("#live-status")).to_have_text("Done.", timeout=60_000)
    tree = page.locator("#live").aria_snapshot()
    assert 'progressbar "tokens generated"' in tree
    assert re.search(r'img "(accepted|rejected|discarded|target) ', tree)
    assert "draft" in page.locator("#live-cycles .cycle-ms").first.inner_text()
    term = page.locator("#live-summary .term").first
    definition = term.locator(".definition")
    assert definition.bounding_box()["width"] <= 1  # hidden until asked for
    term.focus()
    page.wait_for_function("d => d.getBoundingClientRect().width > 100",  # shown on focus
                           arg=definition.element_handle())
    expect(definition).to_contain_text("drafts tried")


def test_slow_motion_paces_the_display_not_the_run(page):
    page.goto("/?temperature=1&run_k=2&max_new_tokens=40&run_seed=2&repeats=1&slow=1")
    expect(page.locator("#slow")).to_be_checked()
    start_run(page, "the quick brown fox")
    expect(page.locator("#live-status")).to_have_text("Done.", timeout=60_000)
    shown_at = page.evaluate("""() => new Promise(resolve => {
        const times = [];
        new MutationObserver(() => times.push(performance.now()))
          .observe(document.getElementById('live-cycles'), {childList: true});
        document.getElementById('run-live').click();
        const done = new MutationObserver(() => {
          if (document.getElementById('live-status').textContent === 'Done.') resolve(times);
        });
        done.observe(document.getElementById('live-status'), {childList: true, subtree: true});
    })""")
    gaps = [b - a for a, b in zip(shown_at[1:], shown_at[2:], strict=False)]
    assert len(shown_at) >= 5 and min(gaps) >= 140  # one cycle per 150 ms on screen
    # What was measured is the real, unpaced run: cycles take milliseconds, not 150.
    row = page.locator("#live-cycles .cycle-ms").first.inner_text()
    draft, verify = (float(x) for x in re.findall(r"[\d.]+", row)[:2])
    assert draft + verify < 140


def test_output_is_coloured_by_model_and_each_cycle_has_a_timeline(page):
    page.goto("/?temperature=1&run_k=4&max_new_tokens=40&run_seed=3&repeats=2")
    start_run(page, "the quick brown fox")
    expect(page.locator("#live-status")).to_have_text("Done.", timeout=60_000)
    assert page.locator("#live-text .by-draft").count() > 0
    # One marked span per target token that carries text ("⋯": a piece of a character).
    targets = page.locator("#live-cycles .chip.target").evaluate_all(
        "els => els.filter(e => e.textContent !== '⋯').length")
    assert page.locator("#live-text .by-target").count() == targets > 0
    rows = page.locator("#live-cycles .cycle").count()
    assert page.locator("#live-cycles svg.timeline .verify-time").count() == rows
    assert page.locator("#live-cycles svg.timeline .alone-time").count() == rows
    # The bars line up in one column, whatever the width of each row's chips.
    lefts = page.locator("#live-cycles svg.timeline").evaluate_all(
        "els => [...new Set(els.map(e => Math.round(e.getBoundingClientRect().left)))]")
    assert len(lefts) == 1, lefts
    interval = page.locator('[data-summary="speedup_interval"]').inner_text()
    low, high = (float(x) for x in re.findall(r"\d+\.\d+", interval))
    measured = float(page.locator(".live-summary").get_attribute("data-speedup-measured"))
    assert low <= measured <= high
    expect(page.locator(".how-measured")).to_contain_text("over 2 quiet passes")
    expect(page.locator('[data-summary="speedup_streamed"]')).to_have_text(re.compile(r"\d\.\d\d×"))
