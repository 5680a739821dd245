"""The pictures of a probe's result: alpha by temperature with a bar per domain, and alpha
against temperature with a line per domain. Colour means the domain in both, named once in
a legend the two charts share (:func:`domain_legend`)."""

from __future__ import annotations

from dataclasses import dataclass

from app.charts import Frame
from engine.measure.probe import ProbeResult, ProbeRow


@dataclass(frozen=True)
class Whisker:
    label: str
    alpha: float
    low: float
    high: float
    x: float
    y: float
    y_low: float
    y_high: float
    width: float = 0.0
    series: int = 0


@dataclass(frozen=True)
class Group:
    label: str
    x: float


@dataclass(frozen=True)
class Line:
    label: str
    series: int
    path: str
    points: list[Whisker]


@dataclass(frozen=True)
class LegendEntry:
    label: str
    series: int


@dataclass(frozen=True)
class AlphaChart(Frame):
    y_ticks: list[tuple[float, str]]
    bars: list[Whisker]
    groups: list[Group]
    lines: list[Line]
    x_ticks: list[tuple[float, str]]


def _y(alpha: float, top: int, bottom: int) -> float:
    return bottom - min(max(alpha, 0.0), 1.0) * (bottom - top)


def _ticks(top: int, bottom: int) -> list[tuple[float, str]]:
    return [(_y(a / 4, top, bottom), f"{a / 4:g}") for a in range(5)]


def _with_alpha(result: ProbeResult) -> list[ProbeRow]:
    """The rows that have a counted alpha to draw (a row without trials has none)."""
    return [r for r in result.rows if r.alpha_counted is not None and r.alpha_counted_ci]


def domains(result: ProbeResult) -> list[str]:
    """The domains drawn, in the order of the table: a domain's colour is its place here."""
    return list(dict.fromkeys(r.domain for r in _with_alpha(result)))


def domain_legend(result: ProbeResult) -> list[LegendEntry]:
    return [LegendEntry(d, i) for i, d in enumerate(domains(result))]


def alpha_bars_chart(result: ProbeResult, width: int = 560, height: int = 240) -> AlphaChart:
    """Counted alpha with its 95% interval: a group of bars per temperature, a bar per
    domain in the domain's colour."""
    left, right, top, bottom = 52, width - 10, 12, height - 40
    rows = _with_alpha(result)
    names = domains(result)
    temps = sorted({r.temperature for r in rows})
    slot = (right - left) / max(len(temps), 1)
    bar = slot * 0.8 / max(len(names), 1)
    bars = []
    for r in rows:
        t, d = temps.index(r.temperature), names.index(r.domain)
        x = left + t * slot + slot * 0.1 + d * bar
        low, high = r.alpha_counted_ci
        bars.append(Whisker(f"{r.domain}, T = {r.temperature:g}", r.alpha_counted, low, high, x,
                            _y(r.alpha_counted, top, bottom), _y(low, top, bottom),
                            _y(high, top, bottom), bar * 0.85, d))
    groups = [Group(f"T = {t:g}", left + (i + 0.5) * slot) for i, t in enumerate(temps)]
    return AlphaChart(width, height, left, right, top, bottom, _ticks(top, bottom), bars, groups,
                      [], [])


def alpha_vs_temperature_chart(
    result: ProbeResult, width: int = 560, height: int = 240
) -> AlphaChart:
    """Counted alpha against temperature, one line per domain in its colour, intervals as
    whiskers."""
    left, right, top, bottom = 52, width - 16, 12, height - 34
    measured = _with_alpha(result)
    temps = sorted({r.temperature for r in measured}) or [0.0]
    span = (temps[-1] - temps[0]) or 1.0

    def x_of(t: float) -> float:
        if len(temps) == 1:
            return (left + right) / 2
        return left + (t - temps[0]) / span * (right - left)

    lines = []
    for i, d in enumerate(domains(result)):
        rows = sorted((r for r in measured if r.domain == d), key=lambda r: r.temperature)
        points = [Whisker(f"{d}, T = {r.temperature:g}", r.alpha_counted,
                          r.alpha_counted_ci[0], r.alpha_counted_ci[1], x_of(r.temperature),
                          _y(r.alpha_counted, top, bottom),
                          _y(r.alpha_counted_ci[0], top, bottom),
                          _y(r.alpha_counted_ci[1], top, bottom), series=i)
                  for r in rows]
        lines.append(Line(d, i, "M" + " L".join(f"{p.x:.1f},{p.y:.1f}" for p in points),
                          points))
    x_ticks = [(x_of(t), f"{t:g}") for t in temps]
    return AlphaChart(width, height, left, right, top, bottom, _ticks(top, bottom), [], [],
                      lines, x_ticks)
