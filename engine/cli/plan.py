"""``specscope plan``: the draft length to use at each batch size, and the vLLM config for it.

    specscope plan --alpha 0.7 --hardware h100-sxm --models llama-70b-1b --gpus 8
    specscope plan --from-probe probe.json --mix code=0.6,chat=0.4 --costs measurements/x.json
    specscope plan --from-metrics before.txt after.txt --k-max 4 --max-num-seqs 64
    specscope plan --alpha 0.8 --drafter eagle --models llama-8b-1b
    specscope plan --alpha 0.81 --drafter self-spec --gpus 8 --contexts 4000,32000

The options are the plan's inputs under the names the page and the API use
(:mod:`engine.planner.inputs`); alpha comes from ``--alpha``, a saved probe (its JSON), a
vLLM server's ``/metrics`` or a mix given by hand. The plan, its costs and its report are
:mod:`engine.planner`; this module reads the files and prints. Nothing here imports torch.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import replace
from pathlib import Path

from engine.analytic import positions, schedule
from engine.analytic.drafters import EAGLE_HEADS, STREAMING_BUDGET
from engine.analytic.schedule import Domain, PlanError
from engine.cli_options import MODEL_HELP
from engine.planner import contexts, provenance
from engine.planner.costs import Costs, file_costs, setting_costs, setting_of
from engine.planner.drafters import DRAFTERS, KV_BUDGET_MAX, drafter_costs
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
from engine.planner.provenance import AlphaSource
from engine.planner.report import k0_price, markdown, report


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


# ---- alpha -----------------------------------------------------------------------------------


def parse_mix(text: str) -> dict[str, float]:
    """``"code=0.6,chat=0.4"`` as ``{"code": 0.6, "chat": 0.4}``."""
    weights: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, sep, value = part.partition("=")
        try:
            weight = float(value)
        except ValueError:
            weight = -1.0
        if not sep or not name.strip() or not weight >= 0:
            raise PlanError(f"--mix entries are domain=weight with a weight of at least 0 "
                            f"(got {part!r})")
        weights[name.strip()] = weight
    if not weights:
        raise PlanError("--mix names no domain")
    return weights


def probe_domains(data: object, temperature: float | None, mix: dict[str, float] | None,
                  ) -> tuple[list[Domain], list[str]]:
    """The domains of a probe's rows at one temperature, weighted by ``mix`` or by the
    probe's prompts."""
    result = data.get("result", data) if isinstance(data, dict) else None
    rows = result.get("rows") if isinstance(result, dict) else None
    if not isinstance(rows, list) or not rows:
        raise PlanError("this is not a probe's JSON (no result rows): save one from the page's "
                        "probe (/probes/ID.json) or with specscope probe --json --out FILE")
    try:
        temperatures = sorted({float(r["temperature"]) for r in rows})
        if temperature is None:
            if len(temperatures) > 1:
                raise PlanError("the probe has rows at temperatures "
                                f"{', '.join(f'{t:g}' for t in temperatures)}: choose one "
                                "with --temperature")
            temperature = temperatures[0]
        chosen = [r for r in rows if float(r["temperature"]) == temperature]
        if not chosen:
            raise PlanError(f"the probe has no rows at temperature {temperature:g} (it has "
                            f"{', '.join(f'{t:g}' for t in temperatures)})")
        found = {str(r["domain"]): (float(r["alpha_counted"]), float(r["prompts"]),
                                    positions.measured(r.get("per_position_acceptance")))
                 for r in chosen}
    except (KeyError, TypeError, ValueError) as error:
        if isinstance(error, PlanError):
            raise
        raise PlanError(f"a probe row lacks a field the plan needs ({error})") from None
    notices = [f"alpha by domain from the probe's rows at temperature {temperature:g}."]
    if mix is None:
        notices.append("The mix is weighted by the probe's prompts per domain; give your "
                       "traffic with --mix domain=weight,...")
        return [Domain(name, prompts, alpha, curve)
                for name, (alpha, prompts, curve) in found.items()], notices
    unknown = sorted(set(mix) - set(found))
    if unknown:
        raise PlanError(f"--mix names {', '.join(unknown)}, which the probe did not measure "
                        f"(it has {', '.join(found)})")
    left = sorted(set(found) - set(mix))
    if left:
        notices.append(f"Not in --mix, so not planned for: {', '.join(left)}.")
    return [Domain(name, weight, found[name][0], found[name][2])
            for name, weight in mix.items()], notices


def probe_draft_sample(data: object) -> str | None:
    """How the probe's draft sampled (``draft_sample`` in its config or result), if it says."""
    if not isinstance(data, dict):
        return None
    for holder in (data, data.get("result"), data.get("config"),
                   (data.get("result") or {}).get("config") if isinstance(
                       data.get("result"), dict) else None):
        if isinstance(holder, dict) and holder.get("draft_sample") in CHOICES[
                "draft_sample"][1]:
            return holder["draft_sample"]
    return None


def metrics_domains(paths: list[Path]) -> tuple[list[Domain], list[str], list[dict]]:
    """Alpha from vLLM's counters; several label sets are a mix weighted by their drafts."""
    from engine.serving.calibrate import calibrate

    if len(paths) > 2:
        raise PlanError("--from-metrics takes one snapshot or two (before, after)")
    texts = [_read_text(p) for p in paths]
    result = calibrate(texts[0], texts[1] if len(texts) > 1 else None)
    domains = [Domain(row.label, row.drafts, row.alpha_counted,
                      positions.measured(row.per_position_acceptance)) for row in result.rows]
    scope = "between the two snapshots" if result.window else "since the server started"
    return (domains, [f"alpha from vLLM's counters {scope}.", *result.notices],
            [row.labels for row in result.rows])


def _read_text(path: Path) -> str:
    try:
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        raise PlanError(f"{path} is not UTF-8 text") from None


def _read_json(path: Path) -> object:
    try:
        return json.loads(_read_text(path))
    except json.JSONDecodeError as error:
        raise PlanError(f"{path} is not JSON ({error})") from None


def hand_mix(text: str) -> list[Domain]:
    """``"code=3:0.85,chat=1:0.4"``: each domain's weight and alpha, given by hand."""
    domains = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, _, rest = part.partition("=")
        domains.append(schedule.parse_mix_entry(f"{name.strip()}:{rest.strip()}"))
    if not domains:
        raise PlanError("--mix names no domain")
    return domains


def alpha_source(args) -> tuple[list[Domain], list[str], str | None, AlphaSource]:
    """The domains, notices, the probe's draft sampling (if it says) and where alpha came
    from."""
    given = [name for name in ("alpha", "from_probe", "from_metrics", "positions")
             if getattr(args, name, None) is not None]
    if not given and args.mix is not None and args.temperature is None:
        domains = hand_mix(args.mix)
        return domains, [], None, provenance.by_hand("--mix", [d.name for d in domains])
    if len(given) != 1:
        raise PlanError("give one of --alpha, --from-probe FILE, --from-metrics BEFORE [AFTER], "
                        "--positions S1,S2,... or --mix domain=weight:alpha,...")
    if (args.mix is not None or args.temperature is not None) and args.from_probe is None:
        raise PlanError("--mix domain=weight and --temperature go with --from-probe (a mix "
                        "alone is domain=weight:alpha,...)")
    if args.alpha is not None:
        return schedule.single(args.alpha), [], None, provenance.by_hand("--alpha")
    if args.positions is not None:
        return schedule.by_position(args.positions), [], None, provenance.by_hand("--positions")
    if args.from_probe is not None:
        data = probe_of_drafter(_read_json(args.from_probe), args.drafter)
        mix = parse_mix(args.mix) if args.mix is not None else None
        domains, notices = probe_domains(data, args.temperature, mix)
        sample = probe_draft_sample(data)
        temperature = probe_temperature(data, args.temperature)
        source = provenance.from_probe(data, str(args.from_probe), [d.name for d in domains],
                                       temperature, sample)
        return domains, notices, sample, source
    domains, notices, labels = metrics_domains(args.from_metrics)
    where = " and ".join(str(p) for p in args.from_metrics)
    return domains, notices, None, provenance.from_metrics(where, labels)


def probe_of_drafter(data: object, drafter: str) -> object:
    """A probe of several drafters side by side (``specscope probe --drafter
    model,ngram,eagle``: one result under "drafters" each) gives the result of the drafter
    planned; any other probe is itself."""
    drafters = data.get("drafters") if isinstance(data, dict) else None
    if not isinstance(drafters, dict) or "rows" in data:
        return data
    if drafter not in drafters:
        raise PlanError(f"the probe measured the drafters {', '.join(drafters)}, not "
                        f"{drafter}: plan one of those with --drafter, or probe {drafter}")
    return drafters[drafter]


def probe_temperature(data: dict, asked: float | None) -> float:
    """The temperature the plan takes the probe's rows at (the only one, unless asked)."""
    if asked is not None:
        return asked
    result = data.get("result", data)
    return float(result["rows"][0]["temperature"])


# ---- the command -----------------------------------------------------------------------------


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
        batch_mix = _read_text(Path(batch_mix))
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


def make_plan(args) -> dict:
    """Everything the command prints, as one JSON-ready object."""
    domains, notices, probed_sample, source = alpha_source(args)
    if args.draft_sample and probed_sample and args.draft_sample != probed_sample:
        raise PlanError(f"the probe measured alpha with {probed_sample} drafting, not "
                        f"{args.draft_sample}: probe again with --draft-sample "
                        f"{args.draft_sample}")
    draft_sample = args.draft_sample or probed_sample or CHOICES["draft_sample"][0]
    inputs = inputs_from(args, draft_sample)
    if args.contexts is not None:
        return plan_contexts(args, domains, inputs, notices, source)
    return report(domains, plan_costs(args, inputs), inputs, args.target, args.draft, notices,
                  source=source)


def plan_costs(args, inputs: PlanInputs) -> Costs:
    """The costs the options name: a costs file, "this machine" as fitted, or the roofline of
    the preset, with the drafter chosen."""
    if args.costs is not None:
        if inputs.drafter != "model":
            raise PlanError(f"a costs file times a draft model: --drafter {inputs.drafter} is "
                            "priced on a hardware preset's roofline, without --costs")
        return file_costs(_read_json(args.costs), str(args.costs))
    if inputs.hardware == "this-machine":
        if inputs.drafter != "model":
            raise PlanError(f"--drafter {inputs.drafter} is priced on a GPU preset; "
                            '"this machine" is fitted for the shipped draft model')
        return this_machine_costs(inputs)
    return drafter_costs(inputs.setting(), inputs.drafter, inputs.eagle_head,
                         inputs.draft_kv_budget)


def plan_contexts(args, domains: list[Domain], inputs: PlanInputs, notices: list[str],
                  source: AlphaSource) -> dict:
    """``--contexts``: a plan for each context class, one schedule safe for all, and which
    to deploy (:mod:`engine.planner.contexts`)."""
    if args.costs is not None:
        raise PlanError("--contexts plans on the roofline at each context; a costs file was "
                        "timed at one context")
    if args.context != NUMBERS["context"].default:
        raise PlanError("give --context or --contexts, not both")
    bound = NUMBERS["context"]
    classes = contexts.parse_contexts(args.contexts, max(1, int(bound.minimum)),
                                      int(bound.maximum))
    by_costs, reports = {}, {}
    for context in classes:
        at = replace(inputs, context=context)
        by_costs[context] = plan_costs(args, at)
        reports[context] = report(domains, by_costs[context], at, args.target, args.draft,
                                  notices, source=source)
    longest = replace(inputs, context=classes[-1])
    one = report(domains, contexts.worst_costs(by_costs), longest, args.target, args.draft,
                 notices, source=source)
    compared = contexts.compare(domains, by_costs, reports, one,
                                k0_price(inputs, by_costs[classes[0]]).overhead(),
                                inputs.batch_mix)
    alphas = ", ".join(f"{d.name} α {d.alpha:g}" for d in domains)
    return {"contexts": classes, "alpha": f"{alphas} ({source.text()})",
            "alpha_source": one["alpha_source"], **compared,
            "table": contexts.table(reports, one), "one_schedule": one,
            "by_context": {str(c): r for c, r in reports.items()}}


def run(args) -> int:
    try:
        result = make_plan(args)
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
