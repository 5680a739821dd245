"""The benchmark on tiny models: its results, its table, its JSON, and its greedy check."""

import json

import pytest
import torch

from engine import cli
from engine.measure.bench import (
    HF_ASSISTED,
    HF_GENERATE,
    OURS_BASE,
    OURS_SPEC,
    Bench,
    BenchConfig,
    run_bench,
)
from engine.measure.bench_report import TARGETS, markdown
from engine.measure.bench_results import greedy_check

PROMPTS = ["the quick brown fox", "speculative decoding drafts"]


@pytest.fixture(scope="module")
def result(good_pair):
    config = BenchConfig(
        ks=(1, 3), temperatures=(0.0, 1.0), max_new_tokens=10, prompts=PROMPTS, repeats=2
    )
    before = good_pair.draft.generation_config.to_dict()
    out = run_bench(good_pair, config)
    assert good_pair.draft.generation_config.to_dict() == before  # assisted runs leave no trace
    return out


def test_every_contender_runs_every_prompt_in_every_repeat(result):
    runs = result["runs"]
    # per temperature, prompt and repeat: 2 target-only runs and 2 per k
    assert len(runs) == 2 * 2 * 2 * (2 + 2 * 2)
    assert {r["contender"] for r in runs} == {OURS_BASE, HF_GENERATE, OURS_SPEC, HF_ASSISTED}
    assert all(r["tokens"] == 10 and r["wall_ms"] > 0 for r in runs)  # end of sequence ignored
    ours = [r for r in runs if r["contender"].startswith("ours")]
    assert all(0 < r["prefill_ms"] < r["wall_ms"] for r in ours)


def test_greedy_outputs_match_across_all_four_contenders(result):
    check = result["results"]["greedy_check"]
    # every run of every contender, both repeats, against the first target-only run
    assert check == {"match": True, "compared": 2 * (2 * 6 - 1), "mismatches": []}


def test_results_per_temperature_and_k(result):
    per_t = result["results"]["temperatures"]
    assert set(per_t) == {"0.0", "1.0"}
    for t in per_t.values():
        assert t["ours_baseline"]["median"] > 0 and t["hf_generate"]["median"] > 0
        assert set(t["k"]) == {1, 3}
        for row in t["k"].values():
            assert row["ours"]["q1"] <= row["ours"]["median"] <= row["ours"]["q3"]
            assert row["ours"]["n"] == len(PROMPTS) * 2
            assert 0 <= row["alpha"] <= 1 and row["c"] > 0 and row["v"] > 0
            assert row["predicted_speedup"] > 0 and row["measured_speedup"] > 0
            assert row["ours_over_hf"] == row["ours"]["median"] / row["hf_assisted"]["median"]
            assert row["time"]["cycle_ms"] > row["time"]["verify_ms"] > 0
        best = t["best"]
        assert best["k_ours"] in (1, 3) and best["k_hf"] in (1, 3)
        assert set(TARGETS) <= set(best)


def test_markdown_table_and_json(result):
    text = markdown(result, command="specscope bench --ks 1,3")
    assert "`specscope bench --ks 1,3`" in text
    assert "### temperature 0 (greedy)" in text and "### temperature 1" in text
    assert "Same tokens from every contender: **yes**" in text
    assert "| k | ours spec tok/s | hf-assisted tok/s | ours / hf | alpha | c | v " in text
    assert text.count("\n| 1 | ") == 2 and text.count("\n| 3 | ") == 2
    for name in TARGETS:
        assert f"| {name} |" in text
    assert "Where the time goes" in text
    json.dumps(result)


def test_a_greedy_mismatch_is_reported(good_pair):
    bench = Bench(good_pair, BenchConfig(ks=(2,), prompts=PROMPTS), log=print)
    bench.outputs = {
        (OURS_BASE, None, 0.0, 0, 0): [1, 2, 3],
        (OURS_BASE, None, 0.0, 0, 1): [1, 2, 3],
        (HF_GENERATE, None, 0.0, 0, 0): [1, 2, 3],
        (OURS_SPEC, 2, 0.0, 0, 0): [1, 2, 3],
        (HF_ASSISTED, 2, 0.0, 0, 0): [1, 2, 3],
        (HF_ASSISTED, 2, 0.0, 0, 1): [1, 5, 3],
        (HF_ASSISTED, 2, 1.0, 0, 0): [9, 9, 9],  # sampled: not compared
    }
    check = greedy_check(bench)
    assert not check["match"] and check["compared"] == 5
    assert check["mismatches"] == [
        {"contender": HF_ASSISTED, "k": 2, "prompt": 0, "repeat": 1, "first": 1}
    ]


@pytest.fixture
def keep_threads():
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


def test_cli_bench_prints_json(capsys, model_dirs, keep_threads):
    argv = ["bench", "--target", model_dirs["target"], "--draft", model_dirs["good"],
            "--device", "cpu", "--ks", "1-2", "--temperatures", "0", "--max-new-tokens", "6",
            "--max-prompts", "1", "--repeats", "1", "--json", "--quiet"]
    assert cli.main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["command"].startswith("specscope bench --target")
    assert out["results"]["greedy_check"]["match"]
    assert set(out["results"]["temperatures"]["0.0"]["k"]) == {"1", "2"}
    assert out["setting"]["threads"] >= 1 and out["setting"]["device"] == "cpu"


def test_cli_bench_refuses_bad_settings(capsys, model_dirs):
    code = cli.main(["bench", "--target", model_dirs["target"], "--ks", "0-2"])
    assert code == 2 and "--ks" in capsys.readouterr().err
    assert cli._int_list("1-3,5") == [1, 2, 3, 5]


def test_the_old_prompts_spelling_is_max_prompts_for_one_release(capsys, model_dirs):
    """--prompts names a file in costs and sweep; bench's count is --max-prompts, as in
    probe. The old spelling still reads, with a deprecation message."""
    code = cli.main(["bench", "--target", model_dirs["target"], "--ks", "1",
                     "--prompts", "0"])
    err = capsys.readouterr().err
    assert "--prompts is now --max-prompts" in err
    assert code == 2 and "--max-prompts must be at least 1" in err  # read as the new option
