"""The parts of benchmarks/gpu_check.sh that can be checked without a GPU: the random-weight
pair has the published shapes and loads like any pair, the bandwidth bound is the roofline's
arithmetic, and the script itself runs its steps in its CPU dry run."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch
from support.scripts import BENCHMARKS, load_script
from transformers import LlamaConfig, LlamaForCausalLM

from engine import cli
from engine.decoder.events import GenerationConfig
from engine.decoder.loading import load_pair
from engine.decoder.speculative import speculate

random_llama = load_script("random_llama")
bandwidth_bound = load_script("bandwidth_bound")


@pytest.mark.parametrize(
    "role,params",
    # the parameter counts of meta-llama/Llama-3.1-8B and Llama-3.2-1B
    [("target", 8_030_261_248), ("draft", 1_235_814_400)],
)
def test_the_llama_shapes_have_the_published_parameter_counts(role, params):
    with torch.device("meta"):
        model = LlamaForCausalLM(LlamaConfig(**random_llama.SHAPES["llama"][role]))
    assert sum(p.numel() for p in model.parameters()) == params


@pytest.fixture(scope="module")
def tiny_random_pair(tmp_path_factory):
    out = tmp_path_factory.mktemp("random_llama")
    assert random_llama.main([str(out), "--shape", "tiny", "--device", "cpu"]) == 0
    return out


def test_the_tiny_recipe_writes_a_pair_that_loads_and_speculates(tiny_random_pair):
    tmp_path = tiny_random_pair
    saved = json.loads((tmp_path / "target" / "config.json").read_text())
    assert saved["dtype"] == "bfloat16" and saved["eos_token_id"] == 0  # the shipped pair's
    pair = load_pair(str(tmp_path / "target"), str(tmp_path / "draft"), device="cpu")
    assert pair.shared_vocab_size == random_llama.SHAPES["tiny"]["target"]["vocab_size"]
    assert pair.target.config.num_hidden_layers == 4 and pair.draft.config.hidden_size == 64
    # the shipped tokenizer's ids fit: the models score every id it can produce
    assert len(pair.tokenizer) <= pair.shared_vocab_size
    config = GenerationConfig(prompt="And it came to pass", k=2, temperature=0.0,
                              max_new_tokens=6)
    assert len(list(speculate(pair, config))[-1].token_ids) >= 1


def test_the_bound_is_weights_and_cache_over_bandwidth():
    config = {"num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
              "hidden_size": 4096, "head_dim": 128}
    result = {
        "setting": {"dtype": "bfloat16", "target_model": {"params": 8_000_000_000},
                    "device_name": "NVIDIA H200", "config": {"max_new_tokens": 64}},
        "results": {"temperatures": {"0.0": {"step_ms": 4.0}}},
    }
    b = bandwidth_bound.bound(result, config, prompt_tokens=[10, 30], bandwidth_tb_s=4.0)
    assert b["weight_bytes"] == 16e9
    assert b["context_tokens"] == 52  # mean prompt 20 + half of 64 new tokens
    assert b["kv_bytes"] == 52 * 2 * 32 * 8 * 128 * 2
    assert b["bound_ms"] == pytest.approx((16e9 + b["kv_bytes"]) / 4e12 * 1e3)
    assert b["fraction_of_bandwidth"] == pytest.approx(b["bound_ms"] / 4.0)
    assert "of the bandwidth bound" in bandwidth_bound.describe(b)


def test_the_bound_reads_what_specscope_bench_writes(tiny_random_pair, tmp_path, capsys):
    """The script's steps 4b and 5 on a CPU at toy size: bench, then the bound of its JSON."""
    result = tmp_path / "bench.json"
    assert cli.main(["bench", "--quiet", "--device", "cpu", "--target",
                     str(tiny_random_pair / "target"), "--draft", str(tiny_random_pair / "draft"),
                     "--ks", "1", "--temperatures", "0", "--max-new-tokens", "4", "--prompts", "1",
                     "--repeats", "1", "--ours-only", "--out", str(result)]) == 0
    capsys.readouterr()
    assert bandwidth_bound.main([str(result), "--bandwidth-tb-s", "4.8"]) == 0
    line = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert line["params"] == sum(p.numel() for p in load_pair(
        str(tiny_random_pair / "target"), None, device="cpu", warmup=False).target.parameters())
    assert line["dtype"] == "float32" and 0 < line["fraction_of_bandwidth"] < 1


def test_the_script_walks_its_steps_on_a_cpu(tmp_path):
    """The script itself, in its dry run (DRY_RUN=1: a CPU, toy sizes): the steps that do not
    need the shipped pair's benches, each within its time limit, their results written, the
    summary naming every step (the others "skipped"), and the exit status the summary's. The
    other steps are the same commands at other sizes, or only mean something on a GPU."""
    env = os.environ | {"DRY_RUN": "1", "STEPS": "0 4a 4b 5 6", "BUDGET_S": "400",
                        "OUT_DIR": str(tmp_path / "out"), "WORK_DIR": str(tmp_path / "work"),
                        "PYTHON": sys.executable}
    result = subprocess.run(["bash", str(BENCHMARKS / "gpu_check.sh")], env=env,
                            capture_output=True, text=True, timeout=600)
    summary = result.stdout.split("== summary", 1)[1].splitlines()[1:]
    assert result.returncode == 0, result.stdout[-3000:]
    status = {line.split()[1]: line.split()[0] for line in summary}
    assert {step for step, said in status.items() if said == "ok"} == {"0.", "4a.", "4b.", "5.",
                                                                       "6."}
    assert set(status.values()) == {"ok", "skipped"} and {"1.", "2.", "7."} <= set(status)
    bench = json.loads((tmp_path / "out" / "gpu_llama8b.json").read_text())
    assert bench["setting"]["device_name"] and bench["results"]
    log = (tmp_path / "out" / "gpu_check.log").read_text()
    assert "of the bandwidth bound" in log and "Fitted roofline of this machine" in log
