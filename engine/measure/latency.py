"""Latency at a request rate: open-loop (Poisson) arrival schedules, each request's time to
first token and time per output token, and their percentiles per rate and policy.

An open-loop client sends request ``i`` at its arrival time whatever is still in flight, so
a server slower than the arrivals builds a queue, as a real service's would; a closed loop
(the batch sweep) waits for answers before it sends more and never sees one. Arrivals are a
Poisson process: gaps drawn from an exponential distribution of mean ``1 / rate`` by an
explicit ``random.Random(seed)``. Every rate draws from a fresh generator of the same seed,
so the schedules of two rates are the same draws scaled by the ratio of the rates, and every
policy gets the same schedule at a rate.

Per request (times in seconds from the start of the rate's run):
``TTFT = first token - sent``; ``TPOT = (last token - first token) / (tokens - 1)``, the
mean time between output tokens after the first (a streamed chunk may carry several tokens,
as a speculative step does: they arrive at once). Percentiles interpolate linearly between
the two nearest ranks (numpy's default, as vLLM's benchmark reports them). Standard library
only.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass

MAX_RATE = 1000.0  # requests/s; far past what any server here answers


def parse_rates(text: str) -> list[float]:
    """``0.5,1,2,4``: request rates (requests per second), each a finite number > 0; sorted,
    duplicates dropped. Raises ValueError with a message a person can act on."""
    items = [x.strip() for x in text.split(",") if x.strip()]
    if not items:
        raise ValueError("give at least one request rate, e.g. 0.5,1,2,4 (requests per second)")
    rates = []
    for item in items:
        try:
            rate = float(item)
        except ValueError:
            raise ValueError(f"a request rate must be a number of requests per second, "
                             f"got {item!r}") from None
        if not math.isfinite(rate) or rate <= 0 or rate > MAX_RATE:
            raise ValueError(f"a request rate must be more than 0 and at most {MAX_RATE:g} "
                             f"requests per second, got {item!r}")
        rates.append(rate)
    return sorted(set(rates))


def poisson_arrivals(rate: float, count: int, seed: int,
                     duration: float | None = None) -> list[float]:
    """Arrival times (s) of up to ``count`` requests at ``rate`` per second: the first at 0,
    then exponential gaps of mean ``1 / rate`` from ``random.Random(seed)``; with
    ``duration``, only the arrivals before it."""
    if rate <= 0 or not math.isfinite(rate):
        raise ValueError(f"the request rate must be a finite number > 0, got {rate}")
    if count < 1:
        raise ValueError(f"the number of requests must be at least 1, got {count}")
    if duration is not None and duration <= 0:
        raise ValueError(f"the duration must be more than 0 seconds, got {duration}")
    rng = random.Random(seed)
    times = [0.0]
    while len(times) < count:
        t = times[-1] + rng.expovariate(rate)
        if duration is not None and t >= duration:
            break
        times.append(t)
    return times


@dataclass
class RequestTiming:
    """One request of an open-loop run; times in seconds from the run's start.

    ``scheduled``: its arrival time; ``sent``: when the client sent it (later than scheduled
    only when the client falls behind); ``first`` / ``last``: when its first and its last
    output token arrived; ``tokens``: output tokens received; ``error``: why it failed (then
    it counts as not completed)."""

    index: int
    scheduled: float
    sent: float
    first: float | None = None
    last: float | None = None
    tokens: int = 0
    error: str | None = None

    @property
    def completed(self) -> bool:
        return self.error is None and self.first is not None and self.tokens > 0

    @property
    def ttft(self) -> float | None:
        return self.first - self.sent if self.completed else None

    @property
    def tpot(self) -> float | None:
        """Seconds per output token after the first; None with fewer than 2 tokens."""
        if not self.completed or self.tokens < 2:
            return None
        return (self.last - self.first) / (self.tokens - 1)


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100) of ``values``, interpolated linearly between the two
    nearest ranks: position ``(n - 1) q / 100`` in the sorted values."""
    if not values:
        raise ValueError("no values to take a percentile of")
    if not 0 <= q <= 100:
        raise ValueError(f"a percentile is between 0 and 100, got {q}")
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


@dataclass
class RateSummary:
    """One (rate, policy): the figures of its requests (None where no request completed).

    ``drawn_rate``: the rate of the schedule as drawn (a Poisson schedule of n requests
    strays from ``rate`` by about ``rate / sqrt(n)``); ``seconds``: from the first send to
    the last answer; ``tok_s``: output tokens of the completed requests over it;
    ``achieved_rate``: completed requests over it (below the drawn rate when the server
    falls behind and a queue builds; a little below it anyway, by the last answer's own
    latency); ``peak_in_flight``: the most requests sent and not yet answered at once;
    ``send_lag_max_ms``: how late the client sent its latest request (an open loop only
    while this stays far below the gaps)."""

    rate: float
    drawn_rate: float | None  # the schedule's own: (requests - 1) / its last arrival
    requests: int
    completed: int
    seconds: float
    tok_s: float
    achieved_rate: float
    tpot_p50_ms: float | None
    tpot_p99_ms: float | None
    ttft_p50_ms: float | None
    ttft_p99_ms: float | None
    latency_p50_s: float | None
    peak_in_flight: int
    send_lag_max_ms: float = 0.0  # the client's: sent - scheduled, at worst

    def as_dict(self) -> dict:
        return asdict(self)


def summarize(rate: float, timings: Sequence[RequestTiming]) -> RateSummary:
    if not timings:
        raise ValueError("no requests to summarize")
    done = [t for t in timings if t.completed]
    start = min(t.sent for t in timings)
    end = max((t.last for t in done), default=start)
    seconds = max(end - start, 1e-9)
    tpots = [t.tpot for t in done if t.tpot is not None]
    ttfts = [t.ttft for t in done]
    latencies = [t.last - t.sent for t in done]

    def ms(values: list[float], q: float) -> float | None:
        return 1000 * percentile(values, q) if values else None

    span = max(t.scheduled for t in timings) - min(t.scheduled for t in timings)
    return RateSummary(
        rate=rate,
        drawn_rate=(len(timings) - 1) / span if span > 0 else None,
        requests=len(timings),
        completed=len(done),
        seconds=seconds,
        tok_s=sum(t.tokens for t in done) / seconds,
        achieved_rate=len(done) / seconds,
        tpot_p50_ms=ms(tpots, 50),
        tpot_p99_ms=ms(tpots, 99),
        ttft_p50_ms=ms(ttfts, 50),
        ttft_p99_ms=ms(ttfts, 99),
        latency_p50_s=percentile(latencies, 50) if latencies else None,
        peak_in_flight=peak_in_flight(timings),
        send_lag_max_ms=1000 * max(t.sent - t.scheduled for t in timings),
    )


def median_summary(summaries: Sequence[RateSummary]) -> RateSummary:
    """Several passes of one (rate, policy) as one row: every figure's median over the
    passes (over those that have it), requests and completions summed, the largest peak.
    On a shared machine one pass can stall behind other work; the median keeps it out."""
    if not summaries:
        raise ValueError("no passes to combine")
    rates = {s.rate for s in summaries}
    if len(rates) != 1:
        raise ValueError(f"passes of different rates cannot be combined: {sorted(rates)}")

    def middle(name: str) -> float | None:
        values = [getattr(s, name) for s in summaries if getattr(s, name) is not None]
        return statistics.median(values) if values else None

    medians = {name: middle(name) for name in (
        "drawn_rate", "seconds", "tok_s", "achieved_rate", "tpot_p50_ms", "tpot_p99_ms",
        "ttft_p50_ms", "ttft_p99_ms", "latency_p50_s", "send_lag_max_ms")}
    return RateSummary(rate=summaries[0].rate,
                       requests=sum(s.requests for s in summaries),
                       completed=sum(s.completed for s in summaries),
                       peak_in_flight=max(s.peak_in_flight for s in summaries), **medians)


def peak_in_flight(timings: Sequence[RequestTiming]) -> int:
    """The most requests in flight at once: sent, and not yet answered (or failed)."""
    events = []
    for t in timings:
        events.append((t.sent, 1))
        end = t.last if t.completed else t.sent
        events.append((end, -1))
    # at equal times an answer leaves before a send arrives
    events.sort(key=lambda e: (e[0], e[1]))
    peak = live = 0
    for _, change in events:
        live += change
        peak = max(peak, live)
    return peak


def table(summaries: dict[str, Sequence[RateSummary]]) -> str:
    """Markdown: one row per rate and policy (policies in the order given)."""
    lines = ["| rate (req/s) | drawn | policy | TPOT p50 (ms) | TPOT p99 (ms) | "
             "TTFT p50 (ms) | output tok/s | completed | achieved (req/s) | peak in flight |",
             "| ---: | ---: | --- |" + " ---: |" * 7]
    rates = sorted({s.rate for rows in summaries.values() for s in rows})
    for rate in rates:
        for name, rows in summaries.items():
            for s in rows:
                if s.rate != rate:
                    continue
                drawn = "-" if s.drawn_rate is None else f"{s.drawn_rate:.2f}"
                lines.append(
                    f"| {rate:g} | {drawn} | {name} | {_num(s.tpot_p50_ms)} | "
                    f"{_num(s.tpot_p99_ms)} | {_num(s.ttft_p50_ms)} | {s.tok_s:.1f} | "
                    f"{s.completed}/{s.requests} | {s.achieved_rate:.2f} | {s.peak_in_flight} |")
    return "\n".join(lines)


def _num(x: float | None) -> str:
    return "-" if x is None else f"{x:.1f}"
