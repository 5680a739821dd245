"""/watch in Chromium: it follows the scrapes live through the event stream, it is whole with
JavaScript off, and it passes the accessibility audit, light and dark."""

from __future__ import annotations

import json
import re

import pytest
from playwright.sync_api import expect
from support.axe import audit
from support.browser import checked_page
from support.live_server import LiveServer
from support.watch_pages import Counts, PageServer, page

from app.main import create_app
from engine.settings import Settings

START = Counts(drafts=100, accepted_per_position=(60, 40, 20, 10), generated=1000, running=1)
COSTS = {"passes": [
    {"model": "target", "batch": 1, "tokens": 1, "median_ms": 10.0},
    {"model": "draft", "batch": 1, "tokens": 1, "median_ms": 2.0},
    *({"model": "target", "batch": 1, "tokens": t, "median_ms": 11.0} for t in range(2, 6))]}
PLAN = {"plan": {"ranges": [[1, 64, 4]], "domains": [{"alpha": 0.6}]},
        "speculative_config": {"num_speculative_tokens": 4}}


@pytest.fixture
def watched(tmp_path):
    (tmp_path / "plan.json").write_text(json.dumps(PLAN))
    (tmp_path / "costs.json").write_text(json.dumps(COSTS))
    with PageServer() as vllm:
        vllm.page = page(START)
        settings = Settings(load_models=False, db=str(tmp_path / "db.sqlite"),
                            watch_urls=f"prod={vllm.url}", watch_interval=1.0,
                            watch_window=1, watch_plans={"prod": tmp_path / "plan.json"},
                            watch_costs={"prod": tmp_path / "costs.json"})
        with LiveServer(create_app(settings)) as server:
            yield vllm, server


def test_the_page_follows_the_scrapes_and_shows_the_warning_live(browser, watched):
    vllm, server = watched
    with checked_page(browser, server.url) as tab:
        tab.goto("/watch")
        expect(tab.locator("#watch-live")).to_contain_text("Live", timeout=15_000)
        vllm.page = page(START + [4, 3] * 20)
        expect(tab.locator(".watch-table")).to_contain_text("moving", timeout=15_000)
        vllm.page = page(START + [4, 3] * 20 + [0] * 80)  # nothing accepted any more
        warning = tab.locator(".verdict.warning")
        expect(warning).to_contain_text("Speculation stops paying", timeout=15_000)
        expect(warning).to_have_attribute("role", "alert")


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_page_passes_the_audit_and_is_whole_without_javascript(browser, watched, scheme):
    vllm, server = watched
    with checked_page(browser, server.url) as tab:
        tab.emulate_media(color_scheme=scheme)
        tab.goto("/watch")
        expect(tab.locator("#watch-live")).to_contain_text("Live", timeout=15_000)
        vllm.page = page(START + [2, 1] * 20)
        expect(tab.locator(".watch-table")).to_contain_text("moving", timeout=15_000)
        assert audit(tab) == []
    context = browser.new_context(base_url=server.url, java_script_enabled=False,
                                  color_scheme=scheme)
    tab = context.new_page()
    tab.goto("/watch")
    expect(tab.locator(".watch-table")).to_contain_text("moving")
    expect(tab.locator(".watch-deployment svg").first).to_be_visible()
    expect(tab.get_by_role("link", name="CSV")).to_have_attribute("href", "/watch/prod.csv")
    context.close()


def test_the_charts_share_one_text_size_fill_their_width_and_label_close_lines_apart(
        browser, watched):
    """The break-even (about 0.45 here) runs just above the counted α (0.417): their labels at
    the lines' ends do not overlap, and the break-even's line is dash-dot where no acceptance
    line is. Every chart's text prints at one size, every plot is as wide as its figure, and
    the live status gives its time in UTC like the rest of the page."""
    vllm, server = watched
    with checked_page(browser, server.url) as tab:
        tab.set_viewport_size({"width": 1280, "height": 900})
        tab.goto("/watch")
        expect(tab.locator("#watch-live")).to_contain_text("Live", timeout=15_000)
        vllm.page = page(START + [1, 0, 1, 0, 2, 1, 0] * 30)  # alpha 5 / 12 = 0.417
        expect(tab.locator(".watch-table")).to_contain_text("moving", timeout=15_000)
        expect(tab.locator("#watch-live")).to_have_text(
            re.compile(r"^Live: updated \d\d:\d\d:\d\d UTC after a scrape\.$"), timeout=15_000)
        charts = tab.locator(".watch-chart svg.chart")
        assert charts.count() == 3
        heights, gaps = [], []
        for i in range(3):
            svg = charts.nth(i)
            heights.append(svg.locator("text.axis").first.bounding_box()["height"])
            figure = svg.locator("xpath=..").bounding_box()
            gaps.append(abs(svg.bounding_box()["width"] - figure["width"]))
        assert max(heights) - min(heights) <= 1, heights
        assert max(gaps) <= 1, gaps
        alpha_chart = charts.first
        even = alpha_chart.locator("text.end-label.break-even-line").bounding_box()
        counted = alpha_chart.locator("text.end-label.alpha").bounding_box()
        assert even["y"] + even["height"] <= counted["y"] or \
            counted["y"] + counted["height"] <= even["y"], (even, counted)
        dashes = alpha_chart.locator("path.series.break-even-line").evaluate(
            "p => getComputedStyle(p).strokeDasharray")
        others = {alpha_chart.locator(f"path.series.{css}").evaluate(
            "p => getComputedStyle(p).strokeDasharray")
            for css in ("alpha", "rate", "assumed", "window-high")}
        assert dashes not in others and dashes != "none"
