"""A plan's cost sources: the roofline model's cycle, and a k = 0 overhead measured at a few
batches."""

from __future__ import annotations

from dataclasses import replace

import pytest

from engine.analytic import theory
from engine.analytic.break_even import speedup_at
from engine.analytic.passes import Setting
from engine.analytic.presets import HARDWARE, PAIRS
from engine.analytic.timed_costs import PlanError
from engine.planner.costs import k0_curve, roofline_cycle


def setting(pair: str, hardware: str, **changes) -> Setting:
    p = PAIRS[pair]
    return replace(Setting(HARDWARE[hardware], p.target, p.draft), **changes)


def test_roofline_costs_give_the_roofline_speedup_for_every_k():
    s = setting("llama-8b-1b", "h100-sxm", context=2048)
    cycle = roofline_cycle(s)
    for batch in (1, 7, 64, 300):
        for k in (1, 4, 8):
            assert theory.expected_tokens(0.7, k) / cycle(batch, k) == pytest.approx(
                speedup_at(replace(s, alpha=0.7), batch, k), rel=1e-12)


def test_a_k0_curve_is_linear_between_its_batches_and_held_outside():
    overhead = k0_curve([(189, 0.216), (2, 0.066)])
    assert overhead(1) == overhead(2) == 0.066 and overhead(500) == 0.216
    assert overhead(95) == pytest.approx(0.066 + 0.15 * 93 / 187)
    with pytest.raises(PlanError, match="above -1"):
        k0_curve([(4, -1.0)])
