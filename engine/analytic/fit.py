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
