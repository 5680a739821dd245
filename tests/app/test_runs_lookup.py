"""Run live with prompt lookup: the drafter is a choice of the body and of the page, a pair
may be a target alone, and a cycle that found nothing is the target's token alone."""

from __future__ import annotations

import httpx
import pytest
from support.live_server import LiveServer
from support.sse import read_events

from app.main import create_app
from engine.settings import PairSpec, Settings

# Repeats itself: lookups find matches, and miss some.
BODY = {"prompt": "the quick brown fox jumps over the lazy dog and the quick brown fox",
        "k": 3, "temperature": 0.0, "top_p": 1.0, "max_new_tokens": 30, "seed": 5,
        "pair": "tiny", "drafter": "ngram", "repeats": 1}


@pytest.fixture(scope="module")
def server(tiny_pair_dirs):
    target, draft = tiny_pair_dirs
    settings = Settings(
        pairs={"tiny": PairSpec(target=target, draft=draft, label="tiny test pair"),
               "alone": PairSpec(target=target, label="the tiny target alone")},
        default_pair="tiny", device="cpu", queue_size=1, max_new_tokens_limit=256,
        run_timeout_s=60.0)
    with LiveServer(create_app(settings)) as live:
        yield live


def run(server, **changes) -> list[tuple[str, dict]]:
    with httpx.stream("POST", server.url + "/api/runs", json=BODY | changes,
                      timeout=60) as response:
        assert response.status_code == 200, response.read()
        return read_events(response)


@pytest.mark.parametrize("pair", ["tiny", "alone"])
def test_a_lookup_run_streams_cycles_of_0_to_k_proposals(server, pair):
    events = run(server, pair=pair)
    cycles = [data for kind, data in events if kind == "cycle"]
    summary = next(data for kind, data in events if kind == "summary")
    assert all(c["drafter"] == "ngram" and 0 <= c["n_proposed"] <= 3 for c in cycles)
    empty = [c for c in cycles if c["n_proposed"] == 0]
    assert empty and any(c["n_proposed"] for c in cycles)
    for c in empty:  # nothing found: the target's token alone
        assert [t["kind"] for t in c["tokens"]] == ["target"]
    for c in cycles:
        drafts = [t for t in c["tokens"] if t["kind"] != "target"]
        assert len(drafts) == c["n_proposed"]
    assert summary["drafter"] == "ngram"
    assert summary["proposal_share"] == pytest.approx(
        sum(c["n_proposed"] > 0 for c in cycles) / len(cycles))


def test_the_page_marks_where_each_match_came_from(server):
    with httpx.stream("POST", server.url + "/runs", json=BODY, timeout=60) as response:
        events = read_events(response)
    cycles = [data for kind, data in events if kind == "cycle"]
    for c in cycles:
        if c["n_proposed"]:
            from markupsafe import escape

            from app.templating import templates

            label = escape(templates.env.filters["token_label"](c["match_text"]))
            assert c["match_text"]  # the matched n-gram's text, shown, and where it was
            assert (f'{c["match_n"]}-gram <q class="match-text">{label}</q> '
                    f'@{c["match_start"]}</span>') in c["chips"]
            assert f'after “…{escape(c["match_before"])}”' in c["chips"]
            assert "tokens that followed them there were proposed" in c["chips"]
        else:
            assert "no match</span>" in c["chips"]
        assert "lookup " in c["chips"]  # the timing names the lookup, not draft steps


def test_a_saved_lookup_run_keeps_its_drafter(server):
    events = run(server)
    saved = next(data for kind, data in events if kind == "saved")
    record = httpx.get(server.url + f"/api/runs/{saved['id']}", timeout=30).json()
    settings = record["settings"]
    assert (settings["drafter"], settings["prompt_lookup_min"],
            settings["prompt_lookup_max"]) == ("ngram", 2, 4)
    assert record["summary"]["drafter"] == "ngram"
    page = httpx.get(server.url + saved["url"], timeout=30).text
    assert "prompt lookup (n-gram 2..4)" in page
    model_run = run(server, drafter="model")
    saved = next(data for kind, data in model_run if kind == "saved")
    record = httpx.get(server.url + f"/api/runs/{saved['id']}", timeout=30).json()
    assert record["settings"]["drafter"] == "model"
    assert "prompt lookup" not in httpx.get(server.url + saved["url"], timeout=30).text


def test_the_draft_model_on_a_pair_without_one_is_refused_with_a_reason(server):
    response = httpx.post(server.url + "/api/runs", json=BODY | {"pair": "alone",
                                                                 "drafter": "model"}, timeout=30)
    assert response.status_code == 422
    assert "has no draft model: choose prompt lookup" in response.text


def test_an_unknown_drafter_is_refused(server):
    response = httpx.post(server.url + "/api/runs", json=BODY | {"drafter": "medusa"},
                          timeout=30)
    assert response.status_code == 422


def test_the_page_offers_the_drafter_and_keeps_it_in_the_link(server):
    page = httpx.get(server.url + "/?drafter=ngram", timeout=30).text
    assert '<select name="drafter" id="drafter">' in page
    assert '<option value="ngram" selected>prompt lookup (n-gram)</option>' in page
    page = httpx.get(server.url + "/", timeout=30).text
    assert '<option value="model" selected>draft model</option>' in page
    # a pair without a draft model can only look up
    page = httpx.get(server.url + "/?pair=alone", timeout=30).text
    assert '<option value="ngram" selected>' in page
    page = httpx.get(server.url + "/?drafter=medusa", timeout=30).text
    assert "is not offered; using the draft model" in page


def test_a_saved_lookup_runs_csv_title_and_card_name_the_drafter_and_its_matches(server):
    import csv
    import io

    from app.saved.cards import run_preview_svg

    events = run(server)
    cycles = [data for kind, data in events if kind == "cycle"]
    saved = next(data for kind, data in events if kind == "saved")
    rows = list(csv.DictReader(io.StringIO(
        httpx.get(server.url + f"/runs/{saved['id']}.csv", timeout=30).text)))
    assert {r["drafter"] for r in rows} == {"ngram"}
    by_cycle = {int(r["cycle"]): r for r in rows}
    for c in cycles:
        row = by_cycle[c["index"]]
        if c["match_n"]:
            assert (int(row["match_n"]), int(row["match_start"])) == (c["match_n"],
                                                                      c["match_start"])
            assert row["match_text"].lstrip("'") == c["match_text"]
        else:
            assert (row["match_n"], row["match_text"]) == ("", "")
    record = httpx.get(server.url + f"/api/runs/{saved['id']}", timeout=30).json()
    assert ">prompt lookup, k " in run_preview_svg(record)
    page = httpx.get(server.url + saved["url"], timeout=30).text
    assert "<title>prompt lookup, k " in page


def test_the_slider_models_card_names_prompt_lookup_and_its_pi():
    from app.saved.cards import slider_preview_svg
    from app.saved.titles import slider_headline, slider_title
    from engine.analytic import lookup, theory

    fig = lookup.figures(0.7, 4, 0.3, 0.0, 1.0)
    assert slider_title(fig).startswith("prompt lookup (pi 0.30), alpha 0.70, k 4:")
    assert slider_headline(fig).startswith("With prompt lookup proposing in π = 0.30 of cycles")
    assert "prompt lookup (pi 0.30)" in slider_preview_svg(fig)
    assert slider_title(theory.figures(0.7, 4, 0.18)).startswith("alpha 0.70, k 4:")
