"""Run live with prompt lookup in real Chromium: the drafter is chosen on the page, kept in
the link, and a cycle that found nothing shows the target's token alone."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect
from support.browser import checked_page

pytestmark = pytest.mark.browser


@pytest.fixture
def page(browser, live_server) -> Page:
    with checked_page(browser, live_server.url, allow_4xx=True) as page:
        yield page


def test_a_prompt_lookup_run_shows_rows_without_a_proposal_as_one_target_token(page):
    page.goto("/?temperature=0&run_k=3&max_new_tokens=40&repeats=1")
    page.locator("#drafter").select_option("ngram")
    expect(page).to_have_url(re.compile(r"drafter=ngram"))
    page.locator("#prompt").fill("the quick brown fox jumps over the lazy dog and the quick brown")
    page.locator("#run-live").click()
    expect(page.locator("#live-summary .live-summary")).to_be_visible(timeout=60_000)
    rows = page.locator("#live-cycles > li")
    chips = rows.evaluate_all(
        "rows => rows.map(r => [...r.querySelectorAll('.chip')].map(c => c.classList[1]))")
    assert ["target"] in chips  # nothing found: one target token
    assert any(len(row) > 1 for row in chips)  # and some rows with proposals
    assert all(row[-1] == "target" for row in chips)
    expect(page.locator("#live-status")).to_have_text("Done.")
    page.reload()
    assert page.locator("#drafter").input_value() == "ngram"


def test_a_match_shows_its_text_and_where_it_was_then_its_numbers_go_to_the_model(page):
    page.goto("/?temperature=0&run_k=3&max_new_tokens=40&repeats=1&drafter=ngram")
    page.locator("#prompt").fill("the quick brown fox jumps over the lazy dog and the quick brown")
    page.locator("#run-live").click()
    expect(page.locator("#live-summary .live-summary")).to_be_visible(timeout=60_000)
    marker = page.locator("#live-cycles .lookup-match:has(q.match-text)").first
    expect(marker).to_have_text(re.compile(r"^\d-gram \S.* @\d+$"))
    expect(marker).to_have_attribute("title", re.compile(r"also occur at token \d+ .*after “…"))
    page.locator("#use-numbers").click()
    expect(page.locator("#preset")).to_have_value("ngram")
    expect(page.locator("#pi")).to_be_visible()
    expect(page).to_have_url(re.compile(r"preset=ngram&pi=\d"))
