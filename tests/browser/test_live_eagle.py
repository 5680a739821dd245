"""Run live with the EAGLE head in real Chromium, on the shipped pair: the drafter is chosen
on the page and kept in the link, the cycles' times name the head, and "Use these numbers"
selects the slider model's EAGLE head preset."""

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
    settings = shipped_settings(eagle="eagle")
    with LiveServer(create_app(settings)) as server:
        yield server


@pytest.fixture
def page(browser, shipped_server) -> Page:
    with checked_page(browser, shipped_server.url) as page:
        yield page


def test_a_head_run_names_the_head_and_its_numbers_go_to_the_heads_preset(page):
    page.goto("/?temperature=0&run_k=4&max_new_tokens=32&repeats=1")
    page.locator("#drafter").select_option("eagle")
    expect(page).to_have_url(re.compile(r"drafter=eagle"))
    page.locator("#prompt").fill("And God said, Let there be light")
    page.locator("#run-live").click()
    expect(page.locator("#live-summary .live-summary")).to_be_visible(timeout=60_000)
    expect(page.locator("#live-status")).to_have_text("Done.")
    times = page.locator("#live-cycles .cycle-ms").all_inner_texts()
    assert times and all(t.startswith("head ") for t in times)
    accepted = page.locator("#live-cycles .chip.accepted")
    expect(accepted.first).to_be_visible()  # a trained head: drafts are accepted
    page.locator("#use-numbers").click()
    expect(page.locator("#preset")).to_have_value("eagle")
    expect(page).to_have_url(re.compile(r"preset=eagle"))
    page.reload()
    assert page.locator("#drafter").input_value() == "eagle"
