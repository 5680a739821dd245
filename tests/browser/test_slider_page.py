"""The slider page in real Chromium: sliders, address bar, share link, keyboard, no-JS form."""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlparse

import pytest
from playwright.sync_api import Page, expect
from support.browser import checked_page, page_errors

from engine.analytic import theory

pytestmark = pytest.mark.browser


@pytest.fixture
def page(browser, slider_server) -> Page:
    with checked_page(browser, slider_server.url, clipboard=True) as page:
        yield page


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
    expect(page.locator("svg.chart path.curve")).not_to_have_attribute("d", chart_before)
    expect(page.locator("svg.chart")).to_have_attribute("data-best-k", str(expected.best_k))
    expect(page).to_have_url(re.compile(r"alpha=0\.9(&|$)"))
    assert page.evaluate("history.length") == history_before  # replaced, not pushed


def test_the_address_bar_follows_a_drag_once_it_rests_and_a_copied_link_is_current(page):
    page.goto("/")
    for value in ("0.31", "0.52", "0.73"):
        page.locator("#alpha").fill(value)
    expect(page.locator('[data-figure="headline"]')).to_contain_text("α = 0.73")
    page.locator("#copy-link").click()  # perhaps before the rest: the copy takes what is shown
    expect(page.locator("#copy-status")).to_have_text("Link copied")
    assert "alpha=0.73&" in page.evaluate("navigator.clipboard.readText()") + "&"
    expect(page).to_have_url(re.compile(r"alpha=0\.73(&|$)"))
    expect(page).to_have_title(page.locator("#results").get_attribute("data-title"))


def test_a_results_request_that_fails_says_so_and_the_next_one_clears_it(browser, slider_server):
    context = browser.new_context(base_url=slider_server.url)
    page = context.new_page()
    errors = page_errors(page)
    page.goto("/")
    before = figure(page, "speedup")
    page.route(re.compile(r"/\?.*alpha=0\.9"), lambda route: route.abort())
    page.locator("#alpha").fill("0.9")
    expect(page.locator("#results-error")).to_contain_text("The server did not answer")
    assert figure(page, "speedup") == before  # the figures shown are still the last answer's
    page.unroute(re.compile(r"/\?.*alpha=0\.9"))
    page.locator("#alpha").fill("0.8")
    expected = theory.figures(0.8, 4, 0.18)
    expect(page.locator('[data-figure="speedup"]')).to_have_text(f"{expected.speedup:.3f}×")
    expect(page.locator("#results-error")).to_have_count(0)
    context.close()
    assert errors == ["Failed to load resource: net::ERR_FAILED"]  # the aborted request alone


def test_back_from_another_page_reopens_the_state_last_shown(page):
    page.goto("/")
    page.locator("#alpha").fill("0.9")
    expect(page).to_have_url(re.compile(r"alpha=0\.9(&|$)"))
    page.goto("/docs")  # the API documentation, and back
    page.go_back()
    expect(page.locator("#alpha-value")).to_have_text("0.90")
    expected = theory.figures(0.9, 4, 0.18)
    expect(page.locator('[data-figure="speedup"]')).to_have_text(f"{expected.speedup:.3f}×")


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

    other = browser.new_page()
    other.goto(link)  # the server draws the linked state; nothing changes it after the load
    expect(other.locator("#c")).to_have_value("0.12")
    expect(other.locator("#k")).to_have_value("6")
    expect(other.locator("#seed")).to_have_value("5")
    # The page that copied it shows the same, once its own update (c = 0.12) is swapped in.
    expect(page.locator("dl.stats")).to_have_text(other.locator("dl.stats").inner_text(),
                                                   use_inner_text=True)
    strip = other.locator("#simulated-cycles").inner_html()
    page.wait_for_function("s => document.querySelector('#simulated-cycles').innerHTML === s",
                           arg=strip)
    other.close()


def test_resample_changes_the_strip_and_the_seed(page):
    page.goto("/?alpha=0.5&seed=1")
    seed_1, seed_2 = ([k for c in theory.simulate_cycles(0.5, 4, 12, seed=s) for k in c]
                      for s in (1, 2))
    assert seed_1 != seed_2  # so the strip must change
    chips = page.locator("#simulated-cycles .chip")
    expect(chips).to_have_class([re.compile(rf"\bchip {k}\b") for k in seed_1])
    page.locator("#resample").click()
    expect(page).to_have_url(re.compile(r"[?&]seed=2(&|$)"))
    # The address can change before the new strip is swapped in: wait for the strip itself.
    expect(chips).to_have_class([re.compile(rf"\bchip {k}\b") for k in seed_2])


def test_bad_link_is_rewritten_to_the_clamped_state(page):
    page.goto("/?alpha=1.7&k=abc&c=-1")
    expect(page.locator("#results .notice")).to_contain_text("alpha=1.7 is outside 0–1")
    for clamped in (r"alpha=1(&|$)", r"k=4(&|$)", r"c=0(&|$)"):
        expect(page).to_have_url(re.compile(r"[?&]" + clamped))
    assert query(page) | {"alpha": "1", "k": "4", "c": "0"} == query(page)
    page.locator("#copy-link").click()
    expect(page.locator("#copy-status")).to_have_text("Link copied")
    assert "1.7" not in page.evaluate("navigator.clipboard.readText()")


def test_bad_link_shows_a_notice_then_clears_on_the_next_move(page):
    page.goto("/?alpha=1.7&k=abc")
    expect(page.locator("#results .notice")).to_contain_text("alpha=1.7 is outside 0–1")
    expect(page.locator("#alpha")).to_have_value("1")
    page.locator("#alpha").fill("0.8")
    expect(page.locator("#results .notice")).to_have_count(0)


def test_four_token_kinds_have_distinct_non_colour_cues(page):
    page.goto("/?alpha=0.5&k=6&seed=3")
    style = page.evaluate("""() => Object.fromEntries(['accepted','rejected','discarded','target']
        .map(kind => { const el = document.querySelector('#simulated-cycles .chip.' + kind);
                       const s = getComputedStyle(el);
                       return [kind, {line: s.textDecorationLine, border: s.borderTopStyle,
                                      bg: s.backgroundColor,
                                      marker: getComputedStyle(el, '::before').content}]; }))""")
    assert style["rejected"]["line"] == "line-through"
    assert style["discarded"]["border"] == "dashed"
    assert style["target"]["marker"] not in ("none", "normal")
    assert len({s["bg"] for s in style.values()}) == 4


def test_form_works_with_javascript_off(browser, slider_server):
    context = browser.new_context(base_url=slider_server.url, java_script_enabled=False)
    page = context.new_page()
    page.goto("/")
    page.locator("#tokens").fill("1000")
    page.locator("#k").fill("3")
    with page.expect_navigation():  # the form's GET: a new page, not an update of this one
        page.locator("button.apply").click()
    assert query(page)["tokens"] == "1000" and query(page)["k"] == "3"
    expected = theory.figures(0.7, 3, 0.18, tokens=1000)
    assert figure(page, "speedup") == f"{expected.speedup:.3f}×"
    assert "1000 tokens" in page.locator("dl.stats").inner_text()
    context.close()


def contrast(a: list[float], b: list[float]) -> float:
    def luminance(rgb: list[float]) -> float:
        lin = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4
               for c in (x / 255 for x in rgb)]
        return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]

    hi, lo = sorted((luminance(a), luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


COLOURS = """() => {
  const rgb = c => c.match(/[\\d.]+/g).slice(0, 3).map(Number);
  const panel = rgb(getComputedStyle(document.querySelector('.controls')).backgroundColor);
  const chips = ['accepted', 'rejected', 'discarded', 'target'].map(kind => {
    const s = getComputedStyle(document.querySelector('#simulated-cycles .chip.' + kind));
    return [kind, rgb(s.color), rgb(s.backgroundColor), s.opacity];
  });
  const texts = ['.muted', '.stats dt', '.chart .axis', '.chart .axis-title', '.chart .best-label',
                 '.chart .break-even-label'].map(sel => {
    const el = document.querySelector(sel), s = getComputedStyle(el);
    return [sel, rgb(sel.startsWith('.chart') ? s.fill : s.color)];
  });
  return {panel, chips, texts};
}"""


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_text_and_chips_meet_wcag_aa_contrast(browser, slider_server, scheme):
    page = browser.new_page(color_scheme=scheme)
    page.goto(slider_server.url + "/?alpha=0.5&k=6&seed=3")
    colours = page.evaluate(COLOURS)
    for kind, ink, background, opacity in colours["chips"]:
        assert float(opacity) == 1, kind  # fading by opacity would drop the contrast
        assert contrast(ink, background) >= 4.5, kind
    for selector, ink in colours["texts"]:
        assert contrast(ink, colours["panel"]) >= 4.5, selector
    page.close()


def test_dark_mode_follows_the_system_setting(browser, slider_server):
    backgrounds = {}
    for scheme in ("light", "dark"):
        page = browser.new_page(color_scheme=scheme)
        page.goto(slider_server.url)
        backgrounds[scheme] = page.evaluate(
            "getComputedStyle(document.documentElement).backgroundColor")
        page.close()
    assert backgrounds["light"] != backgrounds["dark"]


@pytest.mark.parametrize("width", [1280, 390])
def test_chart_text_is_readable_and_axes_are_labelled(browser, slider_server, width):
    page = browser.new_page(viewport={"width": width, "height": 900})
    page.goto(slider_server.url)
    sizes = page.locator("svg.chart text").evaluate_all(
        "els => els.map(e => e.getBoundingClientRect().height)")
    assert min(sizes) >= 13  # a glyph box of 13 px or more: 11 px type or larger
    titles = page.locator("svg.chart .axis-title").all_text_contents()
    assert titles == ["draft length k (tokens drafted per cycle)", "speedup (× plain decoding)"]
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    page.close()


@pytest.mark.parametrize("width", [1280, 390])
def test_nothing_moves_while_dragging_across_do_not_speculate(browser, slider_server, width):
    page = browser.new_page(viewport={"width": width, "height": 900})
    page.goto(slider_server.url + "/?alpha=0.3")
    tops = set()
    # 0.18 and 0.00 say "do not speculate", 1.00 puts the best k at the slider's edge.
    for alpha in ("0.30", "0.19", "0.18", "0.00", "1.00", "0.50"):
        page.locator("#alpha").fill(alpha)
        expect(page.locator('[data-figure="headline"]')).to_contain_text(f"α = {alpha}")
        tops.add(page.evaluate("""() => ['#simulated-cycles', 'svg.chart', '.panels']
            .map(s => document.querySelector(s).getBoundingClientRect().top).join()"""))
    assert len(tops) == 1, tops
    page.close()


def test_phone_sees_the_answer_while_moving_a_slider(browser, slider_server):
    page = browser.new_page(viewport={"width": 390, "height": 844})
    page.goto(slider_server.url)
    page.locator("#alpha").fill("0.9")
    pocket = page.locator(".pocket")
    expect(pocket).to_contain_text(f"{theory.figures(0.9, 4, 0.18).speedup:.2f}×")
    box = pocket.bounding_box()
    assert box is not None and box["y"] >= 0 and box["y"] + box["height"] <= 844
    page.close()


def test_the_phone_answer_steps_aside_once_the_sliders_are_scrolled_away(browser,
                                                                        slider_server):
    page = browser.new_page(viewport={"width": 390, "height": 844})
    page.goto(slider_server.url)
    pocket = page.locator(".pocket")
    expect(pocket).to_be_visible()
    page.locator("#live").scroll_into_view_if_needed()
    expect(pocket).to_be_hidden()  # it would cover the live run
    page.locator("#alpha").scroll_into_view_if_needed()
    expect(pocket).to_be_visible()
    page.close()


def test_do_not_speculate_draws_no_best_marker_and_the_edge_is_named(page):
    page.goto("/?alpha=0")
    assert page.locator("svg.chart .best-marker").count() == 0
    expect(page.locator("svg.chart .no-best-label")).to_have_text("no k pays: do not speculate")
    expect(page.locator('[data-figure="best_k"]')).to_have_text("none: do not speculate")
    page.locator("#alpha").fill("1")
    expect(page.locator("svg.chart .best-label")).to_have_text("best k = 16 (slider's edge)")
    expect(page.locator('[data-figure="headline"]')).to_contain_text("16 is the slider's edge")


def test_accessibility_tree_names_every_control_once(page):
    page.goto("/?alpha=0.5&k=3&seed=3")
    tree = page.locator("body").aria_snapshot()
    names = re.findall(r'- (?:slider|spinbutton|combobox|textbox) "([^"]+)"', tree)
    assert len(names) == len(set(names)) >= 10, names
    assert 'slider "acceptance rate α"' in tree and 'spinbutton "simulation seed"' in tree
    assert 'spinbutton "run seed"' in tree and 'spinbutton "run\'s draft length k"' in tree
    # Token kinds are names, not only tooltips.
    kinds = theory.simulate_cycles(0.5, 3, 12, seed=3)[0]
    assert f'img "draft 1: {kinds[0]}"' in tree
    # The results are not one big live region; a short status line speaks instead.
    assert page.locator("#results").get_attribute("aria-live") is None
    page.locator("#alpha").fill("0.8")
    fig = theory.figures(0.8, 3, 0.18)
    expect(page.locator("#results-announcer")).to_have_text(
        f"{fig.speedup:.2f}× at k = 3; best k {fig.best_k}, {fig.best_speedup:.2f}×.")


def test_the_prompt_lookup_preset_moves_c_shows_pi_and_prices_cycles_with_it(page):
    from engine.analytic import lookup

    page.goto("/")
    expect(page.locator("#pi")).to_be_hidden()
    page.locator("#preset").select_option("ngram")
    expect(page.locator("#c-value")).to_have_text("0.00")
    expect(page.locator("#pi")).to_be_visible()
    fig = lookup.figures(0.7, 4, 0.25, 0.0, 1.0)
    expect(page.locator('[data-figure="speedup"]')).to_have_text(f"{fig.speedup:.3f}×")
    expect(page.locator('[data-figure="cycle_cost"]')).to_have_text(
        "0.25 × 1.00 + 0.75 + 0.00 = 1.00")
    expect(page).to_have_url(re.compile(r"preset=ngram&pi=0\.25(&|$)"))
    page.locator("#pi").fill("0.6")
    fig = lookup.figures(0.7, 4, 0.6, 0.0, 1.0)
    expect(page.locator('[data-figure="speedup"]')).to_have_text(f"{fig.speedup:.3f}×")
    expect(page.locator("#pi-value")).to_have_text("0.60")
    expect(page).to_have_url(re.compile(r"pi=0\.6(&|$)"))
    # Back to the draft model: today's c, today's figures, no pi in the link.
    page.locator("#preset").select_option("model")
    expect(page.locator('[data-figure="speedup"]')).to_have_text("1.612×")
    expect(page.locator("#c-value")).to_have_text("0.18")
    expect(page.locator("#pi")).to_be_hidden()
    expect(page).not_to_have_url(re.compile(r"[?&](pi|preset)="))
