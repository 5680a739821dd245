"""Context as an axis (``specscope plan --contexts 512,8192,32768``): a plan for each context
class, the k by batch and context side by side, and what to deploy for a mix of classes.

vLLM 0.32 looks k up by batch size only (``num_speculative_tokens_per_batch_size``), so one
engine serving every class runs one schedule. Two deployments are weighed:

- one engine, one schedule safe for all: at each batch the k whose worst class does best
  (the plan over the worst class's cycle cost, :func:`worst_costs`), so no class is made
  slower than that k allows; its ``max_model_len`` is the longest context
- one engine per class, each with its own plan and ``max_model_len``

For each class, the gain of both over no speculative config (geometric mean over the batches
the class plans, weighed as the plan weighs them) is computed; one engine is recommended when
it gives up at most :data:`ONE_ENGINE_TOLERANCE` in every class.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace

from engine.analytic.timed_costs import PlanError
from engine.planner import schedule
from engine.planner.costs import Costs, parse_batch_mix
from engine.planner.schedule import Domain

ONE_ENGINE_TOLERANCE = 0.01  # one schedule for all may give up this much in any class
CONTEXTS_MAX = 8


def parse_contexts(text: str, lo: int, hi: int) -> list[int]:
    """``"512,8192,32768"`` as sorted distinct contexts from ``lo`` to ``hi``."""
    contexts = set()
    for part in filter(None, (p.strip() for p in text.split(","))):
        try:
            value = int(part)
        except ValueError:
            raise PlanError(f"--contexts takes whole token counts, e.g. 512,8192,32768 "
                            f"(got {part!r})") from None
        if not lo <= value <= hi:
            raise PlanError(f"--contexts must be from {lo} to {hi} tokens (got {value})")
        contexts.add(value)
    if not 2 <= len(contexts) <= CONTEXTS_MAX:
        raise PlanError(f"--contexts takes 2 to {CONTEXTS_MAX} different contexts "
                        f"(got {len(contexts)})")
    return sorted(contexts)


def worst_costs(by_context: Mapping[int, Costs]) -> Costs:
    """Costs for one schedule over every class: at each batch the dearest cycle among the
    classes that fit there (the same alpha in each, so the lowest speedup), and a k fits
    where it fits in all of them. A batch fits where any class fits."""
    classes = list(by_context.values())

    def fitting(batch: int) -> list[Costs]:
        return [c for c in classes if c.fits is None or c.fits(batch, 0)]

    def cycle(batch: int, k: int) -> float:
        return max(c.cycle(batch, k) for c in fitting(batch) or classes)

    def fits(batch: int, k: int) -> bool:
        found = fitting(batch)
        return bool(found) and all(c.fits is None or c.fits(batch, k) for c in found)

    longest = by_context[max(by_context)]
    names = ", ".join(str(c) for c in by_context)
    return replace(longest, cycle=cycle, fits=fits,
                   describe=f"the worst of contexts {names} at each batch: "
                            f"{longest.describe}")


def class_gain(domains: Sequence[Domain], costs: Costs, k_at: Mapping[int, int],
               configured: bool, k0_overhead: schedule.K0Overhead,
               batch_mix: str = "") -> float | None:
    """One class's throughput over no speculative config under the k at each batch
    ``k_at`` (batches the class does not fit are skipped): the geometric mean the plan uses,
    each batch once or weighed by the batch mix. None when the class fits no batch."""
    weights = parse_batch_mix(batch_mix) if batch_mix.strip() else None
    logs, total = 0.0, 0.0
    for batch, k in k_at.items():
        if costs.fits is not None and not costs.fits(batch, 0):
            continue
        weight = 1.0 if weights is None else weights.get(batch, 0.0)
        if weight <= 0:
            continue
        if not configured:
            speedup = 1.0
        elif k == 0:
            speedup = 1.0 / (1.0 + k0_overhead(batch))
        else:
            speedup = schedule.throughput(domains, costs.cycle, batch, k)
        logs += weight * math.log(speedup)
        total += weight
    return math.exp(logs / total) if total else None


def k_by_batch(result: dict) -> dict[int, int]:
    """The k a report's plan runs at each batch (0 everywhere when speculation is not to be
    configured; where vLLM refuses the deployment, the plan's k, as a what-if)."""
    configured = result["plan"]["configure"]
    return {b: (r["k"] if configured else 0) for r in result["plan"]["ranges"]
            for b in range(r["lo"], r["hi"] + 1)}


def table(by_context: Mapping[int, dict], one: dict) -> list[dict]:
    """Rows of batches over which the k of every class and of the one schedule stay the
    same: ``{"lo", "hi", "k": {context: k or None (does not fit)}, "one": k or None}``."""
    ks = {c: k_by_batch(r) for c, r in by_context.items()}
    safe = k_by_batch(one)
    last = max([*safe, *[b for k in ks.values() for b in k]], default=0)
    rows: list[dict] = []
    for batch in range(1, last + 1):
        cells = {c: k.get(batch) for c, k in ks.items()}
        key = (cells, safe.get(batch))
        if rows and (rows[-1]["k"], rows[-1]["one"]) == key:
            rows[-1]["hi"] = batch
        else:
            rows.append({"lo": batch, "hi": batch, "k": cells, "one": safe.get(batch)})
    return rows


def compare(domains: Sequence[Domain], by_context: Mapping[int, Costs],
            reports: Mapping[int, dict], one: dict, k0_overhead: schedule.K0Overhead,
            batch_mix: str = "") -> dict:
    """Each class under its own plan and under the one schedule, and the recommendation."""
    safe, safe_on = k_by_batch(one), one["plan"]["configure"]
    classes = []
    for context, costs in by_context.items():
        own = reports[context]
        own_on = own["plan"]["configure"]
        own_gain = class_gain(domains, costs, k_by_batch(own), own_on, k0_overhead, batch_mix)
        one_gain = class_gain(domains, costs, safe, safe_on, k0_overhead, batch_mix)
        classes.append({"context": context, "own": own_gain, "one": one_gain,
                        "largest_batch": own["plan"]["largest_batch"],
                        "gives_up": (own_gain / one_gain - 1.0
                                     if own_gain and one_gain else None)})
    worst = max((c for c in classes if c["gives_up"] is not None),
                key=lambda c: c["gives_up"], default=None)
    if worst is None:
        return {"classes": classes, "recommend": "none",
                "recommendation": "Nothing to deploy: no context class fits even batch 1."}
    if worst["gives_up"] <= ONE_ENGINE_TOLERANCE:
        words = (f"Deploy one engine with one schedule for every context (max_model_len "
                 f"{max(by_context)}): in no class does it give up more than "
                 f"{max(worst['gives_up'], 0):.1%} against an engine planned for that class "
                 f"alone (context {worst['context']}: {worst['one']:.3f}× against "
                 f"{worst['own']:.3f}× no speculative config).")
        recommend = "one-engine"
    else:
        words = (f"Deploy one engine per context class, each with its own schedule and "
                 f"max_model_len: one schedule for all gives up {worst['gives_up']:.1%} at "
                 f"context {worst['context']} ({worst['one']:.3f}× against "
                 f"{worst['own']:.3f}× no speculative config with its own plan).")
        recommend = "per-class"
    return {"classes": classes, "recommend": recommend, "recommendation": words}


def markdown(result: dict) -> str:
    """The text of ``--contexts``: the recommendation, k by batch and context, the classes'
    gains, the TPOT by context, then what to deploy."""
    contexts = result["contexts"]
    lines = [result["recommendation"], "", f"alpha: {result['alpha']}"]
    lines += ["", "k by batch and context (— : does not fit in memory)", "",
              "| batches | " + " | ".join(f"context {c}" for c in contexts)
              + " | one schedule for all |",
              "| ---: |" + " ---: |" * (len(contexts) + 1)]

    def cell(k: int | None) -> str:
        return "—" if k is None else str(k)

    for row in result["table"]:
        batches = f"{row['lo']}" if row["lo"] == row["hi"] else f"{row['lo']}–{row['hi']}"
        lines.append(f"| {batches} | " + " | ".join(cell(row["k"][c]) for c in contexts)
                     + f" | {cell(row['one'])} |")
    lines += ["", "| context | largest batch | own plan over off | one schedule over off | "
              "one schedule gives up |", "| ---: | ---: | ---: | ---: | ---: |"]
    for c in result["classes"]:
        def x(v: float | None) -> str:
            return "—" if v is None else f"{v:.3f}×"

        up = "—" if c["gives_up"] is None else f"{c['gives_up']:.1%}"
        lines.append(f"| {c['context']} | {c['largest_batch'] or '—'} | {x(c['own'])} | "
                     f"{x(c['one'])} | {up} |")
    lines += tpot_table(result)
    one = result["one_schedule"]
    if one["refused"] is not None:
        lines += ["", f"No vLLM config: {one['refused']}"]
        return "\n".join(lines + _notices(result))
    lines += ["", "One engine for every context:", one["verdict"]]
    if one["serve"]:
        lines += [one["serve"]]
    lines += ["", "One engine per context:"]
    for c in contexts:
        r = result["by_context"][str(c)]
        lines.append(f"- context {c}: {r['verdict']}")
        if r["serve"]:
            lines.append(f"  {r['serve']}")
    return "\n".join(lines + _notices(result))


def _notices(result: dict) -> list[str]:
    """Every plan's notices, once each, in the order they first come."""
    notices = list(dict.fromkeys(
        [f"one schedule for all: {n}" for n in result["one_schedule"]["notices"]]
        + [f"context {c}: {n}" for c, r in result["by_context"].items() for n in r["notices"]]))
    return [""] + [f"- {n}" for n in notices] if notices else []


def tpot_table(result: dict) -> list[str]:
    """TPOT off → as planned (ms) at batches 1, 2, 4, ... by context."""
    contexts = result["contexts"]
    by = {c: {row["batch"]: row for row in result["by_context"][str(c)]["latency"] or []}
          for c in contexts}
    batches = sorted({b for rows in by.values() for b in rows if b & (b - 1) == 0})
    if not batches:
        return []
    lines = ["", "TPOT of one sequence (ms), no speculative config → each context's own plan",
             "", "| batch | " + " | ".join(f"context {c}" for c in contexts) + " |",
             "| ---: |" + " ---: |" * len(contexts)]
    for b in batches:
        cells = [f"{by[c][b]['off_ms']:.2f} → {by[c][b]['plan_ms']:.2f}" if b in by[c] else "—"
                 for c in contexts]
        lines.append(f"| {b} | " + " | ".join(cells) + " |")
    return lines
