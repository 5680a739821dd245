"""The pictures of a probe's result: alpha by domain, and alpha against temperature."""

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
    label_y: float


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


def alpha_by_domain_chart(result: ProbeResult, width: int = 560, height: int = 250) -> AlphaChart:
    """Counted alpha per domain, one bar per temperature, with its 95% interval."""
    left, right, top, bottom = 40, width - 10, 12, height - 46
    rows = _with_alpha(result)
    domains = list(dict.fromkeys(r.domain for r in rows))
    temps = sorted({r.temperature for r in rows})
    slot = (right - left) / max(len(domains), 1)
    bar = slot * 0.8 / max(len(temps), 1)
    bars = []
    for r in rows:
        d, t = domains.index(r.domain), temps.index(r.temperature)
        x = left + d * slot + slot * 0.1 + t * bar
        low, high = r.alpha_counted_ci
        bars.append(Whisker(f"{r.domain}, T = {r.temperature:g}", r.alpha_counted, low, high, x,
                            _y(r.alpha_counted, top, bottom), _y(low, top, bottom),
                            _y(high, top, bottom), bar * 0.85, t))
    groups = [Group(d, left + (i + 0.5) * slot) for i, d in enumerate(domains)]
    return AlphaChart(width, height, left, right, top, bottom, _ticks(top, bottom), bars, groups,
                      [], [])


def alpha_vs_temperature_chart(
    result: ProbeResult, width: int = 560, height: int = 250
) -> AlphaChart:
    """Counted alpha against temperature, one line per domain, intervals as whiskers."""
    left, right, top, bottom = 40, width - 110, 12, height - 34
    measured = _with_alpha(result)
    temps = sorted({r.temperature for r in measured}) or [0.0]
    span = (temps[-1] - temps[0]) or 1.0

    def x_of(t: float) -> float:
        if len(temps) == 1:
            return (left + right) / 2
        return left + (t - temps[0]) / span * (right - left)

    series = []
    for i, d in enumerate(dict.fromkeys(r.domain for r in measured)):
        rows = sorted((r for r in measured if r.domain == d), key=lambda r: r.temperature)
        points = [Whisker(f"{d}, T = {r.temperature:g}", r.alpha_counted,
                          r.alpha_counted_ci[0], r.alpha_counted_ci[1], x_of(r.temperature),
                          _y(r.alpha_counted, top, bottom),
                          _y(r.alpha_counted_ci[0], top, bottom),
                          _y(r.alpha_counted_ci[1], top, bottom), series=i)
                  for r in rows]
        series.append((d, i, points))
    label_ys = spread_labels([points[-1].y + 4 for _, _, points in series], top, bottom + 4)
    lines = [Line(d, i, "M" + " L".join(f"{p.x:.1f},{p.y:.1f}" for p in points), points, y)
             for (d, i, points), y in zip(series, label_ys, strict=True)]
    x_ticks = [(x_of(t), f"{t:g}") for t in temps]
    return AlphaChart(width, height, left, right, top, bottom, _ticks(top, bottom), [], [],
                      lines, x_ticks)


def spread_labels(ys: list[float], top: float, bottom: float, gap: float = 13.0) -> list[float]:
    """The end-of-line labels' heights, moved apart so no two are closer than ``gap`` and
    kept inside ``top..bottom`` where there is room."""
    order = sorted(range(len(ys)), key=lambda i: ys[i])
    placed = [0.0] * len(ys)
    last = top - gap
    for i in order:
        last = placed[i] = max(ys[i], last + gap)
    shift = max(last - bottom, 0.0)  # pushed past the bottom: move the whole stack up
    return [y - shift for y in placed]
