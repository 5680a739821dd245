"""The overheads a setting starts from, before anyone types one (standard library only).

- A GPU preset: the terms :func:`engine.analytic.validate.fit` finds on the published fit
  series (``measurements/published``), fitted at the same bandwidth and FLOP/s fractions the
  roofline then prices at. The fit's residual is ``measured - roofline``, so the terms belong
  to the fractions they were fitted at: datasheet-rate overheads on an achieved-rate
  roofline would count the same shortfall twice (docs/design.md, "Overheads").
- "This machine": :func:`engine.analytic.machine_overheads.loop_overheads`, from a
  ``specscope costs`` file timed through the decoding loop (with the machine its passes
  describe).

Computed from the data files on first use and cached; nothing is typed in by hand.
"""

from __future__ import annotations

import functools

from engine.analytic import engines, published, validate
from engine.analytic.overheads import NONE, Overheads
from engine.analytic.passes import Setting


@functools.lru_cache(maxsize=64)
def fitted(bw_share: float, flops_share: float,
           engine: str = engines.DEFAULT) -> Overheads:
    """The published fit's overheads for ``engine`` at these fractions
    (:func:`engine.analytic.validate.fit` on every source in ``measurements/published``)."""
    return validate.fit(published.load_all(), (bw_share, flops_share)).overheads(
        engine)


def preset_overheads(s: Setting, engine: str = engines.DEFAULT) -> Overheads:
    """The overheads a hardware preset starts from: the published fit for ``engine`` at
    ``s``'s fractions. Hardware whose figures are measured (``achieved``) has none of its own
    here: "this machine" takes :func:`~engine.analytic.machine_overheads.loop_overheads` from
    a costs file."""
    if s.hardware.achieved:
        return NONE
    return fitted(s.bw_share, s.flops_share, engine)
