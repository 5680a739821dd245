"""Prompt lookup on the shipped pair in real Chromium when it finds nothing: the summary says
so in words instead of drawing empty charts, a run that ended at end-of-sequence says where
and fills its progress bar, and the "Quoted again" preset gives lookup text to find."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect
from support.browser import checked_page
from support.live_server import LiveServer, shipped_settings

from app.main import create_app

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def shipped_server() -> LiveServer:
    with LiveServer(create_app(shipped_settings())) as server:
        yield server


@pytest.fixture
def page(browser, shipped_server) -> Page:
    with checked_page(browser, shipped_server.url) as page:
        yield page


def test_lookup_on_the_jargon_preset_says_it_found_nothing_and_where_the_model_stopped(page):
    # The run: the page's defaults (temperature 0.8, seed 0, 64 tokens), one repeat.
    page.goto("/?drafter=ngram&repeats=1&max_new_tokens=64")
    page.get_by_role("button", name="Jargon File").click()
    page.locator("#run-live").click()
    expect(page.locator("#nothing-proposed")).to_contain_text(
        "Prompt lookup found nothing to propose", timeout=60_000)
    expect(page.locator("#live-summary .summary-charts")).to_have_count(0)  # no empty axes
    expect(page.locator("#live-status")).to_have_text(re.compile(
        r"^Done: the model ended its answer \(end of sequence\) at (\d+) of 64 tokens\.$"))
    made = int(re.search(r"at (\d+) of", page.locator("#live-status").inner_text()).group(1))
    assert made < 64
    progress = page.locator("#live-progress")
    assert progress.evaluate("p => [p.value, p.max]") == [made, made]  # the bar is full


def test_the_quoted_again_preset_gives_prompt_lookup_something_to_accept(page):
    page.goto("/?drafter=ngram&repeats=1&temperature=0&max_new_tokens=48")
    page.get_by_role("button", name="Quoted again").click()
    expect(page.locator("#prompt")).to_have_value(re.compile(r"deep\.\n\nIn the beginning"))
    page.locator("#run-live").click()
    expect(page.locator("#live-summary .summary-charts")).to_be_visible(timeout=60_000)
    expect(page.locator("#nothing-proposed")).to_have_count(0)
    expect(page.locator("#live-cycles .chip.accepted").first).to_be_visible()
    expect(page.locator("#live-status")).to_have_text("Done.")
