"""The benchmark with prompt lookup as the drafter: ours against transformers'
``prompt_lookup_num_tokens`` at the same maximum n, on the target alone."""

import json

import pytest

from engine import cli
from engine.decoder.ngram import PromptLookup
from engine.measure.bench import (
    HF_ASSISTED,
    HF_GENERATE,
    OURS_BASE,
    OURS_SPEC,
    BenchConfig,
    run_bench,
)
from engine.measure.bench_report import markdown

# Repeating prompts: lookups match, so the runs have real proposals to verify.
PROMPTS = ["the quick brown fox jumps over the lazy dog and the quick brown fox",
           "speculative decoding drafts tokens and speculative decoding verifies"]


@pytest.fixture(scope="module")
def result(target_only_pair):
    config = BenchConfig(ks=(1, 3), temperatures=(0.0, 1.0), max_new_tokens=12,
                         prompts=PROMPTS, repeats=2, lookup=PromptLookup(1, 2))
    return run_bench(target_only_pair, config)


def test_four_contenders_run_without_a_draft_model(result):
    runs = result["runs"]
    assert len(runs) == 2 * 2 * 2 * (2 + 2 * 2)
    assert {r["contender"] for r in runs} == {OURS_BASE, HF_GENERATE, OURS_SPEC, HF_ASSISTED}
    assert all(r["tokens"] == 12 for r in runs)
    assert result["setting"]["drafter"] == "ngram" and result["setting"]["draft_model"] is None
    assert result["setting"]["config"]["lookup"] == {"prompt_lookup_min": 1,
                                                     "prompt_lookup_max": 2}


def test_greedy_outputs_match_transformers_prompt_lookup(result):
    check = result["results"]["greedy_check"]
    assert check["match"], check["mismatches"]
    assert check["compared"] == 2 * (2 * 6 - 1)  # per prompt: every run but the reference


def test_results_price_the_share_of_cycles_with_a_proposal(result):
    for t in result["results"]["temperatures"].values():
        for row in t["k"].values():
            assert 0 < row["proposal_share"] <= 1
            assert row["tokens_per_cycle"] >= 1 and row["predicted_speedup"] > 0
            assert row["c"] < 0.5  # a lookup, not a model
            assert row["ours_over_hf"] > 0


def test_the_report_names_transformers_prompt_lookup(result):
    text = markdown(result, "specscope bench --drafter ngram")
    assert "prompt lookup (n-gram), prompt_lookup_min 1, prompt_lookup_max 2" in text
    assert "hf-prompt-lookup tok/s" in text and "proposal share" in text
    assert "pi v + (1 - pi) + c" in text
    assert "the lookup (one a cycle), mean (median)" in text


def test_cli_generate_and_bench_with_the_ngram_drafter(capsys, model_dirs):
    argv = ["generate", PROMPTS[0], "--target", model_dirs["target"], "--drafter", "ngram",
            "--prompt-lookup-min", "1", "--prompt-lookup-max", "2", "--device", "cpu",
            "--temperature", "0", "--max-new-tokens", "12", "--json"]
    assert cli.main(argv) == 0
    events = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    cycles = [e for e in events if e["event"] == "cycle"]
    assert cycles and all(c["drafter"] == "ngram" for c in cycles)
    assert events[-2]["event"] == "summary" and events[-2]["drafter"] == "ngram"
    argv = ["bench", "--target", model_dirs["target"], "--drafter", "ngram", "--device", "cpu",
            "--ks", "2", "--temperatures", "0", "--max-new-tokens", "6", "--max-prompts", "1",
            "--repeats", "1", "--quiet", "--threads", "1"]
    assert cli.main(argv) == 0
    assert "hf-prompt-lookup" in capsys.readouterr().out


def test_cli_refuses_bad_lookup_settings(capsys, model_dirs):
    argv = ["generate", "hello", "--target", model_dirs["target"], "--drafter", "ngram",
            "--prompt-lookup-min", "4", "--prompt-lookup-max", "2", "--device", "cpu"]
    assert cli.main(argv) == 2
    assert "must not exceed" in capsys.readouterr().err
