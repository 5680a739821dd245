"""GET /healthz and ``python -m app.healthcheck``, the container's health check."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from app import healthcheck
from app.main import create_app
from engine.settings import PairSpec, Settings


def test_without_models_the_server_is_healthy_and_says_none_were_asked_for(client):
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.headers["cache-control"] == "no-store"
    body = response.json()
    assert body["status"] == "ok"
    assert body["models"] == {"requested": False, "loaded": False, "pairs": [], "error": None}
    assert body["queue"] == {"capacity": 4, "running": False, "waiting": 0, "completed": 0}


def test_with_models_it_names_the_pairs_and_reports_the_engine_queue(live_server, app_state):
    import httpx

    body = httpx.get(live_server.url + "/healthz").json()
    assert body["status"] == "ok"
    assert body["models"]["requested"] and body["models"]["loaded"]
    assert body["models"]["pairs"] == ["tiny"]
    assert body["queue"] == {"capacity": 1, **app_state.runs.status()}


def test_models_that_fail_to_load_make_it_503_with_the_reason(tmp_path):
    missing = str(tmp_path / "no-such-model")
    settings = Settings(pairs={"gone": PairSpec(target=missing, draft=missing)},
                        default_pair="gone", device="cpu")
    with TestClient(create_app(settings), base_url="http://127.0.0.1") as c:
        response = c.get("/healthz")
        assert c.get("/").status_code == 200  # the slider page still works
    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "degraded" and not body["models"]["loaded"]
    assert "could not be loaded" in body["models"]["error"]


def test_it_is_cheap_and_in_the_api_docs(client):
    assert "/healthz" in client.get("/openapi.json").json()["paths"]


@pytest.mark.parametrize(
    "host,url",
    [("0.0.0.0", "http://127.0.0.1:8000/healthz"), ("::", "http://127.0.0.1:8000/healthz"),
     ("127.0.0.1", "http://127.0.0.1:8000/healthz"), ("::1", "http://[::1]:8000/healthz")],
)
def test_the_check_asks_where_the_server_listens(host, url):
    assert healthcheck.health_url(Settings(host=host, port=8000, load_models=False)) == url


def test_the_check_passes_against_a_serving_server(live_server, monkeypatch, capsys):
    monkeypatch.setenv("SPECSCOPE_PORT", str(live_server.port))
    assert healthcheck.main() == 0
    assert '"status":"ok"' in capsys.readouterr().out


def test_the_check_fails_when_nothing_answers(monkeypatch, capsys):
    from support.live_server import free_port

    monkeypatch.setenv("SPECSCOPE_PORT", str(free_port()))
    assert healthcheck.main() == 1
    assert "/healthz" in capsys.readouterr().out
