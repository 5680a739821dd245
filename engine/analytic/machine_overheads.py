""""This machine"'s overheads from a ``specscope costs`` file timed through the decoding loop
(standard library only): what :mod:`engine.analytic.default_overheads` gives "this machine",
and what ``specscope validate`` prices this project's own sweeps with."""

from __future__ import annotations

from dataclasses import dataclass

from engine.analytic.overheads import Overheads, fit_launch, fit_linear_overhead
from engine.analytic.passes import Setting, forward_pass


@dataclass(frozen=True)
class LoopFit:
    """"This machine"'s overheads from a costs file, and whether the pass term could be
    told from the fitted hardware (else it is 0)."""

    overheads: Overheads
    pass_identified: bool
    spec_rows: int
    pass_rows: int


def loop_overheads(timed, s: Setting) -> LoopFit:
    """Overheads from a costs file's timings (``timed``: a
    :class:`engine.analytic.schedule.TimedCosts`) on the hardware of ``s``:

    - the speculative step: ``fixed + per_row B`` fitted to the loop's own time a step at every
      timed batch and ``k >= 1`` (sampling, the rule, bookkeeping; ``loop[(B, k)]``)
    - a pass: a launch time a layer, fitted to each timed pass less its roofline time on
      ``s``'s hardware (target passes over ``T`` tokens, draft steps, each with its own
      model's layers). The hardware was itself fitted to passes like these, so the residuals
      scatter about 0; the term counts as identified only when the fit leaves it above 0 and
      explains the residuals better than no term at all. Otherwise it is 0.
    """
    spec_rows = [(float(b), timed.loop[(b, k)] / 1000) for (b, k) in sorted(timed.loop)
                 if k >= 1]
    spec = fit_linear_overhead(spec_rows) if spec_rows else None
    pass_rows = []
    for (b, tokens), ms in sorted(timed.target.items()):
        pass_rows.append((s.target.layers, 0.0,
                          ms / 1000 - forward_pass(s.target, s, b, tokens).seconds))
    for b, ms in sorted(timed.draft.items()):
        pass_rows.append((s.draft.layers, 0.0,
                          ms / 1000 - forward_pass(s.draft, s, b, 1, s.draft_gpus).seconds))
    per_pass = fit_launch(pass_rows)
    untouched = (sum(r * r for _, _, r in pass_rows) / len(pass_rows)) ** 0.5
    identified = per_pass.launch_s_per_layer > 0 and per_pass.rms < untouched
    launch = per_pass.launch_s_per_layer if identified else 0.0
    spec_fixed, spec_row = (spec.fixed_s, spec.per_row_s) if spec else (0.0, 0.0)
    words = ("the passes' residuals against the fitted roofline" if identified
             else "none identified against the fitted roofline, so 0")
    loop = (f"the loop's own time a speculative step ({len(spec_rows)} batch and k timings)"
            if spec else "no loop timings in the file, so 0")
    return LoopFit(Overheads(launch, 0.0, spec_fixed, spec_row,
                             source=f"a costs file: a pass, {words}; a speculative step, "
                                    f"{loop}"),
                   identified, len(spec_rows), len(pass_rows))
