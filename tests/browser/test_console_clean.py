"""The page logs nothing while it is used: no console error, no uncaught exception and no
Content-Security-Policy violation during a slider drag, fast typing in a number box, and a live
run (support.browser collects all three and fails the test on any)."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect
from support.browser import checked_page

pytestmark = pytest.mark.browser


@pytest.fixture
def page(browser, live_server) -> Page:
    with checked_page(browser, live_server.url) as page:
        yield page


def drag(page: Page, selector: str, steps: int = 20) -> None:
    """A real drag: the mouse down on the thumb's track, moved across it step by step."""
    slider = page.locator(selector)
    slider.scroll_into_view_if_needed()
    box = slider.bounding_box()
    y = box["y"] + box["height"] / 2
    page.mouse.move(box["x"] + 4, y)
    page.mouse.down()
    for i in range(1, steps + 1):
        page.mouse.move(box["x"] + 4 + i * (box["width"] - 8) / steps, y)
    page.mouse.up()


def test_dragging_sliders_typing_fast_and_a_live_run_log_nothing(page):
    page.goto("/?max_new_tokens=20#plan")
    drag(page, "#alpha")  # to the end of the track
    top = float(page.locator("#alpha").get_attribute("max"))
    expect(page.locator('[data-figure="headline"]')).to_contain_text(f"α = {top:.2f}")
    drag(page, "#batch-slider")
    expect(page).to_have_url(re.compile(r"batch=1024(&|$)"))
    # Typed as fast as keys repeat: each key sends the section's request before the last is back.
    box = page.locator("#rl-batch")
    box.fill("")
    box.press_sequentially("1000")
    expect(page).to_have_url(re.compile(r"batch=1000(&|$)"))
    expect(page.locator("#rl-batch")).to_have_value("1000")
    page.locator("#plan-k_max").fill("")
    page.locator("#plan-k_max").press_sequentially("3")
    page.locator("#plan-k_max").press("Enter")
    expect(page).to_have_url(re.compile(r"k_max=3(&|$)"))
    page.locator("#prompt").fill("the quick brown fox")
    page.locator("#run-live").click()
    expect(page.locator("#live-status")).to_have_text("Done.", timeout=60_000)
