"""The open-loop sweep against the stand-in server (tests/support/fake_vllm.py, which streams
the first token alone, then two tokens a chunk, STREAM_GAP_S apart): streamed timings, sends
on schedule whatever is in flight, one server per policy, the command's output and its
refusals. (Through real vLLM: test_open_loop_vllm.py.)"""

from __future__ import annotations

import json
import time

import pytest
from support.fake_vllm import STREAM_GAP_S
from support.fake_vllm_server import fake_python

from engine.measure.sweep_results import Policy
from engine.serving.client import VllmError
from engine.serving.open_loop import run_policies, run_schedule, schedules


def test_a_stream_notes_each_chunk_and_its_tokens(fake_server):
    server = fake_server("serve")
    answer = server.client.stream([1, 2, 3], 5, 0.0)
    assert answer.done and answer.token_ids == [7] * 5
    assert [n for _, n in answer.chunks] == [1, 2, 2]
    times = [t for t, _ in answer.chunks]
    assert answer.sent < times[0] < times[1] < times[2]
    # the stand-in sleeps STREAM_GAP_S between chunks
    assert all(b - a >= STREAM_GAP_S * 0.9 for a, b in zip(times, times[1:], strict=False))


def test_an_error_in_the_stream_is_an_error(fake_server):
    server = fake_server("stream-error")
    with pytest.raises(VllmError, match="streamed an error: .*the engine died"):
        server.client.stream([1, 2], 5, 0.0)


def test_requests_go_on_schedule_while_others_are_in_flight(fake_server):
    server = fake_server("serve")
    # each answer takes 2 gaps (5 tokens: 1 + 2 + 2), far longer than the 10 ms between sends
    arrivals = [0.0, 0.01, 0.02, 0.03]
    timings = run_schedule(server.client, [[1, 2], [3]], arrivals, 5)
    assert [t.index for t in timings] == [0, 1, 2, 3]
    assert all(t.completed and t.tokens == 5 for t in timings)
    assert all(abs(t.sent - t.scheduled) < 0.5 * 2 * STREAM_GAP_S for t in timings)
    assert all(t.tpot >= 2 * STREAM_GAP_S / 4 * 0.9 for t in timings)
    from engine.measure.latency import peak_in_flight

    assert peak_in_flight(timings) == 4


def test_a_server_dying_mid_rate_counts_its_lost_requests(fake_server):
    server = fake_server("die-after-2")
    started = time.monotonic()
    timings = run_schedule(server.client, [[1, 2]], [0.0, 0.3, 0.6, 0.9], 3)
    assert time.monotonic() - started < 30
    assert sum(t.completed for t in timings) == 2
    assert all(t.error for t in timings if not t.completed)


def test_every_policy_gets_its_own_server_and_the_same_schedule(tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_VLLM_MODE", "serve")
    arrivals = schedules([20.0, 40.0], 5, seed=2)
    lines: list[str] = []
    runs = run_policies([Policy("off", 0), Policy("k = 2", 2)], arrivals, [[1, 2], [3]], 4,
                        0.0, "models/target", "models/draft", lines.append,
                        python=fake_python(tmp_path))
    assert [r.policy.name for r in runs] == ["off", "k = 2"]
    for run in runs:
        assert run.start_s > 0 and run.stop_s >= 0
        assert [r.summary.rate for r in run.rates] == [20.0, 40.0]
        for r, times in zip(run.rates, arrivals.values(), strict=True):
            assert [t.scheduled for t in r.timings] == times
            assert r.summary.completed == 5
    assert runs[0].rates[0].counts is None  # off: no speculative counters to read
    assert runs[1].rates[0].counts.drafts == 5  # the stand-in adds one a completion
    assert any("answered /health after" in line for line in lines)


def test_passes_take_the_policies_in_turn(tmp_path, monkeypatch):
    from engine.serving.open_loop import medians

    monkeypatch.setenv("FAKE_VLLM_MODE", "serve")
    runs = run_policies([Policy("off", 0), Policy("k = 2", 2)], schedules([40.0], 3, 0),
                        [[1, 2]], 3, 0.0, "models/target", "models/draft", passes=2,
                        python=fake_python(tmp_path))
    assert [(r.policy.name, r.pass_index) for r in runs] == [
        ("off", 0), ("k = 2", 0), ("off", 1), ("k = 2", 1)]
    rows = medians(runs)
    assert list(rows) == ["off", "k = 2"]
    assert rows["off"][0].completed == 6  # both passes' requests
    first, second = (r.rates[0].summary.tpot_p50_ms for r in runs if r.policy.name == "off")
    assert rows["off"][0].tpot_p50_ms == pytest.approx((first + second) / 2)


def sweep(*args: str) -> list[str]:
    return ["sweep", "--engine", "vllm", *args]


def test_the_command_prints_the_table_and_writes_json(tmp_path, monkeypatch, capsys):
    from engine.cli import main

    monkeypatch.setenv("FAKE_VLLM_MODE", "serve")
    out = tmp_path / "open-loop" / "result.json"
    code = main(sweep("--request-rates", "40,20", "--requests", "4", "--new-tokens", "3",
                      "--policies", "off,2", "--python", str(fake_python(tmp_path)),
                      "--out", str(out)))
    assert code == 0
    text = capsys.readouterr().out
    rows = [line.split(" | ") for line in text.splitlines() if line.startswith("| 20 |")
            or line.startswith("| 40 |")]
    assert [(r[0], r[2]) for r in rows] == [("| 20", "off"), ("| 20", "k = 2"),
                                            ("| 40", "off"), ("| 40", "k = 2")]
    assert "policy k = 2: server start" in text
    assert "k = 2 against off, TPOT p50 speedup: 20 req/s" in text
    data = json.loads(out.read_text())
    assert data["kind"] == "open-loop" and data["rates"] == [20.0, 40.0]
    assert [p["policy"] for p in data["policies"]] == ["off", "k = 2"]
    cell = data["policies"][1]["rates"][0]
    assert cell["completed"] == 4 and cell["spec"]["drafts"] == 4
    assert len(cell["request_timings"]) == 4


@pytest.mark.parametrize(("args", "message"), [
    (["--request-rates", "0,1"], "more than 0"),
    (["--request-rates", "fast"], "must be a number of requests per second"),
])
def test_bad_rates_are_refused_before_anything_starts(args, message, capsys):
    from engine.cli import main

    with pytest.raises(SystemExit) as stopped:
        main(sweep(*args))
    assert stopped.value.code == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize(("args", "message"), [
    (["--requests", "0"], "--requests must be at least 1"),
    (["--passes", "0"], "--passes must be at least 1"),
    (["--duration", "-3"], "--duration must be more than 0"),
    (["--new-tokens", "1"], "--new-tokens must be at least 2"),
    (["--policies", "off,two"], "policies are 'off' or a whole k"),
    (["--url", "http://127.0.0.1:9"], "leave out --url"),
    (["--engine", "specscope"], "--request-rates drives vLLM"),
])
def test_bad_options_get_a_message_not_a_traceback(args, message, capsys, tmp_path):
    from engine.cli import main

    code = main([*sweep("--request-rates", "1"), *args, "--python", str(tmp_path / "missing")])
    assert code == 2
    assert message in capsys.readouterr().err


def test_the_old_spelling_rates_still_works_for_one_release_and_says_so(capsys, tmp_path):
    """--rates is `specscope validate`'s (achieved or datasheet shares); a sweep's request
    rates are --request-rates, and the old spelling still runs, with a deprecation message."""
    from engine.cli import main

    code = main([*sweep("--rates", "1"), "--engine", "specscope", "--python",
                 str(tmp_path / "missing")])
    err = capsys.readouterr().err
    assert "--rates is now --request-rates" in err
    assert code == 2 and "--request-rates drives vLLM" in err  # read as the new option
