"""The decision from the user's traffic (standard library only).

Speculation pays at small batches and costs at large ones, so without the traffic the answer is
a band: the batches where it pays, cut where it stops. No average over batches is the verdict
unless the user gave the traffic it averages over (a batch mix): then one weighted answer. Either
way the held-out interval of the model's speedups (:mod:`engine.analytic.intervals`) decides:
"configure" only where the interval's lower end beats no speculation, "measure first" where it
straddles 1x, with the command that measures it on the user's own vLLM.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.analytic.intervals import LEVEL, Interval
from engine.analytic.schedule import Plan

CONFIGURE, MEASURE_FIRST, DO_NOT = "configure", "measure first", "do not configure"


@dataclass(frozen=True)
class Band:
    """Speculation pays at batches ``1..hi`` (the best k at each, against no speculative
    config), most at ``best_batch`` (``best``× with k = ``best_k``); the interval's lower end
    clears 1x at ``1..sure_hi`` (None: nowhere). ``largest``: the largest planned batch."""

    hi: int
    best: float
    best_batch: int
    best_k: int
    sure_hi: int | None
    largest: int
    ends: str = "cost"  # why the band stops at hi: "cost", "memory" (no draft fits above) or
    # "plan" (hi is the largest planned batch)


def paying_band(plan: Plan, interval: Interval) -> Band | None:
    """Where speculation pays, from batch 1 up to the first batch where no k does (None: it
    pays not even at batch 1), read off the plan's best speculating k at each batch."""
    if not plan.ranges:
        return None
    hi = best = best_batch = best_k = 0
    sure_hi, sure = None, True
    ends = "plan"
    for batch in range(1, plan.largest_batch + 1):
        if batch not in plan.best_speculating:
            ends = "memory"  # the target alone fits here, with no speculating k beside it
            break
        speed, k = plan.best_speculating[batch]
        if speed <= 1.0:
            ends = "cost"
            break
        hi = batch
        if speed > best:
            best, best_batch, best_k = speed, batch, k
        sure = sure and speed * interval.low > 1.0  # from batch 1 on, without a gap
        if sure:
            sure_hi = batch
    if hi == 0:
        return None
    return Band(hi, best, best_batch, best_k, sure_hi, plan.largest_batch, ends)


def band_decision(band: Band | None) -> str:
    """The answer without traffic: configure where the interval's lower end clears 1x from
    batch 1 on, measure first where it straddles 1x at every batch that pays."""
    if band is None:
        return DO_NOT
    return CONFIGURE if band.sure_hi is not None else MEASURE_FIRST


def weighted_decision(gain: float, interval: Interval) -> str:
    """One answer for a given traffic: the plan's gain over no speculative config and its
    interval."""
    low, high = interval.of(gain)
    if low > 1.0:
        return CONFIGURE
    return DO_NOT if high <= 1.0 else MEASURE_FIRST


def measure_command(k: int) -> str:
    """The command that measures off against k on the user's own vLLM."""
    return (f"specscope sweep --engine vllm --url http://HOST:8000 --policies off,{k} "
            "--costs-out costs.json")


def band_words(band: Band, interval: Interval) -> str:
    """The band answer in a sentence or two."""
    low, high = interval.of(band.best)
    at = f"up to {band.best:.2f}× at batch {band.best_batch} with k = {band.best_k}, " \
         f"{LEVEL:.0%} interval {low:.2f}–{high:.2f}×"
    act = "configure it" if band.sure_hi is not None else "measure first, then configure it"
    if band.hi >= band.largest:
        head = f"Speculation pays at every batch that fits, 1–{band.hi} ({at}): {act}."
    elif band.ends == "memory":
        head = (f"Speculation pays at every batch where the draft fits beside the target, "
                f"1–{band.hi} ({at}); above {band.hi} only the target fits in memory: {act}.")
    else:
        head = (f"Speculation pays at batches 1–{band.hi} ({at}) and costs from "
                f"{band.hi + 1} on: {act} if your server runs mostly below "
                f"{band.hi + 1} sequences; give the traffic (--batch-mix) for one answer.")
    if band.sure_hi is not None and band.sure_hi >= band.hi:
        return head
    where = (f"above batch {band.sure_hi}" if band.sure_hi is not None
             else "at every batch")
    return (f"{head} The held-out interval straddles 1× {where}: measure first, "
            f"`{measure_command(band.best_k)}`.")
