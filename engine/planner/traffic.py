"""Traffic given as a request rate and an output length: the batches it implies, and the time
per output token with and without speculation (standard library only).

The queueing assumption, stated: requests arrive as a Poisson process at ``rate`` a second,
each decodes ``output_tokens`` tokens, and the server is not at capacity (every arrival starts
decoding at once: vLLM admits it while ``max_num_seqs`` and memory allow). Then the sequences
decoding at once form an M/G/infinity system: by Little's law their mean is ``L = rate x
time in decode``, and their number is Poisson distributed with mean ``L`` whatever the
output lengths' distribution. Prefill is left out (a short prompt's is a step or two).

A request's time in decode is ``output_tokens`` times the time per output token at the batch
it runs in, which itself grows with the batch: ``L = rate N tau(L)``, a fixed point, solved by
bisection (``L - rate N tau(L)`` rises with ``L`` while ``tau`` grows slower than ``L``).
Speculation shortens ``tau``, so the same traffic runs at a smaller batch with it than
without: a batch mix observed with speculation on is not the mix without it, and each side is
priced at its own. The objective is the time per output token at that traffic (the
throughput is the traffic's own, ``rate N``, on both sides while neither is at capacity).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

ASSUMPTION = ("Poisson arrivals, every request decoding from its arrival (no queue below "
              "max_num_seqs): the sequences decoding at once are Poisson with mean L = rate x "
              "output tokens x the time per output token at L (Little's law); prefill left "
              "out")
Tau = Callable[[int], float]
"""``tau(B)``: seconds per output token of one sequence at batch ``B``."""


class Overloaded(ValueError):
    """The traffic needs more sequences at once than ``max_num_seqs``: requests would queue."""


@dataclass(frozen=True)
class AtRate:
    """One side (off, or speculating) at the traffic: the mean batch ``L``, the mean time per
    output token over the tokens served (s), and the batch distribution (``{B: share of
    time}``)."""

    batch: float
    tpot_s: float
    mix: dict[int, float]


def tau_between(tau: Tau, batch: float) -> float:
    """``tau`` between whole batches: linear from ``B = 1`` (a batch below 1 runs as 1)."""
    if batch <= 1:
        return tau(1)
    lo = math.floor(batch)
    return tau(lo) + (tau(lo + 1) - tau(lo)) * (batch - lo)


def mean_batch(rate: float, output_tokens: int, tau: Tau, max_num_seqs: int) -> float:
    """``L = rate N tau(L)`` (Little's law): the mean number of sequences decoding at once;
    :class:`Overloaded` when even ``max_num_seqs`` at once cannot keep up."""
    if not (rate > 0 and math.isfinite(rate)) or output_tokens < 1:
        raise ValueError("a request rate above 0 and at least one output token are needed")

    def excess(batch: float) -> float:
        return batch - rate * output_tokens * tau_between(tau, batch)

    if excess(max_num_seqs) < 0:
        raise Overloaded(
            f"{rate:g} requests/s of {output_tokens} tokens need more than {max_num_seqs} "
            "sequences decoding at once: requests would queue (the rate is past this "
            "server's capacity)")
    lo, hi = 0.0, float(max_num_seqs)
    for _ in range(60):
        middle = (lo + hi) / 2
        if excess(middle) < 0:
            lo = middle
        else:
            hi = middle
    return hi


def poisson_mix(mean: float, max_num_seqs: int) -> dict[int, float]:
    """The share of time with ``B`` sequences decoding, ``B = 1..max_num_seqs`` (Poisson with
    this mean, the tail above ``max_num_seqs`` folded into it; idle time left out: no steps
    run then), normalised to 1."""
    shares: dict[int, float] = {}
    p = math.exp(-mean)  # P(0)
    total = 0.0
    for b in range(1, max_num_seqs + 1):
        p = p * mean / b
        shares[b] = p
        total += p
    tail = max(0.0, 1.0 - math.exp(-mean) - total)
    shares[max_num_seqs] += tail
    total += tail
    return {b: s / total for b, s in shares.items() if s / total > 1e-9}


def at_rate(rate: float, output_tokens: int, tau: Tau, max_num_seqs: int) -> AtRate:
    """One side at the traffic: its mean batch, the batch mix, and the mean time per output
    token over the tokens served (a step at batch ``B`` serves ``B`` tokens, so each batch
    counts by its share of time times ``B / tau(B)``)."""
    mean = mean_batch(rate, output_tokens, tau, max_num_seqs)
    mix = poisson_mix(mean, max_num_seqs)
    tokens = {b: share * b / tau(b) for b, share in mix.items()}
    served = sum(tokens.values())
    tpot = sum(t * tau(b) for b, t in tokens.items()) / served
    return AtRate(mean, tpot, mix)


def unspeculated_mix(mix: dict[int, float], tau_observed: Tau, tau_off: Tau,
                     max_num_seqs: int) -> dict[int, float]:
    """A batch mix observed while the server speculated, as the same traffic runs without
    speculation: each observed batch ``B`` serves requests at the rate ``B / tau_observed(B)``
    (Little's law), and without speculation that rate needs the batch ``B'`` with
    ``B' / tau_off(B') = B / tau_observed(B)``; the share of time moves with it (rounded to
    a whole batch, at most ``max_num_seqs``)."""
    out: dict[int, float] = {}
    for batch, share in mix.items():
        try:  # the same fixed point as mean_batch: B' = (B / tau_observed(B)) tau_off(B')
            off = mean_batch(batch / tau_observed(batch), 1, tau_off, max_num_seqs)
        except Overloaded:  # past capacity without speculation: it queues at the top
            off = max_num_seqs
        off = min(max_num_seqs, max(1, round(off)))
        out[off] = out.get(off, 0.0) + share
    return out
