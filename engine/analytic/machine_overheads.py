""""This machine" from a ``specscope costs`` file timed through the decoding loop (standard
library only): the machine its passes describe and the overheads of its loop. What the page's
and the plan's "this machine" price with, and what ``specscope validate`` prices this
project's own sweeps with."""

from __future__ import annotations

from dataclasses import dataclass, replace

from engine.analytic.fit import TimedPass, fit_serial
from engine.analytic.overheads import Overheads, fit_linear_overhead
from engine.analytic.passes import Setting
from engine.analytic.presets import Hardware, this_machine


@dataclass(frozen=True)
class LoopFit:
    """"This machine" as a costs file describes it: the serial machine fitted to its passes
    (``pass_rms``: the fit's relative error over ``pass_rows`` passes) and the overheads (the
    launch a layer that fit found; the loop's own time a speculative step, fitted over
    ``spec_rows`` timings)."""

    hardware: Hardware
    overheads: Overheads
    spec_rows: int
    pass_rows: int
    pass_rms: float


def loop_overheads(timed, s: Setting) -> LoopFit:
    """"This machine" from a costs file's timings (``timed``: a
    :class:`engine.analytic.timed_costs.TimedCosts`) of the models of ``s`` at its context:

    - a pass: ``launch x layers + bytes / bandwidth + FLOPs / flops``
      (:func:`engine.analytic.fit.fit_serial`): our engine runs eager ops on CPU threads, each
      dispatched, then reading, then computing, so the three add where a GPU's roofline takes
      the larger of reads and arithmetic (on the shipped pair's file the serial form's relative
      error is about half the max form's: docs/design.md, "This machine");
    - the speculative step: ``fixed + per_row B`` fitted to the loop's own time a step at every
      timed batch and ``k >= 1`` (sampling, the rule, bookkeeping; ``loop[(B, k)]``).
    """
    passes = [TimedPass(s.target, b, tokens, s.context, ms / 1000)
              for (b, tokens), ms in sorted(timed.target.items())]
    passes += [TimedPass(s.draft, b, 1, s.context, ms / 1000)
               for b, ms in sorted(timed.draft.items())]
    machine = fit_serial(passes, s.dtype)
    hardware = this_machine(
        machine.bandwidth, machine.flops, serial=True,
        source=f"a costs file's {len(passes)} passes: launch, reads and arithmetic added "
               f"(relative error {machine.rms:.0%})")
    spec_rows = [(float(b), timed.loop[(b, k)] / 1000) for (b, k) in sorted(timed.loop)
                 if k >= 1]
    spec = fit_linear_overhead(spec_rows) if spec_rows else None
    spec_fixed, spec_row = (spec.fixed_s, spec.per_row_s) if spec else (0.0, 0.0)
    loop = (f"the loop's own time a speculative step ({len(spec_rows)} batch and k timings)"
            if spec else "no loop timings in the file, so 0")
    overheads = Overheads(machine.launch_s_per_layer, 0.0, spec_fixed, spec_row,
                          source=f"a costs file: a pass, the launch a layer fitted with its "
                                 f"reads and arithmetic; a speculative step, {loop}")
    return LoopFit(hardware, overheads, len(spec_rows), len(passes), machine.rms)


def machine_setting(s: Setting, fit: LoopFit) -> Setting:
    """``s`` on the fitted machine with its overheads."""
    return replace(s, hardware=fit.hardware, overheads=fit.overheads)
