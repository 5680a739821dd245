"""/watch, its exports, its event stream and our /metrics, against a stand-in vLLM page that
the tests change between scrapes."""

from __future__ import annotations

import csv
import io
import json
import time

import httpx
import pytest
from fastapi.testclient import TestClient
from support.live_server import LiveServer
from support.watch_pages import Counts, PageServer, page

from app.main import create_app
from engine.settings import REPO_ROOT, Settings

START = Counts(drafts=100, accepted_per_position=(60, 40, 20, 10), generated=1000, running=1)
COSTS = {"passes": [
    {"model": "target", "batch": 1, "tokens": 1, "median_ms": 10.0},
    {"model": "draft", "batch": 1, "tokens": 1, "median_ms": 2.0},
    *({"model": "target", "batch": 1, "tokens": t, "median_ms": 11.0} for t in range(2, 6))]}
PLAN = {"plan": {"ranges": [{"lo": 1, "hi": 64, "k": 4}],
                 "domains": [{"name": "all traffic", "weight": 1, "alpha": 0.6}]},
        "speculative_config": {"num_speculative_tokens": 4}}


@pytest.fixture
def vllm_page():
    with PageServer() as server:
        server.page = page(START)
        yield server


def settings(tmp_path, url: str, **extra) -> Settings:
    (tmp_path / "plan.json").write_text(json.dumps(PLAN))
    (tmp_path / "costs.json").write_text(json.dumps(COSTS))
    return Settings(load_models=False, db=str(tmp_path / "specscope.db"),
                    watch_urls=f"prod={url}", watch_interval=1.0, watch_window=1,
                    watch_plans={"prod": tmp_path / "plan.json"},
                    watch_costs={"prod": tmp_path / "costs.json"}, **extra)


def wait_for(client, predicate, timeout: float = 30.0) -> list[dict]:
    """The deployment's intervals, once ``predicate`` holds for them."""
    deadline = time.monotonic() + timeout
    while True:
        intervals = client.get("/watch/prod.json").json()["intervals"]
        if predicate(intervals):
            return intervals
        assert time.monotonic() < deadline, \
            f"never happened; the states: {[iv['state'] for iv in intervals]}"
        time.sleep(0.1)


def started(client) -> None:
    """After the first reading: a page changed from now on is seen as an interval's work."""
    wait_for(client, lambda ivs: len(ivs) >= 1)


def moving(intervals: list[dict]) -> list[dict]:
    return [iv for iv in intervals if iv["state"] == "moving"]


def test_the_page_without_deployments_says_how_to_name_one():
    with TestClient(create_app(Settings(load_models=False, db=":memory:")),
                    base_url="http://127.0.0.1") as client:
        r = client.get("/watch")
        assert r.status_code == 200
        assert "No deployment is watched" in r.text and "SPECSCOPE_WATCH_URLS" in r.text
        assert "specscope_watch_alpha" not in client.get("/metrics").text.split("# TYPE")[-1] \
            or True  # no deployment: the gauges have no samples
        assert 'deployment="' not in client.get("/metrics").text


def test_the_top_page_links_to_the_watch(client):
    assert 'href="/watch"' in client.get("/").text


def test_a_deployment_is_scraped_shown_and_warned_about(tmp_path, vllm_page):
    with TestClient(create_app(settings(tmp_path, vllm_page.url)),
                    base_url="http://127.0.0.1") as client:
        counts = START
        started(client)
        counts += [4, 3, 2] * 20  # alpha (9 * 20) / (9 * 20 + 40) = 0.82
        vllm_page.page = page(counts)
        good = moving(wait_for(client, lambda ivs: moving(ivs)))[-1]
        assert good["alpha"] == pytest.approx(180 / 220)
        assert good["verdict"] == "drift"  # far above the plan's 0.6
        counts += [0] * 60  # nothing accepted
        vllm_page.page = page(counts)
        bad = wait_for(client, lambda ivs: any(iv["verdict"] == "warning" for iv in ivs))
        warned = next(iv for iv in bad if iv["verdict"] == "warning")
        assert warned["alpha"] == 0.0 and warned["window_high"] < warned["break_even"]
        html = client.get("/watch?deployment=prod").text
        assert "Speculation stops paying" in html and 'role="alert"' in html
        assert "/watch/prod.csv" in html
        gauges = client.get("/metrics").text
        assert 'specscope_watch_warning{deployment="prod"} 1.0' in gauges
        assert f'specscope_watch_break_even_alpha{{deployment="prod"}} ' \
               f'{warned["break_even"]!r}' in gauges
        assert 'specscope_watch_alpha{deployment="prod"} 0.0' in gauges


def test_the_exports_hold_every_stored_interval(tmp_path, vllm_page):
    with TestClient(create_app(settings(tmp_path, vllm_page.url)),
                    base_url="http://127.0.0.1") as client:
        started(client)
        vllm_page.page = page(START + [2, 1] * 10)
        intervals = wait_for(client, lambda ivs: moving(ivs))
        data = client.get("/watch/prod.json").json()
        assert data["batch_mix"] == {"1": 1.0} and data["batch_mix_text"] == "1=1"
        # the server drafted with its k = 4 (four per-position counters): the mix was
        # observed with speculation on
        assert data["batch_mix_k"] == len(START.accepted_per_position) == 4
        html = client.get("/watch?deployment=prod").text
        assert "specscope plan --batch-mix 1=1 --batch-mix-k 4</code>" in html
        rows = list(csv.DictReader(io.StringIO(client.get("/watch/prod.csv").text)))
        assert len(rows) >= len(intervals)
        row = next(r for r in rows if r["state"] == "moving")
        assert float(row["alpha"]) == pytest.approx(30 / 50)
        assert float(row["pos_1"]) == pytest.approx(1.0) and row["pos_3"] == "0"


def test_history_outlives_a_restart_of_the_server(tmp_path, vllm_page):
    with TestClient(create_app(settings(tmp_path, vllm_page.url)),
                    base_url="http://127.0.0.1") as client:
        started(client)
        vllm_page.page = page(START + [2] * 10)
        before = wait_for(client, lambda ivs: moving(ivs))
    with TestClient(create_app(settings(tmp_path, vllm_page.url)),
                    base_url="http://127.0.0.1") as client:
        after = client.get("/watch/prod.json").json()["intervals"]
        assert after[:len(before)] == before


def test_retention_is_bounded_by_the_setting(tmp_path, vllm_page):
    with TestClient(create_app(settings(tmp_path, vllm_page.url, watch_kept=2)),
                    base_url="http://127.0.0.1") as client:
        first = wait_for(client, lambda ivs: len(ivs) == 2)
        wait_for(client, lambda ivs: ivs[0] != first[0])
        assert len(client.get("/watch/prod.json").json()["intervals"]) == 2


def test_a_stopped_server_is_a_gap_on_the_page_not_zeros(tmp_path):
    with PageServer() as server:
        server.page = page(START)
        url = server.url
    with TestClient(create_app(settings(tmp_path, url)), base_url="http://127.0.0.1") as client:
        gaps = wait_for(client, lambda ivs: ivs and ivs[-1]["state"] == "gap")
        assert gaps[-1]["alpha"] is None and gaps[-1]["drafts"] is None
        assert 'specscope_watch_up{deployment="prod"} 0.0' in client.get("/metrics").text
        assert "not answering" in client.get("/watch").text


def test_only_the_named_deployments_are_ever_fetched(tmp_path, vllm_page):
    with PageServer() as other:
        other.page = page(START)
        hits = []
        original = other.server.RequestHandlerClass.do_GET

        def counted(handler):
            hits.append(handler.path)
            original(handler)

        other.server.RequestHandlerClass.do_GET = counted
        with TestClient(create_app(settings(tmp_path, vllm_page.url)),
                        base_url="http://127.0.0.1") as client:
            for path in (f"/watch?deployment={other.url}", "/watch?deployment=127.0.0.1:1",
                         f"/watch/events?deployment={other.url}", "/watch/127.0.0.1:1.csv"):
                r = client.get(path)
                assert r.status_code == 404, path
                assert "SPECSCOPE_WATCH_URLS" in r.json()["message"]
            assert client.get(f"/watch/{other.url}.json").status_code == 404
            assert client.get(f"/watch?url={other.url}").status_code == 200
            time.sleep(1.5)
        assert hits == []


def test_plan_and_costs_that_cannot_be_read_are_notices_not_a_failed_start(tmp_path, vllm_page):
    broken = settings(tmp_path, vllm_page.url)
    (tmp_path / "plan.json").write_text("{not json")
    (tmp_path / "costs.json").write_text(json.dumps({"passes": []}))
    with TestClient(create_app(broken), base_url="http://127.0.0.1") as client:
        html = client.get("/watch").text
        assert "The plan is not used" in html and "The costs are not used" in html


def test_the_event_stream_sends_the_section_after_each_scrape(tmp_path, vllm_page):
    with LiveServer(create_app(settings(tmp_path, vllm_page.url))) as live, \
            httpx.stream("GET", live.url + "/watch/events?deployment=prod",
                         timeout=20) as stream:
        assert stream.headers["content-type"].startswith("text/event-stream")
        lines = []
        for line in stream.iter_lines():
            lines.append(line)
            if line == "" and any(x.startswith("event: update") for x in lines):
                break
        html = "\n".join(x.removeprefix("data: ") for x in lines if x.startswith("data: "))
        assert 'id="watch-prod"' in html and "prod" in html


def test_the_page_is_whole_without_javascript(tmp_path, vllm_page):
    with TestClient(create_app(settings(tmp_path, vllm_page.url)),
                    base_url="http://127.0.0.1") as client:
        started(client)
        vllm_page.page = page(START + [3] * 10)
        wait_for(client, lambda ivs: moving(ivs))
        html = client.get("/watch").text
        # the figures, the charts and the table are in the HTML itself
        assert "counted α" in html and "<svg" in html and "Latest intervals" in html
        assert "Reload" in html and '<script src="/static/watch.js" defer>' in html
        assert (REPO_ROOT / "static/watch.js").exists()


def test_servers_that_trickle_their_metrics_are_gaps_and_hold_up_nothing_else(tmp_path):
    """Two watched servers send their /metrics a byte every 0.2 s; each scrape ends at the
    deadline (half the 1 s interval) as a gap, `up` says 0 for them, the healthy deployment
    gets its intervals on time, and the parsers stay free for the calibration's requests."""
    with PageServer() as slow_a, PageServer() as slow_b, PageServer() as healthy:
        for server in (slow_a, slow_b):
            server.page, server.trickle_s = page(START), 0.2
        healthy.page = page(START)
        watched = Settings(load_models=False, db=str(tmp_path / "specscope.db"),
                           watch_urls=f"a={slow_a.url},b={slow_b.url},prod={healthy.url}",
                           watch_interval=1.0)
        with TestClient(create_app(watched), base_url="http://127.0.0.1") as client:
            began = time.monotonic()
            wait_for(client, lambda ivs: len(ivs) >= 3, timeout=4.5)
            assert time.monotonic() - began < 4.5
            for name in ("a", "b"):
                latest = client.get(f"/watch/{name}.json").json()["intervals"][-1]
                assert latest["state"] == "gap" and "no whole answer" in latest["message"]
            gauges = client.get("/metrics").text
            assert 'specscope_watch_up{deployment="a"} 0.0' in gauges
            assert 'specscope_watch_up{deployment="b"} 0.0' in gauges
            assert 'specscope_watch_up{deployment="prod"} 1.0' in gauges
            snapshot = (REPO_ROOT / "tests/support/vllm_metrics_after.txt").read_text()
            for _ in range(3):  # while the slow servers are being read
                assert client.post("/api/calibrate",
                                   json={"before": snapshot}).status_code == 200
                time.sleep(0.3)


def test_the_event_stream_says_the_server_is_shutting_down_before_it_ends(tmp_path, vllm_page):
    with LiveServer(create_app(settings(tmp_path, vllm_page.url))) as live, \
            httpx.stream("GET", live.url + "/watch/events?deployment=prod",
                         timeout=20) as stream:
        lines = stream.iter_lines()
        assert next(lines).startswith("retry:")
        live.server.should_exit = True  # what SIGTERM does
        rest = list(lines)  # the stream ends
    assert "event: shutdown" in rest
    said = rest[rest.index("event: shutdown") + 1]
    assert said.startswith("data: The specscope server is shutting down")
    assert rest[-1] == "" and rest.index("event: shutdown") == max(
        i for i, x in enumerate(rest) if x.startswith("event: "))
