"""A batch of requests started together runs until its slowest row is done: the chance a row
is still live after i cycles, the expected time of the batch (against a simulation of rows
drafting and accepting at random), and the speedup that follows."""

from __future__ import annotations

import math
import random

import pytest

from engine.analytic import static_batch
from engine.analytic.break_even import speedup_at
from engine.analytic.passes import Setting
from engine.analytic.presets import HARDWARE, PAIRS


def test_without_drafts_every_row_takes_exactly_n_cycles():
    assert static_batch.live_after(0.7, 0, 5) == [1.0] * 5


def test_when_every_draft_is_accepted_a_row_takes_n_over_k_plus_one_cycles():
    live = static_batch.live_after(1.0, 3, 10)
    assert live == [1.0] * math.ceil(10 / 4)


def test_one_new_token_takes_one_cycle_whatever_the_drafts():
    assert static_batch.live_after(0.5, 4, 1) == [1.0]


def test_the_mean_cycles_of_one_row_is_the_sum_of_the_live_chances():
    # one cycle adds 1 + Geometric tokens: about N / E[tokens] cycles, a little more (the
    # last cycle's tokens past N are not kept)
    alpha, k, n = 0.6, 4, 200
    tokens = (1 - alpha ** (k + 1)) / (1 - alpha)
    assert sum(static_batch.live_after(alpha, k, n)) == pytest.approx(n / tokens + 0.5, rel=0.02)


def simulate(alpha: float, k: int, n: int, batch: int, cycle, runs: int, rng: random.Random
             ) -> float:
    """Mean time of ``runs`` batches: every live row drafts k tokens, each accepted in turn
    with chance alpha, and gains the accepted ones plus one; a cycle costs cycle(live rows)."""
    total = 0.0
    for _ in range(runs):
        need = [n] * batch
        while any(r > 0 for r in need):
            live = [i for i, r in enumerate(need) if r > 0]
            total += cycle(len(live))
            for i in live:
                accepted = 0
                while accepted < k and rng.random() < alpha:
                    accepted += 1
                need[i] -= accepted + 1
    return total / runs


@pytest.mark.parametrize(("alpha", "k", "batch"), [(0.6, 1, 4), (0.6, 4, 16), (0.8, 3, 64)])
def test_the_expected_time_of_a_batch_matches_a_simulation(alpha, k, batch):
    def cycle(rows: float) -> float:  # any cost that grows with the rows, sub-linearly
        return 1.0 + 0.05 * rows

    rng = random.Random(1234)
    simulated = simulate(alpha, k, 32, batch, cycle, 400, rng)
    expected = static_batch.batch_seconds(cycle, batch, static_batch.live_after(alpha, k, 32))
    assert expected == pytest.approx(simulated, rel=0.02)
    # a lockstep batch (every row the mean cycles, at the full batch's cost) is further off
    lockstep = 32 / ((1 - alpha ** (k + 1)) / (1 - alpha)) * cycle(batch)
    assert abs(lockstep - simulated) > abs(expected - simulated)


def test_a_single_row_pays_no_wait_for_others():
    pair = PAIRS["llama-8b-1b"]
    s = Setting(HARDWARE["h100-sxm"], pair.target, pair.draft, alpha=0.8, k=4, context=512)
    # one row: only the last cycle's tokens past N are lost, so close to the lockstep speedup
    assert static_batch.speedup(s, 1, 512) == pytest.approx(speedup_at(s, 1), rel=0.02)
    # many rows: the batch waits for its slowest
    assert static_batch.speedup(s, 64, 32) < speedup_at(s, 64)


def test_k_zero_is_plain_decoding():
    pair = PAIRS["llama-8b-1b"]
    s = Setting(HARDWARE["h100-sxm"], pair.target, pair.draft, k=0)
    assert static_batch.speedup(s, 8, 32) == 1.0
