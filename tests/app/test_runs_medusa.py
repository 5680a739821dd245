"""Run live with the Medusa heads: a pair whose spec names them offers drafter "medusa"; its
cycles read as one pass of the heads, its summary and saved run keep the drafter, and k beyond
the heads is refused with a reason."""

from __future__ import annotations

import csv
import io

import httpx
import pytest
from support.live_server import LiveServer, shipped_settings
from support.sse import read_events

from app.main import create_app

BODY = {"prompt": "And God said, Let there be light", "k": 3, "temperature": 0.0,
        "top_p": 1.0, "max_new_tokens": 24, "seed": 5, "pair": "shipped", "drafter": "medusa",
        "repeats": 1}


@pytest.fixture(scope="module")
def server():
    settings = shipped_settings(medusa="medusa")
    with LiveServer(create_app(settings)) as live:
        yield live


def test_a_medusa_run_streams_one_pass_cycles_and_is_saved_as_the_heads(server):
    with httpx.stream("POST", server.url + "/runs", json=BODY, timeout=60) as response:
        assert response.status_code == 200, response.read()
        events = read_events(response)
    cycles = [data for kind, data in events if kind == "cycle"]
    summary = next(data for kind, data in events if kind == "summary")
    assert cycles and all(c["drafter"] == "medusa" and c["n_proposed"] == 3 for c in cycles)
    assert all("heads " in c["chips"] and "(one pass)" in c["chips"] for c in cycles)
    assert summary["drafter"] == "medusa"
    saved = next(data for kind, data in events if kind == "saved")
    record = httpx.get(server.url + f"/api/runs/{saved['id']}", timeout=30).json()
    assert record["settings"]["drafter"] == "medusa"
    assert "Medusa heads, k 3" in httpx.get(server.url + saved["url"], timeout=30).text


def test_k_beyond_the_heads_is_refused_with_a_reason(server):
    response = httpx.post(server.url + "/api/runs", json=BODY | {"k": 6}, timeout=30)
    assert response.status_code == 422
    assert "k must be at most 4" in response.text


# ---- a token tree --------------------------------------------------------------------------

TREE = "0;1;2;0.0;0.1;1.0;0.0.0"  # 7 drafts, 3 deep


def test_a_tree_run_streams_each_cycles_tree_drawn_and_replays_it_saved(server):
    with httpx.stream("POST", server.url + "/runs", json=BODY | {"tree": TREE},
                      timeout=60) as response:
        assert response.status_code == 200, response.read()
        events = read_events(response)
    cycles = [data for kind, data in events if kind == "cycle"]
    summary = next(data for kind, data in events if kind == "summary")
    assert cycles
    for c in cycles[:-1]:  # the last may stop inside its path (the token budget)
        tree = c["tree"]
        assert tree["parents"] == [0, 0, 0, 1, 1, 2, 4] and len(tree["nodes"]) == 7
        kinds = [node["kind"] for node in tree["nodes"]]
        accepted = [i for i, kind in enumerate(kinds, 1) if kind == "accepted"]
        # the accepted nodes form one path down from the root
        assert all(tree["parents"][node - 1] == parent
                   for parent, node in zip([0, *accepted], accepted, strict=False))
        # and the children tried where it stopped are the rejected ones
        stop = accepted[-1] if accepted else 0
        tried = [i for i, parent in enumerate(tree["parents"], 1) if parent == stop]
        assert [i for i, kind in enumerate(kinds, 1) if kind == "rejected"] == tried
        assert c["n_proposed"] == 3 and 'class="cycle-tree"' in c["chips"]
        assert c["chips"].count('class="tree-token accepted"') == len(accepted)
    assert summary["tree"] == TREE and summary["k"] == 3
    assert summary["speedup_predicted"] is not None
    saved = next(data for kind, data in events if kind == "saved")
    record = httpx.get(server.url + f"/api/runs/{saved['id']}", timeout=30).json()
    assert record["settings"]["tree"] == TREE
    page = httpx.get(server.url + saved["url"], timeout=30).text
    assert "Medusa heads, a tree of 7, depth 3" in page
    assert page.count('class="cycle-tree"') == len(cycles)
    exported = httpx.get(server.url + saved["url"] + ".csv", timeout=30).text
    rows = list(csv.DictReader(io.StringIO(exported, newline="")))
    assert len(rows) == sum(len(c["tokens"]) for c in cycles)
    first = cycles[0]  # every draft of a tree: the heads' one pass
    assert {r["step_ms"] for r in rows[: len(first["tokens"]) - 1]} == {
        f"{first['draft_ms']:.3f}"}
    assert sum(any(n["kind"] == "accepted" for n in c["tree"]["nodes"]) for c in cycles) > 0


@pytest.mark.parametrize(("change", "says"), [
    ({"tree": "0;0.1"}, "needs its parent and its elder siblings"),
    ({"tree": "0;0.0;0.0.0;0.0.0.0;0.0.0.0.0"}, "the tree is 5 deep"),
    ({"tree": "0;x"}, "should match pattern"),
    ({"tree": "0;;1."}, "is not a path"),
    ({"tree": "0", "drafter": "ngram"}, "not by prompt lookup"),
])
def test_a_tree_the_heads_cannot_draft_is_refused_with_a_reason(server, change, says):
    response = httpx.post(server.url + "/api/runs", json=BODY | change, timeout=30)
    assert response.status_code == 422
    assert says in response.text
