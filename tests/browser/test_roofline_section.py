"""The "At your batch size" section in real Chromium: controls, log slider, link, no-JS form."""

from __future__ import annotations

import math
import re
from urllib.parse import parse_qs, urlparse

import pytest
from playwright.sync_api import Page, expect
from support.browser import checked_page

from app.roofline import SLIDER_BATCHES
from engine.analytic.roofline import HARDWARE, PAIRS, Setting, roofline

pytestmark = pytest.mark.browser


@pytest.fixture
def page(browser, slider_server) -> Page:
    with checked_page(browser, slider_server.url) as page:
        yield page


def query(page: Page) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(urlparse(page.url).query).items()}


def expected(hardware="h100-sxm", models="llama-8b-1b", dtype="bf16", gpus=1, context=512,
             batch=32, alpha=0.7, k=4):
    pair = PAIRS[models]
    return roofline(Setting(HARDWARE[hardware], pair.target, pair.draft, dtype, gpus, context,
                            alpha, k), batch)


def headline(page: Page):
    return page.locator('[data-figure="roofline-headline"]')


def test_choosing_hardware_updates_the_section_and_the_address_bar(page):
    page.goto("/")
    history = page.evaluate("history.length")
    page.locator("#rl-hardware").select_option("l4")
    r = expected(hardware="l4")
    expect(headline(page)).to_contain_text("on 1 × L4, speculating with Llama 3.2 1B")
    expect(page.locator('[data-figure="s_b"]')).to_have_text(f"{r.speedup:.2f}×")
    expect(page).to_have_url(re.compile(r"hardware=l4(&|$)"))
    assert query(page)["alpha"] == "0.7"  # the slider model's state stays in the link
    assert page.evaluate("history.length") == history


def test_log_slider_steps_through_quarter_octaves_into_the_batch_box(page):
    page.goto("/?batch=32")
    slider = page.locator("#batch-slider")
    expect(slider).to_be_visible()
    index = SLIDER_BATCHES.index(128)
    slider.fill(str(index))
    expect(page.locator("#rl-batch")).to_have_value("128")
    expect(headline(page)).to_contain_text("At batch 128 on")
    expect(page).to_have_url(re.compile(r"batch=128(&|$)"))
    r = expected(batch=128)
    expect(page.locator('[data-figure="c_b"]')).to_have_text(f"{r.c:.3f}")


def test_a_typed_batch_moves_the_log_slider_to_the_nearest_step(page):
    page.goto("/?batch=32")
    page.locator("#rl-batch").fill("100")
    nearest = min(range(len(SLIDER_BATCHES)), key=lambda i: abs(math.log(SLIDER_BATCHES[i] / 100)))
    expect(page.locator("#batch-slider")).to_have_value(str(nearest))
    expect(headline(page)).to_contain_text("At batch 100 on")


def test_moving_alpha_in_the_slider_model_reprices_the_section(page):
    page.goto("/")
    page.locator("#alpha").fill("0.9")
    r = expected(alpha=0.9)
    expect(page.locator('[data-figure="s_b"]')).to_have_text(f"{r.speedup:.2f}×")
    expect(page.locator("#rl-hardware")).to_have_value("h100-sxm")  # controls were kept


def test_a_bad_batch_typed_in_is_clamped_with_a_notice(page):
    page.goto("/")
    page.locator("#rl-batch").fill("5000")
    expect(page.locator("#roofline .notice")).to_contain_text("batch=5000 is outside 1–1024")
    expect(headline(page)).to_contain_text("At batch 1024 on")


def test_use_these_costs_fills_the_slider_model(page):
    page.goto("/?models=llama-70b-1b&batch=8&context=0")
    r = expected(models="llama-70b-1b", batch=8, context=0)
    page.locator("#use-costs").click()
    expect(page.locator("#c")).to_have_value(f"{round(r.c, 2):g}")
    expect(page.locator("#v")).to_have_value("1")
    expect(page).to_have_url(re.compile(r"[?&]models=llama-70b-1b(&|$)"))
    expect(page).to_have_url(re.compile(r"[?&]batch=8(&|$)"))


def test_section_works_with_javascript_off(browser, slider_server):
    context = browser.new_context(base_url=slider_server.url, java_script_enabled=False)
    page = context.new_page()
    page.goto("/?alpha=0.8")
    expect(page.locator("#batch-slider")).to_be_hidden()
    page.locator("#rl-models").select_option("qwen-7b-0.5b")
    page.locator("#rl-batch").fill("96")
    with page.expect_navigation():  # the form's GET: a new page, not an update of this one
        page.locator("#roofline-apply").click()
    q = query(page)
    assert (q["models"], q["batch"], q["alpha"]) == ("qwen-7b-0.5b", "96", "0.8")
    r = expected(models="qwen-7b-0.5b", batch=96, alpha=0.8)
    assert page.locator('[data-figure="s_b"]').inner_text() == f"{r.speedup:.2f}×"
    context.close()
