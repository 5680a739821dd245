"""``specscope sweep --engine specscope``: this project's batched engine timed per batch size
and policy, written as measured curves the page reads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine import cli
from engine.measure.curves import parse_curve
from engine.measure.sweep_results import Policy, parse_policies, read_schedule, schedule_policy
from engine.serving.cli import spec_from_plan
from engine.serving.server import ServerSpec
from engine.serving.watch.intervals import read_plan

REPO = Path(__file__).resolve().parents[3]


def test_a_schedule_picks_k_by_the_live_batch_size_as_vllm_does():
    policy = schedule_policy(((1, 4, 4), (5, 8, 2), (17, 64, 0)))
    assert [policy.k_at(b) for b in (1, 4, 5, 8)] == [4, 4, 2, 2]
    assert policy.k_at(12) == 2  # a gap keeps the previous range's k
    assert [policy.k_at(b) for b in (17, 64, 300)] == [0, 0, 0]
    assert Policy("k = 3", 3).k_at(50) == 3


def test_policies_always_include_off():
    assert [p.name for p in parse_policies("2,4", None)] == ["off", "k = 2", "k = 4"]
    names = [p.name for p in parse_policies("off,0,3", [(1, 8, 3)])]
    assert names == ["off", "k = 3", "schedule"]
    with pytest.raises(ValueError, match="'off' or a whole k"):
        parse_policies("off,fast", None)


def test_a_schedule_file_is_the_list_or_any_object_holding_it(tmp_path):
    ranges = [[9, 24, 2], [1, 8, 4]]
    for data in (ranges, {"num_speculative_tokens_per_batch_size": ranges},
                 {"speculative_config": {"method": "draft_model",
                                         "num_speculative_tokens_per_batch_size": ranges}}):
        path = tmp_path / "plan.json"
        path.write_text(json.dumps(data))
        assert read_schedule(path) == [(1, 8, 4), (9, 24, 2)]
    path.write_text(json.dumps({"k": 4}))
    with pytest.raises(ValueError, match="no \\[\\[lo, hi, k\\]"):
        read_schedule(path)
    # a list of lists that is not the schedule (the k = 0 price points) is not taken for one
    path.write_text(json.dumps({"k0": {"points": [[2, 0.066], [8, 0.1]]}}))
    with pytest.raises(ValueError, match="no \\[\\[lo, hi, k\\]"):
        read_schedule(path)
    path.write_text(json.dumps([[4, 2, 1]]))
    with pytest.raises(ValueError, match="1 <= lo <= hi"):
        read_schedule(path)


def test_sweep_watch_and_serve_read_a_plan_as_its_config_deploys_it(tmp_path, capsys):
    """One reading of ``specscope plan --json`` for ``sweep --schedule``, ``watch --plan`` and
    ``vllm serve --plan``: the k the printed config runs at each batch (a fixed k where the
    schedule did not clear its margin, k = 0 where nothing is configured), not the plan's
    ranges (the k = 0 price points were once taken for the schedule, too)."""
    costs = REPO / "measurements" / "schedule" / "shipped-cpu-costs.json"
    cases = (["--alpha", "0.7"], ["--alpha", "0.6", "--costs", str(costs)],
             ["--alpha", "0.7", "--hardware", "h200", "--models", "llama-70b-1b", "--context",
              "2048", "--max-num-seqs", "512", "--gpus", "2"],
             ["--alpha", "0.7", "--engine", "sglang"])
    seen = set()
    for args in cases:
        assert cli.main(["plan", *args, "--json"]) == 0
        printed = json.loads(capsys.readouterr().out)
        path = tmp_path / "plan.json"
        path.write_text(json.dumps(printed))
        deployed = read_schedule(path)
        assert tuple(deployed) == read_plan(printed).ranges
        config, largest = printed["speculative_config"], printed["plan"]["largest_batch"]
        if config is None:
            assert deployed == [(1, largest, 0)]
            seen.add("none")
        elif "num_speculative_tokens_per_batch_size" in config:
            assert deployed == [tuple(r) for r in config["num_speculative_tokens_per_batch_size"]]
            seen.add("schedule")
        else:
            assert deployed == [(1, largest, config["num_speculative_tokens"])]
            assert config["num_speculative_tokens"] == printed["plan"]["fixed_k"]
            seen.add("fixed")
        if printed["engine_args"] is not None:
            assert spec_from_plan(path, ServerSpec(target="")).speculative_config() == config
    assert seen == {"none", "schedule", "fixed"}


def test_the_sweep_writes_one_curve_per_speculative_policy(capsys, tmp_path, model_dirs):
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps([[1, 1, 3], [2, 4, 0]]))
    out = tmp_path / "ours.json"
    code = cli.main([
        "sweep", "--engine", "specscope", "--target", model_dirs["target"], "--draft",
        model_dirs["good"], "--device", "cpu", "--batch", "1,2", "--policies", "off,2",
        "--schedule", str(plan), "--new-tokens", "6", "--repeats", "2", "--temperature", "0.8",
        "--clock", "cpu", "--out", str(out),
    ])
    printed = capsys.readouterr().out
    assert code == 0
    assert "| B | off | k = 2 | schedule | best |" in printed
    written = sorted(p.name for p in tmp_path.glob("ours-*.json"))
    assert written == ["ours-k2.json", "ours-schedule.json"]
    for name, policy in (("ours-k2.json", "k = 2"), ("ours-schedule.json", "schedule")):
        data = json.loads((tmp_path / name).read_text())
        curve = parse_curve(data, name)  # the page's own reader accepts it
        assert data["policy"] == policy and [p.batch for p in curve.points] == [1, 2]
        assert all(p.tok_s_spec > 0 and p.tok_s_base > 0 for p in curve.points)
        assert 0 < data["alpha"] <= 1 and data["clock"] == "cpu"
        assert all(p["speedup"] == p["speedup_cpu"] for p in data["points"])
    schedule = json.loads((tmp_path / "ours-schedule.json").read_text())
    assert schedule["schedule"] == [[1, 1, 3], [2, 4, 0]] and schedule["k"] == 3


def test_bad_sweep_arguments_exit_with_a_clear_message(capsys, tmp_path, model_dirs):
    code = cli.main(["sweep", "--engine", "specscope", "--target", model_dirs["target"],
                     "--draft", model_dirs["good"], "--schedule", str(tmp_path / "none.json")])
    assert code == 2 and "none.json" in capsys.readouterr().err


def test_the_sweep_drafts_by_prompt_lookup_with_no_draft_model(capsys, tmp_path, model_dirs):
    out = tmp_path / "lookup.json"
    code = cli.main([
        "sweep", "--engine", "specscope", "--target", model_dirs["target"], "--draft",
        str(tmp_path / "no-such-draft"), "--drafter", "ngram", "--device", "cpu", "--batch",
        "1,3", "--policies", "off,3", "--new-tokens", "6", "--repeats", "1",
        "--temperature", "0", "--out", str(out),
    ])
    printed = capsys.readouterr().out
    assert code == 0  # the draft's path is never read
    assert "| B | off | k = 3 | best |" in printed
    data = json.loads((tmp_path / "lookup-k3.json").read_text())
    curve = parse_curve(data, "lookup-k3.json")
    assert data["drafter"] == "ngram" and data["draft"].startswith("prompt lookup")
    assert "prompt lookup, k = 3" in curve.label and [p.batch for p in curve.points] == [1, 3]
    assert 0 <= data["alpha"] <= 1


def test_the_sweep_takes_a_prompt_set_and_names_a_bad_one(capsys, tmp_path, model_dirs):
    out = tmp_path / "set.json"
    base = ["sweep", "--engine", "specscope", "--target", model_dirs["target"], "--drafter",
            "ngram", "--device", "cpu", "--batch", "2", "--policies", "off,2",
            "--new-tokens", "4", "--repeats", "1", "--temperature", "0"]
    assert cli.main([*base, "--prompts", "lookup", "--out", str(out)]) == 0
    assert json.loads((tmp_path / "set-k2.json").read_text())["prompts"] == "lookup"
    capsys.readouterr()
    assert cli.main([*base, "--prompts", "no-such-set"]) == 2
    assert "no-such-set: no such file, and not a built-in set" in capsys.readouterr().err
