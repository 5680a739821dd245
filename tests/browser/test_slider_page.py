"""The slider page in real Chromium: sliders, address bar, share link, keyboard, no-JS form."""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlparse

import pytest
from playwright.sync_api import Page, expect

from engine.analytic import theory

pytestmark = pytest.mark.browser


@pytest.fixture
def page(browser, slider_server) -> Page:
    context = browser.new_context(base_url=slider_server.url)
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=slider_server.url)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: m.type == "error" and errors.append(m.text))
    yield page
    context.close()
    assert errors == [], f"the page logged errors: {errors}"


def figure(page: Page, name: str) -> str:
    return page.locator(f'[data-figure="{name}"]').inner_text()


def query(page: Page) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(urlparse(page.url).query).items()}


def test_moving_alpha_updates_numbers_chart_and_address_bar(page):
    page.goto("/")
    assert figure(page, "speedup") == "1.612×"
    chart_before = page.locator("svg.chart path.curve").get_attribute("d")
    history_before = page.evaluate("history.length")
    page.locator("#alpha").fill("0.9")
    expected = theory.figures(0.9, 4, 0.18)
    expect(page.locator('[data-figure="speedup"]')).to_have_text(f"{expected.speedup:.3f}×")
    expect(page.locator("#alpha-value")).to_have_text("0.90")
    assert page.locator("svg.chart path.curve").get_attribute("d") != chart_before
    assert page.locator("svg.chart").get_attribute("data-best-k") == str(expected.best_k)
    expect(page).to_have_url(re.compile(r"alpha=0\.9(&|$)"))
    assert page.evaluate("history.length") == history_before  # replaced, not pushed


def test_keyboard_moves_every_slider(page):
    page.goto("/")
    page.locator("#k").focus()
    page.keyboard.press("ArrowRight")
    expect(page.locator('[data-figure="cycle_cost"]')).to_have_text("5 × 0.18 + 1.00 = 1.90")
    page.locator("#alpha").focus()
    page.keyboard.press("ArrowLeft")
    expect(page.locator("#alpha-value")).to_have_text("0.69")
    expect(page).to_have_url(re.compile(r"alpha=0\.69&k=5&"))


def test_copied_link_reopens_the_same_state(page, browser, slider_server):
    page.goto("/?alpha=0.55&k=6&c=0.1&v=1.3&step_ms=30&tokens=800&seed=5")
    page.locator("#c").fill("0.12")
    expect(page).to_have_url(re.compile(r"c=0\.12&"))
    page.locator("#copy-link").click()
    expect(page.locator("#copy-status")).to_have_text("Link copied")
    link = page.evaluate("navigator.clipboard.readText()")
    assert link == page.url
    strip = page.locator("#simulated-cycles").inner_html()
    numbers = page.locator("dl.stats").inner_text()

    other = browser.new_page()
    other.goto(link)
    assert other.locator("#simulated-cycles").inner_html() == strip
    assert other.locator("dl.stats").inner_text() == numbers
    assert other.locator("#c").input_value() == "0.12"
    assert other.locator("#k").input_value() == "6"
    assert other.locator("#seed").input_value() == "5"
    other.close()


def test_resample_changes_the_strip_and_the_seed(page):
    page.goto("/?alpha=0.5&seed=1")
    strip = page.locator("#simulated-cycles").inner_html()
    page.locator("#resample").click()
    expect(page).to_have_url(re.compile(r"[?&]seed=2(&|$)"))
    assert page.locator("#simulated-cycles").inner_html() != strip
    chips = page.locator("#simulated-cycles .chip")
    kinds = chips.evaluate_all("els => els.map(e => e.classList[1])")
    assert kinds == [k for c in theory.simulate_cycles(0.5, 4, 12, seed=2) for k in c]


def test_bad_link_shows_a_notice_then_clears_on_the_next_move(page):
    page.goto("/?alpha=1.7&k=abc")
    expect(page.locator("#results .notice")).to_contain_text("alpha=1.7 is outside 0–1")
    assert page.locator("#alpha").input_value() == "1"
    page.locator("#alpha").fill("0.8")
    expect(page.locator("#results .notice")).to_have_count(0)


def test_four_token_kinds_have_distinct_non_colour_cues(page):
    page.goto("/?alpha=0.5&k=6&seed=3")
    style = page.evaluate("""() => Object.fromEntries(['accepted','rejected','discarded','target']
        .map(kind => { const el = document.querySelector('#simulated-cycles .chip.' + kind);
                       const s = getComputedStyle(el);
                       return [kind, {line: s.textDecorationLine, opacity: s.opacity,
                                      bg: s.backgroundColor,
                                      marker: getComputedStyle(el, '::before').content}]; }))""")
    assert style["rejected"]["line"] == "line-through"
    assert float(style["discarded"]["opacity"]) < 1
    assert style["target"]["marker"] not in ("none", "normal")
    assert len({s["bg"] for s in style.values()}) == 4


def test_form_works_with_javascript_off(browser, slider_server):
    context = browser.new_context(base_url=slider_server.url, java_script_enabled=False)
    page = context.new_page()
    page.goto("/")
    page.locator("#tokens").fill("1000")
    page.locator("#k").fill("3")
    page.locator("button.apply").click()
    page.wait_for_load_state()
    assert query(page)["tokens"] == "1000" and query(page)["k"] == "3"
    expected = theory.figures(0.7, 3, 0.18, tokens=1000)
    assert figure(page, "speedup") == f"{expected.speedup:.3f}×"
    assert "1000 tokens" in page.locator("dl.stats").inner_text()
    context.close()
