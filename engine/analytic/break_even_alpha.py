"""The break-even alpha: the acceptance rate below which drafting k tokens a cycle loses to
plain decoding at a batch, on measured step costs.

A cycle of k drafts yields ``E_k(alpha) = (1 - alpha^(k+1)) / (1 - alpha)`` tokens per row
(``k + 1`` at alpha = 1) and costs ``cycle(B, k)`` plain decode steps at batch B. Speculation
pays while ``E_k(alpha) > cycle(B, k)``; ``E_k`` rises from 1 (alpha = 0) to ``k + 1``
(alpha = 1), so the break-even alpha is the one root of ``E_k(alpha) = cycle(B, k)`` in
[0, 1]: 0 when the cycle costs no more than a plain step (any alpha pays), none when it
costs ``k + 1`` steps or more (no alpha pays).

The costs are vLLM's own, as ``specscope sweep --engine vllm --costs-out`` writes them
(``{"method": "vllm-steps", "passes": [{model, batch, tokens, median_ms}, ...]}``):

    cycle(B, k) = (k t_draft(B, 1) + t_target(B, k + 1)) / t_target(B, 1)

with every time linear in B between the timed batches, held below the first, and following
the last two timed batches past the last (never below the last time), as the plan reads
them. "Plain decoding" is the target's step over one token: a server with no speculative
config. A k = 0 range of a schedule may cost more than that (vLLM keeps its speculative
machinery running); a costs file that prices it is not read here, so a break-even at such a
batch is the one against no speculative config. Standard library only.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from engine.analytic.theory import expected_tokens
from engine.analytic.timed_costs import PlanError, TimedCosts, timed_costs

BISECTION_STEPS = 60  # 2^-60: far below any alpha a counter can resolve

VLLM_STEPS = "vllm-steps"  # the method of vLLM's costs file (engine.serving.policy_sweep)
VLLM_COSTS_COMMAND = "specscope sweep --engine vllm --policies off,0,2,4 --costs-out FILE"
CostsError = PlanError  # a costs file that does not give the step times this needs; says why


def break_even_alpha(cycle: float, k: int) -> float | None:
    """The alpha in [0, 1] with ``E_k(alpha) = cycle``; 0.0 when ``cycle <= 1`` (every alpha
    pays), None when ``cycle >= k + 1`` (none does)."""
    if k < 1:
        raise ValueError(f"a break-even alpha needs k >= 1 (got k = {k}): k = 0 is off")
    if not math.isfinite(cycle) or cycle <= 0:
        raise ValueError(f"a cycle cost must be a positive number of steps (got {cycle!r})")
    if cycle <= 1.0:
        return 0.0
    if cycle >= k + 1:
        return None
    lo, hi = 0.0, 1.0
    for _ in range(BISECTION_STEPS):
        mid = (lo + hi) / 2
        if expected_tokens(mid, k) < cycle:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def break_even(costs: TimedCosts, batch: int, k: int) -> float | None:
    """The break-even alpha of k at ``batch`` on ``costs`` (see :func:`break_even_alpha`)."""
    return break_even_alpha(costs.cycle(batch, k), k)


def step_costs(data: object) -> TimedCosts:
    """The costs file's timed steps, read as the plan reads them
    (:func:`engine.analytic.timed_costs.timed_costs`); :class:`CostsError` says what is
    missing, or that the file times another engine's steps.

    A file that names its method must be vLLM's (``"vllm-steps"``): the loop's costs
    (``specscope costs``, ``"loop"``) price this project's engine, whose steps cost what
    vLLM's do not, so a break-even from them would be another server's. A file without a
    method (written by hand) is taken as vLLM's."""
    passes = data.get("passes") if isinstance(data, dict) else None
    if not isinstance(passes, list) or not passes:
        raise CostsError('this is not a costs file: it has no "passes" (write one with '
                         f"{VLLM_COSTS_COMMAND})")
    method = data.get("method")
    if method == "loop":
        raise CostsError("this costs file times specscope's own loop (specscope costs, "
                         '"method": "loop"), not a vLLM server\'s steps: the break-even of a '
                         f"vLLM deployment needs vLLM's costs ({VLLM_COSTS_COMMAND})")
    if method is not None and method != VLLM_STEPS:
        raise CostsError(f'this costs file says "method": {str(method)[:40]!r}, not '
                         f'"{VLLM_STEPS}": the break-even of a vLLM deployment needs vLLM\'s '
                         f"step costs ({VLLM_COSTS_COMMAND})")
    return timed_costs(passes, data.get("loop") or ())


def planned_k(ranges: Sequence[Sequence[int]], batch: int, k_cap: int | None = None) -> int:
    """The k vLLM uses at ``batch`` under ``[[lo, hi, k], ...]``: the range holding it; in a
    gap, the previous range's k; past the last range, the last k; before the first, 0; capped
    at ``num_speculative_tokens`` (vLLM's ``build_dynamic_sd_schedule_lookup``)."""
    k: int | None = None
    for lo, hi, rk in sorted(tuple(r) for r in ranges):
        if lo <= batch:
            k = rk
        if lo <= batch <= hi:
            break
    k = k if k is not None else 0
    return min(k, k_cap) if k_cap is not None else k
