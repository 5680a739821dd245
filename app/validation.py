"""The /validation page: ``specscope validate``'s report (engine.analytic.validate) drawn, one
chart and one table a series, each with its citation, split, errors and, where the model
misses, the reason docs/design.md gives."""

from __future__ import annotations

import functools
from dataclasses import dataclass

from app.charts import BarChart, measured_vs_model
from engine.analytic import published, validate
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

    @property
    def split_words(self) -> str:
        return SPLIT_WORDS[self.result.split]

    @property
    def readings(self) -> list[str]:
        return sorted({p.reading for p in self.result.points})

    @property
    def misses(self) -> bool:
        return self.result.misses


def point_labels(series: Series) -> tuple[list[str], bool]:
    """What tells the points apart, short enough to sit under a bar; else their numbers."""
    varying = [(name, form) for name, form in VARYING
               if len({str(series.setting(p, name)) for p in series.points}) > 1]
    if len(series.points) == 1:
        varying = [("batch", "B {}")]
    labels = [" ".join(form.format(series.setting(p, name)) for name, form in varying)
              for p in series.points]
    fits = PLOT_PX / len(labels) / CHAR_PX  # characters that fit under one bar
    if all(len(label) <= fits for label in labels):
        return labels, False
    return [str(i + 1) for i in range(len(series.points))], True


def series_view(result: SeriesResult, series: Series, source: Source) -> SeriesView:
    labels, numbered = point_labels(series)
    chart = measured_vs_model(labels, [p.measured for p in result.points],
                              [p.model for p in result.points], ceiling=None)
    return SeriesView(result, source, labels, numbered, chart)


def page_context(rates: str = validate.DEFAULT_RATES) -> dict:
    r = report(rates)
    sources = {s.id: s for s in r.sources}
    series = published.all_series(list(r.sources))
    views = [series_view(result, series[result.id], sources[result.source])
             for result in r.series]
    return {
        "report": r,
        "views": views,
        "fitted": [v for v in views if v.result.split == "fit"],
        "held_out": [v for v in views if v.result.split == "held_out"],
        "limit": validate.HELD_OUT_LIMIT,
        "quoted": published.QUOTED,  # the table's short "quoted"; the citation says it in full
        "measured_here": published.MEASURED_HERE,  # "measured here" in the table, likewise
        "rates": rates,
        "rate_choices": sorted(validate.RATES),
    }
