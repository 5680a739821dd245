"""The batch sweep's timing and arithmetic, against the stand-in server."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from engine.serving.client import VllmError, parse_counters
from engine.serving.sweep import (
    SweepPoint,
    break_even,
    check_batches,
    combine,
    counted_alpha,
    time_batches,
)

SUPPORT = Path(__file__).resolve().parents[2] / "support"


def test_each_batch_sends_b_requests_and_counts_their_tokens(fake_server):
    server = fake_server("serve")
    timings = time_batches(server.client, [[1, 2], [3]], [4, 1, 2, 2], new_tokens=5)
    assert [t.batch for t in timings] == [1, 2, 4]
    assert [t.tokens for t in timings] == [5, 10, 20]
    assert all(t.seconds > 0 and t.tok_s == t.tokens / t.seconds for t in timings)


def test_repeats_time_each_batch_again_and_keep_the_median(fake_server):
    server = fake_server("serve")
    lines: list[str] = []
    timings = time_batches(server.client, [[1, 2]], [1, 2], new_tokens=3, log=lines.append,
                           repeats=3)
    assert [t.tokens for t in timings] == [3, 6]
    assert all("over 3" in line for line in lines)
    # warm-up, then 3 x 1 and 3 x 2 completions: each adds one cycle to the counters
    assert server.client.counters().drafts == 10 + 1 + 3 * 1 + 3 * 2


def test_a_server_dying_mid_sweep_names_the_batch_and_does_not_hang(fake_server):
    server = fake_server("die-after-3")  # the warm-up, B = 1, then one of B = 2's two
    started = time.monotonic()
    with pytest.raises(VllmError, match=r"batch 2 failed: .*stopped answering|not answering"):
        time_batches(server.client, [[1, 2]], [1, 2, 4], new_tokens=3)
    assert time.monotonic() - started < 30
    server.stop()
    assert not server.running()


def test_answers_shorter_than_asked_are_refused(fake_server):
    server = fake_server("short")
    with pytest.raises(VllmError, match=r"had 2 tokens, not 4 .*ignore_eos"):
        time_batches(server.client, [[1, 2]], [1], new_tokens=4)


@pytest.mark.parametrize("batches", [[], [0, 1], [1, 512]])
def test_batch_sizes_are_checked(batches):
    with pytest.raises(ValueError, match="batch sizes must be 1..256"):
        check_batches(batches)


def test_speedup_and_break_even_between_the_batches_around_it():
    points = [SweepPoint(1, 300, 200), SweepPoint(2, 500, 400), SweepPoint(4, 600, 800)]
    assert [p.speedup for p in points] == [1.5, 1.25, 0.75]
    # 1.25 at B = 2, 0.75 at B = 4: halfway in log2 B, so 2 ** 1.5.
    assert break_even(points) == pytest.approx(2**1.5)
    assert break_even(points[:2]) is None  # still above 1 at the largest batch
    assert break_even([SweepPoint(1, 1, 2), SweepPoint(2, 1, 3)]) is None


def test_points_pair_the_same_batch_sizes():
    from engine.serving.sweep import BatchTiming

    spec = [BatchTiming(1, 10, 1.0), BatchTiming(2, 20, 1.0)]
    base = [BatchTiming(2, 20, 2.0), BatchTiming(1, 10, 2.0)]
    assert [(p.batch, p.speedup) for p in combine(spec, base)] == [(1, 2.0), (2, 2.0)]


def test_counted_alpha_from_real_counters():
    before = parse_counters((SUPPORT / "vllm_metrics_before.txt").read_text())
    after = parse_counters((SUPPORT / "vllm_metrics_after.txt").read_text())
    # 77 accepted in 81 cycles, 6 of which accepted all 4: 77 + 81 - 6 = 152 trials.
    assert counted_alpha(after - before) == pytest.approx(77 / 152)
    assert counted_alpha(before) is None


def test_the_sweep_command_against_running_servers_writes_the_curve(
    fake_server, tmp_path, capsys
):
    import json

    from engine.cli import main

    spec, base = fake_server("serve"), fake_server("serve")
    out = tmp_path / "curve.json"
    code = main(["sweep", "--engine", "vllm", "--url", spec.url, "--baseline-url", base.url,
                 "--batch", "1,2", "--new-tokens", "4", "--models", "shipped",
                 "--out", str(out)])
    assert code == 0
    table = capsys.readouterr().out
    assert "| B | tok/s with speculation | tok/s without | speedup |" in table
    curve = json.loads(out.read_text())
    assert [p["batch"] for p in curve["points"]] == [1, 2]
    assert curve["k"] == 4 and curve["method"] == "end-to-end"
    assert curve["pair"] == "shipped"  # drawn only with that pair on the page
    # Warm-up + 1 + 2 completions, each a cycle accepting 2 of 4: 6 / (6 + 3 - 0) trials.
    assert curve["alpha"] == round(6 / 9, 4)
    for p in curve["points"]:
        assert p["speedup"] == p["tok_s_spec"] / p["tok_s_base"]


def test_the_sweep_needs_a_baseline_server_next_to_a_given_one(capsys):
    from engine.cli import main

    assert main(["sweep", "--url", "http://127.0.0.1:9"]) == 2
    assert "needs --baseline-url" in capsys.readouterr().err
