"""Geometry for the server-rendered SVG charts: Python decides every number the page draws."""

from __future__ import annotations

import math
from dataclasses import dataclass

from engine.analytic.theory import Figures


@dataclass(frozen=True)
class Tick:
    value: float
    y: float
    label: str


@dataclass(frozen=True)
class Point:
    k: int
    speedup: float
    x: float
    y: float
    current: bool
    best: bool


@dataclass(frozen=True)
class Frame:
    """An SVG viewBox and the plotting area inside it."""

    width: int
    height: int
    left: int
    right: int
    top: int
    bottom: int

    @property
    def y_title_x(self) -> float:
        """Where the rotated y-axis title sits: left of the tick labels."""
        return self.left - 44

    @property
    def middle_x(self) -> float:
        return (self.left + self.right) / 2

    @property
    def middle_y(self) -> float:
        return (self.top + self.bottom) / 2


@dataclass(frozen=True)
class SpeedupChart(Frame):
    points: list[Point]
    y_ticks: list[Tick]
    break_even_y: float
    path: str

    worth_speculating: bool  # the best k beats 1x; else no k is marked best
    best_at_edge: bool  # the best k is the last k drawn: a longer draft might be better still
    iid_path: str = ""  # the i.i.d. model at the slider's alpha, beside a per-position curve

    @property
    def best_label_y(self) -> float:
        """Above the best point's marker, lifted clear of the 1x line when it would sit on it."""
        y = self.best.y - 28
        return self.break_even_y - 8 if abs(y - self.break_even_y) < 12 else y

    @property
    def break_even_label_y(self) -> float:
        """Above the 1x line, or below it where the curve ends above: never on the curve."""
        curve_ends_above = self.points[-1].y < self.break_even_y
        return self.break_even_y + (14 if curve_ends_above else -5)

    @property
    def current(self) -> Point:
        return next(p for p in self.points if p.current)

    @property
    def best(self) -> Point:
        return next(p for p in self.points if p.best)


def nice_step(span: float, target_ticks: int = 5) -> float:
    """A 1-2-5 step that divides ``span`` into about ``target_ticks`` parts."""
    raw = span / target_ticks
    magnitude = 10 ** math.floor(math.log10(raw))
    for factor in (1, 2, 5, 10):
        if factor * magnitude >= raw:
            return factor * magnitude
    return 10 * magnitude


def speedup_chart(fig: Figures, width: int = 440, height: int = 280) -> SpeedupChart:
    """Speedup against k = 1..16, scaled so the curve and the 1x line are always in view.

    A small viewBox, so its text (sized in the stylesheet) is drawn large on a desktop and
    still readable on a phone; the margins hold the tick labels and the axis titles."""
    left, right, top, bottom = 60, width - 14, 18, height - 48
    peak = max(max(p.speedup for p in [*fig.curve, *(fig.iid_curve or [])]), 1.0)
    step = nice_step(peak * 1.1)
    y_max = step * math.ceil(peak * 1.1 / step)
    n = len(fig.curve)

    def x_of(k: int) -> float:
        return left + (k - 1) * (right - left) / (n - 1)

    def y_of(s: float) -> float:
        return bottom - s / y_max * (bottom - top)

    points = [
        Point(p.k, p.speedup, x_of(p.k), y_of(p.speedup), p.k == fig.k, p.k == fig.best_k)
        for p in fig.curve
    ]
    ticks = [
        Tick(i * step, y_of(i * step), f"{i * step:g}×")
        for i in range(int(round(y_max / step)) + 1)
    ]
    path = "M" + " L".join(f"{p.x:.1f},{p.y:.1f}" for p in points)
    iid_path = ("M" + " L".join(f"{x_of(p.k):.1f},{y_of(p.speedup):.1f}" for p in fig.iid_curve)
                if fig.survival is not None and fig.iid_curve else "")
    return SpeedupChart(width, height, left, right, top, bottom, points, ticks, y_of(1.0), path,
                        fig.worth_speculating, fig.best_at_edge, iid_path)


@dataclass(frozen=True)
class Bar:
    """One category; a share that is None (no data) has no bar, or no dot, and no height."""

    label: str
    measured: float | None
    model: float | None
    x: float
    width: float
    y_measured: float | None
    y_model: float | None


@dataclass(frozen=True)
class BarChart(Frame):
    """Measured shares as bars, the model's prediction as dots joined by a line."""

    bars: list[Bar]
    y_ticks: list[Tick]
    model_path: str


def measured_vs_model(
    labels: list[str], measured: list[float | None], model: list[float | None],
    width: int = 360, height: int = 220, ceiling: float | None = 1.0,
) -> BarChart:
    """Bars of ``measured`` and dots of ``model`` per label, from 0 to a 1-2-5 step above the
    largest value; ``ceiling`` caps the axis (shares stop at 1; None: no cap)."""
    left, right, top, bottom = 62, width - 8, 12, height - 48
    peak = max([x for x in (*measured, *model) if x is not None] + [0.1])
    y_max = nice_step(peak * 1.1, 4) * math.ceil(peak * 1.1 / nice_step(peak * 1.1, 4))
    if ceiling is not None:
        y_max = min(ceiling, y_max)
    step = nice_step(y_max, 4)
    slot = (right - left) / len(labels)

    def y_of(share: float) -> float:
        return bottom - min(share, y_max) / y_max * (bottom - top)

    def y_or_none(share: float | None) -> float | None:
        return None if share is None else y_of(share)

    bars = [
        Bar(label, m, p, left + i * slot + slot * 0.15, slot * 0.7, y_or_none(m), y_or_none(p))
        for i, (label, m, p) in enumerate(zip(labels, measured, model, strict=True))
    ]
    ticks = [Tick(i * step, y_of(i * step), f"{i * step:g}")
             for i in range(int(round(y_max / step)) + 1)]
    dots = [f"{b.x + b.width / 2:.1f},{b.y_model:.1f}" for b in bars if b.y_model is not None]
    path = "M" + " L".join(dots) if dots else ""
    return BarChart(width, height, left, right, top, bottom, bars, ticks, path)


@dataclass(frozen=True)
class TreeNode:
    path: tuple[int, ...]
    label: str  # the rank under its parent, 1-based
    survival: float
    x: float
    y: float
    parent_x: float
    parent_y: float


@dataclass(frozen=True)
class TreeChart:
    width: int
    height: int
    nodes: list[TreeNode]
    root_x: float
    root_y: float


def tree_chart(paths: list[tuple[int, ...]], survival: list[float], column: int = 96,
               row: int = 34) -> TreeChart:
    """A token tree drawn left to right: a column a depth, a row a node in depth-first order
    (each node below its elder siblings' subtrees), every node with its survival."""
    order: list[tuple[int, ...]] = []

    def visit(prefix: tuple[int, ...]) -> None:
        for path in sorted(p for p in paths if p[:-1] == prefix):
            order.append(path)
            visit(path)

    visit(())
    left, top = 30, 22
    y = {(): top}
    for i, path in enumerate(order):
        y[path] = top + i * row
    x = {(): left}
    nodes = []
    by_path = dict(zip(paths, survival, strict=True))
    for path in order:
        x[path] = left + len(path) * column
        nodes.append(TreeNode(path, str(path[-1] + 1), by_path[path], x[path], y[path],
                              x[path[:-1]], y[path[:-1]]))
    width = left + max(len(p) for p in paths) * column + 80
    return TreeChart(width, top + max(len(order) - 1, 0) * row + 22, nodes, left, top)


@dataclass(frozen=True)
class CycleTreeNode:
    text: str
    kind: str  # accepted, rejected or discarded (engine.decoder.events.TreeDraft)
    x: float  # where the token's text starts
    y: float
    edge_x: float  # where the edge from its parent starts
    parent_y: float


@dataclass(frozen=True)
class CycleTreeChart:
    width: int
    height: int
    nodes: list[CycleTreeNode]
    root_y: float


def cycle_tree(tree, column: int = 70, row: int = 17) -> CycleTreeChart:
    """One live cycle's token tree, compact: a column a depth, each depth's nodes stacked in
    node order (siblings by rank), an edge to each node's parent; ``tree`` is a
    :class:`engine.decoder.events.TreeDraft`."""
    nodes, parents = tree.nodes, tree.parents
    left, top = 8, 11
    xy = {0: (left, top)}
    depth_of = {0: 0}
    used: dict[int, int] = {}
    out = []
    for i, (node, parent) in enumerate(zip(nodes, parents, strict=True), 1):
        depth = depth_of[parent] + 1
        depth_of[i] = depth
        xy[i] = (left + 14 + (depth - 1) * column, top + used.get(depth, 0) * row)
        used[depth] = used.get(depth, 0) + 1
        edge_x = xy[parent][0] + (column - 12 if parent else 4)
        out.append(CycleTreeNode(node.text, node.kind, *xy[i], edge_x, xy[parent][1]))
    width = left + 14 + max(used, default=1) * column
    return CycleTreeChart(width, top + max(used.values(), default=1) * row, out, top)
