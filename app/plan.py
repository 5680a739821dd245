"""The batch section's schedule: the k to speculate at each batch size on the section's
settings, at the slider model's alpha, and the vLLM config that carries it
(:mod:`engine.analytic.schedule`; the same JSON as ``GET /api/plan``)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import urlencode

from app.params import Slider, fmt, parse_controls
from app.roofline import RooflineState
from engine.analytic.roofline import BATCH_MAX, CURVE_MAX_K, Setting
from engine.analytic.schedule import K_MAX, MAX_NUM_SEQS, single
from engine.measure.plan_cli import report, setting_costs

PLAN_NUMBERS: dict[str, Slider] = {
    s.name: s
    for s in (
        Slider("k_max", "longest draft k_max", 1, CURVE_MAX_K, 1, K_MAX, integer=True),
        Slider("max_num_seqs", "vLLM max_num_seqs", 1, BATCH_MAX, 1, MAX_NUM_SEQS,
               integer=True),
    )
}


@dataclass(frozen=True)
class PlanState:
    k_max: int
    max_num_seqs: int

    def query(self) -> str:
        return urlencode({name: fmt(value) for name, value in vars(self).items()})


def parse_plan_state(query: Sequence[tuple[str, str]]) -> tuple[PlanState, list[str]]:
    """The plan's two inputs from the link; bad values become defaults or bounds, said so."""
    values, notices = parse_controls(query, PLAN_NUMBERS)
    return PlanState(**values), notices


def plan_context(state: PlanState, notices: list[str], s: Setting, alpha: float,
                 rl_state: RooflineState) -> dict:
    """What ``_plan.html`` shows: the plan at ``alpha`` on the section's setting ``s``."""
    result = report(single(alpha), setting_costs(s), state.k_max, state.max_num_seqs)
    api = urlencode([("hardware", rl_state.hardware), ("pair", rl_state.models),
                     ("dtype", rl_state.dtype), ("gpus", rl_state.gpus),
                     ("context", rl_state.context), ("alpha", fmt(alpha)),
                     ("k_max", state.k_max), ("max_num_seqs", state.max_num_seqs)])
    command = (f"specscope plan --alpha {fmt(alpha)} --hardware {rl_state.hardware} "
               f"--models {rl_state.models} --dtype {rl_state.dtype} --gpus {rl_state.gpus} "
               f"--context {rl_state.context} --k-max {state.k_max} "
               f"--max-num-seqs {state.max_num_seqs}")
    config = result["speculative_config"]
    return {
        "plan": result,
        "plan_state": state,
        "plan_notices": notices + result["notices"],
        "plan_numbers": PLAN_NUMBERS,
        "plan_alpha": alpha,
        "plan_config_json": json.dumps(config) if config else None,
        "plan_api": f"/api/plan?{api}",
        "plan_command": command,
    }


def plan_href(alpha: float) -> str:
    """The page at ``alpha``, scrolled to the plan: "Plan a schedule from this"."""
    return f"/?{urlencode({'alpha': f'{min(max(alpha, 0.0), 1.0):.2f}'})}#plan"
