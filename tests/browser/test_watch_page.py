"""/watch in Chromium: it follows the scrapes live through the event stream, it is whole with
JavaScript off, and it passes the accessibility audit, light and dark."""

from __future__ import annotations

import json

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
