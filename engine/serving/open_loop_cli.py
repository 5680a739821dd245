"""``specscope sweep --engine vllm --rates 0.5,1,2,4 [--policies off,2,4] [--requests 60]
[--duration S] [--seed 0] [--json] [--out FILE]``: the open-loop sweep
(:mod:`engine.serving.open_loop`), its tables and its JSON."""

from __future__ import annotations

import json
import os
import platform
import sys

from engine.measure.latency import RateSummary, table
from engine.serving.client import VllmError
from engine.serving.open_loop import PolicyRun, medians, run_policies, schedules
from engine.serving.policy_sweep import parse_vllm_policies

DEFAULT_POLICIES = "off,2"


def open_loop(args) -> int:
    from engine.measure.sweep_results import read_schedule

    if args.new_tokens < 2:
        raise VllmError("--new-tokens must be at least 2 with --rates (the time per output "
                        "token is measured between the first token and the last)")
    if args.requests < 1:
        raise VllmError("--requests must be at least 1")
    if args.passes < 1:
        raise VllmError("--passes must be at least 1")
    if args.duration is not None and args.duration <= 0:
        raise VllmError("--duration must be more than 0 seconds")
    if args.temperature < 0:
        raise VllmError("--temperature must be at least 0")
    if args.url:
        raise VllmError("--rates starts its own servers (one per policy): leave out --url")
    try:
        schedule = read_schedule(args.schedule) if args.schedule else None
        policies = parse_vllm_policies(args.policies or DEFAULT_POLICIES, schedule)
    except (OSError, ValueError) as error:
        raise VllmError(str(error)) from None
    arrivals = schedules(args.rates, args.requests, args.seed, args.duration)
    prompts = _prompts(args.target)

    def log(message: str) -> None:
        print(f"specscope sweep: {message}", file=sys.stderr, flush=True)

    for rate, times in arrivals.items():
        log(f"{rate:g} req/s: {len(times)} requests over {times[-1]:.1f} s")
    runs = run_policies(policies, arrivals, prompts, args.new_tokens, args.temperature,
                        args.target, args.draft, log, passes=args.passes,
                        python=args.python)
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    result = {
        "kind": "open-loop",
        "hardware": args.hardware or f"{platform.processor() or platform.machine()} "
                                     "(vLLM, CPU)",
        "target": args.target, "draft": args.draft, "temperature": args.temperature,
        "new_tokens": args.new_tokens, "requests": args.requests, "duration": args.duration,
        "seed": args.seed, "rates": list(arrivals), "passes": args.passes,
        "load_average": load,
        "command": "specscope " + " ".join(sys.argv[1:]),
        "medians": {name: [r.as_dict() for r in rows]
                    for name, rows in medians(runs).items()},
        "policies": [run.as_dict() for run in runs],
    }
    if args.json:
        print(json.dumps(result, indent=1))
    else:
        print(report(runs, load))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
        log(f"wrote {args.out}")
    return 0


def report(runs: list[PolicyRun], load: str) -> str:
    passes = max(run.pass_index for run in runs) + 1
    rows = medians(runs)
    what = f", the median of {passes} passes" if passes > 1 else ""
    lines = [f"latency at a request rate (open loop, Poisson arrivals{what})", "",
             table(rows), ""]
    lines += [f"policy {run.policy.name}" + (f", pass {run.pass_index + 1}" if passes > 1
                                             else "")
              + f": server start {run.start_s:.1f} s, stop {run.stop_s:.1f} s"
              for run in runs]
    lines += ratios(rows, "medians" if passes > 1 else "")
    if passes > 1:
        for i in range(passes):
            lines += ratios({run.policy.name: [r.summary for r in run.rates] for run in runs
                             if run.pass_index == i}, f"pass {i + 1}")
    lines.append(f"load average at the end (1, 5, 15 min): {load}")
    return "\n".join(lines)


def ratios(rows: dict[str, list[RateSummary]], which: str = "") -> list[str]:
    """Per speculative policy and rate: TPOT p50 of off over its own (above 1: faster per
    token)."""
    if "off" not in rows:
        return []
    base = {s.rate: s for s in rows["off"]}
    lines = []
    for name, summaries in rows.items():
        if name == "off":
            continue
        parts = []
        for s in summaries:
            b = base.get(s.rate)
            if b is None or not s.tpot_p50_ms or not b.tpot_p50_ms:
                continue
            parts.append(f"{s.rate:g} req/s {b.tpot_p50_ms / s.tpot_p50_ms:.2f}x")
        if parts:
            lines.append(f"{name} against off, TPOT p50 speedup"
                         + (f" ({which})" if which else "") + ": " + ", ".join(parts))
    return lines


def _prompts(target: str) -> list[list[int]]:
    """The pair's held-out prompts as token ids (the batch sweep's prompts)."""
    from transformers import AutoTokenizer

    from engine.measure.prompt_sets import FALLBACK_PROMPTS, heldout_prompts

    tokenizer = AutoTokenizer.from_pretrained(target)
    texts = heldout_prompts(target, per_domain=20) or FALLBACK_PROMPTS
    return [list(tokenizer(t).input_ids) for t in texts]
