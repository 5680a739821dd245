"""Probing through a vLLM server from the page and the API, when the server is configured with
one (SPECSCOPE_VLLM_URL): the stand-in vLLM server, the tiny real pair for the comparison."""

from __future__ import annotations

import httpx
import pytest
from fastapi.testclient import TestClient
from support.fake_vllm_server import start_fake_vllm
from support.live_server import LiveServer
from support.probes import events, result_of

from app.main import create_app

VLLM = {"engine": "vllm", "sets": ["python"], "temperatures": "0", "k": 4, "max_new_tokens": 5,
        "prompts_per_set": 2, "seed": 1}


@pytest.fixture(scope="module")
def fake_vllm(tmp_path_factory):
    server = start_fake_vllm("serve", tmp_path_factory.mktemp("fake_vllm"))
    yield server
    server.stop()


@pytest.fixture(scope="module")
def server(live_settings, fake_vllm):
    settings = live_settings.model_copy(update={"vllm_url": fake_vllm.url})
    with LiveServer(create_app(settings)) as running:
        yield running


def stream(server, path: str, params: dict) -> list[tuple[str, dict]]:
    with httpx.stream("POST", server.url + path, params=params, timeout=120) as response:
        assert response.status_code == 200, response.read()
        return events(response)


def test_the_api_probe_through_vllm_reports_vllms_counters(server):
    out = stream(server, "/api/probes", VLLM)
    progress = [d for kind, d in out if kind == "progress"]
    # two prompts through vLLM, then the same two through our engine, for the comparison
    assert [d["engine"] for d in progress] == ["vllm", "vllm", "specscope", "specscope"]
    assert {d["total"] for d in progress} == {4}
    result = result_of(out)
    assert result["engine"] == "vllm"
    [row] = result["rows"]
    assert (row["cycles"], row["accepted"], row["drafted"]) == (2, 4, 8)  # 2 of 4 a cycle
    assert row["alpha_expected"] is None
    assert any("n/a here" in n for n in result["notices"])


def test_the_page_renders_the_vllm_table_with_what_vllm_cannot_give(server):
    out = stream(server, "/probes", VLLM)
    html = result_of(out)["html"]
    assert "vllm" in html.lower() and "n/a" in html


def test_the_panel_offers_vllm_only_when_the_server_has_one(server, live_settings):
    page = httpx.get(server.url + "/?probe_engine=vllm").text
    assert 'id="probe_engine"' in page and '<option value="vllm" selected>' in page
    with TestClient(create_app(live_settings.model_copy(update={"load_models": False})),
                    base_url="http://127.0.0.1") as plain:
        html = plain.get("/?probe_engine=vllm").text
        assert 'id="probe_engine"' not in html
        assert "probe_engine=&#39;vllm&#39; is not available on this server" in html
        refused = plain.post("/api/probes", params=VLLM)
        assert refused.status_code == 422
        assert "engine: Input should be 'specscope'" in refused.json()["message"]


def test_a_vllm_server_that_stops_answering_ends_the_probe_with_a_message(
        live_settings, tmp_path):
    settings = live_settings.model_copy(update={"vllm_url": "http://127.0.0.1:9"})
    with LiveServer(create_app(settings)) as running:
        out = stream(running, "/api/probes", VLLM)
    kind, data = out[-1]
    assert kind == "error" and data["message"].startswith("the vLLM server:")


def test_a_vllm_probe_is_kept_with_its_engine_and_links_back_to_it(server):
    out = stream(server, "/api/probes", VLLM)
    kind, saved = out[-1]
    assert kind == "saved"
    record = httpx.get(server.url + f"/api/probes/{saved['id']}").json()
    assert record["settings"]["engine"] == "vllm" and record["result"]["engine"] == "vllm"
    page = httpx.get(server.url + saved["url"]).text
    assert "probe_engine=vllm" in page
