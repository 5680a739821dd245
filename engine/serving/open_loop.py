"""``specscope sweep --engine vllm --rates 0.5,1,2,4``: latency at a request rate through vLLM,
one server per speculation policy, one after the other.

At each rate the client sends the schedule's requests (:func:`engine.measure.latency.
poisson_arrivals`) at their arrival times, each on its own thread whatever is still in
flight, as streams, so each request's time to first token and time per output token are
measured (:mod:`engine.measure.latency`). Every policy gets the same prompts (request ``i``
takes prompt ``i`` of the set, round the set) and the same arrival times. vLLM fixes
speculation when it starts, so a policy change restarts the server; the start (until
``/health`` answers) and the stop are timed and reported. A rate's run ends when its last
request has answered, so the next rate starts on an empty server.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from engine.measure.latency import (
    RateSummary,
    RequestTiming,
    median_summary,
    poisson_arrivals,
    summarize,
)
from engine.measure.sweep_results import Policy
from engine.serving.client import VllmClient, VllmError
from engine.serving.metrics import SpecCounters
from engine.serving.policy_sweep import server_spec
from engine.serving.server import VllmServer


def run_schedule(client: VllmClient, prompts: Sequence[list[int]], arrivals: Sequence[float],
                 new_tokens: int, temperature: float = 0.0,
                 clock: Callable[[], float] = time.perf_counter) -> list[RequestTiming]:
    """Send request ``i`` (prompt ``i`` round ``prompts``) at ``arrivals[i]`` seconds from now,
    without waiting for earlier answers; return every request's timing once all have ended
    (times from the start, in ``clock``'s seconds)."""
    if not prompts:
        raise ValueError("no prompts to send")
    start = clock()
    timings: list[RequestTiming | None] = [None] * len(arrivals)

    def send(i: int, at: float) -> None:
        sent = clock() - start
        try:
            answer = client.stream(prompts[i % len(prompts)], new_tokens, temperature,
                                   clock=clock)
        except VllmError as error:
            timings[i] = RequestTiming(i, at, sent, error=str(error))
            return
        sent = answer.sent - start
        if not answer.chunks:
            timings[i] = RequestTiming(i, at, sent, error="the stream brought no tokens")
            return
        timings[i] = RequestTiming(i, at, sent, first=answer.chunks[0][0] - start,
                                   last=answer.chunks[-1][0] - start,
                                   tokens=len(answer.token_ids))

    threads = []
    for i, at in enumerate(arrivals):
        wait = start + at - clock()
        if wait > 0:
            time.sleep(wait)
        thread = threading.Thread(target=send, args=(i, at), daemon=True)
        thread.start()
        threads.append(thread)
    for thread in threads:
        thread.join()
    return [t for t in timings if t is not None]


@dataclass
class RateRun:
    """One rate on one policy's server: the figures, every request, the counters' change."""

    summary: RateSummary
    timings: list[RequestTiming]
    counts: SpecCounters | None = None
    load_average: float | None = None  # the machine's, over the last minute, at the end

    def as_dict(self) -> dict:
        out = self.summary.as_dict() | {"load_average_1min": self.load_average}
        c = self.counts
        if c is not None:
            out["spec"] = {"drafts": c.drafts, "draft_tokens": c.draft_tokens,
                           "accepted": c.accepted,
                           "draft_acceptance_rate": c.draft_acceptance_rate,
                           "mean_acceptance_length": c.mean_acceptance_length}
        out["errors"] = sorted({t.error for t in self.timings if t.error})[:5]
        out["request_timings"] = [
            {"scheduled": round(t.scheduled, 6), "sent": round(t.sent, 6),
             "first": None if t.first is None else round(t.first, 6),
             "last": None if t.last is None else round(t.last, 6), "tokens": t.tokens}
            for t in self.timings]
        return out


@dataclass
class PolicyRun:
    policy: Policy
    start_s: float  # starting the server until /health answered
    stop_s: float = 0.0  # stopping it (its whole process group gone)
    rates: list[RateRun] = field(default_factory=list)
    pass_index: int = 0  # which pass over the policies (0: the first)

    def as_dict(self) -> dict:
        return {"policy": self.policy.name, "k": self.policy.k, "pass": self.pass_index,
                "server_start_s": round(self.start_s, 2), "server_stop_s": round(self.stop_s, 2),
                "rates": [r.as_dict() for r in self.rates]}


def medians(runs: Sequence[PolicyRun]) -> dict[str, list[RateSummary]]:
    """Per policy (in the order they first ran) and rate: the median over its passes."""
    by_policy: dict[str, list[PolicyRun]] = {}
    for run in runs:
        by_policy.setdefault(run.policy.name, []).append(run)
    out = {}
    for name, passes in by_policy.items():
        rates = [r.summary.rate for r in passes[0].rates]
        out[name] = [median_summary([r.summary for p in passes for r in p.rates
                                     if r.summary.rate == rate]) for rate in rates]
    return out


def schedules(rates: Sequence[float], requests: int, seed: int,
              duration: float | None = None) -> dict[float, list[float]]:
    """Each rate's arrival times (the same for every policy)."""
    return {rate: poisson_arrivals(rate, requests, seed, duration) for rate in rates}


def run_policy(client: VllmClient, prompts: Sequence[list[int]],
               arrivals: dict[float, list[float]], new_tokens: int, temperature: float,
               speculative: bool, log: Callable[[str], None] = lambda message: None
               ) -> list[RateRun]:
    """Every rate on one server, after one untimed request that warms it up."""
    client.stream(prompts[0], new_tokens, temperature)
    runs = []
    for rate, times in arrivals.items():
        before = client.counters() if speculative else None
        timings = run_schedule(client, prompts, times, new_tokens, temperature)
        counts = client.counters() - before if speculative else None
        summary = summarize(rate, timings)
        runs.append(RateRun(summary, timings, counts, round(os.getloadavg()[0], 2)))
        tpot = "-" if summary.tpot_p50_ms is None else f"{summary.tpot_p50_ms:.1f}"
        log(f"{rate:g} req/s: {summary.completed}/{summary.requests} completed, TPOT p50 "
            f"{tpot} ms, {summary.tok_s:.1f} tok/s, peak in flight {summary.peak_in_flight}")
    return runs


def run_policies(policies: Sequence[Policy], arrivals: dict[float, list[float]],
                 prompts: Sequence[list[int]], new_tokens: int, temperature: float,
                 target: str, draft: str | None,
                 log: Callable[[str], None] = lambda message: None, passes: int = 1,
                 **server_kwargs) -> list[PolicyRun]:
    """One server per policy, started, measured at every rate and stopped (always, also on
    an error), one at a time; with ``passes`` > 1 the policies again in turn, that many
    times, so a spell of other work on the machine falls on one pass, not on one policy."""
    if passes < 1:
        raise ValueError("passes must be at least 1")
    results = []
    for pass_index, policy in ((i, p) for i in range(passes) for p in policies):
        log(f"starting vLLM for policy {policy.name}"
            + (f" (pass {pass_index + 1} of {passes})" if passes > 1 else "") + " ...")
        server = VllmServer(server_spec(policy, target, draft, **server_kwargs))
        started = time.perf_counter()
        server.start()
        run = PolicyRun(policy, time.perf_counter() - started, pass_index=pass_index)
        log(f"policy {policy.name}: the server answered /health after {run.start_s:.1f} s")
        try:
            run.rates = run_policy(server.client, prompts, arrivals, new_tokens, temperature,
                                   policy.k > 0, log)
        finally:
            stopping = time.perf_counter()
            server.stop()
            run.stop_s = time.perf_counter() - stopping
        log(f"policy {policy.name}: stopped in {run.stop_s:.1f} s")
        results.append(run)
    return results
