"""Live runs over HTTP: the event stream, its invariants, limits, cancellation and faults.

A real server (uvicorn on a free localhost port) runs a tiny real pair built by the tests.
"""

from __future__ import annotations

import dataclasses
import json
import time
from contextlib import contextmanager

import httpx
import pytest
from support.live_server import wait_until_idle
from support.sse import read_events

from engine.analytic.theory import KINDS

BODY = {"prompt": "the quick brown fox", "k": 3, "temperature": 1.0, "top_p": 1.0,
        "max_new_tokens": 24, "seed": 5, "pair": "tiny"}


def run(server, body=None, path="/api/runs") -> list[tuple[str, dict]]:
    with httpx.stream("POST", server.url + path, json=body or BODY, timeout=60) as response:
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"].startswith("text/event-stream")
        return read_events(response)


def test_stream_is_cycles_then_one_summary_then_where_it_was_saved(live_server):
    events = run(live_server)
    kinds = [kind for kind, _ in events]
    assert kinds[0] == "cycle" and kinds[-2:] == ["summary", "saved"]
    # The streamed pass, then three quiet repeats by default, announced after every cycle.
    assert set(kinds) == {"cycle", "repeat", "summary", "saved"}
    assert kinds.index("repeat") > max(i for i, kind in enumerate(kinds) if kind == "cycle")
    assert [data for kind, data in events if kind == "repeat"] == [
        {"repeat": r, "repeats": 3} for r in (1, 2, 3)]
    summary = next(data for kind, data in events if kind == "summary")
    assert len(summary["speedup_per_repeat"]) == 3 and summary["speedup_streamed"] > 0
    assert events[-1][1]["url"] == f"/runs/{events[-1][1]['id']}"
    cycles = [data for kind, data in events if kind == "cycle"]
    assert [c["index"] for c in cycles] == list(range(len(cycles)))
    for c in cycles:
        assert set(c) >= {"index", "tokens", "draft_ms", "verify_ms"}
        assert c["draft_ms"] > 0 and c["verify_ms"] > 0


def test_cycle_invariants_and_counts_add_up(live_server, tiny_tokenizer):
    events = run(live_server)
    cycles = [data for kind, data in events if kind == "cycle"]
    summary = next(data for kind, data in events if kind == "summary")
    output_ids, output_text = [], ""
    for c in cycles:
        kinds = [t["kind"] for t in c["tokens"]]
        assert set(kinds) <= set(KINDS)
        drafts = [k for k in kinds if k != "target"]
        assert len(drafts) == BODY["k"]
        n = drafts.count("accepted")
        # accepted*, then at most one rejected, then discarded*; the target token last.
        assert drafts[:n] == ["accepted"] * n
        assert drafts[n:] in ([], ["rejected"] + ["discarded"] * (len(drafts) - n - 1),
                              ["discarded"] * (len(drafts) - n))
        assert kinds.count("target") <= 1 and (kinds[-1] == "target" or c is cycles[-1])
        for t in c["tokens"]:
            if t["kind"] in ("accepted", "target"):
                output_ids.append(t["id"])
                output_text += t["text"]
    # The text shown is exactly the decoded output: accepted plus target tokens.
    assert output_text == tiny_tokenizer.decode(output_ids, skip_special_tokens=True)
    assert summary["tokens"] == len(output_ids) <= BODY["max_new_tokens"]
    assert summary["cycles"] == len(cycles)
    accepted = sum(t["kind"] == "accepted" for c in cycles for t in c["tokens"])
    assert summary["accepted"] >= accepted  # drafts past a stop are shown as discarded
    assert summary["drafted"] == BODY["k"] * len(cycles)


def test_summary_has_every_figure(live_server):
    summary = run(live_server)[-2][1]
    for key in ("alpha_counted", "alpha_expected", "draft_acceptance_rate",
                "mean_acceptance_length", "c", "v", "baseline_tok_s", "spec_tok_s",
                "speedup_measured", "speedup_predicted"):
        assert isinstance(summary[key], float), key
    assert 0 <= summary["alpha_counted"] <= 1 and 0 <= summary["alpha_expected"] <= 1
    assert summary["speedup_measured"] == pytest.approx(
        summary["spec_tok_s"] / summary["baseline_tok_s"])
    # The baseline decoded as many tokens as the speculative run, end of sequence or not.
    assert summary["baseline_tokens"] == summary["tokens"]


def test_same_seed_same_tokens(live_server):
    ids = lambda events: [t["id"] for k, d in events if k == "cycle" for t in d["tokens"]]  # noqa: E731
    assert ids(run(live_server)) == ids(run(live_server))


@pytest.mark.parametrize(
    "change,field",
    [
        ({"prompt": ""}, "prompt"),
        ({"prompt": "   "}, "prompt"),
        ({"prompt": "x" * 5000}, "prompt"),
        ({"k": 0}, "k"),
        ({"k": 17}, "k"),
        ({"temperature": -0.5}, "temperature"),
        ({"top_p": 0}, "top_p"),
        ({"top_p": 1.5}, "top_p"),
        ({"max_new_tokens": 100_000}, "max_new_tokens"),
        ({"pair": "../../etc/passwd"}, "pair"),
        ({"seed": "abc"}, "seed"),
        ({"model_path": "/tmp/x"}, "model_path"),
    ],
)
def test_invalid_bodies_get_422_before_any_stream(live_server, change, field):
    response = httpx.post(live_server.url + "/api/runs", json=BODY | change)
    assert response.status_code == 422
    assert response.json()["message"].startswith(field)


def test_non_json_body_gets_422(live_server):
    response = httpx.post(live_server.url + "/api/runs", content=b"not json",
                          headers={"Content-Type": "application/json"})
    assert response.status_code == 422
    assert response.json()["message"].startswith("body:")


@contextmanager
def slow_target(app_state, seconds: float):
    """Every target forward pass takes ``seconds`` longer, and no run stops at an end of
    sequence: a run that lasts long enough to be cancelled or queued behind."""
    pairs = app_state.runs.pairs
    pair = pairs["tiny"]
    hook = pair.target.register_forward_hook(lambda *_: time.sleep(seconds))
    pairs["tiny"] = dataclasses.replace(pair, stop_token_ids=frozenset())
    try:
        yield
    finally:
        pairs["tiny"] = pair
        hook.remove()


def test_client_going_away_cancels_within_one_cycle(live_server, app_state):
    body = BODY | {"max_new_tokens": 256, "k": 2}
    with slow_target(app_state, 0.05):
        with httpx.stream("POST", live_server.url + "/api/runs", json=body, timeout=60) as r:
            seen = 0
            for line in r.iter_lines():
                seen += line.startswith("event: cycle")
                if seen == 3:
                    break
            run = app_state.runs.active
        freed_after = wait_until_idle(live_server)
    assert run.cancelled.is_set()
    assert run.cycles_after_cancel <= 1
    assert run.cycles < 10  # of the ~100 cycles the full run would take
    assert freed_after < 1.0
    assert run_summary_ok(live_server)


def run_summary_ok(server) -> bool:
    return [kind for kind, _ in run(server)[-2:]] == ["summary", "saved"]


def test_engine_fault_ends_the_run_with_an_error_and_the_next_run_works(live_server, app_state):
    target = app_state.runs.pairs["tiny"].target

    def out_of_memory(module, args, output):
        raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")

    hook = target.register_forward_hook(out_of_memory)
    try:
        events = run(live_server)
    finally:
        hook.remove()
    assert events[-1][0] == "error"
    assert "ran out of memory" in events[-1][1]["message"]
    assert run_summary_ok(live_server)


def test_an_internal_fault_is_reported_without_the_engines_internals(live_server, app_state):
    def fault(module, args, output):
        raise IndexError("index 300 is out of bounds for dimension 0 with size 300")

    hook = app_state.runs.pairs["tiny"].target.register_forward_hook(fault)
    try:
        kind, data = run(live_server)[-1]
    finally:
        hook.remove()
    assert kind == "error" and "the engine failed on this run" in data["message"]
    for internal in ("IndexError", "out of bounds", "dimension", "Traceback"):
        assert internal not in data["message"]


@pytest.mark.parametrize("path", ["/api/runs", "/runs"])
def test_a_prompt_longer_than_the_context_gets_422_before_any_stream(live_server, app_state,
                                                                     path):
    wait_until_idle(live_server)  # a run of an earlier test may still be finishing
    completed = app_state.runs.status()["completed"]
    prompt = "the quick brown fox jumps over the lazy dog " * 45  # ~2000 characters
    response = httpx.post(live_server.url + path, json=BODY | {"prompt": prompt,
                                                               "max_new_tokens": 256})
    assert response.status_code == 422
    assert response.headers["content-type"] == "application/json"
    message = response.json()["message"]
    assert message.startswith("prompt") and "does not fit in the models' context of 512" in message
    assert app_state.runs.status()["completed"] == completed


def test_tiny_temperature_runs_to_a_summary(live_server):
    kinds = [kind for kind, _ in run(live_server, BODY | {"temperature": 1e-39})]
    assert "summary" in kinds and "error" not in kinds


def test_queue_is_bounded_with_429_and_retry_after(live_server, app_state):
    body = BODY | {"max_new_tokens": 200}
    first = httpx.stream("POST", live_server.url + "/api/runs", json=body, timeout=60)
    second = httpx.stream("POST", live_server.url + "/api/runs", json=body, timeout=60)
    # The tiny pair may end its text within two cycles: slow enough that the first run is
    # still going while the second waits and the third is refused.
    with slow_target(app_state, 0.5), first as a:
        running = a.iter_lines()  # held: a dropped iterator closes its stream
        assert next(running) == "event: cycle"
        with second as b:
            waiting = b.iter_lines()
            assert next(waiting) == "event: queued"
            assert json.loads(next(waiting)[6:]) == {"position": 1}
            assert httpx.get(live_server.url + "/api/runs/status").json()["waiting"] == 1
            third = httpx.post(live_server.url + "/api/runs", json=body)
            assert third.status_code == 429
            assert int(third.headers["retry-after"]) > 0
            assert "try again" in third.json()["message"]
    wait_until_idle(live_server)


def test_page_stream_renders_escaped_html_fragments(live_server):
    events = run(live_server, BODY | {"prompt": "<script>alert(1)</script> the"}, path="/runs")
    cycles = [data for kind, data in events if kind == "cycle"]
    assert cycles and all(c["chips"].lstrip().startswith('<li class="cycle"') for c in cycles)
    assert "<script" not in "".join(c["chips"] for c in cycles)
    assert 'class="live-summary"' in events[-2][1]["html"]
    assert "Use these numbers" in events[-2][1]["html"]
    assert 'id="share-run"' in events[-1][1]["html"]


def test_run_past_the_time_limit_is_stopped(live_server, app_state):
    limit = app_state.runs.run_timeout_s
    app_state.runs.run_timeout_s = 0.0
    try:
        events = run(live_server)
    finally:
        app_state.runs.run_timeout_s = limit
    assert events[-1][0] == "error" and "time limit" in events[-1][1]["message"]


def test_status_reports_the_engine(live_server):
    wait_until_idle(live_server)  # whatever an earlier test left running
    status = httpx.get(live_server.url + "/api/runs/status").json()
    assert status["available"] is True and status["running"] is False
