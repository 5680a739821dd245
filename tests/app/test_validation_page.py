"""/validation and GET /api/validation: every fitted and held-out series of
``specscope validate`` beside the model, with its citation, split, errors and, for a miss, the
reason; the fitted overhead terms first; bad input named, not a 500."""

from __future__ import annotations

import html as html_lib
import json
import re

import pytest

from engine.analytic import own_sweeps, validate
from engine.analytic.validate import EXPLAINED_MISSES

REPORT = validate.run()
SOURCES = {s.id: s for s in REPORT.sources}


@pytest.fixture(scope="module")
def page(client) -> str:
    response = client.get("/validation")
    assert response.status_code == 200
    return html_lib.unescape(response.text)


def section(page: str, series_id: str) -> str:
    match = re.search(rf'<section class="panel validation-series" id="{re.escape(series_id)}"'
                      r'.*?</section>', page, re.S)
    assert match, f"{series_id} has no section"
    return match.group(0)


def test_the_fitted_overhead_terms_come_first(page):
    t = REPORT.fit.terms
    terms = page.index("The fitted overhead terms")
    assert terms < page.index("Fitted series") < page.index("Held-out series")
    for name, seconds in (("step_fixed", t.vllm_step_fixed_s),
                          ("draft_fixed", t.vllm_draft_fixed_s),
                          ("spec_fixed", t.vllm_spec_fixed_s)):
        assert f'data-figure="{name}">{round(seconds * 1e6)} µs<' in page, name
    assert (f'data-figure="schedule">{t.schedule_fixed_s * 1000:.3f} ms + '
            f'{t.schedule_per_row_s * 1000:.3f} ms a row<') in page
    for name, seconds in (("launch", t.launch_s_per_layer), ("allreduce", t.allreduce_s_per_log2)):
        assert f'data-figure="{name}">{seconds * 1e6:.2f} µs' in page, name
    assert 'data-figure="sample">not identified by the fit series' in page
    assert (f'data-figure="kernel_shares">int8 {t.int8_share:.3f}, int4 '
            f'{t.int4_share:.3f}<') in page


def test_the_page_opens_with_the_held_out_series_summed_up(page):
    summary = page.index(f'data-figure="held-out-summary">{validate.held_out_summary(REPORT)}.<')
    assert summary < page.index("The fitted overhead terms")


def test_each_fit_source_left_out_is_a_row(page):
    table = page[page.index('data-figure="left-out"'):]
    table = table[:table.index("</table>")]
    for x in REPORT.left_out:
        assert f"<th scope=\"row\">{x.source}</th><td>{x.series}</td>" in table
        assert f"{x.without_it * 100:.1f}%" in table


@pytest.mark.parametrize("result", REPORT.series, ids=[r.id for r in REPORT.series])
def test_every_series_is_drawn_with_its_citation_split_and_errors(page, result):
    text = section(page, result.id)
    source = SOURCES[result.source]
    assert result.label in text and source.title in text and result.table in text
    if source.url.startswith("http"):
        assert f'href="{source.url.split()[0]}"' in text
    else:  # this project's own sweep: the file it ships in, and the command that made it
        assert f"<code>{source.url}</code>" in text and source.quote in text
    assert {"fit": "split: fitted", "held_out": "split: held out"}[result.split] in re.sub(
        r"<[^>]+>", "", text)
    assert f"Median absolute error <strong>{result.median_abs_error * 100:.1f}%" in text
    assert text.count('<svg class="chart bar-chart"') == 1
    assert text.count('<rect class="bar"') == len(result.points)
    assert text.count('<circle class="model-point"') == len(result.points)
    errors = re.findall(r'data-figure="error">([^<]*)<', text)
    assert errors == [f"{p.error * 100:+.1f}%" for p in result.points]
    for p in result.points:
        assert p.setting in text
        assert f">{p.measured:.4g}<" in text and f">{p.model:.4g}<" in text


@pytest.mark.parametrize("result", REPORT.series, ids=[r.id for r in REPORT.series])
def test_a_miss_shows_its_reason_and_nothing_else_does(page, result):
    text = section(page, result.id)
    if result.misses:
        assert EXPLAINED_MISSES[result.id] in text
    else:
        assert 'data-figure="explained"' not in text


def test_our_own_sweeps_are_held_out_with_their_file_command_and_machine(page):
    own = [r for r in REPORT.series if r.source in {src.id for src in own_sweeps.sources()}]
    assert len(own) == len(own_sweeps.SWEEPS)
    held_out = page[page.index("Held-out series"):]
    for result in own:
        text = section(held_out, result.id)
        source = SOURCES[result.source]
        assert "This project's own end-to-end sweep" in text and source.hardware in text
        assert "measured by this project (a shipped sweep file)" in text


def test_the_quoted_step_time_says_it_was_quoted(page):
    text = section(page, "magicdec-t-ar-llama-3.1-8b-a100")
    assert "quoted (from the table by another text; not read from the source here)" in text


def test_what_the_store_lacked_is_listed(page):
    for missing in REPORT.not_found:
        assert missing["what"] in page


def test_the_other_rates_are_a_link_away(client):
    datasheet = validate.run(rates="datasheet")
    html = client.get("/validation?rates=datasheet").text
    launch = datasheet.fit.terms.launch_s_per_layer * 1e6
    assert f'data-figure="launch">{launch:.2f} µs' in html
    assert '<option value="datasheet" selected>' in html


@pytest.mark.parametrize(("query", "notice"), [
    ("rates=peak", "rates=&#39;peak&#39; is not one of achieved, datasheet; using achieved."),
    ("alpha=0.9", "&#39;alpha&#39; is not a setting of this page; it was ignored."),
])
def test_the_page_reads_a_bad_link_as_far_as_it_goes_and_says_what_it_skipped(client, query,
                                                                               notice):
    response = client.get(f"/validation?{query}")
    assert response.status_code == 200
    assert notice in response.text
    assert 'data-figure="launch">' in response.text


def test_the_batch_section_links_the_page(client):
    html = client.get("/").text
    section_html = html[html.index('id="roofline-title"'):html.index('id="roofline"')]
    assert 'href="/validation"' in section_html


def test_the_json_is_the_commands_report(client):
    response = client.get("/api/validation")
    assert response.status_code == 200
    data = response.json()
    assert data == json.loads(json.dumps(validate.report_json(REPORT)))
    assert [s["id"] for s in data["series"]] == [r.id for r in REPORT.series]
    for s in data["series"]:
        assert set(s) >= {"id", "label", "split", "source", "table", "quantity", "unit",
                          "median_abs_error", "misses", "explained", "points"}
        assert s["split"] in ("fit", "held_out")
        assert (s["explained"] is not None) == s["misses"]
        for p in s["points"]:
            assert set(p) == {"setting", "measured", "model", "reading", "error"}
    assert {s["source"] for s in data["series"]} <= {src["id"] for src in data["sources"]}
    assert set(data["overheads"]) == {"vllm", "sglang", "gpt-fast", "specscope"}
    for o in data["overheads"].values():
        assert set(o) >= {"launch_s_per_layer", "step_fixed_s", "draft_fixed_s", "spec_fixed_s",
                          "schedule_fixed_s", "source"}
    assert [x["source"] for x in data["left_out"]] == [x.source for x in REPORT.left_out]


def test_the_json_takes_the_rates(client):
    data = client.get("/api/validation?rates=achieved").json()
    assert data["rates"] == "achieved"
    assert data["overheads"] == validate.report_json(validate.run(rates="achieved"))["overheads"]


@pytest.mark.parametrize(("query", "named"), [("rate=achieved", "rate"), ("rates=peak", "rates")])
def test_the_json_refuses_what_it_does_not_take(client, query, named):
    response = client.get(f"/api/validation?{query}")
    assert response.status_code == 422
    assert named in response.text


def test_the_intervals_and_their_checked_coverage_are_shown(page):
    for band in REPORT.intervals.values():
        shown = f'data-figure="interval-{band.kind}">×{band.low:.2f} to ×{band.high:.2f}: '
        assert shown in page
        assert f"{band.inside} of {band.n} held-out points" in page


def test_each_series_shows_every_points_interval_and_whether_it_holds_the_measurement(page):
    from app.validation import page_context

    views = {v.result.id: v for v in page_context()["views"]}
    band = REPORT.intervals["speedup"]
    magicdec = views["magicdec-selfspec-llama-3.1-8b-a100"]
    for p, (lo, hi) in zip(magicdec.result.points, magicdec.band, strict=True):
        assert (lo, hi) == pytest.approx(band.of(p.model))
    tpot = views["vllm-issue20780-llama31-8b-eagle3"]  # a time: the rate's interval turned over
    speed = REPORT.intervals["speed"]
    for p, (lo, hi) in zip(tpot.result.points, tpot.band, strict=True):
        assert (lo, hi) == pytest.approx((p.model / speed.high, p.model / speed.low))
        assert lo < hi
    text = section(page, "magicdec-selfspec-llama-3.1-8b-a100")
    assert magicdec.inside == sum(lo <= p.measured <= hi for p, (lo, hi) in zip(
        magicdec.result.points, magicdec.band, strict=True))
    assert f"{magicdec.inside} of 3 measured inside the model's 80% interval" in text


def test_points_that_differ_in_no_listed_setting_are_numbered_not_left_blank():
    from app.validation import point_labels
    from engine.analytic import published

    series = published.all_series(published.load_all())
    trees = series["sglang-pr4247-llama31-8b-eagle3-trees"]  # alike but for the tree's steps
    assert point_labels(trees) == (["1", "2"], True)
    batches = series["vllm-pr29334-llama31-8b-a100-40gb-plain-mtbench"]
    labels, numbered = point_labels(batches)
    assert all(labels) and len(set(labels)) == len(labels)
