"""What the sweeps of both engines share (``specscope sweep --engine specscope``,
:mod:`engine.measure.batch_sweep`; ``--engine vllm``, :mod:`engine.serving.policy_sweep`): the
speculation policies, the schedule file, the statistics of a cell's repeats and the table.

A policy is off (k = 0 at every step), a fixed k, or a schedule ``[[lo, hi, k], ...]`` applied
to the live batch size as vLLM applies ``num_speculative_tokens_per_batch_size`` (a batch size
in a gap between ranges keeps the previous range's k). Standard library only.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from engine.planner.deployed import deployed_ranges

Ranges = list[tuple[int, int, int]]
ALL_BATCHES = 256  # vLLM's "0" policy: one range with k = 0 over every batch it can run


@dataclass(frozen=True)
class Policy:
    """``name``; ``k``, the largest k it uses (vLLM's ``num_speculative_tokens``; 0: off);
    ``schedule``, ranges ``(lo, hi, k)`` of the live batch size, or None for a fixed k."""

    name: str
    k: int
    schedule: tuple[tuple[int, int, int], ...] | None = None

    @property
    def off(self) -> bool:
        return self.k == 0

    def k_at(self, batch: int) -> int:
        """The k at ``batch`` live rows (a gap keeps the previous range's k, as vLLM does)."""
        if self.schedule is None:
            return self.k
        k = 0
        for lo, hi, range_k in self.schedule:
            if batch >= lo:
                k = range_k
            if lo <= batch <= hi:
                break
        return min(k, self.k)


def schedule_policy(ranges: Sequence[Sequence[int]], name: str = "schedule") -> Policy:
    ranges = tuple((int(lo), int(hi), int(k)) for lo, hi, k in ranges)
    return Policy(name, max((k for _, _, k in ranges), default=0), ranges)


def parse_policies(text: str, schedule: Ranges | None, *, vllm: bool = False) -> list[Policy]:
    """``off,2,4`` (comma-separated), plus "schedule" when ``schedule`` is given; "off" always
    comes first (every speedup is against it). "0" is off for our engine; for vLLM
    (``vllm=True``) it is a speculative config whose k is 0 at every batch, which vLLM 0.32
    still pays a draft pass a step for."""
    policies = [Policy("off", 0)]
    for item in filter(None, (x.strip() for x in text.split(","))):
        if item == "off":
            continue
        if not item.isdigit():
            raise ValueError(f"policies are 'off' or a whole k, comma-separated; got {item!r}")
        k = int(item)
        if k == 0:
            if vllm:  # k = 1 sizes vLLM's buffers; the one range asks for 0
                policies.append(Policy("k = 0", 1, ((1, ALL_BATCHES, 0),)))
            continue
        policies.append(Policy(f"k = {k}", k))
    if schedule is not None:
        planned = schedule_policy(schedule)
        if vllm and planned.k < 1:
            raise ValueError("the schedule's k is 0 everywhere: vLLM needs at least one "
                             "range with k >= 1 (or run the '0' policy)")
        policies.append(planned)
    return list({p.name: p for p in policies}.values())


def read_schedule(path: Path) -> Ranges:
    """``[[lo, hi, k], ...]`` from a JSON file: what ``specscope plan --json`` writes, read as
    its config deploys it (:func:`engine.planner.deployed.deployed_ranges`: the schedule, or
    the fixed k the plan printed instead); the list itself; or any object holding it as
    ``num_speculative_tokens_per_batch_size`` (a ``speculative_config``)."""
    data = json.loads(path.read_text(encoding="utf-8"))
    found = deployed_ranges(data) or _find_ranges(data)
    if found is None:
        raise ValueError(f"{path}: no [[lo, hi, k], ...] list (num_speculative_tokens_per_"
                         "batch_size) in it")
    ranges = []
    for item in found:
        if (not isinstance(item, list) or len(item) != 3
                or not all(isinstance(x, int) and not isinstance(x, bool) for x in item)
                or not 1 <= item[0] <= item[1] or item[2] < 0):
            raise ValueError(f"{path}: each range must be [lo, hi, k] with 1 <= lo <= hi and "
                             f"k >= 0, got {item!r}")
        ranges.append((item[0], item[1], item[2]))
    return sorted(ranges)


def _find_ranges(data):
    """The top-level list, or the first ``num_speculative_tokens_per_batch_size`` found."""
    if isinstance(data, list) and data and all(isinstance(x, list) for x in data):
        return data
    if isinstance(data, dict):
        if "num_speculative_tokens_per_batch_size" in data:
            return data["num_speculative_tokens_per_batch_size"]
        for value in data.values():
            if isinstance(value, dict):
                found = _find_ranges(value)
                if found is not None:
                    return found
    return None


def spread(values: Sequence[float]) -> tuple[float, float, float]:
    """First quartile, median, third quartile (one value: itself thrice)."""
    if len(values) == 1:
        return values[0], values[0], values[0]
    q1, median, q3 = statistics.quantiles(values, n=4)
    return q1, median, q3


def table(batches: Sequence[int], names: Sequence[str],
          tok_s: Callable[[str, int], tuple[float, float, float]]) -> str:
    """Markdown: tokens/s median (interquartile range) per batch and policy, and the best;
    ``tok_s(name, i)``: the spread of policy ``name`` at the ``i``-th batch."""
    lines = ["| B | " + " | ".join(names) + " | best |",
             "| ---: |" + " ---: |" * (len(names) + 1)]
    for i, batch in enumerate(batches):
        row, best = [], None
        for name in names:
            q1, median, q3 = tok_s(name, i)
            row.append(f"{median:.0f} ({q1:.0f}-{q3:.0f})")
            if best is None or median > best[1]:
                best = (name, median)
        lines.append(f"| {batch} | " + " | ".join(row) + f" | {best[0]} |")
    return "\n".join(lines)
