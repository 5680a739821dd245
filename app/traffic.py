"""The "Your traffic" panel: its state in the link, the probe job on the engine queue, and
the pictures of a probe's result and of a vLLM calibration.

A probe runs through the same :class:`app.run_queue.RunManager` as "Run live": one at a time, a
queued place shown, 429 past the bound, cancelled when its client goes away.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from urllib.parse import urlencode

from app.charts import Frame
from app.params import SLIDERS, Slider, parse_controls
from app.run_messages import MessageKind, RunMessage
from app.run_queue import LiveRun, RunStopped
from engine.analytic.theory import CURVE_MAX_K
from engine.decoder.loading import ModelPair
from engine.measure.calibrate import Calibration
from engine.measure.probe import (
    ProbeConfig,
    ProbeResult,
    ProbeRow,
    PromptMeasure,
    fit_prompts,
    plan,
    probe,
    summarize_probe,
)
from engine.measure.prompt_sets import BUILTIN_SETS, Prompt
from engine.measure.vllm_client import VllmClient, VllmError
from engine.measure.vllm_probe import NOT_AVAILABLE, acceptance_warnings, probe_vllm
from engine.settings import Settings

SET_LABELS = {
    "scripture": "Scripture (held out)",
    "jargon": "Jargon File (held out)",
    "modern-english": "plain modern English",
    "python": "Python code",
    "lookup": "restating and editing (prompt lookup's traffic)",
}
TEMPERATURES = (0.0, 0.3, 0.7, 1.0, 1.5)
DEFAULT_SETS = tuple(s for s in BUILTIN_SETS if s != "lookup")  # that one on request
DEFAULT_TEMPERATURES = (0.0, 0.7, 1.0)


ENGINES = {"specscope": "specscope's engine", "vllm": "vLLM (this server's SPECSCOPE_VLLM_URL)"}


def engines(settings: Settings) -> dict[str, str]:
    """The engines a probe can run on here: vLLM only when the server is configured with one."""
    return {name: label for name, label in ENGINES.items()
            if name == "specscope" or settings.vllm_url}


def probe_controls(settings: Settings) -> dict[str, Slider]:
    """The panel's numeric inputs (link names start with ``probe_``)."""
    return {
        s.name: s
        for s in (
            Slider("probe_k", "k", 1, CURVE_MAX_K, 1, 4, integer=True),
            Slider("probe_tokens", "new tokens per prompt", 1, settings.probe_max_new_tokens, 1,
                   min(32, settings.probe_max_new_tokens), integer=True),
            Slider("probe_prompts", "prompts per built-in set", 1, 32, 1, 8, integer=True),
        )
    }


@dataclass(frozen=True)
class TrafficState:
    sets: tuple[str, ...]
    temperatures: tuple[float, ...]
    probe_k: int
    probe_tokens: int
    probe_prompts: int
    engine: str = "specscope"

    def query(self) -> str:
        """This state as the link's query string (an empty ``probe_set`` first, so that no
        set chosen is a state too)."""
        pairs = [("probe_set", "")] + [("probe_set", s) for s in self.sets]
        pairs += [("probe_t", f"{t:g}") for t in self.temperatures]
        pairs += [(name, str(getattr(self, name)))
                  for name in ("probe_k", "probe_tokens", "probe_prompts")]
        if self.engine != "specscope":
            pairs.append(("probe_engine", self.engine))
        return urlencode(pairs)


def parse_traffic_state(
    query: Sequence[tuple[str, str]], settings: Settings
) -> tuple[TrafficState, list[str]]:
    """The panel's state from a link; never fails, says what it changed."""
    values, notices = parse_controls(query, probe_controls(settings))
    # The form always sends an empty probe_set, so that choosing no set is a state too.
    sets = tuple(dict.fromkeys(raw for key, raw in query if key == "probe_set" and raw))
    unknown = [s for s in sets if s not in BUILTIN_SETS]
    if unknown:
        notices.append(f"probe_set {unknown[0][:40]!r} is not a built-in set; "
                       f"choose from {', '.join(BUILTIN_SETS)}.")
    given = any(key == "probe_set" for key, _ in query)
    sets = tuple(s for s in sets if s in BUILTIN_SETS) if given else DEFAULT_SETS
    temps: list[float] = []
    for key, raw in query:
        if key != "probe_t" or not raw.strip():
            continue
        value = _number(raw)
        if value is None or value not in TEMPERATURES:
            notices.append(f"probe_t={raw[:24]!r} is not one of the offered temperatures "
                           f"({', '.join(f'{t:g}' for t in TEMPERATURES)}); left out.")
        elif value not in temps:
            temps.append(value)
    if not temps:
        temps = list(DEFAULT_TEMPERATURES)
    engine = next((raw for key, raw in query if key == "probe_engine"), "specscope")
    if engine not in engines(settings):
        notices.append(f"probe_engine={engine[:24]!r} is not available on this server; "
                       f"the probe uses {ENGINES['specscope']}.")
        engine = "specscope"
    return TrafficState(sets, tuple(sorted(temps)), engine=engine, **values), notices


def _number(raw: str) -> float | None:
    try:
        value = float(raw)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def traffic_context(state: TrafficState, settings: Settings) -> dict:
    """What ``_traffic_panel.html`` needs."""
    return {
        "traffic": state,
        "traffic_controls": probe_controls(settings),
        "traffic_sets": SET_LABELS,
        "traffic_temperatures": TEMPERATURES,
        "traffic_engines": engines(settings),
        "probe_limits": {"prompts": settings.probe_max_prompts,
                         "kb": settings.probe_max_bytes // 1024,
                         "tokens": settings.probe_max_new_tokens},
    }


# ---- the job on the engine queue ----------------------------------------------------------


def probe_job(
    prompts: list[Prompt], config: ProbeConfig, notices: list[str],
    keep: Callable[[ProbeResult, ModelPair], RunMessage] | None = None,
    vllm_url: str | None = None,
) -> Callable[[LiveRun, ModelPair, Callable], None]:
    """What the engine thread runs for one probe: a ``progress`` message per prompt run, then
    one ``probe`` message with the :class:`ProbeResult`, and then ``keep``'s message (where the
    result was saved, or why not). A probe that reaches the time limit reports (and keeps) what
    it measured; one whose client left reports nothing.

    With ``vllm_url`` the prompts go through that vLLM server first (its counters give the
    table), then through our engine, which warns where vLLM accepts far fewer drafts."""

    def job(run: LiveRun, pair: ModelPair, guard: Callable) -> None:
        fitted, cut = fit_prompts(pair, prompts, config)
        runs = len(plan(fitted, config))
        total = runs * (2 if vllm_url else 1)
        done = 0

        def measure(events, engine: str, notes: list[str]) -> ProbeResult:
            nonlocal done
            measures: list[PromptMeasure] = []
            stopped: list[str] = []
            try:
                for m in guard(events):
                    if not isinstance(m, PromptMeasure):
                        continue  # a cycle or a step: the guard may stop the probe between them
                    measures.append(m)
                    done += 1
                    run.post(RunMessage(MessageKind.PROGRESS, progress={
                        "done": done, "total": total, "domain": m.domain,
                        "temperature": m.temperature, "engine": engine}))
            except RunStopped as stop:
                if not str(stop) or not measures:
                    raise
                stopped.append(f"{stop}; the table pools the prompts measured by then.")
            except VllmError as error:
                raise RunStopped(f"the vLLM server: {error}") from None
            return summarize_probe(
                measures, config, engine=engine, target=pair.target_name,
                draft=pair.draft_name or "", runs_planned=runs, notices=notes + stopped)

        ours = probe(pair, fitted, config, steps=True)
        if vllm_url is None:
            result = measure(ours, "specscope", notices + cut)
        else:
            client = VllmClient(vllm_url, timeout_s=60.0)
            ids = [list(pair.tokenizer(p.text).input_ids) for p in fitted]
            result = measure(probe_vllm(client, fitted, ids, config), "vllm",
                             notices + cut + [NOT_AVAILABLE])
            if result.complete:
                result.notices += acceptance_warnings(result, measure(ours, "specscope", []))
        run.post(RunMessage(MessageKind.PROBE, probe=result))
        if keep is not None:
            run.post(keep(result, pair))

    return job


# ---- "Use these numbers" ------------------------------------------------------------------


def use_numbers_query(alpha: float, k: int, c: float | None = None, v: float | None = None,
                      step_ms: float | None = None) -> dict[str, str]:
    """Slider values for a measured row, clamped into the sliders' ranges."""
    formats = {"alpha": "{:.2f}", "k": "{:d}", "c": "{:.2f}", "v": "{:.2f}", "step_ms": "{:.1f}"}
    given = {"alpha": alpha, "k": k, "c": c, "v": v, "step_ms": step_ms}
    values = {}
    for name, value in given.items():
        if value is not None:
            s = SLIDERS[name]
            clamped = min(max(value, s.minimum), s.maximum)
            values[name] = formats[name].format(int(clamped) if s.integer else clamped)
    return values


def row_numbers(row: ProbeRow) -> dict[str, str]:
    return use_numbers_query(row.alpha_counted, row.k, row.c, row.v, row.step_ms)


def href(values: dict[str, str]) -> str:
    return "/?" + urlencode(values)


# ---- charts -------------------------------------------------------------------------------


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


def alpha_by_domain_chart(result: ProbeResult, width: int = 560, height: int = 250) -> AlphaChart:
    """Counted alpha per domain, one bar per temperature, with its 95% interval."""
    left, right, top, bottom = 40, width - 10, 12, height - 46
    domains = list(dict.fromkeys(r.domain for r in result.rows))
    temps = sorted({r.temperature for r in result.rows})
    slot = (right - left) / max(len(domains), 1)
    bar = slot * 0.8 / max(len(temps), 1)
    bars = []
    for r in result.rows:
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
    temps = sorted({r.temperature for r in result.rows})
    span = (temps[-1] - temps[0]) or 1.0

    def x_of(t: float) -> float:
        if len(temps) == 1:
            return (left + right) / 2
        return left + (t - temps[0]) / span * (right - left)

    series = []
    for i, d in enumerate(dict.fromkeys(r.domain for r in result.rows)):
        rows = sorted((r for r in result.rows if r.domain == d), key=lambda r: r.temperature)
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


def calibration_numbers(calibration: Calibration) -> list[dict[str, str]]:
    return [use_numbers_query(r.alpha_counted, r.k) for r in calibration.rows]
