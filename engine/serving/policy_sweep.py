"""``specscope sweep --engine vllm --policies ... [--schedule PLAN.json]``: vLLM's throughput
against batch size for several speculation policies, one server per policy, one at a time.

A policy is "off" (no speculative config at all), a fixed k (``num_speculative_tokens``), "0"
(a speculative config whose schedule is k = 0 at every batch: what a schedule's k = 0 ranges
cost in vLLM 0.32, whose draft model still runs one forward pass per step to keep its KV cache
in step, ``llm_base_proposer.py``), or "schedule" (``num_speculative_tokens_per_batch_size``
from a plan, ``num_speculative_tokens`` its largest k).

Each batch is timed like :mod:`engine.serving.sweep` (B concurrent requests, fixed new
tokens, end of sequence ignored; the median of the repeats, with the interquartile range), and
the server's speculative counters are read around each batch's repeats, so the table shows
where drafts stop (a k = 0 range drafts nothing). From the off and fixed-k policies,
:func:`costs_file` derives vLLM's own cycle costs in the form ``specscope plan --costs`` reads.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from engine.analytic.timed_costs import COSTS_FILE_VERSION
from engine.measure import sweep_results
from engine.measure.sweep_results import ALL_BATCHES, Policy, parse_policies, spread
from engine.serving.client import VllmClient
from engine.serving.metrics import SpecCounters
from engine.serving.server import ServerSpec
from engine.serving.sweep import _time_batch, check_batches


def server_spec(policy: Policy, target: str, draft: str | None, **kwargs) -> ServerSpec:
    """The server a policy runs on: none of speculation for "off", else the draft model with
    the policy's k (and schedule)."""
    if policy.off:
        return ServerSpec(target, None, k=0, **kwargs)
    ranges = [list(r) for r in policy.schedule] if policy.schedule is not None else None
    return ServerSpec(target, draft, k=policy.k, schedule=ranges, **kwargs)


def parse_vllm_policies(text: str, schedule: Sequence[Sequence[int]] | None) -> list[Policy]:
    """``off,0,2,4`` for vLLM (off: no speculative config; 0: a config whose k is 0 at every
    batch), plus "schedule" when ``schedule`` is given; "off" always comes first."""
    return parse_policies(text, schedule, vllm=True)


@dataclass
class VllmCell:
    """One (policy, batch): each repeat's seconds, and the counters' change over them."""

    batch: int
    tokens: int  # per repeat: batch x new tokens
    seconds: list[float] = field(default_factory=list)
    counts: SpecCounters | None = None
    cpu_seconds: list[float] = field(default_factory=list)  # the server's CPU time
    clock: str = "wall"  # which the figures use: "wall" or "cpu"

    def times(self) -> list[float]:
        return self.cpu_seconds if self.clock == "cpu" else self.seconds

    def tok_s(self) -> tuple[float, float, float]:
        """Tokens/s: first quartile, median, third quartile (one repeat: itself thrice)."""
        return spread(sorted(self.tokens / max(s, 1e-9) for s in self.times()))

    def tokens_per_step(self) -> float:
        """Mean tokens a request gains per engine step: 1 without drafts, else the mean
        acceptance length (accepted drafts plus the step's own token)."""
        c = self.counts
        if c is None or not c.drafts:
            return 1.0
        return c.mean_acceptance_length

    def step_ms(self, new_tokens: int) -> float:
        """The median batch step's time: the batch's wall time over its steps (the prefill
        is spread over them; the same for every policy, so differences are the cycles')."""
        seconds = statistics.median(self.times())
        return 1000 * seconds / (new_tokens / self.tokens_per_step())


def sweep_server(client: VllmClient, prompts: Sequence[list[int]], batches: Sequence[int],
                 new_tokens: int, temperature: float, repeats: int, speculative: bool = True,
                 log: Callable[[str], None] = lambda message: None,
                 cpu_seconds: Callable[[], float] | None = None,
                 clock: str = "wall") -> list[VllmCell]:
    """Every batch on one server (after an untimed warm-up request), the counters of a
    ``speculative`` one (a server without a speculative config exports none) around each;
    with ``cpu_seconds`` (the server's CPU time so far) also the CPU time of each repeat."""
    client.complete(prompts[0], new_tokens, temperature)
    cells = []
    for batch in check_batches(batches):
        cell = VllmCell(batch, batch * new_tokens, clock=clock)
        before = client.counters() if speculative else None
        for _ in range(repeats):
            cpu = cpu_seconds() if cpu_seconds else 0.0
            cell.seconds.append(_time_batch(client, prompts, batch, new_tokens, temperature))
            if cpu_seconds:
                cell.cpu_seconds.append(cpu_seconds() - cpu)
        drafted = ""
        if speculative:
            cell.counts = client.counters() - before
            drafted = f", drafts {cell.counts.drafts}, draft tokens {cell.counts.draft_tokens}"
        q1, median, q3 = cell.tok_s()
        log(f"B = {batch}: {median:.1f} tok/s ({q1:.1f}-{q3:.1f}){drafted}")
        cells.append(cell)
    return cells


def table(results: dict[str, list[VllmCell]], policies: Sequence[Policy]) -> str:
    """Markdown: tokens/s median (interquartile range) per batch and policy, and the best."""
    names = [p.name for p in policies]
    return sweep_results.table([c.batch for c in results[names[0]]], names,
                               lambda name, i: results[name][i].tok_s())


def counters_table(results: dict[str, list[VllmCell]], policies: Sequence[Policy]) -> str:
    """Markdown: per speculative policy and batch, the k vLLM should use there and what its
    counters saw (drafts, draft tokens, draft acceptance rate, mean acceptance length)."""
    lines = ["| policy | B | k there | drafts | draft tokens | acceptance rate | "
             "mean acceptance length |", "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for policy in policies:
        if policy.k == 0:
            continue
        for cell in results[policy.name]:
            c = cell.counts
            rate = f"{c.draft_acceptance_rate:.3f}" if c.drafts else "-"
            length = f"{c.mean_acceptance_length:.2f}" if c.drafts else "-"
            lines.append(f"| {policy.name} | {cell.batch} | {policy.k_at(cell.batch)} | "
                         f"{c.drafts} | {c.draft_tokens} | {rate} | {length} |")
    return "\n".join(lines)


def drafting_mismatches(results: dict[str, list[VllmCell]],
                        policies: Sequence[Policy]) -> list[str]:
    """Batches whose counters disagree with the policy: drafts where k = 0, none where k > 0.
    (A batch's requests do not all run at the full batch size: the first arrive and the last
    finish alone, so a schedule's ranges may draft a little at a batch whose own k is 0;
    those are reported, not hidden.)"""
    found = []
    for policy in policies:
        if policy.k == 0:
            continue
        for cell in results[policy.name]:
            k, drafts = policy.k_at(cell.batch), cell.counts.drafts
            if (k == 0) != (drafts == 0):
                found.append(f"{policy.name}, B = {cell.batch}: k = {k} there, but "
                             f"{drafts} drafts counted")
    return found


def curves(results: dict[str, list[VllmCell]], policies: Sequence[Policy],
           meta: dict) -> list[dict]:
    """One measured-curve JSON per speculative policy (speedup over "off" at each batch),
    in the format of ``specscope sweep --engine specscope``'s curves, ``policy`` included."""
    out = []
    off = results["off"]
    for policy in policies:
        if policy.k == 0:
            continue
        points = []
        total = SpecCounters(0, 0, 0, [0] * policy.k)
        for cell, base in zip(results[policy.name], off, strict=True):
            spec, plain = cell.tok_s(), base.tok_s()
            c = cell.counts
            total = SpecCounters(total.drafts + c.drafts, total.draft_tokens + c.draft_tokens,
                                 total.accepted + c.accepted,
                                 [a + b for a, b in zip(total.per_position,
                                                        c.per_position[:policy.k], strict=False)])
            points.append({"batch": cell.batch, "speedup": spec[1] / plain[1],
                           "tok_s_spec": spec[1], "tok_s_base": plain[1],
                           "tok_s_spec_iqr": [spec[0], spec[2]],
                           "tok_s_base_iqr": [plain[0], plain[2]],
                           "drafts": cell.counts.drafts,
                           "draft_tokens": cell.counts.draft_tokens})
        k_max = max((r[2] for r in policy.schedule), default=0) if policy.schedule else policy.k
        # A fixed k: the counted alpha of its counters. A schedule's drafts mix several k,
        # which vLLM's counters do not tell apart: its draft acceptance rate instead.
        alpha = (total.alpha_counted if policy.schedule is None
                 else total.draft_acceptance_rate)
        out.append(meta | {
            "label": f"vLLM, {policy.name}",
            "policy": policy.name,
            "k": k_max,
            "alpha": round(alpha, 4) if alpha is not None else 0.0,
            "alpha_measure": ("counted alpha" if policy.schedule is None
                              else "draft acceptance rate"),
            "method": "end-to-end",
            "points": points,
        } | ({"schedule": [list(r) for r in policy.schedule]} if policy.schedule else {}))
    return out


def costs_file(results: dict[str, list[VllmCell]], policies: Sequence[Policy],
               new_tokens: int, meta: dict) -> dict:
    """vLLM's own cycle costs as ``specscope plan --costs`` reads them (``passes``).

    The sweep times whole steps, not single passes, so each fixed-k policy's step time is
    split along a line in k: with fixed k1 < k2 measured, ``d(B) = (t_k2 - t_k1) / (k2 - k1)``
    is the cost of one more draft token (a draft pass plus a longer verification) and the
    "target" pass over ``k + 1`` tokens is ``t_k - k d`` for every k up to k2; the plain step
    is the off policy's. One fixed k gives ``d`` from the off policy instead. The planner then
    sees ``cycle(B, k) = (k d(B) + t_p(B, k + 1)) / t_0(B) = t_k(B) / t_0(B)`` at the measured
    k and the line between them.

    With the "0" policy measured too, ``k0`` holds its step at each batch (a speculative
    config whose schedule says k = 0): what a plan's k = 0 ranges cost beside "off"."""
    fixed = sorted((p for p in policies if p.k > 0 and p.schedule is None), key=lambda p: p.k)
    if not fixed:
        raise ValueError("vLLM's costs need the off policy and at least one fixed k")
    off = results["off"]
    k1, k2 = (fixed[0], fixed[-1]) if len(fixed) > 1 else (None, fixed[0])
    passes = []
    for i, base in enumerate(off):
        t0 = base.step_ms(new_tokens)
        t2 = results[k2.name][i].step_ms(new_tokens)
        if k1 is None:
            d, a = (t2 - t0) / k2.k, t0
        else:
            t1 = results[k1.name][i].step_ms(new_tokens)
            d = (t2 - t1) / (k2.k - k1.k)
            a = t2 - k2.k * d
        d = max(d, 1e-3)  # a pass time must be positive; noise can make the slope negative
        passes.append({"model": "target", "batch": base.batch, "tokens": 1,
                       "median_ms": round(t0, 4)})
        passes.append({"model": "draft", "batch": base.batch, "tokens": 1,
                       "median_ms": round(d, 4)})
        for k in range(1, k2.k + 1):
            passes.append({"model": "target", "batch": base.batch, "tokens": k + 1,
                           "median_ms": round(max(a, 1e-3), 4)})
    zero = next((p for p in policies if p.schedule == ((1, ALL_BATCHES, 0),)), None)
    k0 = [{"batch": cell.batch, "median_ms": round(cell.step_ms(new_tokens), 4)}
          for cell in results[zero.name]] if zero is not None and zero.name in results else []
    return meta | {"version": COSTS_FILE_VERSION, "method": "vllm-steps", "passes": passes} | (
        {"k0": k0} if k0 else {})
