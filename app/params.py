"""The slider page's state: one GET parameter per control, with ranges and defaults.

The page is forgiving (it clamps or defaults bad values and says what it changed); the JSON API
is strict (422). Both read their ranges from ``SLIDERS`` so they can never disagree.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from app.charts import speedup_chart, tree_chart
from app.saved.titles import slider_title
from engine.analytic import lookup, positions, theory, trees
from engine.analytic.drafters import DRAFTER_WORDS
from engine.analytic.positions import (
    CONDITIONAL,
    SEQUENTIAL,
    SHAPES,
    SURVIVAL,
    Curve,
    CurveError,
)
from engine.analytic.theory import CURVE_MAX_K, Figures, figures
from engine.decoder.events import DEFAULT_SEED
from engine.planner.inputs import Bound

MAX_SEED = 2**31 - 1


@dataclass(frozen=True)
class Slider(Bound):
    """One numeric control: its range, step and default (a :class:`Bound`) are defined here
    and nowhere else (the templates, the query parsing, the API's schema and its messages all
    read them)."""

    widget: str = "range"  # "range" (a slider with its value beside it) or "number"

    def describe_range(self) -> str:
        return f"{self.name} must be {self.allowed()}"

    def allowed(self) -> str:
        """What a value must be, in words: "a whole number from 1 to 16"."""
        kind = "a whole number" if self.integer else "a number"
        return f"{kind} from {fmt(self.minimum)} to {fmt(self.maximum)}"

    def clamp(self, value: float) -> float | int:
        """``value`` moved into the range (and rounded, for a whole-number control)."""
        return _typed(self, min(max(value, self.minimum), self.maximum))

    def show(self, value: float) -> str:
        """The value as an input shows it."""
        return str(int(value)) if self.integer else fmt(value)

    def setting(self, value: float) -> str:
        """A measured ``value`` as this control can take it: clamped, to the step's precision."""
        decimals = max(0, -math.floor(math.log10(self.step)))
        return f"{self.clamp(value):.{decimals}f}"


def fmt(x: float) -> str:
    """A number as the link and the messages write it: ``%g``, but 1000000 not 1e+06."""
    text = f"{x:g}"
    return f"{int(x)}" if "e+" in text and x == int(x) else text


SLIDERS: dict[str, Slider] = {
    s.name: s
    for s in (
        Slider("alpha", "acceptance rate α", 0.0, 1.0, 0.01, 0.70),
        Slider("k", "draft length k", 1, CURVE_MAX_K, 1, 4, integer=True),
        Slider("c", "draft cost c", 0.0, 1.0, 0.01, 0.18),
        Slider("v", "verification cost v", 0.5, 3.0, 0.01, 1.0),
        # From a microsecond to over a quarter of an hour: whatever the batch section produces.
        Slider("step_ms", "target step (ms)", 0.001, 1e6, 0.001, 22.0, widget="number"),
        Slider("tokens", "output length N", 1, 100_000, 1, 500, integer=True, widget="number"),
        Slider("seed", "simulation seed", 0, MAX_SEED, 1, DEFAULT_SEED, integer=True,
               widget="number"),
    )
}


# The slider model's drafter preset. A draft model proposes k tokens every cycle and each draft
# step costs c; prompt lookup proposes in a share pi of cycles and its lookup costs c once a
# cycle (engine.analytic.lookup). The preset sets c (the page's script moves the c slider).
# In the link it is ``preset``: ``drafter`` is the live run's.
PRESET_C = {
    "model": SLIDERS["c"].default,
    # The EAGLE head proposes k every cycle (the draft model's formula); the probe measured its
    # step at 0.22-0.28 target steps on the shipped pair, 0.26 on Scripture at T = 1 (README,
    # "The EAGLE head beside the draft model and prompt lookup"; 0.258 from its multiply-adds).
    "eagle": 0.26,
    # The probe measured the lookup at 0.001-0.003 target steps a cycle on the shipped pair
    # (README, "Prompt lookup against the draft model"): 0.00 at the c slider's step.
    "ngram": 0.0,
    # A Medusa head is one residual block and the shared LM head: 1.11M multiply-adds a token
    # against the shipped target's 7.9M, 0.14 of a step; the probe measures it (README,
    # "Acceptance by position").
    "medusa": 0.14,
}
# Acceptance by position and the draft's cost shape (engine.analytic.positions): the link
# carries the rates as given (``positions``, with ``rates`` saying survival or conditional),
# the shape and, for one pass, its fixed part c0.
SHAPE_SLIDERS: dict[str, Slider] = {
    "c0": Slider("c0", "one pass's fixed cost c₀", 0.0, 1.0, 0.01, 0.05),
}
LOOKUP_SLIDERS: dict[str, Slider] = {
    # 0.25: the probe's share of greedy cycles with a proposal on Scripture (0.24); it ranged
    # 0.01-0.41 over the built-in sets and temperatures.
    "pi": Slider("pi", "cycles with a proposal π", 0.0, 1.0, 0.01, 0.25),
}

HELD_MAX = 1e6  # the largest v(k) a link may carry
HELD_WHERE_CHARS = 160


@dataclass(frozen=True)
class HeldCosts:
    """The batch section's costs, held by the slider model: v for every k (``vk``, k = 1..16)
    at batch ``batch`` on ``where`` (hardware, pair, dtype, context: shown, never parsed).

    A draft step's c(B) goes into the c slider at the slider's step; what the rounding leaves
    out, ``k (c(B) - c)``, is carried in ``v_by_k`` so every cycle costs what the section says."""

    v_by_k: tuple[float, ...]
    batch: int
    where: str

    def items(self) -> list[tuple[str, str]]:
        return [("vk", ",".join(f"{v:.9g}" for v in self.v_by_k)), ("vk_batch", str(self.batch)),
                ("vk_on", self.where)]


@dataclass(frozen=True)
class PageState:
    alpha: float
    k: int
    c: float
    v: float
    step_ms: float
    tokens: int
    seed: int
    held: HeldCosts | None = None
    drafter: str = "model"  # a key of DRAFTER_WORDS; "preset" in the link (the live run's
    # own drafter is "drafter")
    pi: float = LOOKUP_SLIDERS["pi"].default  # prompt lookup only
    positions: tuple[float, ...] | None = None  # acceptance by position, as the link gives it
    rates: str = SURVIVAL  # what ``positions`` are: survival or conditional rates
    shape: str = SEQUENTIAL  # the draft's cost shape
    c0: float = SHAPE_SLIDERS["c0"].default  # one pass's fixed cost
    tree: tuple[tuple[int, ...], ...] | None = None  # a token tree's paths of ranks

    def query(self, **changes: float) -> str:
        values = {name: getattr(self, name) for name in SLIDERS} | changes
        held = self.held.items() if self.held is not None else []
        # The draft model's link is the page's link as it always was: the preset travels with
        # every other drafter (and prompt lookup's pi with it), a curve and a shape with theirs.
        lookup = ([("preset", self.drafter), ("pi", fmt(self.pi))] if self.drafter == "ngram"
                  else [("preset", self.drafter)] if self.drafter != "model" else [])
        if self.positions is not None:
            lookup += [("positions", ",".join(fmt(r) for r in self.positions))]
            lookup += [("rates", self.rates)] if self.rates != SURVIVAL else []
        if self.shape != SEQUENTIAL:
            lookup += [("shape", self.shape), ("c0", fmt(self.c0))]
        if self.tree is not None:
            lookup += [("tree", trees.text(self.tree))]
        return urlencode([(name, fmt(value)) for name, value in values.items()] + held + lookup)

    @property
    def curve(self) -> Curve | None:
        """The per-position curve (checked when the link was read), or None: i.i.d. at α."""
        return None if self.positions is None else Curve.of(list(self.positions), self.rates)

    @property
    def v_by_k(self) -> tuple[float, ...] | None:
        return None if self.held is None else self.held.v_by_k


def _typed(slider: Slider, value: float) -> float | int:
    return int(round(value)) if slider.integer else value


DEFAULT_STATE = PageState(**{name: _typed(s, s.default) for name, s in SLIDERS.items()})


def _short(raw: str) -> str:
    return raw if len(raw) <= 24 else raw[:21] + "..."


def parse_number(raw: str) -> float | None:
    if "_" in raw:  # Python's float() reads "1_0" as 10; nobody writes a number that way
        return None
    try:
        value = float(raw.strip())
    except ValueError:
        return None
    # Infinity (or a digit string too long for a float) is clamped like any big number.
    return None if math.isnan(value) else value


def parse_controls(
    query: Sequence[tuple[str, str]], controls: dict[str, Slider]
) -> tuple[dict[str, float | int], list[str]]:
    """Read ``controls`` from query pairs; never fails.

    Returns the values (defaults where missing) and a notice for each value that was changed.
    """
    notices: list[str] = []
    values: dict[str, float | int] = {}
    for name, slider in controls.items():
        raws = [raw for key, raw in query if key == name]
        values[name] = _typed(slider, slider.default)
        if not raws or raws[0].strip() == "":
            continue
        if len(raws) > 1:
            notices.append(f"{name} was given {len(raws)} times; using the first value.")
        raw = raws[0]
        value = parse_number(raw)
        if value is None:
            notices.append(
                f"{name}={_short(raw)!r} is not a number; using the default {fmt(slider.default)}."
            )
            continue
        clamped = min(max(value, slider.minimum), slider.maximum)
        if clamped != value:
            bound = "maximum" if value > slider.maximum else "minimum"
            notices.append(
                f"{name}={_short(raw)} is outside {fmt(slider.minimum)}–{fmt(slider.maximum)}; "
                f"using the {bound} {fmt(clamped)}."
            )
        elif slider.integer and value != round(value):
            clamped = float(round(value))
            notices.append(f"{name}={_short(raw)} is not a whole number; using {fmt(clamped)}.")
        values[name] = _typed(slider, clamped)
    return values, notices


def parse_held_costs(query: Sequence[tuple[str, str]]) -> tuple[HeldCosts | None, list[str]]:
    """The batch section's held costs from a link (``vk``, ``vk_batch``, ``vk_on``), or None;
    a malformed ``vk`` is dropped with a notice (the slider model then uses one v)."""
    given = {key: raw for key, raw in reversed(list(query)) if key in ("vk", "vk_batch", "vk_on")}
    if not given.get("vk", "").strip():
        return None, []
    parts = given["vk"].split(",")
    values = [parse_number(part) for part in parts]
    batch = parse_number(given.get("vk_batch", "1"))
    problem = None
    if len(values) != CURVE_MAX_K:
        problem = f"it has {len(values)} values, not one for each k from 1 to {CURVE_MAX_K}"
    elif any(v is None or not 0 < v <= HELD_MAX for v in values):
        problem = f"each value must be a number above 0 and at most {fmt(HELD_MAX)}"
    elif batch is None or batch != round(batch) or not 1 <= batch <= 1 << 20:
        problem = "vk_batch is not a batch size"
    if problem:
        return None, [f"vk (the batch section's v for each k) was ignored: {problem}; using "
                      "one v for every k."]
    where = " ".join(given.get("vk_on", "").split())[:HELD_WHERE_CHARS]
    return HeldCosts(tuple(values), int(batch), where), []


def parse_drafter(query: Sequence[tuple[str, str]]) -> tuple[str, list[str]]:
    """The slider model's drafter preset (``preset`` in the link), "model" unless the link
    names another."""
    raws = [raw.strip() for key, raw in query if key == "preset"]
    if not raws or raws[0] in ("", "model"):
        return "model", []
    if raws[0] in DRAFTER_WORDS:
        return raws[0], []
    return "model", [f"preset={_short(raws[0])!r} is not one of "
                     f"{', '.join(DRAFTER_WORDS)}; using the draft model."]


def parse_page_state(query: Sequence[tuple[str, str]]) -> tuple[PageState, list[str]]:
    """The slider page's state from a link, and what had to be changed to read it."""
    values, notices = parse_controls(query, SLIDERS)
    held, held_notices = parse_held_costs(query)
    drafter, drafter_notices = parse_drafter(query)
    lookup, lookup_notices = parse_controls(query, LOOKUP_SLIDERS)
    rates_by_position, rates, shape, position_notices = parse_positions(query)
    pass_cost, shape_notices = parse_controls(query, SHAPE_SLIDERS)
    tree, tree_notices = parse_tree(query)
    return (PageState(**values, held=held, drafter=drafter, pi=float(lookup["pi"]),
                      positions=rates_by_position, rates=rates, shape=shape,
                      c0=float(pass_cost["c0"]), tree=tree),
            notices + held_notices + drafter_notices + lookup_notices + position_notices
            + shape_notices + tree_notices)


def parse_positions(query: Sequence[tuple[str, str]]
                    ) -> tuple[tuple[float, ...] | None, str, str, list[str]]:
    """Acceptance by position from a link: the rates (None: i.i.d. at α), what they are
    (``rates``: survival, the default, or conditional) and the cost shape (``shape``); what
    cannot be read is dropped with a notice."""
    given = {key: raw.strip() for key, raw in reversed(list(query))
             if key in ("positions", "rates", "shape")}
    notices: list[str] = []
    rates = given.get("rates", SURVIVAL) or SURVIVAL
    if rates not in (SURVIVAL, CONDITIONAL):
        notices.append(f"rates={_short(rates)!r} is not {SURVIVAL} or {CONDITIONAL}; reading "
                       f"the rates as {SURVIVAL} rates.")
        rates = SURVIVAL
    shape = given.get("shape", SEQUENTIAL) or SEQUENTIAL
    if shape not in SHAPES:
        notices.append(f"shape={_short(shape)!r} is not one of {', '.join(SHAPES)}; using "
                       f"{SEQUENTIAL}.")
        shape = SEQUENTIAL
    raw = given.get("positions", "")
    if not raw:
        return None, rates, shape, notices
    values = [parse_number(part) for part in raw.replace(" ", ",").split(",") if part.strip()]
    try:
        if any(v is None for v in values):
            raise CurveError("give numbers separated by commas, such as 0.8, 0.6, 0.45")
        Curve.of(values, rates)
    except CurveError as error:
        notices.append(f"positions={_short(raw)!r} was ignored: {error}; using one α at every "
                       "position.")
        return None, rates, shape, notices
    return tuple(values), rates, shape, notices


def parse_tree(query: Sequence[tuple[str, str]]
               ) -> tuple[tuple[tuple[int, ...], ...] | None, list[str]]:
    """A token tree from a link (``tree=0;1;0.0``), or None; a tree that cannot be read is
    dropped with a notice."""
    raw = next((raw.strip() for key, raw in query if key == "tree"), "")
    if not raw:
        return None, []
    try:
        return tuple(trees.parse(raw)), []
    except ValueError as error:
        return None, [f"tree={_short(raw)!r} was ignored: {error}."]


def tree_figures(state: PageState) -> trees.TreeFigures | None:
    """The tree of the link priced on the slider model: acceptance by rank and depth from its
    curve (or one α) by :func:`engine.analytic.trees.rank_model`, the draft a pass or a head
    a level of the cost shape, the verification over the tree's tokens (the batch section's
    v(k) when the model holds it)."""
    if state.tree is None:
        return None
    paths = list(state.tree)
    depth = max(max(len(p) for p in paths), len(paths))
    survival = (state.curve.extended(depth) if state.curve is not None
                else positions.iid(state.alpha, depth))
    acc = trees.rank_model(survival, max(p[-1] for p in paths) + 1)
    return trees.figures(
        paths, acc, lambda levels: positions.draft_cost(levels, state.c, state.shape, state.c0),
        lambda n: theory.v_at(min(n, CURVE_MAX_K), state.v, state.v_by_k))


def page_figures(state: PageState) -> Figures:
    """The slider model's figures for a state, with the batch section's v(k) when it holds it:
    the draft model's (engine.analytic.theory), prompt lookup's (engine.analytic.lookup) or,
    with acceptance by position or a one-pass cost shape, engine.analytic.positions'."""
    if state.positions is not None or state.shape != SEQUENTIAL:
        return positions.figures(state.curve, state.alpha, state.k, state.c, state.v,
                                 state.step_ms, state.tokens, state.v_by_k, state.shape,
                                 state.c0)
    if state.drafter == "ngram":
        return lookup.figures(state.alpha, state.k, state.pi, state.c, state.v, state.step_ms,
                              state.tokens, state.v_by_k)
    return figures(state.alpha, state.k, state.c, state.v, state.step_ms, state.tokens,
                   state.v_by_k)


SIMULATED_CYCLES = 12


def slider_context(state: PageState, notices: list[str]) -> dict[str, Any]:
    """The slider section's template context: its figures, chart, tree, simulated cycles and
    controls (``notices``: what reading its link changed)."""
    fig = page_figures(state)
    tree_fig = tree_figures(state)
    return {
        "state": state,
        "notices": notices,
        "fig": fig,
        "chart": speedup_chart(fig),
        "tree_fig": tree_fig,
        "tree_chart": tree_chart(tree_fig.paths, tree_fig.survival) if tree_fig else None,
        "cycles": _simulated(state),
        # How far the strip's own average may fall from the expected one by chance.
        "strip_spread": _strip_sd(state) / SIMULATED_CYCLES**0.5,
        "sliders": SLIDERS,
        "lookup_sliders": LOOKUP_SLIDERS,
        "shape_sliders": SHAPE_SLIDERS,
        "shapes": positions.SHAPES,
        "slider_drafters": DRAFTER_WORDS,
        "preset_c": PRESET_C,
        "page_title": f"{slider_title(fig)} · specscope",
    }


def _simulated(state: PageState) -> list[list[str]]:
    """The strip of simulated cycles under the slider's figures."""
    if state.curve is not None:
        return positions.simulate_cycles(state.curve, state.k, SIMULATED_CYCLES, state.seed)
    if state.drafter == "ngram":
        return lookup.simulate_cycles(state.alpha, state.k, state.pi, SIMULATED_CYCLES,
                                      state.seed)
    return theory.simulate_cycles(state.alpha, state.k, SIMULATED_CYCLES, state.seed)


def _strip_sd(state: PageState) -> float:
    """The standard deviation of one simulated cycle's accepted drafts."""
    if state.curve is not None:
        return positions.accepted_sd(state.curve, state.k)
    if state.drafter == "ngram":
        return lookup.accepted_sd(state.alpha, state.k, state.pi)
    return theory.accepted_sd(state.alpha, state.k)
