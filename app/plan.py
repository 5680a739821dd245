"""The batch section's schedule: the k to speculate at each batch size on the section's
settings, at the slider model's alpha, and the vLLM config that carries it
(:mod:`engine.analytic.schedule`; the same JSON as ``GET /api/plan``)."""

from __future__ import annotations

import json
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, replace
from urllib.parse import urlencode

from app.params import Slider, fmt, parse_controls
from app.roofline import RooflineState
from engine.analytic.roofline import BATCH_MAX, CURVE_MAX_K, Setting
from engine.analytic.schedule import (
    K_MAX,
    MAX_NUM_SEQS,
    MIX_MAX_DOMAINS,
    Domain,
    PlanError,
    mix_entry,
    parse_mix_entry,
    single,
)
from engine.serving.plan_cli import report, setting_costs

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
    mix: tuple[Domain, ...] = ()  # a traffic mix instead of the slider's alpha

    def items(self) -> list[tuple[str, str]]:
        return [("k_max", fmt(self.k_max)), ("max_num_seqs", fmt(self.max_num_seqs))] + [
            ("mix", mix_entry(d)) for d in self.mix]

    def query(self) -> str:
        return urlencode(self.items())


def parse_plan_state(query: Sequence[tuple[str, str]]) -> tuple[PlanState, list[str]]:
    """The plan's inputs from the link; bad values become defaults or bounds, said so."""
    values, notices = parse_controls(query, PLAN_NUMBERS)
    mix, mix_notices = mix_domains([value for key, value in query if key == "mix"])
    return PlanState(**values, mix=tuple(mix)), notices + mix_notices


def plan_context(state: PlanState, notices: list[str], s: Setting, alpha: float,
                 rl_state: RooflineState) -> dict:
    """What ``_plan.html`` shows: the plan on the section's setting ``s``, at the slider's
    ``alpha`` or for the link's traffic mix."""
    domains = list(state.mix) or single(alpha)
    result = report(domains, setting_costs(s), state.k_max, state.max_num_seqs)
    given = [("alpha", fmt(alpha))] if not state.mix else []
    api = urlencode([("hardware", rl_state.hardware), ("pair", rl_state.models),
                     ("dtype", rl_state.dtype), ("gpus", rl_state.gpus),
                     ("context", rl_state.context), *given, *state.items()])
    by_hand = ",".join(mix_entry(d).replace(":", "=", 1) for d in state.mix)
    source = f"--mix {shlex.quote(by_hand)}" if state.mix else f"--alpha {fmt(alpha)}"
    command = (f"specscope plan {source} --hardware {rl_state.hardware} "
               f"--models {rl_state.models} --dtype {rl_state.dtype} --gpus {rl_state.gpus} "
               f"--context {rl_state.context} --k-max {state.k_max} "
               f"--max-num-seqs {state.max_num_seqs}")
    config = result["speculative_config"]
    without_mix = urlencode([*rl_state.items(), ("alpha", fmt(alpha)),
                             *replace(state, mix=()).items()])
    return {
        "plan": result,
        "plan_state": state,
        "plan_notices": notices + result["notices"],
        "plan_numbers": PLAN_NUMBERS,
        "plan_alpha": alpha,
        "plan_mix": bool(state.mix),
        "plan_config_json": json.dumps(config) if config else None,
        "plan_api": f"/api/plan?{api}",
        "plan_command": command,
        "plan_without_mix": f"/?{without_mix}#plan",
    }


def mix_domains(entries: Sequence[str]) -> tuple[list[Domain], list[str]]:
    """A mix from ``NAME:WEIGHT:ALPHA`` entries: the ones that parse, and a notice for each
    one that does not (or for weights that are all 0, then taken as equal)."""
    domains, notices = [], []
    for entry in entries[:MIX_MAX_DOMAINS]:
        try:
            domains.append(parse_mix_entry(entry))
        except PlanError as error:
            notices.append(f"mix: {error}; left out.")
    if len(entries) > MIX_MAX_DOMAINS:
        notices.append(f"mix: only the first {MIX_MAX_DOMAINS} domains are planned for.")
    if domains and not any(d.weight > 0 for d in domains):
        domains = [replace(d, weight=1.0) for d in domains]
        notices.append("mix: every weight is 0, so the domains are weighted equally.")
    return domains, notices


def mix_hrefs(rows: Sequence[dict]) -> list[tuple[float, str]]:
    """For each temperature of a probe, the page planning for its domains at that
    temperature, each weighted by its prompts: "Plan a schedule from this" for the mix."""
    links = []
    for t in sorted({float(r["temperature"]) for r in rows}):
        mix = [Domain(str(r["domain"]), float(r["prompts"]), float(r["alpha_counted"]))
               for r in rows if float(r["temperature"]) == t]
        links.append((t, f"/?{urlencode([('mix', mix_entry(d)) for d in mix])}#plan"))
    return links
