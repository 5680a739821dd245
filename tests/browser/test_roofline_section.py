"""The "At your batch size" section in real Chromium: controls, log slider, link, no-JS form."""

from __future__ import annotations

import json
import math
import re
from dataclasses import replace
from urllib.parse import parse_qs, urlparse

import pytest
from playwright.sync_api import Page, expect
from support.browser import checked_page
from support.live_server import LiveServer

from app.main import create_app
from app.roofline import NUMBERS, SLIDER_BATCHES
from engine.analytic.default_overheads import fitted
from engine.analytic.passes import Setting
from engine.analytic.presets import HARDWARE, PAIRS
from engine.analytic.roofline import roofline
from engine.settings import Settings

pytestmark = pytest.mark.browser


@pytest.fixture
def page(browser, slider_server) -> Page:
    with checked_page(browser, slider_server.url) as page:
        yield page


def query(page: Page) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(urlparse(page.url).query).items()}


def expected(hardware="h100-sxm", models="llama-8b-1b", dtype="bf16", gpus=1, context=512,
             batch=32, alpha=0.7, k=4, **given):
    """The section's figures from the engine: the achieved shares, and the overheads fitted at
    them with any given (``spec_fixed_s=...``) in their place."""
    pair = PAIRS[models]
    shares = NUMBERS["bw_share"].default, NUMBERS["flops_share"].default
    return roofline(Setting(HARDWARE[hardware], pair.target, pair.draft, dtype, gpus, context,
                            alpha, k, bw_share=shares[0], flops_share=shares[1],
                            overheads=replace(fitted(*shares), **given)), batch)


def headline(page: Page):
    return page.locator('[data-figure="roofline-headline"]')


def test_choosing_hardware_updates_the_section_and_the_address_bar(page):
    page.goto("/?batch_k=slider")  # the slider's k = 4, fixed
    history = page.evaluate("history.length")
    page.locator("#rl-hardware").select_option("l4")
    r = expected(hardware="l4")
    expect(headline(page)).to_contain_text("on one L4, speculating k = 4 (the slider's) with "
                                           "Llama 3.2 1B")
    expect(page.locator('[data-figure="s_b"]')).to_have_text(f"{r.speedup:.2f}×")
    expect(page).to_have_url(re.compile(r"hardware=l4(&|$)"))
    assert query(page)["alpha"] == "0.7"  # the slider model's state stays in the link
    assert page.evaluate("history.length") == history


def test_typed_overheads_reprice_the_section_and_its_link_opens_exactly_as_it_was(page):
    start = "/?batch_k=slider&hardware=a100-80gb&gpus=8&context=4000&batch=32"
    page.goto(start)
    fixed = page.locator("#rl-launch_us_per_layer")
    per_row = page.locator("#rl-spec_row_overhead_us")
    spec = page.locator("#rl-spec_overhead_ms")
    fitted_spec = fitted(NUMBERS["bw_share"].default, NUMBERS["flops_share"].default)
    # blank inputs show the fitted default they stand for
    expect(spec).to_have_value("")
    expect(spec).to_have_attribute("placeholder", f"{fitted_spec.spec_fixed_s * 1e3:.4g}")
    fixed.fill("5")
    expect(page).to_have_url(re.compile(r"[?&]launch_us_per_layer=5(&|$)"))  # one answer at a time
    per_row.fill("20")
    r = expected("a100-80gb", gpus=8, context=4000, launch_s_per_layer=5e-6,
                 spec_per_row_s=20e-6)
    s_b = page.locator('[data-figure="s_b"]')
    expect(s_b).to_have_text(f"{r.speedup:.2f}×")
    expect(page.locator('[data-figure="target_overhead"]')).to_have_text(
        f"{r.target_pass.overhead_ms:.3g} ms")
    expect(page).to_have_url(re.compile(r"[?&]spec_row_overhead_us=20(&|$)"))
    assert "spec_overhead_ms" not in query(page)  # blank: the fitted default, not in the link
    link = page.url
    page.goto(link)  # the shared link opens as it was left
    expect(fixed).to_have_value("5")
    expect(per_row).to_have_value("20")
    expect(spec).to_have_value("")
    expect(s_b).to_have_text(f"{r.speedup:.2f}×")
    assert page.url == link
    # past its bound a value is clamped, said so, and the link carries the clamped value
    spec.fill("500")
    expect(page.locator("#roofline .notice")).to_contain_text(
        "spec_overhead_ms=500 is outside 0–100; using the maximum 100.")
    expect(page).to_have_url(re.compile(r"[?&]spec_overhead_ms=100(&|$)"))


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
    page.goto("/?batch_k=slider")
    page.locator("#alpha").fill("0.9")
    r = expected(alpha=0.9)
    expect(page.locator('[data-figure="s_b"]')).to_have_text(f"{r.speedup:.2f}×")
    expect(page.locator("#rl-hardware")).to_have_value("h100-sxm")  # controls were kept


def test_a_bad_batch_typed_in_is_clamped_with_a_notice(page):
    page.goto("/")
    page.locator("#rl-batch").fill("5000")
    expect(page.locator("#roofline > .notice")).to_contain_text("batch=5000 is outside 1–1024")
    expect(headline(page)).to_contain_text("At batch 1024 on")


def test_use_these_costs_fills_the_slider_model(page):
    page.goto("/?models=llama-70b-1b&batch=8&context=0&gpus=8")
    r = expected(models="llama-70b-1b", batch=8, context=0, gpus=8)
    page.locator("#use-costs").click()
    expect(page.locator("#c")).to_have_value(f"{round(r.c, 2):g}")
    expect(page.locator("#step_ms")).to_have_value(f"{r.t_step_ms:g}")
    expect(page).to_have_url(re.compile(r"[?&]models=llama-70b-1b(&|$)"))
    expect(page).to_have_url(re.compile(r"[?&]batch=8(&|$)"))


def figure(page: Page, name: str):
    return page.locator(f'[data-figure="{name}"]')


def test_use_these_costs_at_batch_512_makes_both_parts_agree_until_v_moves(page):
    page.goto("/?models=llama-8b-1b&hardware=h100-sxm&batch=512&batch_k=slider")
    r = expected(batch=512)
    page.locator("#use-costs").click()
    notice = figure(page, "held-notice")
    expect(notice).to_contain_text("Costs from the batch section at batch 512 on one H100 SXM")
    # the best-k answers and the tokens/s, per sequence and for the whole batch, are the same
    best = ("none: do not speculate" if r.best_speedup <= 1
            else f"{r.best_k} ({r.best_speedup:.2f}×)")
    expect(figure(page, "best_k_b")).to_have_text(best)
    expect(figure(page, "best_k")).to_have_text(best)
    per_sequence = f"{r.tok_s_base:.1f} → {r.tok_s_spec:.1f}"
    expect(figure(page, "tok_s_seq")).to_have_text(per_sequence)
    expect(figure(page, "tok_s")).to_have_text(per_sequence)
    whole = f"{r.tok_s_base_total:.0f} → {r.tok_s_spec_total:.0f}"
    expect(figure(page, "tok_s_total")).to_have_text(whole)
    expect(figure(page, "tok_s_batch")).to_have_text(whole)
    expect(figure(page, "speedup")).to_have_text(f"{r.speedup:.3f}×")
    assert "vk" in query(page)  # the held costs are in the link
    # moving v returns the model to one v for every k: the notice goes, and the link with it
    page.locator("#v").fill("1.5")
    expect(notice).to_have_count(0)
    expect(figure(page, "cycle_cost")).to_contain_text("+ 1.50 =")
    expect(page).not_to_have_url(re.compile(r"[?&]vk="))


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
    k = re.fullmatch(r"k = (\d+) \(plan\)",
                     page.locator('[data-figure="rl_k"]').inner_text()).group(1)
    r = expected(models="qwen-7b-0.5b", batch=96, alpha=0.8, k=int(k))  # the plan's k there
    assert page.locator('[data-figure="s_b"]').inner_text() == f"{r.speedup:.2f}×"
    context.close()


LABEL_STATES = [
    "models=qwen-7b-0.5b&gpus=8&context=512&batch=64",  # break-even 72 beside the ridge at 69
    "models=qwen-7b-0.5b&hardware=a100-80gb&gpus=8&context=8192&batch=512",  # limit by break-even
    "models=llama-8b-1b&context=512&batch=512",  # ridge, break-even, memory limit, current
    "models=llama-70b-1b&gpus=1&context=8192&batch=1",  # nothing fits
]


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("width", [1280, 390])
def test_chart_labels_never_overlap_one_another(browser, slider_server, width, scheme):
    with checked_page(browser, slider_server.url) as page:
        page.set_viewport_size({"width": width, "height": 900})
        page.emulate_media(color_scheme=scheme)
        for state in LABEL_STATES:
            page.goto(f"/?{state}")
            labels = page.locator(".rl-chart .chart-label")
            expect(labels.first).to_be_visible()
            boxes = {labels.nth(i).get_attribute("data-marker"): labels.nth(i).bounding_box()
                     for i in range(labels.count())}
            assert "current" in boxes and "ridge" in boxes, state
            lines = {}
            for kind, selector in (("ridge", "line.ridge"), ("break-even", "line.break-even-batch"),
                                   ("memory", "rect.no-fit-zone")):
                marker = page.locator(f".rl-chart {selector}")
                if marker.count():
                    lines[kind] = marker.bounding_box()["x"]
            assert set(boxes) == {"current"} | set(lines), state
            names = sorted(boxes)
            for i, a in enumerate(names):
                box = boxes[a]
                for b in names[i + 1:]:
                    other = boxes[b]
                    apart = (box["x"] + box["width"] <= other["x"]
                             or other["x"] + other["width"] <= box["x"]
                             or box["y"] + box["height"] <= other["y"]
                             or other["y"] + other["height"] <= box["y"])
                    assert apart, f"{a} and {b} overlap at {width} px ({scheme}): {state}"
            chart = page.locator(".rl-chart").bounding_box()
            for name, box in boxes.items():
                assert chart["x"] <= box["x"] and box["x"] + box["width"] <= chart["x"] + \
                    chart["width"], f"{name} leaves the chart at {width} px: {state}"
            # the case the page once got wrong: break-even's label over the ridge's line
            if "break-even" in boxes:
                be = boxes["break-even"]
                assert not be["x"] < lines["ridge"] < be["x"] + be["width"], state


MEASURED = {"hardware": "this machine", "target": "t", "draft": "d", "k": 4, "alpha": 0.62,
            "pair": "shipped", "method": "end-to-end"}
POLICIES = ("k = 2", "k = 4", "schedule", "vLLM k = 4")


@pytest.fixture
def measured_server(tmp_path_factory) -> LiveServer:
    folder = tmp_path_factory.mktemp("measurements")
    for i, policy in enumerate(POLICIES):
        points = [{"batch": 2 ** j, "speedup": 0.6 + i / 5 + j / 20} for j in range(7)]
        (folder / f"c{i}.json").write_text(json.dumps(
            MEASURED | {"label": f"sweep {i}", "policy": policy, "points": points}))
    with LiveServer(create_app(Settings(load_models=False, measurements_dir=folder))) as server:
        yield server


def test_each_measured_policy_is_drawn_with_its_own_marker_and_named_in_the_legend(
        browser, measured_server):
    with checked_page(browser, measured_server.url) as page:
        page.goto("/?models=shipped&hardware=this-machine")
        looks = set()
        for policy in POLICIES:
            series = page.locator(f'.rl-chart g.measured-series[data-policy="{policy}"]')
            expect(series.locator("path")).to_have_count(7)
            expect(series.locator("path").first).to_be_visible()
            key = page.locator(f'.measured-legend[data-policy="{policy}"]')
            expect(key).to_be_visible()
            expect(key.locator("strong.policy")).to_have_text(policy)
            shape = series.get_attribute("data-shape")
            assert key.get_attribute("data-shape") == shape
            # the colour the reader sees, in the chart and in the legend
            fill = series.locator("path").first.evaluate("e => getComputedStyle(e).fill")
            assert key.locator("path").evaluate("e => getComputedStyle(e).fill") == fill
            looks.add((shape, fill))
            assert series.locator("title").first.text_content().startswith(f"{policy}: B = 1:")
        assert len(looks) == len(POLICIES)  # no two policies look alike
        assert len({fill for _, fill in looks}) == len(POLICIES)

def test_the_pass_table_reads_on_a_phone(browser, slider_server):
    with checked_page(browser, slider_server.url) as page:
        page.set_viewport_size({"width": 390, "height": 900})
        page.goto("/?models=llama-70b-1b&gpus=8&context=8192")
        # The page never scrolls sideways; the table does, inside its box.
        assert page.evaluate("document.documentElement.scrollWidth") <= 390
        scroller = page.locator(".rl-passes-box .table-scroll")
        expect(scroller).to_be_visible()
        assert scroller.evaluate("s => s.scrollWidth > s.clientWidth")
        box = scroller.bounding_box()
        # Its caption is read whole, not cut at the box's edge.
        caption = page.locator(".rl-passes caption").bounding_box()
        assert box["x"] <= caption["x"] and caption["x"] + caption["width"] <= box["x"] + \
            box["width"]
        # Scrolled to its end, the pass names stay in view.
        scroller.evaluate("s => { s.scrollLeft = s.scrollWidth; }")
        name = page.locator(".rl-passes th[scope=row]").first.bounding_box()
        assert box["x"] - 1 <= name["x"] <= box["x"] + 20
