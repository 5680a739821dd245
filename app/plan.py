"""The batch section's schedule: the k to speculate at each batch size on the section's
settings, at the slider model's alpha or a traffic mix, the verdict and the vLLM deployment
(:mod:`engine.planner`; the same JSON as ``GET /api/plan``)."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from urllib.parse import urlencode

from app.params import Slider, fmt, parse_controls, parse_number
from app.roofline import RooflineState, inputs_of
from engine.analytic import engines, positions
from engine.analytic.passes import Setting
from engine.analytic.positions import Curve
from engine.analytic.timed_costs import PlanError
from engine.planner.costs import K0Price, parse_batch_mix, parse_k0, setting_costs
from engine.planner.inputs import CHOICES, OUTPUT_TOKENS, REQUEST_RATE_MAX
from engine.planner.inputs import PLAN_NUMBERS as INPUT_PLAN_NUMBERS
from engine.planner.provenance import by_hand, from_probe
from engine.planner.report import report
from engine.planner.schedule import (
    MIX_MAX_DOMAINS,
    Domain,
    by_position,
    mix_entry,
    parse_mix_entry,
    single,
)
from engine.planner.vllm_config import DRAFT_SAMPLE_WORDS

PLAN_NUMBERS: dict[str, Slider] = {
    b.name: Slider(b.name, b.label, b.minimum, b.maximum, b.step, b.default, integer=True)
    for b in INPUT_PLAN_NUMBERS.values()
}
PLAN_TEXTS = {"k0_overhead": "cited", "batch_mix": "", "request_rate": "",
              "output_tokens": str(OUTPUT_TOKENS)}
ALPHA_FROM = re.compile(r"^probe:([A-Za-z0-9_-]{1,64}):([0-9]{1,3}(\.[0-9]{1,6})?)$")
"""``alpha_from``: the saved probe (its id) and temperature the link's alpha came from."""
TEXT_MAX = 2000  # characters of a text input the link may carry


@dataclass(frozen=True)
class PlanState:
    k_max: int
    max_num_seqs: int
    data_parallel: int = 1
    mix: tuple[Domain, ...] = ()  # a traffic mix instead of the slider's alpha
    draft_sample: str = CHOICES["draft_sample"][0]
    k0_overhead: str = "cited"
    batch_mix: str = ""
    request_rate: str = ""  # requests a second (engine.planner.traffic); empty: not given
    output_tokens: str = PLAN_TEXTS["output_tokens"]
    alpha_from: str = ""  # "probe:ID:T": where the mix's alphas were measured (ALPHA_FROM)

    def items(self) -> list[tuple[str, str]]:
        items = [(name, fmt(getattr(self, name))) for name in PLAN_NUMBERS]
        items += [("mix", mix_entry(d)) for d in self.mix]
        items += [(name, getattr(self, name))
                  for name in ("draft_sample", *PLAN_TEXTS, "alpha_from")
                  if getattr(self, name) != getattr(PlanState(0, 0), name)]
        return items

    @property
    def probe(self) -> tuple[str, float] | None:
        """The saved probe and the temperature ``alpha_from`` names (None: none)."""
        m = ALPHA_FROM.match(self.alpha_from)
        return (m.group(1), float(m.group(2))) if m else None

    def query(self) -> str:
        return urlencode(self.items())


def parse_plan_state(query: Sequence[tuple[str, str]]) -> tuple[PlanState, list[str]]:
    """The plan's inputs from the link; bad values become defaults or bounds, said so."""
    values, notices = parse_controls(query, PLAN_NUMBERS)
    mix, mix_notices = mix_domains([value for key, value in query if key == "mix"])
    first = {key: value for key, value in reversed(query)}
    default, allowed = CHOICES["draft_sample"]
    sample = first.get("draft_sample", default) or default
    if sample not in allowed:
        notices.append(f"draft_sample={sample[:24]!r} is not one of {', '.join(allowed)}; "
                       f"using {default}.")
        sample = default
    texts = {}
    for name, fallback in PLAN_TEXTS.items():
        text = first.get(name, fallback)[:TEXT_MAX].strip() or fallback
        try:
            if name == "k0_overhead":
                parse_k0(text)
            elif name == "request_rate" and text:
                _request_rate(text)
            elif name == "output_tokens":
                _output_tokens(text)
            elif text:
                parse_batch_mix(text)
        except PlanError as error:
            notices.append(f"{name}: {error}; using {fallback or 'none'}.")
            text = fallback
        texts[name] = text
    if texts["request_rate"] and texts["batch_mix"]:
        notices.append("request_rate and batch_mix both give the traffic; the batch mix is "
                       "used.")
        texts["request_rate"] = ""
    alpha_from = first.get("alpha_from", "")[:TEXT_MAX].strip()
    if alpha_from and not ALPHA_FROM.match(alpha_from):
        notices.append(f"alpha_from={alpha_from[:40]!r} is not probe:ID:TEMPERATURE; the "
                       "alpha is taken as given by hand.")
        alpha_from = ""
    if alpha_from and not mix:
        notices.append("alpha_from names a probe but the link has no mix of its domains; "
                       "the alpha is taken as given by hand.")
        alpha_from = ""
    return PlanState(**values, mix=tuple(mix), draft_sample=sample, alpha_from=alpha_from,
                     **texts), notices + mix_notices


def _request_rate(text: str) -> float:
    rate = parse_number(text)
    if rate is None or not 0 < rate <= REQUEST_RATE_MAX:
        raise PlanError(f"request_rate must be a number of requests a second above 0 and at "
                        f"most {REQUEST_RATE_MAX:g}")
    return rate


def _output_tokens(text: str) -> int:
    tokens = parse_number(text)
    if tokens is None or tokens != int(tokens) or not 1 <= tokens <= 1_000_000:
        raise PlanError("output_tokens must be a whole number of tokens from 1 to 1000000")
    return int(tokens)


def slider_domains(state: PlanState, alpha: float, curve: Curve | None) -> list[Domain]:
    """The traffic the plan prices: the link's mix, else the slider model's acceptance by
    position (its curve, as survival rates), else its one α."""
    if state.mix:
        return list(state.mix)
    return by_position(positions.text(curve)) if curve is not None else single(alpha)


def plan_planning(state: PlanState, alpha: float, curve: Curve | None = None
                  ) -> tuple[list[Domain], int, K0Price | None]:
    """What the batch section needs to follow the plan's k: its domains, k_max and the price
    of a k = 0 range given by hand (None, "cited": the setting's speculative-step overhead;
    the page's costs are the roofline's, so never a file's own)."""
    hand = state.k0_overhead.strip() not in ("", "cited")
    return (slider_domains(state, alpha, curve), state.k_max,
            parse_k0(state.k0_overhead) if hand else None)


def plan_context(state: PlanState, notices: list[str], s: Setting, alpha: float,
                 rl_state: RooflineState, probe: dict | None = None,
                 curve: Curve | None = None) -> dict:
    """What ``_plan.html`` shows: the plan on the section's setting ``s``, at the slider's
    ``alpha`` or for the link's traffic mix; ``probe``: the saved probe record ``alpha_from``
    names, whose pair, temperature and way of drafting the plan then reports (and warns when
    they are not the pair it plans)."""
    domains = slider_domains(state, alpha, curve)
    by_hand_curve = positions.text(curve) if curve is not None and not state.mix else ""
    inputs = replace(inputs_of(rl_state), alpha=None if state.mix else alpha, mix=state.mix,
                     positions=by_hand_curve,
                     k_max=state.k_max, max_num_seqs=state.max_num_seqs,
                     data_parallel=state.data_parallel, draft_sample=state.draft_sample,
                     k0_overhead=state.k0_overhead, batch_mix=state.batch_mix,
                     request_rate=_request_rate(state.request_rate) if state.request_rate
                     else None, output_tokens=_output_tokens(state.output_tokens))
    source = by_hand("the link's traffic mix" if state.mix
                     else "the slider model's acceptance by position" if by_hand_curve
                     else "the slider model's α", [d.name for d in state.mix])
    if probe is not None and state.probe is not None:
        probe_id, temperature = state.probe
        source = from_probe(probe, f"saved probe {probe_id}", [d.name for d in state.mix],
                            temperature, probe["result"].get("draft_sample"))
    result = report(domains, setting_costs(s), inputs, source=source)
    api = urlencode([("hardware", inputs.hardware), ("models", inputs.models),
                     *[(k, v if isinstance(v, str) else fmt(v)) for k, v in inputs.given()
                       if k not in ("hardware", "models")]])
    config = result["engine_args"]
    without_mix = urlencode([*rl_state.items(), ("alpha", fmt(alpha)),
                             *replace(state, mix=()).items()])
    return {
        "plan": result,
        "plan_state": state,
        "plan_notices": notices + result["notices"],
        "plan_numbers": PLAN_NUMBERS,
        "plan_samples": {name: f"{name}: {words}" for name, words in DRAFT_SAMPLE_WORDS.items()},
        "plan_alpha": alpha,
        "plan_engine": engines.LABELS[inputs.engine],
        "plan_mix": bool(state.mix),
        "plan_config_json": json.dumps(config) if config else None,
        "plan_api": f"/api/plan?{api}",
        "plan_command": inputs.command(),
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


def mix_hrefs(rows: Sequence[dict], draft_sample: str | None = None, probe_id: str = "",
              ) -> list[tuple[float, str]]:
    """For each temperature of a probe, the page planning for its domains at that
    temperature, each weighted by its prompts: "Plan a schedule from this" for the mix. The
    plan names the probe's way of drafting (``draft_sample``) when it is not the default, and
    the probe itself (``alpha_from``), so the plan reports the pair alpha was measured on."""
    links = []
    for t in sorted({float(r["temperature"]) for r in rows}):
        chosen = [r for r in rows if float(r["temperature"]) == t]
        links.append((t, _plan_href(chosen, t, draft_sample, probe_id)))
    return links


def row_hrefs(rows: Sequence[dict], draft_sample: str | None = None, probe_id: str = "",
              ) -> list[tuple[dict, str]]:
    """Each row of a probe with alpha, as the page planning for that domain alone (a mix of
    one, so the link names the domain and the probe as :func:`mix_hrefs` does)."""
    return [(r, _plan_href([r], float(r["temperature"]), draft_sample, probe_id))
            for r in rows if r.get("alpha_counted") is not None]


def _plan_href(rows: Sequence[dict], temperature: float, draft_sample: str | None,
               probe_id: str) -> str:
    mix = [Domain(str(r["domain"]), float(r["prompts"]), float(r["alpha_counted"]))
           for r in rows if r.get("alpha_counted") is not None]
    query = [("mix", mix_entry(d)) for d in mix]
    if draft_sample in CHOICES["draft_sample"][1] and draft_sample != CHOICES["draft_sample"][0]:
        query.append(("draft_sample", draft_sample))
    if probe_id:
        query.append(("alpha_from", f"probe:{probe_id}:{temperature:g}"))
    return f"/?{urlencode(query)}#plan"
