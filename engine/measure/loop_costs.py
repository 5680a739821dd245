"""``specscope costs --engine specscope``: what a step of the real decoding loop costs, at each
batch and draft length, in the costs-file format ``specscope plan --costs`` reads.

For each batch ``B`` and each ``k`` in ``0..k_max`` the batched loop decodes ``B`` of the
pair's held-out prompts (end of sequence ignored, so every row stays live) and each step is
timed in parts (:class:`engine.decoder.step.StepTimes`): the draft's passes, the target's
pass, and everything else, the loop's own time (sampling, the rule, the caches' bookkeeping,
emitting). Only steps with all ``B`` rows live count, after the first (which runs the
prefill); medians over the steps of every repeat.

The file holds, per batch: the draft's pass (``draft_pass / k``, pooled over every k), the
target's pass over ``k + 1`` tokens, and ``loop[(B, k)]``, the median step minus its passes,
so that the planner's cycle ``(k t_q + t_p(k + 1) + loop(k)) / (t_p(1) + loop(0))`` is the
median step at ``k`` over the median plain step: a plan from this file predicts what the
loop delivers. ``steps`` keeps each part's median for the record, and ``step_mad_ms``, the
spread of the repeats' median steps: the planner takes a larger k only where it gains more
than that spread (:func:`engine.planner.schedule.plan`).
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Callable, Sequence

from engine.analytic.timed_costs import COSTS_FILE_VERSION


def measure(pair, prompts: Sequence[str], batches: Sequence[int], k_max: int, new_tokens: int,
            repeats: int, temperature: float, cpu_clock: bool, drafter=None,
            log: Callable[[str], None] = lambda message: None) -> dict[tuple[int, int], dict]:
    """Median parts of a step (ms) for every ``(batch, k)``: ``draft_pass``, ``target``,
    ``loop`` (the rest), ``step``, ``steps`` (how many steps counted) and ``step_mad``: the
    median absolute deviation of the repeats' own median steps (the timings' spread)."""
    from engine.decoder.batched import BatchConfig, BatchStepEvent, speculate_batch
    from engine.decoder.common import Clock
    from engine.decoder.drafter_spec import DRAFT_MODEL

    pair = dataclasses.replace(pair, stop_token_ids=frozenset())  # every row stays live
    clock = Clock(pair.device, cpu_time=cpu_clock)
    parts: dict[tuple[int, int], dict[str, list[float]]] = {}
    by_repeat: dict[tuple[int, int], list[float]] = {}  # each repeat's median step
    for repeat in range(repeats + 1):  # the first round warms caches and the allocator
        for batch in batches:
            for k in range(k_max + 1):
                config = BatchConfig([prompts[i % len(prompts)] for i in range(batch)], k=k,
                                     temperature=temperature, max_new_tokens=new_tokens,
                                     seeds=[repeat * 1000 + i for i in range(batch)])
                cell = parts.setdefault((batch, k), {})
                mine = []
                events = speculate_batch(pair, config, drafter=drafter or DRAFT_MODEL,
                                         clock=clock)
                for index, event in enumerate(events):
                    if (repeat == 0 or index == 0 or not isinstance(event, BatchStepEvent)
                            or len(event.rows) < batch):
                        continue
                    for name, ms in _parts(event).items():
                        cell.setdefault(name, []).append(ms)
                    mine.append(event.step_ms)
                if mine:
                    by_repeat.setdefault((batch, k), []).append(statistics.median(mine))
        if repeat:
            log(f"repeat {repeat} of {repeats} done")
    return {key: {name: statistics.median(v) for name, v in cell.items()} | {
        "steps": len(cell.get("step", [])), "step_mad": mad(by_repeat.get(key, []))}
        for key, cell in parts.items()}


def mad(values: Sequence[float]) -> float:
    """The median absolute deviation from the median (0 for fewer than two values)."""
    if len(values) < 2:
        return 0.0
    middle = statistics.median(values)
    return statistics.median(abs(v - middle) for v in values)


def _parts(event) -> dict[str, float]:
    return {"draft_pass": event.draft_pass_ms, "target": event.target_ms,
            "loop": event.loop_ms, "step": event.step_ms}


def costs_file(medians: dict[tuple[int, int], dict], batches: Sequence[int], k_max: int,
               meta: dict) -> dict:
    """The versioned costs file (see the module's docstring)."""
    passes, loop, steps = [], [], []
    for batch in batches:
        plain = medians[(batch, 0)]
        if not plain.get("steps"):
            raise ValueError(f"no step at batch {batch} ran with every row live: raise "
                             "--new-tokens")
        per_draft = [medians[(batch, k)]["draft_pass"] / k for k in range(1, k_max + 1)
                     if medians[(batch, k)].get("steps")]
        draft = statistics.median(per_draft) if per_draft else 0.0
        passes.append({"model": "target", "batch": batch, "tokens": 1,
                       "median_ms": round(plain["target"], 4)})
        if per_draft:
            passes.append({"model": "draft", "batch": batch, "tokens": 1,
                           "median_ms": round(draft, 4)})
        for k in range(k_max + 1):
            cell = medians[(batch, k)]
            if not cell.get("steps"):
                continue
            if k:
                passes.append({"model": "target", "batch": batch, "tokens": k + 1,
                               "median_ms": round(cell["target"], 4)})
            # The step's median minus the passes the planner prices, so the planner's cycle
            # is the measured step.
            rest = cell["step"] - k * draft - cell["target"]
            loop.append({"batch": batch, "k": k, "median_ms": round(max(rest, 0.0), 4)})
            steps.append({"batch": batch, "k": k, "steps": cell["steps"]} | {
                f"{name}_ms": round(cell[name], 4) for name in ("draft_pass", "target", "loop",
                                                                "step")}
                | {"step_mad_ms": round(cell.get("step_mad", 0.0), 4)})
    return {"version": COSTS_FILE_VERSION, "method": "loop"} | meta | {
        "passes": passes, "loop": loop, "steps": steps}


def table(data: dict) -> str:
    """Markdown: each (batch, k)'s median step in parts."""
    lines = ["| B | k | draft passes | target pass | loop's own | step | steps |",
             "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for s in data["steps"]:
        lines.append(f"| {s['batch']} | {s['k']} | {s['draft_pass_ms']:.2f} | "
                     f"{s['target_ms']:.2f} | {s['loop_ms']:.2f} | {s['step_ms']:.2f} | "
                     f"{s['steps']} |")
    return "\n".join(lines) + "\n\n(ms, medians over the steps with every row live)"
