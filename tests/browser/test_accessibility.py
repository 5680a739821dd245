"""An accessibility audit (axe-core: WCAG 2.1 A and AA, and best practice) of every kind of
page: the slider page after a live run, a saved run, a saved probe, the embeds, and the pages
a browser without JavaScript gets; on a phone (390 px) and a desktop (1280 px), in light and
dark, since a phone's screen is where tables scroll."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect
from support.axe import audit, audit_as_without_javascript
from support.browser import checked_page
from support.probes import FAST, probe

pytestmark = pytest.mark.browser

METRICS = "\n".join(
    ['vllm:spec_decode_num_drafts_total{model_name="m"} 10',
     'vllm:spec_decode_num_draft_tokens_total{model_name="m"} 30',
     'vllm:spec_decode_num_accepted_tokens_total{model_name="m"} 15']) + "\n"


WIDTHS = {"phone": {"width": 390, "height": 844}, "desktop": {"width": 1280, "height": 900}}
LOOKS = [(width, scheme) for width in WIDTHS for scheme in ("light", "dark")]


def looking(browser, live_server, width: str, scheme: str):
    return checked_page(browser, live_server.url, color_scheme=scheme, viewport=WIDTHS[width])


@pytest.fixture(scope="module")
def saved_run(browser, live_server) -> str:
    """A run made on the page; the link it was saved under."""
    with checked_page(browser, live_server.url) as page:
        page.goto("/?temperature=1&run_k=3&max_new_tokens=30&run_seed=2&repeats=1")
        page.locator("#prompt").fill("the quick brown fox")
        page.locator("#run-live").click()
        expect(page.locator("#share-run")).to_be_visible(timeout=60_000)
        return page.locator("#share-run").get_attribute("href")


@pytest.mark.parametrize(("width", "scheme"), LOOKS)
def test_the_page_after_a_live_run(browser, live_server, width, scheme):
    with looking(browser, live_server, width, scheme) as page:
        page.goto("/?temperature=1&run_k=3&max_new_tokens=30&run_seed=2&repeats=1")
        page.locator("#prompt").fill("the quick brown fox")
        page.locator("#run-live").click()
        expect(page.locator("#live-summary .live-summary")).to_be_visible(timeout=60_000)
        expect(page.locator("#share-run")).to_be_visible()
        assert audit(page) == []


@pytest.mark.parametrize(("width", "scheme"), LOOKS)
@pytest.mark.parametrize("path", ["{run}", "{run}?embed=1", "/?embed=1"])
def test_a_saved_run_and_the_embeds(browser, live_server, saved_run, path, width, scheme):
    with looking(browser, live_server, width, scheme) as page:
        page.goto(path.format(run=saved_run))
        assert audit(page) == []


@pytest.fixture(scope="module")
def saved_probe(live_server) -> str:
    return next(data for kind, data in probe(live_server, FAST) if kind == "saved")["url"]


@pytest.mark.parametrize(("width", "scheme"), LOOKS)
def test_a_saved_probe(browser, live_server, saved_probe, width, scheme):
    with looking(browser, live_server, width, scheme) as page:
        page.goto(saved_probe)
        expect(page.locator(".probe-table").first).to_be_visible()
        assert audit(page) == []


@pytest.mark.parametrize(("width", "scheme"), LOOKS)
@pytest.mark.parametrize("path", ["/runs", "/probes", "/calibrate"])
def test_the_indexes_of_saved_records_and_the_calibrate_box(browser, live_server, saved_run,
                                                            saved_probe, path, width, scheme):
    with looking(browser, live_server, width, scheme) as page:
        page.goto(path)
        assert audit(page) == []


SCROLLERS_OUT_OF_REACH = """() => [...document.querySelectorAll("*")].filter(el => {
  const style = getComputedStyle(el);
  const scrolls = (/(auto|scroll)/.test(style.overflowX) && el.scrollWidth > el.clientWidth + 1)
    || (/(auto|scroll)/.test(style.overflowY) && el.scrollHeight > el.clientHeight + 1);
  const reachable = el.tabIndex >= 0
    || el.querySelector("a[href], button, input, select, textarea, [tabindex]");
  return scrolls && !reachable;
}).map(el => el.tagName.toLowerCase() + "." + el.className)"""


@pytest.mark.parametrize(("width", "scheme"), LOOKS)
def test_every_region_that_scrolls_is_reachable_by_keyboard(browser, live_server, saved_run,
                                                          saved_probe, width, scheme):
    """axe checks this too; this names every scroller on each kind of page at once."""
    with looking(browser, live_server, width, scheme) as page:
        for path in ("/", saved_run, saved_probe):
            page.goto(path)
            page.wait_for_load_state("load")
            assert page.evaluate(SCROLLERS_OUT_OF_REACH) == [], path


def test_the_pages_without_javascript(browser, live_server, saved_run):
    context = browser.new_context(base_url=live_server.url, java_script_enabled=False)
    page: Page = context.new_page()
    shown = []
    for path in ("/", saved_run):
        page.goto(path)
        shown.append((page.url, page.content()))
    page.goto("/")
    page.locator("#metrics-before").fill(METRICS)
    page.locator("#run-calibrate").click()
    expect(page.locator(".calibrate-table")).to_be_visible()
    shown.append((page.url, page.content()))
    context.close()
    for url, html in shown:
        assert audit_as_without_javascript(browser, url, html) == [], url


@pytest.mark.parametrize(("width", "scheme"), LOOKS)
def test_the_validation_page(browser, slider_server, width, scheme):
    with checked_page(browser, slider_server.url, color_scheme=scheme,
                      viewport=WIDTHS[width]) as page:
        page.goto("/validation")
        expect(page.locator(".validation-series").first).to_be_visible()
        assert audit(page) == []
        assert page.evaluate(SCROLLERS_OUT_OF_REACH) == []
        # the page itself never scrolls sideways: wide tables scroll in their own region
        assert page.evaluate("document.documentElement.scrollWidth") <= WIDTHS[width]["width"]


def test_the_validation_page_without_javascript(browser, slider_server):
    context = browser.new_context(base_url=slider_server.url, java_script_enabled=False)
    page: Page = context.new_page()
    page.goto("/validation")
    page.locator("#rates").select_option("achieved")
    page.get_by_role("button", name="Show").click()
    expect(page.locator('#rates option[value="achieved"]')).to_have_attribute("selected", "")
    assert page.url.endswith("/validation?rates=achieved")
    url, html = page.url, page.content()
    context.close()
    assert audit_as_without_javascript(browser, url, html) == []


@pytest.mark.parametrize(("width", "scheme"), LOOKS)
def test_the_batch_section_where_model_and_measurement_disagree(browser, slider_server, width,
                                                                scheme):
    with checked_page(browser, slider_server.url, color_scheme=scheme,
                      viewport=WIDTHS[width]) as page:
        page.goto("/?hardware=this-machine&models=shipped&batch=64")
        expect(page.locator(".model-vs-measured")).to_be_visible()
        assert audit(page) == []
