"""The batch section's schedule in real Chromium: "Copy vLLM config" puts the API's config on
the clipboard; the plan's inputs and the section's settings re-plan it in place and in the link."""

from __future__ import annotations

import json
import re

import httpx
import pytest
from playwright.sync_api import Page, expect
from support.browser import checked_page

pytestmark = pytest.mark.browser


@pytest.fixture
def page(browser, slider_server) -> Page:
    with checked_page(browser, slider_server.url, clipboard=True) as page:
        yield page


def api_config(server, query: str) -> dict | None:
    """What "Copy vLLM config" copies: the engine arguments, speculative_config among them."""
    return httpx.get(f"{server.url}/api/plan?{query}", timeout=30).json()["engine_args"]


def test_copy_vllm_config_puts_the_plans_config_on_the_clipboard(page, slider_server):
    page.goto("/?hardware=a100-80gb&models=llama-70b-1b&gpus=4&context=2048&alpha=0.75#plan")
    page.locator("#copy-plan-config").click()
    expect(page.locator("#plan-copy-status")).to_have_text(
        re.compile("vLLM engine arguments copied"))
    copied = json.loads(page.evaluate("navigator.clipboard.readText()"))
    assert copied == api_config(slider_server, "hardware=a100-80gb&pair=llama-70b-1b&gpus=4"
                                               "&context=2048&alpha=0.75")
    assert copied["tensor_parallel_size"] == 4 and copied["model"] == "meta-llama/Llama-3.1-70B"
    spec = copied["speculative_config"]
    assert spec["method"] == "draft_model" and spec["model"] == "meta-llama/Llama-3.2-1B"
    assert "/api/plan" not in page.url  # the link copied instead of navigating
    assert page.url.endswith("#plan")  # the canonical link keeps the section's fragment


IDEAL = ("launch_us_per_layer=0&allreduce_us_per_log2=0&sample_row_overhead_us=0"
         "&spec_overhead_ms=0&spec_row_overhead_us=0&step_overhead_us=0&draft_overhead_us=0")
"""The ideal roofline: with the fitted speculative step the defaults' plan configures nothing."""


def test_a_shorter_k_max_replans_in_place_and_goes_into_the_link(page, slider_server):
    page.goto(f"/?{IDEAL}")
    rows = page.locator("table.plan-table tbody tr")
    expect(rows.first).to_have_attribute("data-k", "3")  # the defaults' plan starts at k = 3
    page.locator("#plan-k_max").fill("2")
    page.locator("#plan-k_max").press("Enter")
    expect(page).to_have_url(re.compile(r"k_max=2(&|$)"))
    expect(rows.first).to_have_attribute("data-k", "2")
    ks = [int(k) for k in rows.evaluate_all("rows => rows.map(r => r.dataset.k)")]
    assert max(ks) == 2
    page.locator("#copy-plan-config").click()
    expect(page.locator("#plan-copy-status")).to_have_text(re.compile("copied"))
    copied = json.loads(page.evaluate("navigator.clipboard.readText()"))
    assert copied == api_config(slider_server, f"k_max=2&{IDEAL}")


def test_where_nothing_pays_there_is_nothing_to_copy(page):
    page.goto("/?alpha=0.05&hardware=l4&context=0")
    expect(page.locator('[data-figure="plan-verdict"]')).to_contain_text(
        "Do not configure speculation")
    expect(page.locator("#copy-plan-config")).to_have_count(0)


def test_a_mix_stays_in_the_link_when_the_settings_change(page):
    page.goto("/?mix=code:3:0.95&mix=chat:1:0.3#plan")
    expect(page.locator("table.plan-mix tbody tr")).to_have_count(2)
    page.locator("#rl-hardware").select_option("l4")
    expect(page.locator("table.plan-table caption")).to_contain_text("L4")
    expect(page).to_have_url(re.compile(r"hardware=l4&.*mix=code%3A3%3A0\.95&mix=chat%3A1%3A0\.3"))
    expect(page.locator("table.plan-mix tbody tr")).to_have_count(2)
