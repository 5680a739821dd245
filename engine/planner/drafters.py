"""The drafter a plan prices and deploys (``specscope plan --drafter``): the pair's draft model,
an EAGLE-style head of the target, or self-speculation with a bounded draft KV cache.

Each is a :class:`~engine.planner.costs.Costs` on the same roofline
(:mod:`engine.analytic.drafters` prices the draft step):

- ``model``: the pair's draft model, its own weights and full KV cache
  (:func:`~engine.planner.costs.setting_costs`)
- ``eagle``: the head in the draft's place, a one-layer model of the target's width whose
  KV cache is one layer's; vLLM serves it as ``method: "eagle"`` or ``"eagle3"`` with the head's
  checkpoint as ``model``, beside the target it was trained for
- ``self-spec``: the target drafts for itself, reading all its weights but only ``budget``
  cached tokens (MagicDec with StreamingLLM); the draft's cache sits beside the target's.
  vLLM 0.32 does not serve it (:func:`engine.planner.vllm_config.refusal`)

Chain drafts only (one token a draft step): EAGLE's own tables and EAGLE-3's SGLang ones use
draft trees, which these costs do not price.
"""

from __future__ import annotations

from dataclasses import replace

from engine.analytic import drafters
from engine.analytic.break_even import step_s
from engine.analytic.drafters import EAGLE_HEADS, STREAMING_BUDGET, HeadShape
from engine.analytic.passes import Setting
from engine.analytic.presets import ModelShape, devices
from engine.analytic.timed_costs import PlanError
from engine.planner.costs import Costs, memory_fits, model_id, setting_costs
from engine.planner.schedule import Fits
from engine.planner.vllm_config import MEDUSA, SELF_SPEC

DRAFTERS = {
    "model": "the pair's draft model",
    "eagle": "an EAGLE-style head of the target",
    "medusa": "Medusa heads of the target (one pass drafts k)",
    "mtp": "the target's own multi-token-prediction layers (vLLM's mtp)",
    SELF_SPEC: "self-speculation: the target drafts over a bounded KV cache",
}
"""``--drafter``: the names ``specscope generate`` and ``bench`` use, and ``self-spec``."""
KV_BUDGET_MAX = 131_072
MEDUSA_PLACEHOLDER = "PATH/TO/MEDUSA-HEADS"  # no public heads for the target: train them


def eagle_head(s: Setting, name: str | None = None) -> HeadShape:
    """The head preset named ``name``, or the one that drafts for ``s.target``; PlanError when
    there is none or it drafts for another target."""
    fitting = drafters.eagle_heads_of(s.target)
    if name is not None:
        head = EAGLE_HEADS.get(name)
        if head is None:
            raise PlanError(f"no EAGLE head preset {name!r}; the presets are "
                            f"{', '.join(EAGLE_HEADS)}")
        if head not in fitting:
            raise PlanError(f"{name} is a head of {head.target}, not of the plan's target "
                            f"({s.target.label})")
        return head
    if not fitting:
        raise PlanError(f"no EAGLE head preset drafts for {s.target.label}: the presets are "
                        + ", ".join(f"{key} (for {h.target})" for key, h in EAGLE_HEADS.items())
                        + "; choose --models with one of those targets")
    return fitting[0]


def eagle_costs(s: Setting, head: HeadShape) -> Costs:
    """The roofline with the head in the draft's place: its weights, its one layer of KV
    cache, on the target's GPUs (or one, with ``draft_placement`` one-gpu)."""
    costs = setting_costs(replace(s, draft=head.shape()))
    return replace(costs, target=head.target_checkpoint or model_id(s.target),
                   draft=head.checkpoint, method=head.method)


def medusa_costs(s: Setting) -> Costs:
    """The roofline with Medusa heads drafting (:func:`engine.analytic.drafters.medusa_cycle`):
    one pass of k heads a cycle, k at most the heads there are; their weights beside the
    target's in memory, no KV cache of their own."""
    heads = drafters.medusa_heads_of(s.target)
    weights = ModelShape(heads.label, heads.resident_params(), 0, 1, 1, 1, heads.source,
                         heads.hidden)
    held = replace(s, draft=weights)

    def cycle(batch: int, k: int) -> float:
        return drafters.medusa_cycle(s, heads, batch, k)

    return Costs(cycle,
                 f"{s.target.label} with {heads.label}, {heads.num_heads} heads, on "
                 f"{devices(s.gpus, s.hardware.label)}, {s.dtype}, context {s.context} "
                 "(roofline model)",
                 heads.target_checkpoint or model_id(s.target),
                 heads.checkpoint or MEDUSA_PLACEHOLDER,
                 k_limit=heads.num_heads, fits=memory_fits(held), setting=s,
                 context=s.context, step_s=lambda batch: step_s(s, batch), method=MEDUSA)


def self_spec_fits(s: Setting, budget: int) -> Fits:
    """``fits(batch, k)``: the target's weights once, and per sequence its full KV cache of
    ``context + k + 1`` tokens plus the draft's bounded one."""
    available = s.hardware.memory * s.usable

    def fits(batch: int, k: int) -> bool:
        weights, per_sequence = drafters.self_spec_bytes(replace(s, k=k), budget)
        return weights + batch * per_sequence <= available

    return fits


def self_spec_costs(s: Setting, budget: int = STREAMING_BUDGET) -> Costs:
    """The roofline of self-speculation with a draft KV cache of ``budget`` tokens. Its passes
    pay the setting's pass overheads; the speculative step's terms are vLLM's (issue 49548),
    and self-speculation runs on another engine (MagicDec's), so they are left out, as
    ``specscope validate`` leaves them out of MagicDec's series."""
    if not 1 <= budget <= KV_BUDGET_MAX:
        raise PlanError(f"--draft-kv-budget must be from 1 to {KV_BUDGET_MAX} (got {budget})")
    s = replace(s, overheads=replace(s.overheads, spec_fixed_s=0.0, spec_per_row_s=0.0))

    def cycle(batch: int, k: int) -> float:
        return drafters.self_spec_cycle(s, batch, k, budget)

    target = model_id(s.target)
    return Costs(cycle,
                 f"{s.target.label} drafting for itself over a {budget}-token KV cache "
                 f"(self-speculation) on {devices(s.gpus, s.hardware.label)}, {s.dtype}, "
                 f"context {s.context} (roofline model)",
                 target, target, fits=self_spec_fits(s, budget), setting=s, context=s.context,
                 step_s=lambda batch: step_s(s, batch), method=SELF_SPEC)


def drafter_costs(s: Setting, drafter: str = "model", head: str | None = None,
                  budget: int = STREAMING_BUDGET) -> Costs:
    """The costs of ``s`` with the drafter named ``drafter`` (:data:`DRAFTERS`)."""
    if drafter == "model":
        return setting_costs(s)
    if drafter == "eagle":
        return eagle_costs(s, eagle_head(s, head))
    if drafter == "medusa":
        return medusa_costs(s)
    if drafter == "mtp":
        head = drafters.mtp_head_of(s.target)
        if head is None:
            raise PlanError(f"{s.target.label} ships no multi-token-prediction layers: --drafter "
                            "mtp plans a target that does (--models mimo-7b-mtp)")
        return eagle_costs(s, head)
    if drafter == SELF_SPEC:
        return self_spec_costs(s, budget)
    raise PlanError(f"--drafter must be one of {', '.join(DRAFTERS)} (got {drafter!r})")
