"""Measured speedup-against-batch curves: the JSON file format, and loading a folder of them.

One file holds one curve (docs/api.md, "Measured curves"):

    {"label": "...", "hardware": "...", "target": "...", "draft": "...", "k": 4, "alpha": 0.7,
     "points": [{"batch": 1, "speedup": 1.31, "tok_s_spec": 260.0, "tok_s_base": 198.5}, ...]}

``tok_s_*`` are tokens/s summed over the batch's sequences (null when not measured). Optional:
``pair`` (the roofline pair preset the curve belongs to; without it the curve is shown with
every pair), ``method`` (``"end-to-end"``: B concurrent requests served with and without
speculation; ``"predicted"``: S(B) from measured c(B) and v(B) at the file's alpha),
``context`` (tokens in the KV cache), ``policy`` (how k was chosen: ``"k = 2"``,
``"schedule"``, ...; the page names it in the chart's legend), ``schedule`` (the k a
schedule ran at each batch: ``[[lo, hi, k], ...]``, inclusive batch ranges) and ``fit``
(``{"bandwidth_gb_s", "gflops"}``, the roofline fitted to the measured passes). Unknown keys
are kept out of the way, not refused, so writers may add their own (``specscope roofline``
adds its timing table as ``passes``).

Nothing here imports torch: the web app loads these files too.
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger("specscope")

METHODS = ("end-to-end", "predicted")


class CurveError(ValueError):
    """A measured-curve file that does not follow the format; the message says where."""


@dataclass(frozen=True)
class MeasuredPoint:
    batch: int
    speedup: float
    tok_s_spec: float | None = None
    tok_s_base: float | None = None


@dataclass(frozen=True)
class Fit:
    """The roofline fitted to measured passes: bytes/s and FLOP/s."""

    bandwidth: float
    flops: float


@dataclass(frozen=True)
class MeasuredCurve:
    label: str
    hardware: str
    target: str
    draft: str
    k: int
    alpha: float
    points: tuple[MeasuredPoint, ...]
    pair: str | None = None
    method: str = "end-to-end"
    context: int | None = None
    fit: Fit | None = None
    source: str = ""  # the file it came from
    policy: str | None = None  # how k was chosen ("k = 2", "schedule"); None: one fixed k
    schedule: tuple[tuple[int, int, int], ...] = ()  # (lo, hi, k): a schedule's k by batch

    def k_at(self, batch: int) -> int | None:
        """The k the curve ran at ``batch``: its schedule's there (None outside it), else
        its one ``k``."""
        if not self.schedule:
            return self.k
        return next((k for lo, hi, k in self.schedule if lo <= batch <= hi), None)

    def to_json(self) -> dict:
        data: dict = {
            "label": self.label, "hardware": self.hardware, "target": self.target,
            "draft": self.draft, "k": self.k, "alpha": self.alpha,
            "points": [{"batch": p.batch, "speedup": p.speedup, "tok_s_spec": p.tok_s_spec,
                        "tok_s_base": p.tok_s_base} for p in self.points],
            "method": self.method,
        }
        if self.pair is not None:
            data["pair"] = self.pair
        if self.context is not None:
            data["context"] = self.context
        if self.policy is not None:
            data["policy"] = self.policy
        if self.schedule:
            data["schedule"] = [list(r) for r in self.schedule]
        if self.fit is not None:
            data["fit"] = {"bandwidth_gb_s": self.fit.bandwidth / 1e9,
                           "gflops": self.fit.flops / 1e9}
        return data


def _number(value: object, where: str, *, positive: bool = True, whole: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise CurveError(f"{where} must be a number (got {value!r:.40})")
    if whole and value != int(value):
        raise CurveError(f"{where} must be a whole number (got {value!r})")
    if positive and value <= 0:
        raise CurveError(f"{where} must be above 0 (got {value!r})")
    return value


def _text(data: dict, key: str) -> str:
    value = data.get(key)
    if not isinstance(value, str) or not value.strip():
        raise CurveError(f'"{key}" must be a non-empty string')
    return value


def _optional(data: dict, key: str, where: str) -> float | None:
    value = data.get(key)
    return None if value is None else _number(value, where)


def parse_curve(data: object, source: str = "") -> MeasuredCurve:
    """A :class:`MeasuredCurve` from decoded JSON; :class:`CurveError` names what is wrong."""
    if not isinstance(data, dict):
        raise CurveError("the file must hold one JSON object")
    alpha = _number(data.get("alpha"), '"alpha"', positive=False)
    if not 0 <= alpha <= 1:
        raise CurveError(f'"alpha" must be from 0 to 1 (got {alpha})')
    k = int(_number(data.get("k"), '"k"', whole=True))
    points = data.get("points")
    if not isinstance(points, list) or not points:
        raise CurveError('"points" must be a non-empty list')
    parsed = []
    for i, point in enumerate(points):
        where = f'"points"[{i}]'
        if not isinstance(point, dict):
            raise CurveError(f"{where} must be an object")
        parsed.append(MeasuredPoint(
            batch=int(_number(point.get("batch"), f'{where}."batch"', whole=True)),
            speedup=_number(point.get("speedup"), f'{where}."speedup"'),
            tok_s_spec=_optional(point, "tok_s_spec", f'{where}."tok_s_spec"'),
            tok_s_base=_optional(point, "tok_s_base", f'{where}."tok_s_base"'),
        ))
    method = data.get("method", "end-to-end")
    if method not in METHODS:
        raise CurveError(f'"method" must be one of {", ".join(METHODS)} (got {method!r:.40})')
    pair = data.get("pair")
    if pair is not None and not isinstance(pair, str):
        raise CurveError('"pair" must be a string')
    policy = data.get("policy")
    if policy is not None and (not isinstance(policy, str) or not policy.strip()):
        raise CurveError('"policy" must be a non-empty string')
    context = data.get("context")
    if context is not None:
        context = int(_number(context, '"context"', positive=False, whole=True))
    schedule = _schedule(data.get("schedule", []))
    fit = data.get("fit")
    if fit is not None:
        if not isinstance(fit, dict):
            raise CurveError('"fit" must be an object')
        fit = Fit(_number(fit.get("bandwidth_gb_s"), '"fit"."bandwidth_gb_s"') * 1e9,
                  _number(fit.get("gflops"), '"fit"."gflops"') * 1e9)
    return MeasuredCurve(
        label=_text(data, "label"), hardware=_text(data, "hardware"),
        target=_text(data, "target"), draft=_text(data, "draft"), k=k, alpha=alpha,
        points=tuple(sorted(parsed, key=lambda p: p.batch)), pair=pair, method=method,
        context=context, fit=fit, source=source, policy=policy, schedule=schedule,
    )


def _schedule(raw: object) -> tuple[tuple[int, int, int], ...]:
    """``[[lo, hi, k], ...]`` as whole-number triples with ``1 <= lo <= hi`` and ``k >= 0``."""
    if not isinstance(raw, list):
        raise CurveError('"schedule" must be a list of [lo, hi, k]')
    ranges = []
    for i, r in enumerate(raw):
        if (not isinstance(r, list) or len(r) != 3
                or not all(isinstance(x, int) and not isinstance(x, bool) for x in r)
                or not 1 <= r[0] <= r[1] or r[2] < 0):
            raise CurveError(f'"schedule"[{i}] must be [lo, hi, k]: whole numbers, '
                             "1 <= lo <= hi, k >= 0")
        ranges.append((r[0], r[1], r[2]))
    return tuple(ranges)


def load_curves(folder: Path) -> tuple[list[MeasuredCurve], list[str]]:
    """Every ``*.json`` curve in ``folder`` (by file name), and one line per file skipped.

    A file that cannot be read or does not follow the format is skipped with a logged
    warning; a missing folder holds no curves."""
    curves: list[MeasuredCurve] = []
    problems: list[str] = []
    if not folder.is_dir():
        return curves, problems
    for path in sorted(folder.glob("*.json")):
        try:
            curves.append(parse_curve(json.loads(path.read_text(encoding="utf-8")), path.name))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, CurveError) as error:
            problem = f"{path.name} was skipped: {error}"
            log.warning("measured curve %s", problem)
            problems.append(problem)
    return curves, problems
