"""``specscope costs``: a step of the real loop timed in parts, written as the versioned costs
file the plan reads, so that the plan's cycle is the loop's measured step."""

from __future__ import annotations

import json

import pytest

from engine import cli
from engine.analytic.timed_costs import COSTS_FILE_VERSION, timed_costs
from engine.measure.loop_costs import costs_file, mad, measure


def medians(step_ms: dict[int, float], draft_ms: float, target_ms: dict[int, float]) -> dict:
    return {(1, k): {"draft_pass": k * draft_ms, "target": target_ms[k], "step": step_ms[k],
                     "loop": step_ms[k] - k * draft_ms - target_ms[k], "steps": 10}
            for k in step_ms}


def test_the_planners_cycle_is_the_measured_step_over_the_plain_step():
    step = {0: 10.0, 1: 14.0, 2: 19.0}
    data = costs_file(medians(step, 1.5, {0: 9.0, 1: 11.0, 2: 13.0}), [1], 2, {"label": "x"})
    assert data["version"] == COSTS_FILE_VERSION and data["method"] == "loop"
    timed = timed_costs(data["passes"], data["loop"])
    for k in (1, 2):
        assert timed.cycle(1, k) == pytest.approx(step[k] / step[0], rel=1e-4)
    assert {p["tokens"] for p in data["passes"] if p["model"] == "target"} == {1, 2, 3}
    assert [s["k"] for s in data["steps"]] == [0, 1, 2]


def test_a_batch_that_never_ran_whole_is_refused():
    empty = {(1, k): {"steps": 0} for k in (0, 1)}
    with pytest.raises(ValueError, match="--new-tokens"):
        costs_file(empty, [1], 1, {})


def test_every_row_stays_live_and_the_parts_add_up(good_pair):
    """Through the real loop: steps are counted only while all B rows are live, and the
    parts are the step's own (the loop's time is what the passes leave)."""
    parts = measure(good_pair, ["the quick brown fox", "the cat sat"], [2], 2, 10, 3, 0.0,
                    cpu_clock=True)
    for k in (0, 1, 2):
        cell = parts[(2, k)]
        assert cell["steps"] >= 1
        assert cell["step"] >= cell["draft_pass"] + cell["target"] - 1e-9
        assert cell["loop"] >= 0
        # the spread of three repeats' median steps: real timings are never all equal
        assert 0 < cell["step_mad"] < cell["step"]
    assert parts[(2, 0)]["draft_pass"] == 0


def test_the_spread_is_the_median_absolute_deviation():
    assert mad([10.0, 12.0, 11.0, 30.0]) == 1.0  # median 11.5: |d| 1.5, 0.5, 0.5, 18.5
    assert mad([5.0]) == 0.0 and mad([]) == 0.0
    data = costs_file({key: cell | {"step_mad": 0.25} for key, cell in medians(
        {0: 10.0, 1: 14.0}, 1.5, {0: 9.0, 1: 11.0}).items()}, [1], 1, {})
    assert [s["step_mad_ms"] for s in data["steps"]] == [0.25, 0.25]


def test_the_command_writes_a_file_the_plan_reads(tmp_path, capsys, model_dirs):
    out = tmp_path / "costs.json"
    code = cli.main(["costs", "--target", model_dirs["target"], "--draft", model_dirs["good"],
                     "--device", "cpu", "--batch", "1,2", "--k-max", "2", "--new-tokens", "8",
                     "--repeats", "1", "--out", str(out)])
    assert code == 0
    assert "| B | k | draft passes | target pass | loop's own | step | steps |" in \
        capsys.readouterr().out
    data = json.loads(out.read_text())
    assert data["version"] == COSTS_FILE_VERSION and data["clock"] == "cpu"
    assert {(s["batch"], s["k"]) for s in data["steps"]} == {(b, k) for b in (1, 2)
                                                             for k in (0, 1, 2)}
    code = cli.main(["plan", "--alpha", "0.7", "--costs", str(out), "--max-num-seqs", "4"])
    assert code == 0
    assert "through the decoding loop" in capsys.readouterr().out
