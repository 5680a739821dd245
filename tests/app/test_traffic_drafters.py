"""The traffic panel's drafter: the draft model, prompt lookup, or both side by side with the
winner of each domain and temperature; saved probes keep it."""

from __future__ import annotations

import httpx
from support.probes import FAST, probe, result_of

from app.traffic.state import parse_traffic_state
from engine.settings import Settings


def test_both_drafters_run_on_the_same_prompts_and_a_winner_is_named(live_server):
    stream = probe(live_server, FAST | {"drafter": "both"})
    kinds = [k for k, _ in stream]
    assert kinds == ["progress"] * 16 + ["probe", "saved"]
    assert [d["drafter"] for _, d in stream[:16]] == ["model"] * 8 + ["ngram"] * 8
    data = result_of(stream)
    model, ngram = data["drafters"]["model"], data["drafters"]["ngram"]
    assert (model["drafter"], ngram["drafter"]) == ("model", "ngram")
    rows = [(r["domain"], r["temperature"]) for r in data["comparison"]]
    assert rows == [(r["domain"], r["temperature"]) for r in model["rows"]] and len(rows) == 4
    for r in data["comparison"]:
        # no estimate (prompt lookup never proposed): plain decoding, 1x
        best = {name: 1.0 if r[name]["best_speedup"] is None else r[name]["best_speedup"]
                for name in ("model", "ngram")}
        if r["winner"] is None:
            assert all(v <= 1 for v in best.values())
        else:
            loser = "ngram" if r["winner"] == "model" else "model"
            assert best[r["winner"]] >= best[loser]
            assert r["ratio"] == best[r["winner"]] / best[loser]
    saved = next(d for k, d in stream if k == "saved")
    record = httpx.get(f"{live_server.url}/api/probes/{saved['id']}").json()
    assert record["settings"]["drafter"] == "both"
    assert record["result"]["ngram"]["drafter"] == "ngram"
    page = httpx.get(f"{live_server.url}{saved['url']}").text
    assert 'class="probe-table compare-table"' in page
    assert page.count('data-drafter="model"') == 1 and page.count('data-drafter="ngram"') == 1
    assert "probe_drafter=both" in page  # the panel's link for probing again keeps it


def test_the_page_renders_the_winner_table_and_both_results(live_server):
    html = result_of(probe(live_server, FAST | {"drafter": "both"}, path="/probes"))["html"]
    assert html.count('data-winner="') == 4
    assert html.index("compare-table") < html.index('data-drafter="model"') < html.index(
        'data-drafter="ngram"')


def test_a_prompt_lookup_probe_shows_pi_and_brings_it_to_the_model(live_server):
    stream = probe(live_server, FAST | {"drafter": "ngram"}, path="/probes")
    html = result_of(stream)["html"]
    assert 'data-drafter="ngram"' in html and "<th>π</th>" in html
    assert html.count('data-figure="pi"') == 4
    assert html.count("data-preset=\"ngram\"") == 4 and "preset=ngram&amp;pi=" in html


def test_a_bad_drafter_is_a_422_naming_the_choices(live_server):
    response = httpx.post(f"{live_server.url}/api/probes", params=FAST | {"drafter": "eagle"})
    assert response.status_code == 422 and "drafter" in response.json()["message"]
    page = httpx.post(f"{live_server.url}/probes", params=FAST | {"drafter": "eagle"})
    assert page.status_code == 422 and "model, ngram, both" in page.json()["message"]


def test_the_panels_drafter_lives_in_the_link():
    settings = Settings(load_models=False)
    state, notices = parse_traffic_state([("probe_drafter", "both")], settings)
    assert state.drafter == "both" and notices == []
    assert "probe_drafter=both" in state.query()
    default, _ = parse_traffic_state([], settings)
    assert "probe_drafter" not in default.query()
    bad, notices = parse_traffic_state([("probe_drafter", "eagle")], settings)
    assert bad.drafter == "model" and "probe_drafter='eagle'" in notices[0]


def test_the_panel_offers_the_drafter_chosen_in_the_link(live_server):
    page = httpx.get(f"{live_server.url}/?probe_drafter=ngram").text
    assert '<option value="ngram" selected>prompt lookup (n-gram)</option>' in page
    assert '<option value="both">both, side by side</option>' in page


def test_a_misspelt_probe_setting_is_refused_not_ignored(live_server):
    response = httpx.post(f"{live_server.url}/api/probes", params=FAST | {"drafters": "both"})
    assert response.status_code == 422
    assert response.json()["message"] == "drafters: is not a parameter of this operation"
    assert response.json()["detail"][0]["loc"] == ["query", "drafters"]
