"""DNS rebinding and cross-site POSTs are refused; the page's own requests are not."""

from __future__ import annotations

import time

import httpx
import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from engine.settings import Settings

BODY = {"prompt": "the quick brown fox", "k": 2, "max_new_tokens": 4, "pair": "tiny"}


@pytest.mark.parametrize("host", ["evil.example", "evil.example:8000", "127.0.0.1.evil.example",
                                  "localhost.evil.example", ""])
def test_a_host_not_on_the_list_gets_400(client, host):
    response = client.get("/", headers={"Host": host})
    assert response.status_code == 400
    assert "this server answers to" in response.json()["message"]


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.1:8000", "localhost:8000", "[::1]:8000"])
def test_the_allowed_hosts_are_served(client, host):
    assert client.get("/api/theory", headers={"Host": host}).status_code == 200


def test_more_hosts_come_from_the_settings(monkeypatch):
    monkeypatch.setenv("SPECSCOPE_ALLOWED_HOSTS", '["specscope.internal"]')
    app = create_app(Settings(load_models=False))
    with TestClient(app, base_url="http://specscope.internal:8000") as c:
        assert c.get("/api/theory").status_code == 200
        assert c.get("/api/theory", headers={"Host": "localhost"}).status_code == 400
    with TestClient(create_app(Settings(load_models=False, allowed_hosts=["*"]))) as c:
        assert c.get("/api/theory", headers={"Host": "anything.example"}).status_code == 200


def test_cross_origin_posts_are_refused_before_any_run(live_server, app_state):
    while app_state.runs.status()["running"]:  # a run of an earlier test may be finishing
        time.sleep(0.02)
    completed = app_state.runs.status()["completed"]
    for path in ("/api/runs", "/runs"):
        response = httpx.post(live_server.url + path, json=BODY,
                              headers={"Origin": "http://evil.example"})
        assert response.status_code == 403
        assert "may not start runs" in response.json()["message"]
    # A page on the rebinding host itself: its Host is refused first.
    response = httpx.post(live_server.url + "/api/runs", json=BODY,
                          headers={"Origin": "http://evil.example", "Host": "evil.example"})
    assert response.status_code == 400
    assert app_state.runs.status()["completed"] == completed


def test_same_origin_and_originless_posts_run(live_server):
    for headers in ({"Origin": live_server.url}, {}):
        with httpx.stream("POST", live_server.url + "/api/runs", json=BODY, headers=headers,
                          timeout=60) as response:
            assert response.status_code == 200
            assert "event: summary" in response.read().decode()


def test_allowed_origins_come_from_the_settings():
    settings = Settings(load_models=False, allowed_origins=["https://docs.example"])
    body = BODY | {"pair": "shipped"}
    with TestClient(create_app(settings), base_url="http://127.0.0.1") as c:
        ok = c.post("/api/runs", json=body, headers={"Origin": "https://docs.example"})
        refused = c.post("/api/runs", json=body, headers={"Origin": "https://other.example"})
    assert ok.status_code == 503  # allowed through; no models are loaded here
    assert refused.status_code == 403


@pytest.mark.parametrize("host", ["127.0.0.1:8777@evil.example", "127.0.0.1:80:80",
                                  "127.0.0.1:", "127.0.0.1:port", "localhost:123456",
                                  "[::1]evil.example", "[::1]:80x", "127.0.0.1 :80",
                                  "user@127.0.0.1", "127.0.0.1/evil"])
def test_a_host_header_is_parsed_strictly(client, host):
    """``name[:port]`` and nothing else: a port of digits, a name of letters, digits, dots
    and hyphens (or an IPv6 address in brackets); anything around an allowed name is not
    that name."""
    response = client.get("/api/theory", headers={"Host": host})
    assert response.status_code == 400, host

def test_a_refusal_names_what_was_refused(client):
    evil = {"Origin": "http://evil.example"}
    calibrate = client.post("/calibrate", data={"before": "x"}, headers=evil)
    assert calibrate.status_code == 403
    assert "may not read vLLM counters (calibrate)" in calibrate.json()["message"]
    probe = client.post("/api/probes", json={}, headers=evil)
    assert probe.status_code == 403 and "may not start probes" in probe.json()["message"]


def test_a_hidden_origin_passes_only_when_the_browser_says_same_origin(client):
    metrics = "vllm:spec_decode_num_drafts_total 10\n"
    own = client.post("/calibrate", data={"before": metrics},
                      headers={"Origin": "null", "Sec-Fetch-Site": "same-origin"})
    assert own.status_code != 403
    for site in ("cross-site", "same-site", None):
        headers = {"Origin": "null"} | ({"Sec-Fetch-Site": site} if site else {})
        refused = client.post("/calibrate", data={"before": metrics}, headers=headers)
        assert refused.status_code == 403
        assert refused.json()["message"].startswith("a page that hides its origin may not "
                                                    "read vLLM counters")


def test_pages_send_their_origin_with_a_same_origin_referrer_policy(client):
    assert client.get("/").headers["Referrer-Policy"] == "same-origin"
