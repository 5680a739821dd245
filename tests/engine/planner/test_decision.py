"""The decision from the traffic: a band without it, one answer with it, and the interval
deciding between configure, measure first and do not configure."""

from __future__ import annotations

from engine.analytic.intervals import Interval
from engine.planner import decision, schedule
from engine.planner.decision import CONFIGURE, DO_NOT, MEASURE_FIRST

TIGHT = Interval("speedup", 0.95, 1.05, 40, 32, (0.65, 0.9))
WIDE = Interval("speedup", 0.6, 1.2, 40, 32, (0.65, 0.9))
DOMAINS = schedule.single(0.7)


def cycle(batch: int, k: int) -> float:
    """A cycle whose verification grows with the batch: pays below batch 40 or so."""
    return 0.1 * k + 1 + 0.02 * batch * k


def test_the_band_ends_where_no_k_pays_any_more():
    p = schedule.plan(DOMAINS, cycle, 4, 200)
    band = decision.paying_band(p, TIGHT)
    for batch in range(1, band.hi + 1):
        assert max(schedule.throughput(DOMAINS, cycle, batch, k) for k in range(1, 5)) > 1
    assert max(schedule.throughput(DOMAINS, cycle, band.hi + 1, k) for k in range(1, 5)) <= 1
    assert band.best_batch == 1 and band.best > 1 and band.largest == 200
    words = decision.band_words(band, TIGHT)
    assert words.startswith(f"Speculation pays at batches 1–{band.hi} ")
    assert f"costs from {band.hi + 1} on" in words


def test_the_sure_part_of_the_band_is_where_the_intervals_lower_end_clears_1x():
    p = schedule.plan(DOMAINS, cycle, 4, 200)
    tight = decision.paying_band(p, TIGHT)
    wide = decision.paying_band(p, WIDE)
    assert wide.hi == tight.hi  # the band is the model's; the interval only grades it
    assert wide.sure_hi is None or wide.sure_hi < tight.sure_hi <= tight.hi
    assert "measure first" in decision.band_words(wide, WIDE)


def test_where_no_draft_fits_the_band_ends_for_memory_and_says_so():
    """Above batch 20 only the target fits (no speculating k is a candidate there): the band
    stops at 20 for memory, not because speculation costs."""
    def fits(batch: int, k: int) -> bool:
        return k == 0 or batch <= 20

    p = schedule.plan(DOMAINS, cycle, 4, 200, fits=fits)
    band = decision.paying_band(p, TIGHT)
    assert band.hi == 20 and band.ends == "memory" and band.largest == 200
    words = decision.band_words(band, TIGHT)
    assert "where the draft fits beside the target, 1–20" in words
    assert "above 20 only the target fits in memory" in words and "costs from" not in words
    assert decision.paying_band(schedule.plan(DOMAINS, cycle, 4, 200), TIGHT).ends == "cost"


def test_nothing_pays_no_band():
    def dear(batch: int, k: int) -> float:
        return 10.0 * k

    p = schedule.plan(DOMAINS, dear, 4, 10)
    assert decision.paying_band(p, TIGHT) is None


def test_with_the_traffic_given_the_interval_decides():
    assert decision.weighted_decision(1.8, WIDE) == CONFIGURE  # 1.08-2.16
    assert decision.weighted_decision(1.2, WIDE) == MEASURE_FIRST  # 0.72-1.44
    assert decision.weighted_decision(0.8, WIDE) == DO_NOT  # 0.48-0.96
    assert decision.weighted_decision(1.2, TIGHT) == CONFIGURE


def test_a_band_sure_only_above_some_batch_says_so_and_configures():
    """A mixture of experts gains more as the batch grows: the interval's lower end clears 1x
    only from some batch on; the band is configured and says where it straddles."""
    def rising(batch: int, k: int) -> float:  # pays a little below batch 10, much above
        return (1 + 0.7 * k) * (0.5 if batch >= 10 else 1.2) / 1.4

    p = schedule.plan(DOMAINS, rising, 4, 40)
    band = decision.paying_band(p, WIDE)
    assert (band.lo, band.sure_lo, band.sure_hi, band.hi) == (1, 10, 40, 40)
    assert decision.band_decision(band) == CONFIGURE
    assert "straddles 1× outside batches 10–40" in decision.band_words(band, WIDE)


def test_where_speculation_pays_only_from_a_larger_batch_the_band_starts_there():
    def rising(batch: int, k: int) -> float:  # costs below batch 10, pays above
        return (1 + 0.7 * k) * (0.5 if batch >= 10 else 2.0) / 1.4

    band = decision.paying_band(schedule.plan(DOMAINS, rising, 4, 40), WIDE)
    assert (band.lo, band.hi) == (10, 40)
    words = decision.band_words(band, WIDE)
    assert words.startswith("Speculation costs at batches 1–9 (verifying k + 1 tokens")
    assert "and pays at every batch that fits from 10 to 40" in words
