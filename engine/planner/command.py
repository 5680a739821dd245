"""``specscope plan``'s work: alpha from a number, a probe's JSON, vLLM's counters or a mix
given by hand; the costs the options name; one plan, or a plan for each context class
(:mod:`engine.planner.contexts`), as one JSON-ready object.

The command line (:mod:`engine.cli.plan`) parses the options into :class:`Asked` and
:class:`engine.planner.inputs.PlanInputs` and prints what :func:`make_plan` returns. The two
readings the standard library cannot do, alpha from vLLM's ``/metrics``
(:mod:`engine.serving`) and "this machine" fitted to the measured sweeps
(:mod:`engine.measure`), are handed in (:data:`MetricsReader`, :data:`MachineCosts`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from engine.analytic import positions
from engine.analytic.timed_costs import PlanError
from engine.planner import contexts, provenance
from engine.planner.costs import Costs, file_costs
from engine.planner.drafters import drafter_costs
from engine.planner.inputs import CHOICES, NUMBERS, PlanInputs
from engine.planner.provenance import AlphaSource
from engine.planner.report import k0_price, report
from engine.planner.schedule import Domain, by_position, parse_mix_entry, single

MetricsReader = Callable[[list[Path]], tuple[list[Domain], list[str], list[dict]]]
"""``metrics(paths)``: the domains of vLLM ``/metrics`` snapshots (one, or before and after),
the notices about them and each domain's label set."""
MachineCosts = Callable[[PlanInputs], Costs]
"""``this_machine(inputs)``: the costs of "this machine" as fitted by the measured sweeps."""


@dataclass(frozen=True)
class Asked:
    """What ``specscope plan`` was asked besides the plan's inputs: where alpha comes from
    (one of ``alpha``, ``from_probe``, ``from_metrics``, ``positions``, or ``mix`` by hand),
    the drafter a probe of several is read for, a costs file, context classes and the model
    names the config prints."""

    alpha: float | None = None
    from_probe: Path | None = None
    from_metrics: list[Path] | None = None
    positions: str | None = None
    mix: str | None = None
    temperature: float | None = None
    draft_sample: str | None = None
    drafter: str = "model"
    costs: Path | None = None
    contexts: str | None = None
    target: str | None = None
    draft: str | None = None


@dataclass(frozen=True)
class Alpha:
    """Alpha as read: the traffic's domains, the notices about them, how the draft samples
    (as asked, else as the probe did, else the default) and where alpha came from."""

    domains: list[Domain]
    notices: list[str]
    draft_sample: str
    source: AlphaSource


# ---- alpha -----------------------------------------------------------------------------------


def parse_mix(text: str) -> dict[str, float]:
    """``"code=0.6,chat=0.4"`` as ``{"code": 0.6, "chat": 0.4}``."""
    weights: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, sep, value = part.partition("=")
        try:
            weight = float(value)
        except ValueError:
            weight = -1.0
        if not sep or not name.strip() or not weight >= 0:
            raise PlanError(f"--mix entries are domain=weight with a weight of at least 0 "
                            f"(got {part!r})")
        weights[name.strip()] = weight
    if not weights:
        raise PlanError("--mix names no domain")
    return weights


def probe_domains(data: object, temperature: float | None, mix: dict[str, float] | None,
                  ) -> tuple[list[Domain], list[str]]:
    """The domains of a probe's rows at one temperature, weighted by ``mix`` or by the
    probe's prompts."""
    result = data.get("result", data) if isinstance(data, dict) else None
    rows = result.get("rows") if isinstance(result, dict) else None
    if not isinstance(rows, list) or not rows:
        raise PlanError("this is not a probe's JSON (no result rows): save one from the page's "
                        "probe (/probes/ID.json) or with specscope probe --json --out FILE")
    try:
        temperatures = sorted({float(r["temperature"]) for r in rows})
        if temperature is None:
            if len(temperatures) > 1:
                raise PlanError("the probe has rows at temperatures "
                                f"{', '.join(f'{t:g}' for t in temperatures)}: choose one "
                                "with --temperature")
            temperature = temperatures[0]
        chosen = [r for r in rows if float(r["temperature"]) == temperature]
        if not chosen:
            raise PlanError(f"the probe has no rows at temperature {temperature:g} (it has "
                            f"{', '.join(f'{t:g}' for t in temperatures)})")
        found = {str(r["domain"]): (float(r["alpha_counted"]), float(r["prompts"]),
                                    positions.measured(r.get("per_position_acceptance")))
                 for r in chosen}
    except (KeyError, TypeError, ValueError) as error:
        if isinstance(error, PlanError):
            raise
        raise PlanError(f"a probe row lacks a field the plan needs ({error})") from None
    notices = [f"alpha by domain from the probe's rows at temperature {temperature:g}."]
    if mix is None:
        notices.append("The mix is weighted by the probe's prompts per domain; give your "
                       "traffic with --mix domain=weight,...")
        return [Domain(name, prompts, alpha, curve)
                for name, (alpha, prompts, curve) in found.items()], notices
    unknown = sorted(set(mix) - set(found))
    if unknown:
        raise PlanError(f"--mix names {', '.join(unknown)}, which the probe did not measure "
                        f"(it has {', '.join(found)})")
    left = sorted(set(found) - set(mix))
    if left:
        notices.append(f"Not in --mix, so not planned for: {', '.join(left)}.")
    return [Domain(name, weight, found[name][0], found[name][2])
            for name, weight in mix.items()], notices


def probe_draft_sample(data: object) -> str | None:
    """How the probe's draft sampled (``draft_sample`` in its config or result), if it says."""
    if not isinstance(data, dict):
        return None
    for holder in (data, data.get("result"), data.get("config"),
                   (data.get("result") or {}).get("config") if isinstance(
                       data.get("result"), dict) else None):
        if isinstance(holder, dict) and holder.get("draft_sample") in CHOICES[
                "draft_sample"][1]:
            return holder["draft_sample"]
    return None


def read_text(path: Path) -> str:
    try:
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        raise PlanError(f"{path} is not UTF-8 text") from None


def read_json(path: Path) -> object:
    try:
        return json.loads(read_text(path))
    except json.JSONDecodeError as error:
        raise PlanError(f"{path} is not JSON ({error})") from None


def hand_mix(text: str) -> list[Domain]:
    """``"code=3:0.85,chat=1:0.4"``: each domain's weight and alpha, given by hand."""
    domains = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, _, rest = part.partition("=")
        domains.append(parse_mix_entry(f"{name.strip()}:{rest.strip()}"))
    if not domains:
        raise PlanError("--mix names no domain")
    return domains


def alpha_source(asked: Asked, metrics: MetricsReader,
                 ) -> tuple[list[Domain], list[str], str | None, AlphaSource]:
    """The domains, notices, the probe's draft sampling (if it says) and where alpha came
    from."""
    given = [name for name in ("alpha", "from_probe", "from_metrics", "positions")
             if getattr(asked, name) is not None]
    if not given and asked.mix is not None and asked.temperature is None:
        domains = hand_mix(asked.mix)
        return domains, [], None, provenance.by_hand("--mix", [d.name for d in domains])
    if len(given) != 1:
        raise PlanError("give one of --alpha, --from-probe FILE, --from-metrics BEFORE [AFTER], "
                        "--positions S1,S2,... or --mix domain=weight:alpha,...")
    if (asked.mix is not None or asked.temperature is not None) and asked.from_probe is None:
        raise PlanError("--mix domain=weight and --temperature go with --from-probe (a mix "
                        "alone is domain=weight:alpha,...)")
    if asked.alpha is not None:
        return single(asked.alpha), [], None, provenance.by_hand("--alpha")
    if asked.positions is not None:
        return by_position(asked.positions), [], None, provenance.by_hand("--positions")
    if asked.from_probe is not None:
        data = probe_of_drafter(read_json(asked.from_probe), asked.drafter)
        mix = parse_mix(asked.mix) if asked.mix is not None else None
        domains, notices = probe_domains(data, asked.temperature, mix)
        sample = probe_draft_sample(data)
        temperature = probe_temperature(data, asked.temperature)
        source = provenance.from_probe(data, str(asked.from_probe), [d.name for d in domains],
                                       temperature, sample)
        return domains, notices, sample, source
    domains, notices, labels = metrics(asked.from_metrics)
    where = " and ".join(str(p) for p in asked.from_metrics)
    return domains, notices, None, provenance.from_metrics(where, labels)


def probe_of_drafter(data: object, drafter: str) -> object:
    """A probe of several drafters side by side (``specscope probe --drafter
    model,ngram,eagle``: one result under "drafters" each) gives the result of the drafter
    planned; any other probe is itself."""
    drafters = data.get("drafters") if isinstance(data, dict) else None
    if not isinstance(drafters, dict) or "rows" in data:
        return data
    if drafter not in drafters:
        raise PlanError(f"the probe measured the drafters {', '.join(drafters)}, not "
                        f"{drafter}: plan one of those with --drafter, or probe {drafter}")
    return drafters[drafter]


def probe_temperature(data: dict, asked: float | None) -> float:
    """The temperature the plan takes the probe's rows at (the only one, unless asked)."""
    if asked is not None:
        return asked
    result = data.get("result", data)
    return float(result["rows"][0]["temperature"])


def read_alpha(asked: Asked, metrics: MetricsReader) -> Alpha:
    """Alpha from the source asked for, and the draft sampling it was measured with."""
    domains, notices, probed_sample, source = alpha_source(asked, metrics)
    if asked.draft_sample and probed_sample and asked.draft_sample != probed_sample:
        raise PlanError(f"the probe measured alpha with {probed_sample} drafting, not "
                        f"{asked.draft_sample}: probe again with --draft-sample "
                        f"{asked.draft_sample}")
    draft_sample = asked.draft_sample or probed_sample or CHOICES["draft_sample"][0]
    return Alpha(domains, notices, draft_sample, source)


# ---- the plan --------------------------------------------------------------------------------


def make_plan(asked: Asked, alpha: Alpha, inputs: PlanInputs,
              this_machine: MachineCosts) -> dict:
    """Everything the command prints, as one JSON-ready object."""
    if asked.contexts is not None:
        return plan_contexts(asked, alpha, inputs, this_machine)
    return report(alpha.domains, plan_costs(asked, inputs, this_machine), inputs, asked.target,
                  asked.draft, alpha.notices, source=alpha.source)


def plan_costs(asked: Asked, inputs: PlanInputs, this_machine: MachineCosts) -> Costs:
    """The costs the options name: a costs file, "this machine" as fitted, or the roofline of
    the preset, with the drafter chosen."""
    if asked.costs is not None:
        if inputs.drafter != "model":
            raise PlanError(f"a costs file times a draft model: --drafter {inputs.drafter} is "
                            "priced on a hardware preset's roofline, without --costs")
        return file_costs(read_json(asked.costs), str(asked.costs))
    if inputs.hardware == "this-machine":
        if inputs.drafter != "model":
            raise PlanError(f"--drafter {inputs.drafter} is priced on a GPU preset; "
                            '"this machine" is fitted for the shipped draft model')
        return this_machine(inputs)
    return drafter_costs(inputs.setting(), inputs.drafter, inputs.eagle_head,
                         inputs.draft_kv_budget)


def plan_contexts(asked: Asked, alpha: Alpha, inputs: PlanInputs,
                  this_machine: MachineCosts) -> dict:
    """``--contexts``: a plan for each context class, one schedule safe for all, and which
    to deploy (:mod:`engine.planner.contexts`)."""
    if asked.costs is not None:
        raise PlanError("--contexts plans on the roofline at each context; a costs file was "
                        "timed at one context")
    if inputs.context != NUMBERS["context"].default:
        raise PlanError("give --context or --contexts, not both")
    bound = NUMBERS["context"]
    classes = contexts.parse_contexts(asked.contexts, max(1, int(bound.minimum)),
                                      int(bound.maximum))
    domains, notices, source = alpha.domains, alpha.notices, alpha.source
    by_costs, reports = {}, {}
    for context in classes:
        at = replace(inputs, context=context)
        by_costs[context] = plan_costs(asked, at, this_machine)
        reports[context] = report(domains, by_costs[context], at, asked.target, asked.draft,
                                  notices, source=source)
    longest = replace(inputs, context=classes[-1])
    one = report(domains, contexts.worst_costs(by_costs), longest, asked.target, asked.draft,
                 notices, source=source)
    compared = contexts.compare(domains, by_costs, reports, one,
                                k0_price(inputs, by_costs[classes[0]]).overhead(),
                                inputs.batch_mix)
    alphas = ", ".join(f"{d.name} α {d.alpha:g}" for d in domains)
    return {"contexts": classes, "alpha": f"{alphas} ({source.text()})",
            "alpha_source": one["alpha_source"], **compared,
            "table": contexts.table(reports, one), "one_schedule": one,
            "by_context": {str(c): r for c, r in reports.items()}}
