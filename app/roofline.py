"""The "At your batch size" section: its controls in the link, its figures, its chart.

The section reads alpha and k from the slider model and prices the cycle with the roofline
model (:mod:`engine.analytic.roofline`) on the chosen hardware and model pair.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from urllib.parse import urlencode

from app.charts import Frame, Tick, nice_step
from app.model_vs_measured import disagreements
from app.params import SLIDERS, HeldCosts, PageState, Slider, fmt, parse_controls, parse_number
from engine.analytic import engines
from engine.analytic.break_even import BATCH_MAX, costs, lookup_speedup_at, speedup_at, step_s
from engine.analytic.drafters import eagle_draft_pass, eagle_heads_of
from engine.analytic.memory import FIT_SEARCH_MAX, max_batch_that_fits
from engine.analytic.overheads import launch_s
from engine.analytic.passes import LINK_LATENCY_S, USABLE_FRACTION, Setting
from engine.analytic.presets import (
    ACHIEVED_BANDWIDTH,
    ACHIEVED_FLOPS,
    DTYPES,
    HARDWARE,
    PAIRS,
    Hardware,
    devices,
    this_machine,
)
from engine.analytic.roofline import Roofline, roofline
from engine.analytic.theory import CURVE_MAX_K
from engine.analytic.validate import default_intervals
from engine.measure.curves import MeasuredCurve, MeasuredPoint
from engine.planner.costs import K0Price, memory_fits, roofline_cycle, spec_step_k0
from engine.planner.costs import setting_of as resolved_setting
from engine.planner.decision import paying_band
from engine.planner.inputs import CHOICES as INPUT_CHOICES
from engine.planner.inputs import DRAFT_PLACES, OLD_NAMES, PlanInputs, overhead_inputs
from engine.planner.inputs import NUMBERS as INPUT_NUMBERS
from engine.planner.inputs import OVERHEADS as INPUT_OVERHEADS
from engine.planner.schedule import Domain, plan, throughput

# The numbers, the choices and their names are the plan's inputs (engine.planner.inputs):
# the page, the API and `specscope plan` share them.
NUMBERS: dict[str, Slider] = {
    b.name: Slider(b.name, b.label, b.minimum, b.maximum, b.step, b.default, integer=b.integer)
    for b in INPUT_NUMBERS.values()
}
# What a step costs beyond bytes and FLOPs, in ms and µs: blank (not in the link) is the
# hardware's fitted default, so a link without them follows the data files.
OVERHEAD_NUMBERS: dict[str, Slider] = {
    b.name: Slider(b.name, b.label, b.minimum, b.maximum, b.step, b.default)
    for b in INPUT_OVERHEADS.values()
}
# The page calls the pair "models": "pair" is the live panel's model pair.
CHOICES: dict[str, tuple[str, tuple[str, ...]]] = {
    **{name: INPUT_CHOICES[name]
       for name in ("hardware", "models", "dtype", "kv_dtype", "draft_placement", "engine")},
    # Which k the section's headline, curve and break-even follow: the plan's (the best k at
    # each batch) unless the user fixes the slider model's k.
    "batch_k": ("plan", ("plan", "slider")),
}
BATCH_K = {"plan": "the plan's (best at each batch)", "slider": "the slider model's k"}
# The batch slider moves in quarter octaves: a log scale over whole batches.
SLIDER_BATCHES = tuple(sorted({round(2 ** (i / 4)) for i in range(41)}))


@dataclass(frozen=True)
class RooflineState:
    hardware: str
    models: str
    dtype: str
    gpus: int
    context: int
    batch: int
    usable: float = USABLE_FRACTION
    latency_us: float = LINK_LATENCY_S * 1e6
    bw_share: float = round(ACHIEVED_BANDWIDTH, 3)
    flops_share: float = round(ACHIEVED_FLOPS, 3)
    draft_placement: str = "sharded"
    batch_k: str = "plan"
    launch_us_per_layer: float | None = None  # None: the hardware's fitted default
    allreduce_us_per_log2: float | None = None
    sample_row_overhead_us: float | None = None
    step_overhead_us: float | None = None
    draft_overhead_us: float | None = None
    spec_overhead_ms: float | None = None
    spec_row_overhead_us: float | None = None
    kv_dtype: str | None = None  # None: "auto" (bf16; fp32 beside fp32 weights), not linked
    engine: str | None = None  # None: the default engine (vLLM), not linked

    def items(self) -> list[tuple[str, str]]:
        return [(name, v if isinstance(v, str) else fmt(v)) for name, v in vars(self).items()
                if v is not None]

    def query(self) -> str:
        return urlencode(self.items())

    @property
    def slider_index(self) -> int:
        """The batch slider's notch nearest to ``batch`` on the log scale."""
        return min(range(len(SLIDER_BATCHES)),
                   key=lambda i: abs(math.log(SLIDER_BATCHES[i] / self.batch)))


def parse_roofline_state(query: Sequence[tuple[str, str]]) -> tuple[RooflineState, list[str]]:
    """The section's state from the link; bad values become defaults or bounds, with a notice."""
    values, notices = parse_controls(query, NUMBERS)
    for name, (default, allowed) in CHOICES.items():
        raws = [raw for key, raw in query if key == name or OLD_NAMES.get(key) == name]
        values[name] = default
        if not raws or raws[0].strip() == "":
            continue
        if raws[0] in allowed:
            values[name] = raws[0]
        else:
            notices.append(f"{name}={raws[0][:24]!r} is not one of {', '.join(allowed)}; "
                           f"using {default}.")
    for name, control in OVERHEAD_NUMBERS.items():
        values[name] = None
        raws = [raw for key, raw in query if key == name and raw.strip()]
        if not raws:
            continue
        if parse_number(raws[0]) is None:
            notices.append(f"{name}={raws[0][:24]!r} is not a number; using the fitted "
                           "default.")
            continue
        given, said = parse_controls([(name, raws[0])], {name: control})
        values[name], notices = given[name], notices + said
    if values["kv_dtype"] == "auto":
        values["kv_dtype"] = None
    if values["engine"] == CHOICES["engine"][0]:
        values["engine"] = None
    notices += _old_overheads(query, values)
    return RooflineState(**values), notices


def _old_overheads(query: Sequence[tuple[str, str]], values: dict) -> list[str]:
    """Links made before the overheads had causes: a fixed time a pass becomes a launch time a
    layer of the target, a time a row a pass the sampler's time a row a step; each said."""
    given = dict(query)
    notices = []
    old = parse_number(given.get("pass_overhead_ms", ""))
    if old is not None and values["launch_us_per_layer"] is None:
        layers = PAIRS[values["models"]].target.layers
        bound = OVERHEAD_NUMBERS["launch_us_per_layer"]
        values["launch_us_per_layer"] = min(max(old * 1000 / layers, bound.minimum),
                                            bound.maximum)
        notices.append(f"pass_overhead_ms={fmt(old)} is now launch_us_per_layer="
                       f"{fmt(values['launch_us_per_layer'])}: a pass's fixed time shared by "
                       f"the target's {layers} layers, and a draft pays it for its own.")
    old = parse_number(given.get("pass_row_overhead_us", ""))
    if old is not None and values["sample_row_overhead_us"] is None:
        bound = OVERHEAD_NUMBERS["sample_row_overhead_us"]
        values["sample_row_overhead_us"] = min(max(old, bound.minimum), bound.maximum)
        notices.append(f"pass_row_overhead_us={fmt(old)} is now sample_row_overhead_us="
                       f"{fmt(values['sample_row_overhead_us'])}: a time a row paid once a step, "
                       "not by every pass.")
    return notices


DEFAULT_STATE = parse_roofline_state([])[0]


def hardware_for(name: str, curves: list[MeasuredCurve]) -> Hardware:
    """A preset; "this machine" takes its figures from a loaded sweep's fit when there is one."""
    if name == "this-machine":
        fitted = next((c.fit for c in curves if c.fit is not None), None)
        if fitted is not None:
            return this_machine(fitted.bandwidth, fitted.flops)
    return HARDWARE[name]


def inputs_of(state: RooflineState) -> PlanInputs:
    """The section's settings as the plan's inputs (the same names)."""
    return PlanInputs(state.hardware, state.models, state.dtype, state.gpus, state.context,
                      state.usable, state.latency_us, state.bw_share, state.flops_share,
                      state.draft_placement,
                      **{name: getattr(state, name) for name in OVERHEAD_NUMBERS},
                      kv_dtype=state.kv_dtype or "auto",
                      engine=state.engine or CHOICES["engine"][0])


def setting_of(state: RooflineState, curves: list[MeasuredCurve],
               machine_costs: Path | None = None) -> Setting:
    """The roofline setting of the section's state, "this machine" from a loaded fit and its
    overheads from the costs file ``machine_costs``."""
    return resolved_setting(inputs_of(state), hardware_for(state.hardware, curves),
                            machine_costs)


@dataclass(frozen=True)
class SectionPlan:
    """The plan's k and speedup at every batch from 1 to BATCH_MAX (index 0 unused): what the
    section's headline, curve and break-even follow unless the user fixes k. Batches that fit
    take the plan's choice (a k that does not fit is no candidate); the others the best k
    were memory no limit."""

    ks: list[int]
    speedups: list[float]
    k_max: int
    off_from: int | None  # the plan's k is 0 from this batch to BATCH_MAX (None: not so)
    pays_to: int | None = None  # speculation pays at batches 1..pays_to (the plan's band)
    largest: int | None = None  # the largest batch that fits
    pays_end: str = "cost"  # why the band stops: cost, memory (no draft fits above) or plan

    def k_at(self, batch: int) -> int:
        return self.ks[batch]

    def best_speculating_k(self, s: Setting, batch: int) -> tuple[int, float]:
        """The k in 1..k_max with the highest S(B, k) at the section's alpha."""
        return max(((k, speedup_at(s, batch, k)) for k in range(1, self.k_max + 1)),
                   key=lambda kv: (kv[1], -kv[0]))


def section_plan(s: Setting, domains: Sequence[Domain], k_max: int,
                 price: K0Price | None) -> SectionPlan:
    """:func:`engine.planner.schedule.plan` over every batch the section shows; a k = 0
    range priced by ``price`` (None: the setting's speculative-step overhead, as the plan
    prices it)."""
    cycle = roofline_cycle(s)
    k0 = (price or spec_step_k0(s)).overhead()
    fitting = plan(domains, cycle, k_max, BATCH_MAX, fits=memory_fits(s), k0_overhead=k0)
    ks = [0] * (BATCH_MAX + 1)
    for r in fitting.ranges:
        ks[r.lo:r.hi + 1] = [r.k] * (r.hi - r.lo + 1)
    last = fitting.largest_batch or 0
    if last < BATCH_MAX:
        free = plan(domains, cycle, k_max, BATCH_MAX, k0_overhead=k0)
        for r in free.ranges:
            for b in range(max(r.lo, last + 1), r.hi + 1):
                ks[b] = r.k
    speculates = any(ks)
    speedups = [1.0] + [
        throughput(domains, cycle, b, ks[b]) if ks[b] else
        (1.0 / (1.0 + k0(b)) if speculates else 1.0)
        for b in range(1, BATCH_MAX + 1)]
    off_from = None
    if ks[BATCH_MAX] == 0:
        off_from = BATCH_MAX
        while off_from > 1 and ks[off_from - 1] == 0:
            off_from -= 1
    band = paying_band(fitting, default_intervals()["speedup"])
    return SectionPlan(ks, speedups, k_max, off_from, band.hi if band else None,
                       fitting.largest_batch, band.ends if band else "cost")


# ---- the chart ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Marker:
    x: float
    y: float
    label: str


@dataclass(frozen=True)
class Label:
    """A text on the chart: where it sits (x, baseline y, anchor) and its class."""

    kind: str  # ridge, break-even, memory, current
    text: str
    x: float
    y: float
    anchor: str  # start, middle or end

    def box(self) -> tuple[float, float, float, float]:
        """Its extent in the viewBox, from a generous estimate of 13 px text."""
        width = len(self.text) * LABEL_CHAR_PX
        x0 = self.x - {"start": 0.0, "middle": width / 2, "end": width}[self.anchor]
        return x0, self.y - 12, x0 + width, self.y + 4


LABEL_CHAR_PX = 7.6  # Chromium's 13 px sans-serif measures 7.2 a glyph here: estimates err wide
LABEL_GAP = 8.0  # room for the halo each label draws round its glyphs


def _overlaps(a: tuple[float, ...], b: tuple[float, ...]) -> bool:
    return (a[0] < b[2] + LABEL_GAP and b[0] < a[2] + LABEL_GAP
            and a[1] < b[3] + LABEL_GAP and b[1] < a[3] + LABEL_GAP)


def place_labels(frame: Frame, lines: list[tuple[str, str, float]],
                 current: tuple[str, float, float]) -> list[Label]:
    """Labels that never overlap one another and, where there is room, cross no other
    marker's vertical line (a label drawn over a line keeps a halo in the panel's colour).

    ``lines``: (kind, text, x) for the ridge, the break-even batch and the memory limit, in
    that order; ``current``: the current batch's text and its point. Each label takes the first
    free place beside its own line: rows from the top, right of its line then left of it, then
    rows from the bottom, first crossing no other line, then crossing one; failing that, across
    its own line up to a neighbouring line, then against the plot's edge nearer its line. The
    current batch's label sits above its point or below it, off the curve where it can, else
    beside it."""
    placed: list[Label] = []
    xs = {kind: x for kind, _, x in lines}

    def free(label: Label, may_cross: bool) -> bool:
        x0, y0, x1, y1 = label.box()
        inside = frame.left <= x0 and x1 <= frame.right and frame.top <= y0 and y1 <= frame.bottom
        crosses = any(x0 - 1 < x < x1 + 1 for kind, x in xs.items() if kind != label.kind)
        return (inside and (may_cross or not crosses)
                and not any(_overlaps(label.box(), p.box()) for p in placed))

    def first(*groups: list[Label], own: list[Label] | None = None) -> Label:
        """The first free place: beside its own line (``own``) without crossing another, then
        crossing one (its halo keeps it readable; a label moved off its line would read as
        another line's), then every other group without crossing a line, then with."""
        tries = [c for group in groups for c in group]
        ordered = ([(c, False) for c in own or []] + [(c, True) for c in own or []]
                   + [(c, False) for c in tries] + [(c, True) for c in tries])
        return next((c for c, may_cross in ordered if free(c, may_cross)),
                    (own or tries)[0])

    text, cx, cy = current
    # off the curve first: above or below the point, centred, then to either side
    placed.append(first([Label("current", text, cx + dx, cy + dy, anchor)
                         for dy in (-12, 22)
                         for dx, anchor in ((0, "middle"), (-6, "end"), (6, "start"))],
                        [Label("current", text, cx + 10, cy + 4, "start"),
                         Label("current", text, cx - 10, cy + 4, "end")]))
    rows = ([frame.top + 14 + 16 * i for i in range(6)]
            + [frame.bottom - 8 - 16 * i for i in range(4)])
    for kind, text, x in lines:
        beside = [Label(kind, text, x + dx, y, anchor) for y in rows
                  for dx, anchor in ((4, "start"), (-4, "end"))]
        # failing that, over its own line between its neighbours, then against the nearer edge
        others = sorted((o for k, o in xs.items() if k != kind), key=lambda o: abs(o - x))
        between = [Label(kind, text, o + (4 if o < x else -4), y, "start" if o < x else "end")
                   for o in others for y in rows]  # the nearest neighbour first, in any row
        edge = ((frame.right - 2, "end") if x > frame.middle_x else (frame.left + 4, "start"))
        placed.append(first(between, [Label(kind, text, edge[0], y, edge[1]) for y in rows],
                            own=beside))
    return placed


# Every measured curve gets its own marker: a shape and a colour (CSS class measured-N) that
# change together, so curves stay apart in grey print and for colour-blind readers.
MARKER_SHAPES = ("square", "diamond", "circle", "triangle", "triangle-down", "plus")
MARKER_COLOURS = 6  # .measured-0 ... .measured-5 in static/specscope.css


def marker_style(index: int) -> tuple[str, int]:
    """The ``index``-th curve's (shape, colour): distinct for the first 36 curves."""
    n = len(MARKER_SHAPES)
    return MARKER_SHAPES[index % n], (index + index // n) % MARKER_COLOURS


def marker_path(shape: str, x: float, y: float, r: float = 4.5) -> str:
    """An SVG path ``d`` for a marker of ``shape`` centred on (x, y), about 2r across."""
    if shape == "square":
        return f"M{x - r:.1f},{y - r:.1f}h{2 * r:.1f}v{2 * r:.1f}h{-2 * r:.1f}Z"
    if shape == "diamond":
        d = r * 1.35
        return f"M{x:.1f},{y - d:.1f}L{x + d:.1f},{y:.1f}L{x:.1f},{y + d:.1f}L{x - d:.1f},{y:.1f}Z"
    if shape == "circle":
        return (f"M{x - r:.1f},{y:.1f}a{r:.1f},{r:.1f} 0 1,0 {2 * r:.1f},0"
                f"a{r:.1f},{r:.1f} 0 1,0 {-2 * r:.1f},0Z")
    if shape in ("triangle", "triangle-down"):
        s = 1 if shape == "triangle" else -1
        return (f"M{x:.1f},{y - s * 1.3 * r:.1f}L{x + 1.2 * r:.1f},{y + s * 0.9 * r:.1f}"
                f"L{x - 1.2 * r:.1f},{y + s * 0.9 * r:.1f}Z")
    if shape == "plus":
        a, w = r * 1.25, r * 0.45
        return (f"M{x - w:.1f},{y - a:.1f}h{2 * w:.1f}v{a - w:.1f}h{a - w:.1f}v{2 * w:.1f}"
                f"h{w - a:.1f}v{a - w:.1f}h{-2 * w:.1f}v{w - a:.1f}h{w - a:.1f}v{-2 * w:.1f}"
                f"h{a - w:.1f}Z")
    raise ValueError(f"no marker shape {shape!r}")


@dataclass(frozen=True)
class MeasuredMarker(Marker):
    d: str  # the marker's SVG path


@dataclass(frozen=True)
class MeasuredSeries:
    label: str
    method: str
    points: list[MeasuredMarker]
    policy: str | None = None
    shape: str = "square"
    colour: int = 0
    key: str = ""  # the same marker, centred on (0, 0), for the legend

    @property
    def name(self) -> str:
        """What the legend calls it: the policy when the curve has one, else its label."""
        return self.policy or self.label


@dataclass(frozen=True)
class BatchChart(Frame):
    """S(B) against B on a log axis, with 1x, break-even, ridge, current B and measurements."""

    path: str
    x_ticks: list[Tick]  # Tick.y holds the x position here
    y_ticks: list[Tick]
    one_y: float
    current: Marker
    break_even_x: float | None
    ridge_x: float | None
    measured: list[MeasuredSeries]
    no_fit_x: float | None  # batches right of this do not fit in memory (None: all fit)
    max_batch: int | None
    labels: list[Label]


def batch_chart(s: Setting, fig: Roofline, measured: list[MeasuredCurve], width: int = 440,
                height: int = 280, sp: SectionPlan | None = None) -> BatchChart:
    """The same frame and text sizes as the slider model's chart (app.charts). With the
    plan ``sp``: its speedup at each batch (the best k there), its current point and the
    batch from which it stops speculating; else the slider's fixed k."""
    left, right, top, bottom = 60, width - 14, 18, height - 48
    samples = [2 ** (i / 8) for i in range(81)]  # 1..1024, eight points an octave
    values = ([sp.speedups[round(b)] for b in samples] if sp is not None
              else [speedup_at(s, b) for b in samples])
    shown = [p.speedup for c in measured for p in c.points if 1 <= p.batch <= BATCH_MAX]
    peak = max([*values, *shown, 1.0])
    step = nice_step(peak * 1.1)
    y_max = step * math.ceil(peak * 1.1 / step)

    def x_of(batch: float) -> float:
        return left + math.log2(batch) / math.log2(BATCH_MAX) * (right - left)

    def y_of(speedup: float) -> float:
        return bottom - min(speedup, y_max) / y_max * (bottom - top)

    path = "M" + " L".join(f"{x_of(b):.1f},{y_of(v):.1f}" for b, v in zip(samples, values,
                                                                             strict=True))
    x_ticks = [Tick(2**i, x_of(2**i), f"{2**i}") for i in range(0, 11, 2)]  # 1, 4, ..., 1024
    y_ticks = [Tick(i * step, y_of(i * step), f"{i * step:g}×")
               for i in range(int(round(y_max / step)) + 1)]
    series = []
    for index, c in enumerate(measured):
        shape, colour = marker_style(index)
        series.append(MeasuredSeries(c.label, c.method, [
            MeasuredMarker(x_of(p.batch), y_of(p.speedup), _point_label(p),
                           marker_path(shape, x_of(p.batch), y_of(p.speedup)))
            for p in c.points if 1 <= p.batch <= BATCH_MAX], c.policy, shape, colour,
            marker_path(shape, 0.0, 0.0)))
    be = fig.break_even_batch if sp is None else sp.off_from
    most = fig.max_batch_that_fits
    no_fit_x = left if most is None else x_of(most) if most < BATCH_MAX else None
    here = fig.speedup if sp is None else sp.speedups[fig.batch]
    current = Marker(x_of(fig.batch), y_of(here), f"B = {fig.batch}: {here:.2f}×")
    be_x = x_of(be) if be is not None else None
    ridge_x = x_of(fig.ridge_batch) if 1 <= fig.ridge_batch <= BATCH_MAX else None
    frame = Frame(width, height, left, right, top, bottom)
    lines = [(kind, text, x) for kind, text, x in (
        ("ridge", "ridge", ridge_x),
        ("break-even", f"break-even {be}" if sp is None else f"k = 0 from {be}", be_x),
        ("memory", "does not fit" if most is None else f"memory limit {most}", no_fit_x))
        if x is not None]
    labels = place_labels(frame, lines, (f"B = {fig.batch}", current.x, current.y))
    return BatchChart(
        width, height, left, right, top, bottom, path, x_ticks, y_ticks, y_of(1.0), current,
        be_x, ridge_x, series, no_fit_x, most, labels)


# ---- the section -------------------------------------------------------------------------------


def _more_gpus(s: Setting) -> tuple[int, int] | None:
    """The fewest GPUs (2, 4 or 8, more than ``s.gpus``) that hold the pair at this context,
    and the largest batch they hold."""
    for gpus in (2, 4, 8):
        if gpus > s.gpus:
            most = max_batch_that_fits(replace(s, gpus=gpus))
            if most is not None:
                return gpus, most
    return None


def memory_headline(s: Setting, fig: Roofline, state: RooflineState) -> str:
    """Said plainly when the weights and KV cache do not fit; empty when they do."""
    if fig.fits:
        return ""
    hw = s.hardware.label
    alone = max_batch_that_fits(replace(s, draft=s.target), with_draft=False) is None
    what = (f"{s.target.label} in {state.dtype}" if alone and fig.max_batch_that_fits is None
            else f"{s.target.label} with {s.draft.label} in {state.dtype}")
    needs = f"{fig.memory_gb_per_gpu:.1f} GB a GPU against {fig.memory_gb_available:.1f} GB usable"
    if fig.max_batch_that_fits is not None:
        return (f"At context {state.context}, {what} does not fit at batch {fig.batch} on "
                f"{devices(state.gpus, hw)} ({needs}): it fits up to batch "
                f"{fig.max_batch_that_fits}. The figures below assume memory it does not have.")
    first = f"{what} does not fit on {devices(state.gpus, hw)} at context {state.context} ({needs})"
    more = _more_gpus(s)
    if more is None:
        return f"{first}, nor on 8. The figures below assume memory it does not have."
    return (f"{first}; on {more[0]} × {hw} at context {state.context} it fits up to batch "
            f"{more[1]}. The figures below assume memory it does not have.")


def batch_title(s: Setting, fig: Roofline, sp: SectionPlan | None) -> str:
    """The batch section in a line, for a link's preview: the hardware, the models, where
    speculation pays and the k at the link's batch (the slider's k when it is fixed)."""
    where = (f"{s.target.label} / {s.draft.label} on {devices(s.gpus, s.hardware.label)}, "
             f"batch {fig.batch}")
    if sp is None:
        return f"{where}: {fig.speedup:.2f}× with k = {s.k}"
    k = sp.k_at(fig.batch)
    if sp.pays_to is None:
        return f"{where}: speculation does not pay"
    band = ("pays at every batch that fits" if sp.largest is not None
            and sp.pays_to >= sp.largest else f"pays to batch {sp.pays_to}")
    return f"{where}: {sp.speedups[fig.batch]:.2f}× with k = {k}; speculation {band}"


def default_section(state: RooflineState) -> bool:
    """Whether ``state`` is the batch section as a link without its inputs opens it."""
    return state == DEFAULT_STATE


def headline(s: Setting, fig: Roofline, state: RooflineState,
             sp: SectionPlan | None = None) -> str:
    """The speedup at this batch, at the k it names, and where it stops paying (the plan's
    k and break-even, unless the slider's k is fixed), then how far memory goes."""
    most = fig.max_batch_that_fits
    room = "" if most is None else (
        f" On {devices(state.gpus, s.hardware.label)} at context {state.context} it fits up to "
        f"batch {most}{' or more' if most >= FIT_SEARCH_MAX else ''}.")
    speed = _speed_headline(s, fig, state) if sp is None else _plan_headline(s, fig, state, sp)
    return speed + room


def _plan_headline(s: Setting, fig: Roofline, state: RooflineState, sp: SectionPlan) -> str:
    where = f"At batch {fig.batch} on {devices(state.gpus, s.hardware.label)}"
    k, speed = sp.k_at(fig.batch), sp.speedups[fig.batch]
    off, most = sp.off_from, fig.max_batch_that_fits
    memory_first = most is not None and most < BATCH_MAX and (off is None or off > most)
    if k > 0:
        first = (f"{where}, the plan speculates k = {k} with {s.draft.label}: "
                 f"{s.target.label} runs {speed:.2f}× ")
        first += ("faster per token" if speed > 1 else
                  "plain decoding's throughput; no k pays here, but inside the schedule a "
                  "k = 0 range would cost more (see the plan's verdict)")
        if sp.pays_to is not None and sp.pays_end == "memory":
            return (f"{first}; speculation pays at every batch where the draft fits beside "
                    f"the target, up to {sp.pays_to} (the plan's verdict below).")
        if sp.pays_to is not None and sp.largest is not None and sp.pays_to < sp.largest:
            return (f"{first}; speculation pays up to batch {sp.pays_to} and costs from "
                    f"{sp.pays_to + 1} on (the plan's verdict below).")
        if memory_first:
            return f"{first}, and it pays at every batch that fits."
        if off is None:
            return f"{first}, and at every batch up to {BATCH_MAX}."
        return f"{first}; from batch {off} on the plan does not speculate (k = 0)."
    best, best_speed = sp.best_speculating_k(s, fig.batch)
    first = (f"{where}, the plan does not speculate (k = 0): no k from 1 to {sp.k_max} pays "
             f"for {s.target.label} with {s.draft.label} here (the best, k = {best}, gives "
             f"{best_speed:.2f}× plain decoding)")
    if off is not None and off > 1:
        return f"{first}; it speculates below batch {off}."
    return f"{first}, nor at any batch here." if off == 1 else f"{first}."


def _speed_headline(s: Setting, fig: Roofline, state: RooflineState) -> str:
    where = f"At batch {fig.batch} on {devices(state.gpus, s.hardware.label)}"
    be, most = fig.break_even_batch, fig.max_batch_that_fits
    memory_first = most is not None and most < BATCH_MAX and (be is None or be > most)
    if fig.speedup > 1:
        first = (f"{where}, speculating k = {s.k} (the slider's) with {s.draft.label} makes "
                 f"{s.target.label} {fig.speedup:.2f}× faster per token")
        if memory_first:
            return f"{first}, and it pays at every batch that fits."
        if be is None:
            return f"{first}, and it pays at every batch up to {BATCH_MAX}."
        return f"{first}; from batch {be} on it costs throughput."
    first = (f"{where}, speculating k = {s.k} (the slider's) with {s.draft.label} costs "
             f"{s.target.label} throughput: {fig.speedup:.2f}× plain decoding")
    if be == 1:
        return f"{first}, and it does not pay at any batch here."
    return f"{first}; it pays only below batch {be}."


def lookup_line(fig: Roofline, lookup_speedup: float, pi: float) -> str:
    """Prompt lookup with the same target: no draft passes to pay, so a later break-even;
    no further than memory goes (the target alone holds more sequences than with a draft, but
    the page's limit is the pair's)."""
    be, most = fig.lookup_break_even_batch, fig.max_batch_that_fits
    memory_first = most is not None and most < BATCH_MAX and (be is None or be > most)
    where = ("it does not pay at any batch here" if be == 1
             else "it pays at every batch that fits" if memory_first
             else f"from batch {be} on it costs throughput" if be is not None
             else f"it pays at every batch up to {BATCH_MAX}")
    later = ("" if be is None or fig.break_even_batch is None or be == fig.break_even_batch
             else f", {be / fig.break_even_batch:.1f}× the draft model's batch")
    return (f"Prompt lookup (no draft passes; a proposal in π = {pi:.2f} of cycles) gives "
            f"{lookup_speedup:.2f}× at batch {fig.batch}: {where}{later}.")


def capacity_line(fig: Roofline, state: RooflineState) -> str:
    """How many sequences fit, and how many fewer because of the draft."""
    with_draft, alone = fig.max_batch_that_fits, fig.max_batch_without_draft
    if alone is None:
        return "the target alone does not fit"
    if with_draft is None:
        return f"none; without the draft {alone} would"
    fewer = alone - with_draft
    limit = "" if with_draft < FIT_SEARCH_MAX else " or more"
    return (f"up to {with_draft}{limit}; the draft's weights and KV cache cost {fewer} "
            f"sequence{'' if fewer == 1 else 's'} at context {state.context}")


def where(s: Setting, state: RooflineState) -> str:
    """The setting the section's costs belong to, in words (the slider model's notice)."""
    return (f"{devices(state.gpus, s.hardware.label)}, {s.target.label} with {s.draft.label}, "
            f"{state.dtype}, context {state.context}")


def handoff(s: Setting, fig: Roofline, state: RooflineState, slider: PageState) -> PageState:
    """The slider model holding this batch's costs: c(B) in the c slider (at its step), v(B, k)
    for every k, and the plain step t_p(B, 1) + o_pass(B) as the step time (c and v are in
    such steps).

    The c slider rounds c(B) to 0.01 (and stops at 1); ``k (c(B) - c)`` is added to v(k) so
    every cycle costs ``k c(B) + v(B, k)`` target steps, exactly the section's."""
    c = float(SLIDERS["c"].setting(fig.c))
    v_by_k = tuple(costs(s, fig.batch, k)[1] + k * (fig.c - c) for k in range(1, CURVE_MAX_K + 1))
    held = HeldCosts(v_by_k, fig.batch, where(s, state))
    return replace(slider, c=c, v=float(SLIDERS["v"].setting(v_by_k[slider.k - 1])),
                   step_ms=float(f"{fig.t_step_ms:.9g}"), held=held)


def _point_label(p: MeasuredPoint) -> str:
    text = f"B = {p.batch}: {p.speedup:.2f}×"
    if p.tok_s_spec is not None and p.tok_s_base is not None:
        text += f" ({p.tok_s_spec:.0f} against {p.tok_s_base:.0f} tokens/s off)"
    return text


def _others(query: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    """The link's parameters that neither the slider model nor this section own."""
    own = set(SLIDERS) | set(NUMBERS) | set(CHOICES) | set(OLD_NAMES) | {
        "vk", "vk_batch", "vk_on", "pass_overhead_ms", "pass_row_overhead_us"}
    return [(key, value) for key, value in query if key not in own]


def eagle_c(s: Setting, batch: int) -> list[tuple[str, str, float]]:
    """(short name, full name, c(B)) of each EAGLE head preset of the target, from the cost
    model (one decoder layer, ``fc`` and the LM head; a one-layer KV cache), in plain steps
    with its own launch (one layer), as the draft model's c(B) beside it."""
    step, launch = step_s(s, batch), launch_s(s.overheads, 1)
    return [("EAGLE-3 head" if head.fc_inputs == 3 else "EAGLE head", head.label,
             (eagle_draft_pass(s, head, batch).seconds + launch) / step)
            for head in eagle_heads_of(s.target)]


def section_context(query: Sequence[tuple[str, str]], state: RooflineState, notices: list[str],
                    slider: PageState, curves: list[MeasuredCurve], problems: list[str],
                    planning: tuple[Sequence[Domain], int, K0Price | None] | None = None,
                    machine_costs: Path | None = None) -> dict:
    """What the batch-size section shows for the parsed ``state`` (the page's ``query`` gives
    the rest of the "use these costs" link). ``planning`` (the plan's domains, k_max and
    price of a k = 0 range): the section follows the plan's k unless ``batch_k`` fixes the
    slider's."""
    s = replace(setting_of(state, curves, machine_costs), alpha=slider.alpha, k=slider.k)
    sp = None
    if planning is not None and state.batch_k == "plan":
        sp = section_plan(s, *planning)
        k_here = sp.k_at(state.batch) or sp.best_speculating_k(s, state.batch)[0]
        s = replace(s, k=k_here)
    fig = roofline(s, state.batch)
    unset = replace(state, **dict.fromkeys(OVERHEAD_NUMBERS))
    base = s.overheads if unset == state else setting_of(unset, curves, machine_costs).overheads
    shown = [c for c in curves if c.pair in (None, state.models)]
    # Prompt lookup verifying with the same target, at the slider model's share pi.
    lookup_s = lookup_speedup_at(s, state.batch, slider.pi)
    use_costs = "&".join([handoff(s, fig, state, slider).query(),
                          urlencode(state.items() + _others(query))])
    return {
        "rl": fig,
        "rl_setting": s,
        "rl_notices": notices + problems,
        "rl_headline": headline(s, fig, state, sp),
        "rl_plan": sp,
        # short: the figures' labels do not wrap on a wide screen
        "rl_k_words": (f"k = {s.k} (slider)" if sp is None else
                       f"k = {s.k} (plan)" if sp.k_at(state.batch) else
                       f"k = {s.k} (best; plan: 0)"),
        "rl_memory_headline": memory_headline(s, fig, state),
        "rl_capacity": capacity_line(fig, state),
        "rl_eagle": eagle_c(s, state.batch),
        "rl_lookup_speedup": lookup_s,
        "rl_lookup_pi": slider.pi,
        "rl_lookup_line": lookup_line(fig, lookup_s, slider.pi),
        "rl_chart": batch_chart(s, fig, shown, sp=sp),
        "rl_measured": shown,
        "rl_disagreements": disagreements(s, shown, BATCH_MAX),
        "rl_use_costs": use_costs,
        "rl_clamped": [f"{name}(B) = {value:.2f} is past the {name} slider's "
                       f"{fmt(SLIDERS[name].maximum)}: the slider shows "
                       f"{fmt(SLIDERS[name].maximum)} and the model keeps the section's cost"
                       for name, value in (("c", fig.c), ("v", fig.v))
                       if value > SLIDERS[name].maximum],
        "rl_numbers": NUMBERS,
        "rl_overhead_numbers": OVERHEAD_NUMBERS,
        # the fitted default of each overhead input (its placeholder), in the input's unit
        "rl_overhead_defaults": overhead_inputs(base),
        "rl_overheads": s.overheads,
        "rl_interval": default_intervals()["speedup"],
        "rl_choices": {"hardware": {k: h.label for k, h in HARDWARE.items()},
                       "models": {k: p.label for k, p in PAIRS.items()},
                       "dtype": {d: d for d in DTYPES},
                       "kv_dtype": {d: "auto (bf16; fp32 beside fp32)" if d == "auto" else d
                                    for d in CHOICES["kv_dtype"][1]},
                       "draft_placement": DRAFT_PLACES,
                       "engine": engines.LABELS,
                       "batch_k": {"plan": BATCH_K["plan"],
                                   "slider": f"{BATCH_K['slider']} (k = {slider.k})"}},
        "rl_slider_batches": SLIDER_BATCHES,
    }
