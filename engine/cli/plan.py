"""``specscope plan``: the draft length to use at each batch size, and the vLLM config for it.

    specscope plan --alpha 0.7 --hardware h100-sxm --models llama-70b-1b --gpus 8
    specscope plan --from-probe probe.json --mix code=0.6,chat=0.4 --costs measurements/x.json
    specscope plan --from-metrics before.txt after.txt --k-max 4 --max-num-seqs 64
    specscope plan --alpha 0.8 --drafter eagle --models llama-8b-1b
    specscope plan --alpha 0.81 --drafter self-spec --gpus 8 --contexts 4000,32000

The options are the plan's inputs under the names the page and the API use
(:mod:`engine.planner.inputs`); alpha comes from ``--alpha``, a saved probe (its JSON), a
vLLM server's ``/metrics`` or a mix given by hand. This module parses the options, hands them
to the plan (:mod:`engine.planner.command`) and prints what it returns; it reads here only
what the planner cannot on the standard library alone: vLLM's counters and "this machine"
fitted to the measured sweeps. Nothing here imports torch.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import fields
from pathlib import Path

from engine.analytic import positions
from engine.analytic.drafters import EAGLE_HEADS, STREAMING_BUDGET
from engine.analytic.timed_costs import PlanError
from engine.cli_options import MODEL_HELP
from engine.planner import command, contexts
from engine.planner.costs import Costs, setting_costs, setting_of
from engine.planner.drafters import DRAFTERS, KV_BUDGET_MAX
from engine.planner.inputs import (
    BATCH_MIX_HELP,
    BATCH_MIX_K_HELP,
    CHOICES,
    EDITS,
    K0_HELP,
    NUMBERS,
    OUTPUT_TOKENS,
    OVERHEADS,
    PLAN_NUMBERS,
    REQUEST_RATE_HELP,
    REQUEST_RATE_MAX,
    PlanInputs,
)
from engine.planner.report import markdown
from engine.planner.schedule import Domain


def add_parser(sub, d: dict | None = None) -> None:
    plan = sub.add_parser(
        "plan", help="the k to speculate at each batch size, and vLLM's config for it",
        description="Pick, for every batch from 1 to --max-num-seqs, the draft length k "
                    "(0 = off) with the highest predicted throughput, say whether to "
                    "configure speculation at all, and print the ranges, vLLM's engine "
                    "arguments, a Python snippet and a vllm serve line that deploy it. The "
                    "options are the page's and the API's parameters, - for _.")
    source = plan.add_argument_group("alpha (one of)")
    source.add_argument("--alpha", type=float, help="one acceptance rate for all traffic")
    source.add_argument("--from-probe", type=Path, metavar="FILE",
                        help="a saved probe's JSON (/probes/ID.json, or specscope probe --json)")
    source.add_argument("--from-metrics", type=Path, nargs="+", metavar=("BEFORE", "AFTER"),
                        help="a vLLM /metrics snapshot, or two: the window between them")
    source.add_argument("--positions", metavar="S1,S2,...",
                        help="acceptance by position, all traffic: survival rates (the share of "
                             "drafts whose first i tokens were accepted, vLLM's per-position "
                             "acceptance). Probes and /metrics carry their own")
    plan.add_argument("--mix", help="with --from-probe: your traffic, domain=weight,... "
                                    "(default: weighted by the probe's prompts); alone: "
                                    "domain=weight:alpha,... (a mix given by hand)")
    plan.add_argument("--tree", metavar="STEPS,TOPK,DRAFT_TOKENS", default="",
                      help="price a token tree for SGLang's EAGLE (--engine sglang --drafter "
                           "eagle) and print its launch line: --speculative-num-steps, "
                           "--speculative-eagle-topk, --speculative-num-draft-tokens, e.g. 5,4,8")
    plan.add_argument("--temperature", type=float,
                      help="with --from-probe: the probe's rows at this temperature "
                           "(needed when it probed several)")
    plan.add_argument("--draft-sample", choices=CHOICES["draft_sample"][1],
                      help="how the draft samples, vLLM's draft_sample_method: alpha depends "
                           "on it (default: the probe's, else "
                           f"{CHOICES['draft_sample'][0]})")
    costs = plan.add_argument_group("costs (a preset, or --costs)")
    for name in ("hardware", "models", "dtype", "kv_dtype", "draft_placement", "engine"):
        default, allowed = CHOICES[name]
        costs.add_argument("--" + name.replace("_", "-"), choices=allowed, default=default,
                           help={"models": "the model-pair preset (target / draft)",
                                 "engine": "the engine that serves: its fitted overheads "
                                           "price the plan, and only vllm's config is "
                                           f"printed (default: {default})",
                                 "dtype": "the weights' dtype",
                                 "kv_dtype": "the KV cache's dtype (auto: bf16, fp32 beside "
                                             "fp32 weights; int4 and fp8 weights keep a "
                                             "bf16 cache)",
                                 "draft_placement": "sharded like the target (vLLM 0.32) or "
                                                    "whole on one GPU"}.get(name))
    for b in NUMBERS.values():
        if b.name != "batch":
            costs.add_argument(b.option, type=int if b.integer else float, default=b.default,
                               help=f"{b.label} ({_bounds(b)})")
    for name, (words, _lo, _hi, integer) in EDITS.items():
        costs.add_argument("--" + name.replace("_", "-"), type=int if integer else float,
                           help=words)
    for b in OVERHEADS.values():
        costs.add_argument(b.option, type=float, default=None,
                           help=f"{b.label}, {b.minimum:g} to {b.maximum:g} (default: the "
                                "engine's, fitted to the published measurements; this "
                                "machine: from SPECSCOPE_MACHINE_COSTS)")
    costs.add_argument("--costs", type=Path, metavar="FILE",
                       help="measured costs instead: a file from specscope roofline --out, "
                            "specscope costs --out or specscope sweep --engine vllm "
                            "--costs-out")
    costs.add_argument("--k0-overhead", default="cited", help=K0_HELP)
    drafter = plan.add_argument_group("the drafter")
    drafter.add_argument("--drafter", choices=tuple(DRAFTERS), default="model",
                         help="model: the pair's draft model (default); eagle: an EAGLE-style "
                              "head of the target (vLLM method eagle or eagle3); self-spec: "
                              "the target drafts over a bounded KV cache (MagicDec; vLLM 0.32 "
                              "does not serve it, so no config is printed)")
    drafter.add_argument("--eagle-head", metavar="NAME",
                         help="with --drafter eagle: a head preset (default: the one of the "
                              "target): " + ", ".join(EAGLE_HEADS))
    drafter.add_argument("--draft-kv-budget", type=int, default=STREAMING_BUDGET,
                         metavar="TOKENS",
                         help="with --drafter self-spec: the draft's KV cache, tokens (a "
                              f"StreamingLLM sink and window; default {STREAMING_BUDGET}, "
                              f"1 to {KV_BUDGET_MAX})")
    costs.add_argument("--contexts", metavar="L1,L2,...",
                       help="plan each context class (instead of --context), show k by batch "
                            "and context, and say what to deploy for the mix: one schedule "
                            "safe for all, or one engine per class")
    plan.add_argument("--batch-mix", metavar="FILE|b=w,...", help=BATCH_MIX_HELP + " (or a "
                      "file of them: JSON, or batch=weight entries)")
    plan.add_argument("--batch-mix-k", type=int, default=0, metavar="K", help=BATCH_MIX_K_HELP)
    plan.add_argument("--request-rate", type=float, metavar="R", help=REQUEST_RATE_HELP)
    plan.add_argument("--output-tokens", type=int, default=OUTPUT_TOKENS, metavar="N",
                      help=f"with --request-rate: tokens each request decodes (default "
                           f"{OUTPUT_TOKENS})")
    for b in PLAN_NUMBERS.values():
        plan.add_argument(b.option, type=int, default=int(b.default),
                          help=f"{b.label} ({_bounds(b)})")
    # Names for the config only: the plan loads no model.
    plan.add_argument("--target", help=f"{MODEL_HELP}: the target the config names "
                                       "(default: the preset's)")
    plan.add_argument("--draft", help=f"{MODEL_HELP}: the draft the config names "
                                      "(default: the preset's)")
    plan.add_argument("--json", action="store_true", help="print one JSON object instead")


def _bounds(b) -> str:
    def text(x: float) -> str:
        return f"{x:g}"

    return f"{text(b.minimum)} to {text(b.maximum)}, default {text(b.default)}"


# ---- what the planner is handed --------------------------------------------------------------


def metrics_domains(paths: list[Path]) -> tuple[list[Domain], list[str], list[dict]]:
    """Alpha from vLLM's counters; several label sets are a mix weighted by their drafts."""
    from engine.serving.calibrate import calibrate

    if len(paths) > 2:
        raise PlanError("--from-metrics takes one snapshot or two (before, after)")
    texts = [command.read_text(p) for p in paths]
    result = calibrate(texts[0], texts[1] if len(texts) > 1 else None)
    domains = [Domain(row.label, row.drafts, row.alpha_counted,
                      positions.measured(row.per_position_acceptance)) for row in result.rows]
    scope = "between the two snapshots" if result.window else "since the server started"
    return (domains, [f"alpha from vLLM's counters {scope}.", *result.notices],
            [row.labels for row in result.rows])


def inputs_from(args, draft_sample: str) -> PlanInputs:
    """The plan's inputs from the options (the same names, - for _)."""
    values = {name: getattr(args, name) for name in
              ("hardware", "models", "dtype", "kv_dtype", "draft_placement", "engine",
               "k0_overhead", "k_max", "tree",
               "max_num_seqs", "data_parallel", *[n for n in NUMBERS if n != "batch"],
               *EDITS, *OVERHEADS)}
    for name, (_words, lo, hi, _integer) in EDITS.items():
        if values[name] is not None and not lo <= values[name] <= hi:
            raise PlanError(f"--{name.replace('_', '-')} must be from {lo:g} to {hi:g}")
    for b in OVERHEADS.values():
        if values[b.name] is not None and not b.minimum <= values[b.name] <= b.maximum:
            raise PlanError(f"{b.option} must be from {b.minimum:g} to {b.maximum:g} "
                            f"(got {values[b.name]:g})")
    for b in [*NUMBERS.values(), *PLAN_NUMBERS.values()]:
        if b.name in values and not b.minimum <= values[b.name] <= b.maximum:
            raise PlanError(f"{b.option} must be from {b.minimum:g} to {b.maximum:g} "
                            f"(got {values[b.name]:g})")
    batch_mix = args.batch_mix or ""
    if batch_mix and "=" not in batch_mix and not batch_mix.lstrip().startswith(("{", "[")):
        batch_mix = command.read_text(Path(batch_mix))
    if args.request_rate is not None and not 0 < args.request_rate <= REQUEST_RATE_MAX:
        raise PlanError(f"--request-rate must be above 0 and at most {REQUEST_RATE_MAX:g} "
                        f"requests/s (got {args.request_rate:g})")
    if not 1 <= args.output_tokens <= 1_000_000:
        raise PlanError(f"--output-tokens must be from 1 to 1000000 (got {args.output_tokens})")
    return PlanInputs(**values, alpha=args.alpha, draft_sample=draft_sample,
                      request_rate=args.request_rate, output_tokens=args.output_tokens,
                      batch_mix_k=args.batch_mix_k,
                      batch_mix=batch_mix, drafter=args.drafter, eagle_head=args.eagle_head,
                      draft_kv_budget=args.draft_kv_budget)


def this_machine_costs(inputs: PlanInputs) -> Costs:
    """"This machine" as fitted by the measured sweeps in SPECSCOPE_MEASUREMENTS_DIR."""
    from engine.analytic.presets import this_machine
    from engine.measure.curves import load_curves
    from engine.settings import Settings

    settings = Settings()
    curves, _ = load_curves(settings.measurements_dir)
    fit = next((c.fit for c in curves if c.fit is not None), None)
    hw = this_machine(fit.bandwidth, fit.flops) if fit else None
    return setting_costs(setting_of(inputs, hw, settings.machine_costs))


# ---- the command -----------------------------------------------------------------------------


def run(args) -> int:
    asked = command.Asked(**{f.name: getattr(args, f.name) for f in fields(command.Asked)})
    try:
        alpha = command.read_alpha(asked, metrics_domains)
        result = command.make_plan(asked, alpha, inputs_from(args, alpha.draft_sample),
                                   this_machine_costs)
    except (PlanError, ValueError, OSError) as error:
        print(f"specscope plan: error: {error}", file=sys.stderr)
        return 2
    text = contexts.markdown if "contexts" in result else markdown
    try:
        print(json.dumps(result, indent=1) if args.json else text(result))
    except BrokenPipeError:  # the reader went away (`specscope plan | head`)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    return 0
