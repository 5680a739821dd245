"""Run live with a token tree in real Chromium, on the shipped pair: the tree field takes part
with every drafter but prompt lookup, is kept in the link, each cycle draws its tree with the
accepted path marked, and "Use these numbers" carries the tree to the slider's tree mode."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect
from support.browser import checked_page
from support.live_server import LiveServer, shipped_settings

from app.main import create_app
from engine.analytic import trees

pytestmark = pytest.mark.browser

TREE = trees.text(trees.MEDUSA_TREE)


@pytest.fixture(scope="module")
def shipped_server() -> LiveServer:
    settings = shipped_settings(medusa="medusa")
    with LiveServer(create_app(settings)) as server:
        yield server


@pytest.fixture
def page(browser, shipped_server) -> Page:
    with checked_page(browser, shipped_server.url) as page:
        yield page


def test_a_tree_run_draws_each_cycles_tree_and_its_numbers_open_the_slider_tree(page):
    page.goto("/?temperature=0&max_new_tokens=32&repeats=1")
    page.locator("#drafter").select_option("ngram")
    expect(page.locator("#run_tree")).to_be_disabled()  # prompt lookup drafts no tree
    page.locator("#drafter").select_option("medusa")
    expect(page.locator("#run_tree")).to_be_enabled()
    page.locator("#run_tree").fill(TREE)
    page.locator("#prompt").fill("And it came to pass, when the king heard these words, that")
    expect(page).to_have_url(re.compile(r"run_tree=" + re.escape("0%3B1%3B2")))
    page.locator("#run-live").click()
    expect(page.locator("#live-summary .live-summary")).to_be_visible(timeout=60_000)
    expect(page.locator("#live-status")).to_have_text("Done.")
    drawn = page.locator("#live-cycles svg.cycle-tree")
    expect(drawn.first).to_be_visible()
    assert drawn.count() == page.locator("#live-cycles .cycle").count()
    assert drawn.first.locator("text.tree-token").count() == len(trees.MEDUSA_TREE)
    expect(page.locator("#live-cycles text.tree-token.accepted").first).to_be_attached()
    expect(page.locator('[data-summary="tree_tokens_predicted"]')).to_be_visible()
    page.locator("#use-numbers").click()
    expect(page.locator("#tree")).to_have_value(TREE)
    expect(page.locator(".tree-box")).to_be_visible()
    page.reload()
    expect(page.locator("#run_tree")).to_have_value(TREE)
    expect(page.locator("#drafter")).to_have_value("medusa")
