"""The /validation page: ``specscope validate``'s report (engine.analytic.validate) drawn, one
chart and one table a series, each with its citation, split, errors and, where the model
misses, the reason docs/design.md gives."""

from __future__ import annotations

import functools
from dataclasses import dataclass

from app.charts import BarChart, measured_vs_model
from engine.analytic import published, validate
from engine.analytic.intervals import INVERSE, KINDS, Interval
from engine.analytic.published import Series, Source
from engine.analytic.validate import Report, SeriesResult

SPLIT_WORDS = {"fit": "fitted", "held_out": "held out"}
# The point fields that may tell one point of a series from another, and how a bar names them.
VARYING = (("model", "{}"), ("dtype", "{}"), ("gpus", "{} GPU"), ("batch", "B {}"),
           ("context", "S {}"), ("k", "k {}"))
PLOT_PX, CHAR_PX = 290, 7.5  # the bar chart's plotting width and an axis glyph, in its viewBox


@functools.cache
def report(rates: str = validate.DEFAULT_RATES) -> Report:
    """The report at ``rates`` (the data files ship with the code: computed once)."""
    return validate.run(rates=rates)


@dataclass(frozen=True)
class SeriesView:
    result: SeriesResult
    source: Source
    labels: list[str]  # each point's name under its bar ("1", "2", ... when words are long)
    numbered: bool  # the bars are numbered: the table's first column says which is which
    chart: BarChart
    band: tuple[tuple[float, float], ...] = ()  # each point's 80% interval around the model

    @property
    def split_words(self) -> str:
        return SPLIT_WORDS[self.result.split]

    @property
    def readings(self) -> list[str]:
        return sorted({p.reading for p in self.result.points})

    @property
    def misses(self) -> bool:
        return self.result.misses

    @property
    def inside(self) -> int:
        """Points whose measured value falls inside the model's interval."""
        return sum(lo <= p.measured <= hi for p, (lo, hi) in zip(self.result.points, self.band,
                                                                 strict=True))


def point_labels(series: Series) -> tuple[list[str], bool]:
    """What tells the points apart, short enough to sit under a bar; else (labels too long,
    empty or alike: points that differ in a setting not listed) their numbers."""
    varying = [(name, form) for name, form in VARYING
               if len({str(series.setting(p, name)) for p in series.points}) > 1]
    if len(series.points) == 1:
        varying = [("batch", "B {}")]
    labels = [" ".join(form.format(series.setting(p, name)) for name, form in varying)
              for p in series.points]
    fits = PLOT_PX / len(labels) / CHAR_PX  # characters that fit under one bar
    if all(0 < len(label) <= fits for label in labels) and len(set(labels)) == len(labels):
        return labels, False
    return [str(i + 1) for i in range(len(series.points))], True


def point_bands(result: SeriesResult, bands: dict[str, Interval]) -> tuple:
    """Each point's interval for the measured value around the model's: the interval of its
    kind (speedups; the plain decode speed, inverted for a time), as the page prices it."""
    kind = next((k for k, quantities in KINDS.items() if result.quantity in quantities), None)
    if kind is None or kind not in bands:
        return ()
    band = bands[kind]
    if result.quantity in INVERSE:  # a time: the rate's interval turned over
        return tuple((p.model / band.high, p.model / band.low) for p in result.points)
    return tuple(band.of(p.model) for p in result.points)


def series_view(result: SeriesResult, series: Series, source: Source,
                bands: dict[str, Interval] | None = None) -> SeriesView:
    labels, numbered = point_labels(series)
    chart = measured_vs_model(labels, [p.measured for p in result.points],
                              [p.model for p in result.points], ceiling=None)
    return SeriesView(result, source, labels, numbered, chart,
                      point_bands(result, bands or {}))


def page_context(rates: str = validate.DEFAULT_RATES) -> dict:
    r = report(rates)
    sources = {s.id: s for s in r.sources}
    series = published.all_series(list(r.sources))
    views = [series_view(result, series[result.id], sources[result.source], r.intervals)
             for result in r.series]
    return {
        "report": r,
        "views": views,
        "fitted": [v for v in views if v.result.split == "fit"],
        "held_out": [v for v in views if v.result.split == "held_out"],
        "limit": validate.HELD_OUT_LIMIT,
        "summary": validate.held_out_summary(r),
        "quoted": published.QUOTED,  # the table's short "quoted"; the citation says it in full
        "measured_here": published.MEASURED_HERE,  # "measured here" in the table, likewise
        "rates": rates,
        "rate_choices": sorted(validate.RATES),
    }
