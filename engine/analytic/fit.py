"""Fitting "this machine": the bandwidth and FLOP/s whose roofline best explains forward
passes timed on it (``specscope roofline``). Standard library only."""

from __future__ import annotations

import math
from dataclasses import dataclass

from engine.analytic.passes import Setting, forward_pass
from engine.analytic.presets import Hardware, ModelShape


@dataclass(frozen=True)
class TimedPass:
    """One measured forward pass: ``model`` over ``batch`` x ``tokens`` after ``context``."""

    model: ModelShape
    batch: int
    tokens: int
    context: int
    seconds: float


def fit_hardware(passes: list[TimedPass], dtype: str = "fp32", steps: int = 160,
                 ) -> tuple[float, float]:
    """The bandwidth (bytes/s) and FLOP/s whose roofline best explains ``passes``: least
    squares on log time, over a log grid from 1e7 to 1e15 (then refined tenfold around the
    best cell). Whatever a pass costs beyond bytes and FLOPs (kernel launches, Python) lands
    in a lower bandwidth: the fit says how the machine behaves, not what its datasheet says."""
    counts = []
    for p in passes:
        s = Setting(Hardware("fit", 1.0, {"bf16": 1.0}), p.model, p.model, dtype,
                    context=p.context)
        one = forward_pass(p.model, s, p.batch, p.tokens)
        counts.append((one.bytes, one.flops, math.log(p.seconds)))

    def error(log_bw: float, log_f: float) -> float:
        bw, f = math.exp(log_bw), math.exp(log_f)
        return sum((math.log(max(b / bw, fl / f)) - t) ** 2 for b, fl, t in counts)

    lo, hi = math.log(1e7), math.log(1e15)
    grid = [lo + (hi - lo) * i / steps for i in range(steps + 1)]
    best = min(((error(a, b), a, b) for a in grid for b in grid[::4]), key=lambda e: e[0])
    cell = (hi - lo) / steps * 4
    fine = [cell * (i / 20 - 1) for i in range(41)]
    best = min(((error(best[1] + da, best[2] + db), best[1] + da, best[2] + db)
                for da in fine for db in fine), key=lambda e: e[0])
    return math.exp(best[1]), math.exp(best[2])


@dataclass(frozen=True)
class SerialFit:
    """A machine whose passes take ``launch x layers + bytes / bandwidth + FLOPs / flops``
    (s): the three add, as on a CPU thread running eager ops one after another (each op's
    dispatch, then its reads, then its arithmetic). ``rms``: the relative error of the fit
    over its passes; a term the passes do not show is 0 (its rate infinite)."""

    bandwidth: float
    flops: float
    launch_s_per_layer: float
    rms: float


def fit_serial(passes: list[TimedPass], dtype: str = "fp32") -> SerialFit:
    """The serial machine that best explains ``passes``: least squares on the relative error,
    each of the three terms at 0 or above (every subset of the terms is solved and the best
    non-negative one kept)."""
    if not passes:
        raise ValueError("fitting needs at least one timed pass")
    rows = []
    for p in passes:
        s = Setting(Hardware("fit", 1.0, {"bf16": 1.0}), p.model, p.model, dtype,
                    context=p.context)
        one = forward_pass(p.model, s, p.batch, p.tokens)
        # divided by its time: each pass's relative error counts alike (the target is 1)
        rows.append([p.model.layers / p.seconds, one.bytes / p.seconds, one.flops / p.seconds])
    best: tuple[float, list[float]] | None = None
    for mask in range(1, 8):
        used = [j for j in range(3) if mask >> j & 1]
        coef = _least_squares([[x[j] for j in used] for x in rows], [1.0] * len(rows))
        if coef is None or any(c <= 0 for c in coef):
            continue
        full = [0.0, 0.0, 0.0]
        for j, c in zip(used, coef, strict=True):
            full[j] = c
        error = sum((sum(a * b for a, b in zip(x, full, strict=True)) - 1) ** 2 for x in rows)
        if best is None or error < best[0]:
            best = (error, full)
    if best is None:
        raise ValueError("no non-negative serial fit explains these passes")
    error, (launch, per_byte, per_flop) = best
    return SerialFit(1 / per_byte if per_byte else math.inf,
                     1 / per_flop if per_flop else math.inf, launch,
                     (error / len(rows)) ** 0.5)


def _least_squares(x: list[list[float]], y: list[float]) -> list[float] | None:
    """``argmin |X c - y|`` through the normal equations (Gaussian elimination with partial
    pivoting); None when they are singular."""
    n = len(x[0])
    a = [[sum(r[i] * r[j] for r in x) for j in range(n)]
         + [sum(r[i] * t for r, t in zip(x, y, strict=True))] for i in range(n)]
    for col in range(n):
        pivot = max(range(col, n), key=lambda r: abs(a[r][col]))
        if abs(a[pivot][col]) < 1e-300:
            return None
        a[col], a[pivot] = a[pivot], a[col]
        for r in range(n):
            if r != col:
                f = a[r][col] / a[col][col]
                a[r] = [u - f * v for u, v in zip(a[r], a[col], strict=True)]
    return [a[i][n] / a[i][i] for i in range(n)]
