"""Run live with the EAGLE head: a pair whose spec names a head offers drafter "eagle"; its
cycles are named as the head's, its summary and saved run keep the drafter, and a pair
without a head refuses it with a reason."""

from __future__ import annotations

import httpx
import pytest
from support.live_server import LiveServer, shipped_settings
from support.sse import read_events

from app.main import create_app
from engine.settings import PairSpec

BODY = {"prompt": "And God said, Let there be light", "k": 3, "temperature": 0.0,
        "top_p": 1.0, "max_new_tokens": 24, "seed": 5, "pair": "shipped", "drafter": "eagle",
        "repeats": 1}


@pytest.fixture(scope="module")
def server(tiny_pair_dirs):
    target, draft = tiny_pair_dirs
    tiny = PairSpec(target=target, draft=draft, label="tiny test pair")
    settings = shipped_settings({"tiny": tiny}, eagle="eagle")
    with LiveServer(create_app(settings)) as live:
        yield live


def run(server, path: str = "/api/runs", **changes) -> list[tuple[str, dict]]:
    with httpx.stream("POST", server.url + path, json=BODY | changes, timeout=60) as response:
        assert response.status_code == 200, response.read()
        return read_events(response)


def test_a_head_run_streams_cycles_of_k_drafts_named_as_the_heads(server):
    events = run(server, path="/runs")
    cycles = [data for kind, data in events if kind == "cycle"]
    summary = next(data for kind, data in events if kind == "summary")
    assert cycles and all(c["drafter"] == "eagle" and c["n_proposed"] == 3 for c in cycles)
    assert any(t["kind"] == "accepted" for c in cycles for t in c["tokens"])  # a trained head
    assert all("head " in c["chips"] and "the EAGLE head" in c["chips"] for c in cycles)
    assert summary["drafter"] == "eagle" and summary["speedup_predicted"] > 0


def test_a_saved_head_run_keeps_its_drafter_in_the_record_title_and_page(server):
    events = run(server)
    saved = next(data for kind, data in events if kind == "saved")
    record = httpx.get(server.url + f"/api/runs/{saved['id']}", timeout=30).json()
    assert record["settings"]["drafter"] == "eagle"
    assert record["summary"]["drafter"] == "eagle"
    page = httpx.get(server.url + saved["url"], timeout=30).text
    assert "· EAGLE head" in page and "EAGLE head, k 3" in page


def test_the_head_on_a_pair_without_one_is_refused_with_a_reason(server):
    response = httpx.post(server.url + "/api/runs", json=BODY | {"pair": "tiny"}, timeout=30)
    assert response.status_code == 422
    assert "has no EAGLE head" in response.text
    page = httpx.get(server.url + "/?drafter=eagle&pair=tiny", timeout=30).text
    assert "has no EAGLE head; using the draft model" in page


def test_the_page_offers_the_head_and_keeps_it_in_the_link(server):
    page = httpx.get(server.url + "/?drafter=eagle", timeout=30).text
    assert '<option value="eagle" selected>EAGLE head</option>' in page


def test_an_eagle_2_tree_run_draws_each_cycles_tree_and_saves_its_shape(server):
    events = run(server, "/runs", tree="4,2,6")
    cycles = [data for kind, data in events if kind == "cycle"]
    summary = next(data for kind, data in events if kind == "summary")
    assert cycles and all(c["tree"]["shape"] == "4,2,6" and c["tree"]["paths"] == []
                          and 'class="cycle-tree"' in c["chips"] for c in cycles)
    assert all(len(c["tree"]["nodes"]) == 5 for c in cycles[:-1])
    assert summary["tree"] == "4,2,6" and summary["k"] == 4
    assert summary["speedup_predicted"] is None  # a tree drawn anew each cycle: measured
    assert 'data-summary="tree_tokens_measured"' in summary["html"]
    saved = next(data for kind, data in events if kind == "saved")
    page = httpx.get(server.url + saved["url"], timeout=30).text
    assert "EAGLE head, an EAGLE-2 tree 4,2,6" in page
    assert page.count('class="cycle-tree"') == len(cycles)


@pytest.mark.parametrize(("tree", "says"), [("4,3,64", "draft_tokens must be at most 31"),
                                            ("0;1", "three whole numbers")])
def test_an_eagle_tree_it_cannot_draft_is_refused_with_a_reason(server, tree, says):
    response = httpx.post(server.url + "/api/runs", json=BODY | {"tree": tree}, timeout=30)
    assert response.status_code == 422 and says in response.text


def test_a_draft_models_tree_run_draws_its_trees_and_predicts_its_yield(server):
    events = run(server, "/runs", drafter="model", tree="0;1;0.0;0.0.0")
    cycles = [data for kind, data in events if kind == "cycle"]
    summary = next(data for kind, data in events if kind == "summary")
    assert cycles and all(c["drafter"] == "model" and c["tree"]["parents"] == [0, 0, 1, 3]
                          for c in cycles)
    assert summary["tree"] == "0;1;0.0;0.0.0" and summary["k"] == 3
    assert "the draft model drafted the tree" in summary["html"]
    # the tree model, from the ranks the target's tokens had among the draft's candidates
    assert summary["speedup_predicted"] > 0.5
    assert any(c["tree"]["ranks"] for c in cycles)
