"""``specscope plan``: the draft length to use at each batch size, and the vLLM config for it.

    specscope plan --alpha 0.7 --hardware h100-sxm --models llama-70b-1b --gpus 8
    specscope plan --from-probe probe.json --mix code=0.6,chat=0.4 --costs measurements/x.json
    specscope plan --from-metrics before.txt after.txt --k-max 4 --max-num-seqs 64

Alpha comes from ``--alpha``, a saved probe (its JSON: ``/probes/{id}.json`` or ``specscope
probe --json``; a traffic mix over its domains) or a vLLM server's ``/metrics``; the costs from
the roofline presets or a measured-costs file (``specscope roofline --out``). The plan itself
is :func:`engine.analytic.schedule.plan`. Nothing here imports torch.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass, replace
from pathlib import Path

from engine.analytic import schedule
from engine.analytic.roofline import (
    ACHIEVED_BANDWIDTH,
    ACHIEVED_FLOPS,
    DTYPES,
    HARDWARE,
    PAIRS,
    Hardware,
    ModelShape,
    Setting,
    max_batch_that_fits,
    this_machine,
)
from engine.analytic.schedule import Domain, PlanError
from engine.cli_options import MODEL_HELP

DEFAULT_HARDWARE, DEFAULT_MODELS, DEFAULT_CONTEXT = "h100-sxm", "llama-8b-1b", 512


def add_parser(sub, d: dict) -> None:
    plan = sub.add_parser(
        "plan", help="the k to speculate at each batch size, and vLLM's config for it",
        description="Pick, for every batch from 1 to --max-num-seqs, the draft length k "
                    "(0 = off) with the highest predicted throughput, and print the ranges, "
                    "vLLM's speculative_config and a Python snippet that starts vLLM with it.")
    source = plan.add_argument_group("alpha (one of)")
    source.add_argument("--alpha", type=float, help="one acceptance rate for all traffic")
    source.add_argument("--from-probe", type=Path, metavar="FILE",
                        help="a saved probe's JSON (/probes/ID.json, or specscope probe --json)")
    source.add_argument("--from-metrics", type=Path, nargs="+", metavar=("BEFORE", "AFTER"),
                        help="a vLLM /metrics snapshot, or two: the window between them")
    plan.add_argument("--mix", help="with --from-probe: your traffic, domain=weight,... "
                                    "(default: weighted by the probe's prompts); alone: "
                                    "domain=weight:alpha,... (a mix given by hand)")
    plan.add_argument("--temperature", type=float,
                      help="with --from-probe: the probe's rows at this temperature "
                           "(needed when it probed several)")
    costs = plan.add_argument_group("costs (a preset, or --costs)")
    costs.add_argument("--hardware", choices=list(HARDWARE), default=DEFAULT_HARDWARE)
    costs.add_argument("--models", choices=list(PAIRS), default=DEFAULT_MODELS,
                       help="the model-pair preset (target / draft)")
    costs.add_argument("--dtype", choices=list(DTYPES), default="bf16")
    costs.add_argument("--gpus", type=int, default=1, help="tensor-parallel GPUs")
    costs.add_argument("--context", type=int, default=DEFAULT_CONTEXT,
                       help="tokens in each sequence's KV cache")
    costs.add_argument("--costs", type=Path, metavar="FILE",
                       help="measured costs instead: a file from specscope roofline --out")
    plan.add_argument("--k-max", type=int, default=schedule.K_MAX,
                      help=f"the longest draft to consider (default {schedule.K_MAX})")
    plan.add_argument("--max-num-seqs", type=int, default=schedule.MAX_NUM_SEQS,
                      help="vLLM's max_num_seqs: the plan covers batches 1 to this "
                           f"(default {schedule.MAX_NUM_SEQS})")
    # Names for the config only: the plan loads no model.
    plan.add_argument("--target", help=f"{MODEL_HELP}: the target the config names "
                                       "(default: the preset's)")
    plan.add_argument("--draft", help=f"{MODEL_HELP}: the draft the config names "
                                      "(default: the preset's)")
    plan.add_argument("--json", action="store_true", help="print one JSON object instead")


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
        found = {str(r["domain"]): (float(r["alpha_counted"]), float(r["prompts"]))
                 for r in chosen}
    except (KeyError, TypeError, ValueError) as error:
        if isinstance(error, PlanError):
            raise
        raise PlanError(f"a probe row lacks a field the plan needs ({error})") from None
    notices = [f"alpha by domain from the probe's rows at temperature {temperature:g}."]
    if mix is None:
        notices.append("The mix is weighted by the probe's prompts per domain; give your "
                       "traffic with --mix domain=weight,...")
        return [Domain(name, prompts, alpha) for name, (alpha, prompts) in found.items()], notices
    unknown = sorted(set(mix) - set(found))
    if unknown:
        raise PlanError(f"--mix names {', '.join(unknown)}, which the probe did not measure "
                        f"(it has {', '.join(found)})")
    left = sorted(set(found) - set(mix))
    if left:
        notices.append(f"Not in --mix, so not planned for: {', '.join(left)}.")
    return [Domain(name, weight, found[name][0]) for name, weight in mix.items()], notices


def metrics_domains(paths: list[Path]) -> tuple[list[Domain], list[str]]:
    """Alpha from vLLM's counters; several label sets are a mix weighted by their drafts."""
    from engine.serving.calibrate import calibrate

    if len(paths) > 2:
        raise PlanError("--from-metrics takes one snapshot or two (before, after)")
    texts = [_read_text(p) for p in paths]
    result = calibrate(texts[0], texts[1] if len(texts) > 1 else None)
    domains = [Domain(row.label, row.drafts, row.alpha_counted) for row in result.rows]
    scope = "between the two snapshots" if result.window else "since the server started"
    return domains, [f"alpha from vLLM's counters {scope}.", *result.notices]


def _read_text(path: Path) -> str:
    try:
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        raise PlanError(f"{path} is not UTF-8 text") from None


def hand_mix(text: str) -> list[Domain]:
    """``"code=3:0.85,chat=1:0.4"``: each domain's weight and alpha, given by hand."""
    domains = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, _, rest = part.partition("=")
        domains.append(schedule.parse_mix_entry(f"{name.strip()}:{rest.strip()}"))
    if not domains:
        raise PlanError("--mix names no domain")
    return domains


def alpha_source(args) -> tuple[list[Domain], list[str]]:
    given = [name for name in ("alpha", "from_probe", "from_metrics")
             if getattr(args, name) is not None]
    if not given and args.mix is not None and args.temperature is None:
        return hand_mix(args.mix), []
    if len(given) != 1:
        raise PlanError("give one of --alpha, --from-probe FILE, --from-metrics BEFORE [AFTER] "
                        "or --mix domain=weight:alpha,...")
    if (args.mix is not None or args.temperature is not None) and args.from_probe is None:
        raise PlanError("--mix domain=weight and --temperature go with --from-probe (a mix "
                        "alone is domain=weight:alpha,...)")
    if args.alpha is not None:
        return schedule.single(args.alpha), []
    if args.from_probe is not None:
        try:
            data = json.loads(_read_text(args.from_probe))
        except json.JSONDecodeError as error:
            raise PlanError(f"{args.from_probe} is not JSON ({error})") from None
        mix = parse_mix(args.mix) if args.mix is not None else None
        return probe_domains(data, args.temperature, mix)
    return metrics_domains(args.from_metrics)


# ---- costs -----------------------------------------------------------------------------------


@dataclass
class Costs:
    cycle: schedule.CycleCost
    describe: str
    target: str
    draft: str
    k_limit: int | None = None
    timed_batches: tuple[int, ...] = ()  # measured costs: the batches that were timed
    fits: schedule.Fits | None = None  # the roofline's memory model; None: every batch fits


def model_id(shape: ModelShape) -> str:
    """The name vLLM loads a preset by: the Hugging Face id (or the shipped folder) its shape
    was copied from."""
    return shape.source.removesuffix(" config.json").removesuffix("/config.json")


def preset_costs(hardware: str, models: str, dtype: str, gpus: int, context: int,
                 measured_fit: Hardware | None = None) -> Costs:
    """Costs from the roofline presets; "this machine" takes ``measured_fit`` when given."""
    if not 1 <= gpus <= 64 or not 0 <= context <= 1_048_576:
        raise PlanError("--gpus must be from 1 to 64 and --context from 0 to 1048576")
    hw = measured_fit if hardware == "this-machine" and measured_fit else HARDWARE[hardware]
    pair = PAIRS[models]
    return setting_costs(Setting(hw, pair.target, pair.draft, dtype, gpus, context,
                                 bandwidth_fraction=ACHIEVED_BANDWIDTH,
                                 flops_fraction=ACHIEVED_FLOPS))


def setting_costs(s: Setting) -> Costs:
    """Costs from the roofline model of ``s`` (its alpha and k are not used)."""
    return Costs(schedule.roofline_cycle(s),
                 f"{s.target.label} / {s.draft.label} on {s.gpus} × {s.hardware.label}, "
                 f"{s.dtype}, context {s.context} (roofline model)",
                 model_id(s.target), model_id(s.draft), fits=memory_fits(s))


def memory_fits(s: Setting) -> schedule.Fits:
    """``fits(batch, k)`` from the roofline's memory model: both models' weights and the KV
    cache of ``batch`` sequences of ``context + k + 1`` tokens on each GPU."""
    limits: dict[int, int | None] = {}

    def fits(batch: int, k: int) -> bool:
        if k not in limits:
            limits[k] = max_batch_that_fits(replace(s, k=k))
        limit = limits[k]
        return limit is not None and batch <= limit

    return fits


def this_machine_fit() -> Hardware | None:
    """"This machine" as fitted by the measured sweeps in SPECSCOPE_MEASUREMENTS_DIR."""
    from engine.measure.curves import load_curves
    from engine.settings import Settings

    curves, _ = load_curves(Settings().measurements_dir)
    fit = next((c.fit for c in curves if c.fit is not None), None)
    return this_machine(fit.bandwidth, fit.flops) if fit else None


def file_costs(path: Path) -> Costs:
    """Costs from the passes a ``specscope roofline --out`` file timed."""
    try:
        data = json.loads(_read_text(path))
    except json.JSONDecodeError as error:
        raise PlanError(f"{path} is not JSON ({error})") from None
    passes = data.get("passes") if isinstance(data, dict) else None
    if not isinstance(passes, list):
        raise PlanError(f"{path} holds no timed passes: write one with "
                        f"specscope roofline --out {path}")
    version = data.get("version", 1)
    if not isinstance(version, int) or not 1 <= version <= schedule.COSTS_FILE_VERSION:
        raise PlanError(f"{path} is a costs file of version {version!r}; this specscope reads "
                        f"versions 1 to {schedule.COSTS_FILE_VERSION}")
    loop = data.get("loop") or []
    if not isinstance(loop, list):
        raise PlanError(f'{path}: "loop" must be a list of {{"batch", "k", "median_ms"}}')
    timed = schedule.timed_costs(passes, loop)
    through = ("through the decoding loop" if timed.loop
               else "forward passes only, the loop's own time not counted")
    preset = PAIRS.get(data.get("pair") or "")
    target = model_id(preset.target) if preset else str(data.get("target", "TARGET"))
    draft = model_id(preset.draft) if preset else str(data.get("draft", "DRAFT"))
    context = data.get("context")
    return Costs(timed.cycle, f"measured costs: {data.get('label', path.name)} "
                 f"({data.get('hardware', 'hardware not named')}"
                 f"{f', context {context}' if context is not None else ''}; {through})",
                 target, draft, timed.k_limit, timed.batches)


# ---- the command -----------------------------------------------------------------------------


def make_plan(args) -> dict:
    """Everything the command prints, as one JSON-ready object."""
    domains, notices = alpha_source(args)
    if args.costs is not None:
        costs = file_costs(args.costs)
    else:
        fit = this_machine_fit() if args.hardware == "this-machine" else None
        costs = preset_costs(args.hardware, args.models, args.dtype, args.gpus, args.context, fit)
    return report(domains, costs, args.k_max, args.max_num_seqs, args.target, args.draft,
                  notices)


def report(domains: list[Domain], costs: Costs, k_max: int, max_num_seqs: int,
           target: str | None = None, draft: str | None = None,
           notices: list[str] | None = None) -> dict:
    """The plan, vLLM's config, the snippet and every notice, as one JSON-ready object (the
    command's ``--json`` and ``GET /api/plan``)."""
    notices = list(notices or [])
    timed = costs.timed_batches
    if timed and max_num_seqs > timed[-1]:
        notices.append(
            f"Costs past batch {timed[-1]}, the largest timed, follow the line through batches "
            f"{timed[-2]} and {timed[-1]}." if len(timed) > 1 else
            f"Costs past batch {timed[0]}, the only one timed, are taken to be the same.")
    if costs.k_limit is not None and k_max > costs.k_limit:
        notices.append(f"k is limited to {costs.k_limit}: the costs file timed verification "
                       f"up to k + 1 = {costs.k_limit + 1} tokens.")
        k_max = costs.k_limit
    p = schedule.plan(domains, costs.cycle, k_max, max_num_seqs, fits=costs.fits)
    target, draft = target or costs.target, draft or costs.draft
    config = schedule.speculative_config(p, draft)
    return {
        "costs": costs.describe,
        "target": target,
        "draft": draft,
        "plan": schedule.plan_json(p),
        "speculative_config": config,
        "python": schedule.python_snippet(target, config, p.max_num_seqs),
        "advice": None if config else advice(p),
        "notices": notices + p.notices,
    }


def _span(lo: float, hi: float) -> str:
    return f"{lo:.2f}×" if f"{lo:.2f}" == f"{hi:.2f}" else f"{lo:.2f}–{hi:.2f}×"


def markdown(result: dict) -> str:
    p = result["plan"]
    alphas = ", ".join(f"{d['name']} α {d['alpha']:.3f}" + (
        f" (weight {d['weight']:g})" if len(p["domains"]) > 1 else "") for d in p["domains"])
    lines = [f"Schedule for {result['costs']}",
             f"alpha: {alphas}; k from 0 (off) to {p['k_max']}; batches 1 to "
             f"{p['max_num_seqs']} (max_num_seqs)", "",
             f"| batches | k | speedup over off | over fixed k = {p['fixed_k']} |",
             "| ---: | ---: | ---: | ---: |"]
    for r in p["ranges"]:
        batches = f"{r['lo']}" if r["lo"] == r["hi"] else f"{r['lo']}–{r['hi']}"
        lines.append(f"| {batches} | {r['k']} | {_span(*r['speedup'])} | "
                     f"{_span(*r['vs_fixed'])} |")
    if p["ranges"]:
        lines += ["", f"Best fixed k: {p['fixed_k']}; the schedule is {p['fixed_gain']:.3f}× "
                  f"its throughput (geometric mean over batches 1–{p['largest_batch']}, each "
                  "counted once)."]
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
    if result["notices"]:
        lines += [""] + [f"- {n}" for n in result["notices"]]
    if result["speculative_config"] is None:
        lines += ["", result["advice"]]
    else:
        lines += ["", "vLLM speculative_config (--speculative-config):",
                  json.dumps(result["speculative_config"]), "", result["python"]]
    return "\n".join(lines)


def advice(p: schedule.Plan) -> str:
    """What to deploy when the plan has no speculative config."""
    if not p.ranges:
        return ("Nothing to deploy here: not even batch 1 fits in memory. Add GPUs, or choose a "
                "smaller dtype or a shorter context.")
    return (f"k is 0 at every batch: {schedule.DO_NOT_SPECULATE}. No speculative config: "
            "serve the target alone.")


def run(args) -> int:
    try:
        result = make_plan(args)
    except (PlanError, ValueError, OSError) as error:
        print(f"specscope plan: error: {error}", file=sys.stderr)
        return 2
    try:
        print(json.dumps(result, indent=1) if args.json else markdown(result))
    except BrokenPipeError:  # the reader went away (`specscope plan | head`)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    return 0
