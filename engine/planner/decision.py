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
from engine.planner.schedule import Plan

CONFIGURE, MEASURE_FIRST, DO_NOT = "configure", "measure first", "do not configure"


@dataclass(frozen=True)
class Band:
    """Speculation pays at batches ``1..hi`` (the best k at each, against no speculative
    config), most at ``best_batch`` (``best``× with k = ``best_k``); the interval's lower end
    clears 1x at ``sure_lo..sure_hi``, its first run of batches (None: nowhere; a dense
    target's run starts at batch 1, a mixture of experts' may start later, where every
    expert is read anyway). ``largest``: the largest planned batch."""

    hi: int
    best: float
    best_batch: int
    best_k: int
    sure_hi: int | None
    largest: int
    ends: str = "cost"  # why the band stops at hi: "cost", "memory" (no draft fits above) or
    # "plan" (hi is the largest planned batch)
    sure_lo: int | None = None
    lo: int = 1  # a dense target's band starts at batch 1; a mixture of experts' may start later


def paying_band(plan: Plan, interval: Interval) -> Band | None:
    """Where speculation pays: its first run of batches, from the first batch where a k pays
    (1 for a dense target; a mixture of experts' verification reads more experts at a small
    batch, so it may pay only from a larger one) up to the first where none does (None: it
    pays at no batch), read off the plan's best speculating k at each batch."""
    if not plan.ranges:
        return None
    first = next((b for b in range(1, plan.largest_batch + 1)
                  if plan.best_speculating.get(b, (0.0, 0))[0] > 1.0), None)
    if first is None:
        return None
    hi = best = best_batch = best_k = 0
    sure_lo = sure_hi = None
    ends = "plan"
    for batch in range(first, plan.largest_batch + 1):
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
        if speed * interval.low > 1.0 and (sure_hi is None or sure_hi == batch - 1):
            sure_lo = batch if sure_lo is None else sure_lo  # the first run, without a gap
            sure_hi = batch
    if hi == 0:
        return None
    return Band(hi, best, best_batch, best_k, sure_hi, plan.largest_batch, ends, sure_lo, first)


def band_decision(band: Band | None) -> str:
    """The answer without traffic: configure where the interval's lower end clears 1x over a
    run of the batches that pay, measure first where it straddles 1x at every one."""
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
    span = f"{band.lo}–{band.hi}"
    pays = ("Speculation pays" if band.lo == 1 else
            f"Speculation costs at batches 1–{band.lo - 1} (verifying k + 1 tokens a row reads "
            f"more experts than one token does) and pays")
    if band.hi >= band.largest:
        head = (f"{pays} at every batch that fits from {band.lo} to {band.hi} ({at}): {act}."
                if band.lo > 1 else f"{pays} at every batch that fits, {span} ({at}): {act}.")
    elif band.ends == "memory":
        head = (f"{pays} at every batch where the draft fits beside the target, {span} "
                f"({at}); above {band.hi} only the target fits in memory: {act}.")
    else:
        head = (f"{pays} at batches {span} ({at}) and costs from {band.hi + 1} on: {act} if "
                f"your server runs mostly below {band.hi + 1} sequences; give the traffic "
                "(--batch-mix) for one answer.")
    if band.sure_hi is not None and band.sure_lo == band.lo and band.sure_hi >= band.hi:
        return head
    if band.sure_hi is None:
        where = "at every batch"
    elif band.sure_lo == band.lo:
        where = f"above batch {band.sure_hi}"
    else:
        where = f"outside batches {band.sure_lo}–{band.sure_hi}"
    return (f"{head} The held-out interval straddles 1× {where}: measure first, "
            f"`{measure_command(band.best_k)}`.")
