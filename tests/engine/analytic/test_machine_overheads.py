""""This machine" from a costs file: a serial machine (a pass's launch, reads and arithmetic
added) fitted to the file's passes, recovered exactly when the passes are one, with the
loop's own time a speculative step; on a serial machine a pass's reads and arithmetic add
where a GPU's roofline takes the larger."""

from __future__ import annotations

import pytest

from engine.analytic import machine_overheads
from engine.analytic.fit import TimedPass, fit_serial
from engine.analytic.passes import Setting, forward_pass
from engine.analytic.presets import HARDWARE, PAIRS, this_machine
from engine.analytic.timed_costs import timed_costs

PAIR = PAIRS["shipped"]
BANDWIDTH, FLOPS, LAUNCH = 8e9, 40e9, 200e-6  # a serial machine the tests time passes on
MACHINE = Setting(this_machine(BANDWIDTH, FLOPS, serial=True), PAIR.target, PAIR.draft,
                  "fp32", context=85)


def seconds(model: str, batch: int, tokens: int) -> float:
    shape = PAIR.target if model == "target" else PAIR.draft
    return forward_pass(shape, MACHINE, batch, tokens).seconds + LAUNCH * shape.layers


def passes() -> list[dict]:
    return [{"model": m, "batch": b, "tokens": t, "median_ms": seconds(m, b, t) * 1e3}
            for b in (1, 4, 16, 64) for m, t in (("target", 1), ("target", 3), ("draft", 1))]


def test_a_serial_machine_adds_a_passs_reads_and_arithmetic():
    gpu_like = Setting(this_machine(BANDWIDTH, FLOPS), PAIR.target, PAIR.draft, "fp32")
    serial = Setting(this_machine(BANDWIDTH, FLOPS, serial=True), PAIR.target, PAIR.draft,
                     "fp32")
    one, two = forward_pass(PAIR.target, gpu_like, 16, 2), forward_pass(PAIR.target, serial, 16, 2)
    assert one.seconds == pytest.approx(max(one.memory_s, one.compute_s))
    assert two.seconds == pytest.approx(two.memory_s + two.compute_s)


def test_the_serial_fit_recovers_the_machine_the_passes_were_timed_on():
    timed = [TimedPass(PAIR.target if p["model"] == "target" else PAIR.draft, p["batch"],
                       p["tokens"], 85, p["median_ms"] / 1e3) for p in passes()]
    fit = fit_serial(timed)
    assert fit.bandwidth == pytest.approx(BANDWIDTH, rel=1e-6)
    assert fit.flops == pytest.approx(FLOPS, rel=1e-6)
    assert fit.launch_s_per_layer == pytest.approx(LAUNCH, rel=1e-6)
    assert fit.rms < 1e-9


def test_a_term_the_passes_do_not_show_is_dropped_not_made_negative():
    free = Setting(this_machine(BANDWIDTH, FLOPS, serial=True), PAIR.target, PAIR.draft, "fp32",
                   context=85)
    timed = [TimedPass(PAIR.target, b, t, 85, forward_pass(PAIR.target, free, b, t).seconds)
             for b in (1, 4, 16, 64) for t in (1, 3)]
    fit = fit_serial(timed)  # no launch in these passes
    assert fit.launch_s_per_layer == 0
    assert fit.bandwidth == pytest.approx(BANDWIDTH, rel=1e-6)


def test_this_machine_is_the_serial_fit_with_the_loops_own_time_a_speculative_step():
    # the loop's own time: 0.4 ms + 20 us a row at k >= 1, exactly; 0.1 ms at k = 0
    loop = [{"batch": b, "k": k, "median_ms": 0.1 if k == 0 else 0.4 + 0.02 * b}
            for b in (1, 4, 16, 64) for k in (0, 1, 2)]
    s = Setting(HARDWARE["this-machine"], PAIR.target, PAIR.draft, "fp32", context=85)
    fit = machine_overheads.loop_overheads(timed_costs(passes(), loop), s)
    assert fit.hardware.serial and fit.hardware.achieved
    assert fit.hardware.bandwidth == pytest.approx(BANDWIDTH, rel=1e-6)
    assert fit.overheads.launch_s_per_layer == pytest.approx(LAUNCH, rel=1e-6)
    assert fit.overheads.spec_fixed_s == pytest.approx(0.4e-3)
    assert fit.overheads.spec_per_row_s == pytest.approx(20e-6)
    assert (fit.spec_rows, fit.pass_rows) == (8, 12)


def test_without_loop_timings_the_speculative_step_costs_nothing_extra_and_says_so():
    s = Setting(HARDWARE["this-machine"], PAIR.target, PAIR.draft, "fp32", context=85)
    fit = machine_overheads.loop_overheads(timed_costs(passes()), s)
    assert fit.overheads.spec_fixed_s == fit.overheads.spec_per_row_s == 0
    assert "no loop timings" in fit.overheads.source
