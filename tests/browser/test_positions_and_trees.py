"""Acceptance by position, the one-pass cost shape and a token tree on the slider page, in real
Chromium: typed, priced, drawn and kept in the address bar."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect
from support.browser import checked_page

from engine.analytic import positions, trees

pytestmark = pytest.mark.browser


@pytest.fixture
def page(browser, slider_server) -> Page:
    with checked_page(browser, slider_server.url) as page:
        yield page


def test_typed_rates_by_position_price_the_cycle_and_draw_the_iid_curve_beside(page):
    page.goto("/?k=3&c=0.05")
    expect(page.locator("svg.chart path.iid-curve")).to_have_count(0)
    page.locator("#positions").fill("0.84, 0.6, 0.39, 0.27")
    page.locator("#positions").press("Enter")
    curve = positions.Curve.of([0.84, 0.6, 0.39, 0.27])
    tokens = positions.tokens_per_cycle(curve, 3)
    expect(page.locator('[data-figure="expected_tokens"]')).to_have_text(f"{tokens:.2f}")
    expect(page.locator("svg.chart path.iid-curve")).to_have_count(1)
    expect(page).to_have_url(re.compile(r"positions=0\.84%2C0\.6%2C0\.39%2C0\.27"))


def test_the_one_pass_shape_adds_its_fixed_part_once(page):
    page.goto("/?k=4&c=0.05&v=1")
    expect(page.locator(".pass-only")).to_be_hidden()
    page.locator("#shape").select_option("pass")
    expect(page.locator(".pass-only")).to_be_visible()
    page.locator("#c0").fill("0.2")
    expect(page.locator('[data-figure="cycle_cost"]')).to_have_text(
        "0.20 + 4 × 0.05 + 1.00 = 1.40")
    expect(page).to_have_url(re.compile(r"shape=pass&c0=0\.2"))


def test_a_tree_is_drawn_with_each_nodes_survival_and_priced_beside_its_chain(page):
    page.goto("/?alpha=0.6&c=0.05&tree=0;1;0.0")
    fig = trees.figures([(0,), (1,), (0, 0)], trees.rank_model(positions.iid(0.6, 3), 2),
                        lambda levels: 0.05 * levels, lambda n: 1.0)
    expect(page.locator('[data-figure="tree-headline"]')).to_contain_text(
        f"{fig.tokens:.2f} tokens")
    expect(page.locator("svg.tree .tree-node")).to_have_count(3)
    expect(page.locator("svg.tree .tree-node text").first).to_have_text("#1 0.60")
    page.locator("#tree").fill("0;1;5")
    page.locator("#tree").press("Enter")
    expect(page.locator("#results .notice").first).to_contain_text("tree='0;1;5' was ignored")
    expect(page.locator("svg.tree")).to_have_count(0)
