"""Run live with the Medusa heads: a pair whose spec names them offers drafter "medusa"; its
cycles read as one pass of the heads, its summary and saved run keep the drafter, and k beyond
the heads is refused with a reason."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from support.live_server import LiveServer
from support.sse import read_events

from app.main import create_app
from engine.settings import PairSpec, Settings

MODELS = Path(__file__).parents[2] / "models"
BODY = {"prompt": "And God said, Let there be light", "k": 3, "temperature": 0.0,
        "top_p": 1.0, "max_new_tokens": 24, "seed": 5, "pair": "shipped", "drafter": "medusa",
        "repeats": 1}


@pytest.fixture(scope="module")
def server():
    settings = Settings(
        pairs={"shipped": PairSpec(target=str(MODELS / "target"), draft=str(MODELS / "draft"),
                                   medusa=str(MODELS / "medusa"), label="shipped pair")},
        default_pair="shipped", device="cpu", queue_size=1, max_new_tokens_limit=256,
        run_timeout_s=60.0)
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
