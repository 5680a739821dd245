"""A batch of ``B`` requests of ``N`` new tokens each, started together and run until the
last is done (how ``specscope sweep`` measures a batch, on our engine and on vLLM). Standard
library only.

Plain decoding finishes every row in ``N`` steps. With speculation each row takes its own
number of cycles ``C`` (its accepted drafts vary), finished rows leave the batch, and the
batch runs until its slowest row is done: the cycles left at the end run fewer rows, so cost
less, but there are more of them than ``N / E[tokens]``. Over cycle ``i`` the chance a given
row is still live is ``P(C > i)``; the batch runs that cycle when any row is live,
``1 - (1 - P(C > i))^B``, with on average ``B P(C > i) / (1 - (1 - P(C > i))^B)`` rows.
Acceptance is i.i.d. at ``alpha`` (:mod:`engine.analytic.theory`); a row's last cycle keeps
only the tokens it still needs.
"""

from __future__ import annotations

from collections.abc import Callable

from engine.analytic.break_even import draft_step_s, step_s, verify_step_s
from engine.analytic.passes import Setting


def live_after(alpha: float, k: int, new_tokens: int) -> list[float]:
    """``P(C > i)`` for ``i = 0, 1, ...`` until it vanishes: the chance one row still needs
    tokens after ``i`` cycles of ``k`` drafts each (``[1.0]`` first)."""
    if not 0 <= alpha <= 1 or k < 0 or new_tokens < 1:
        raise ValueError("needs 0 <= alpha <= 1, k >= 0 and at least one new token")
    # a cycle adds j + 1 tokens: j drafts accepted, then the target's own token
    per_cycle = [alpha ** j * (1 - alpha) for j in range(k)] + [alpha ** k]
    short = {0: 1.0}  # tokens so far (< N) -> probability, over the rows still live
    live = [1.0]
    while short:
        after: dict[int, float] = {}
        for tokens, p in short.items():
            for j, q in enumerate(per_cycle):
                if tokens + j + 1 < new_tokens and p * q > 0:
                    after[tokens + j + 1] = after.get(tokens + j + 1, 0.0) + p * q
        short = {t: p for t, p in after.items() if p > 1e-15}
        live.append(sum(short.values()))
    return live[:-1] if live[-1] == 0 else live


def batch_seconds(cycle_s: Callable[[float], float], batch: int, live: list[float]) -> float:
    """Expected seconds until the last of ``batch`` rows is done, each cycle costing
    ``cycle_s(rows live)``, with ``live[i] = P(C > i)`` (:func:`live_after`)."""
    total = 0.0
    for share in live:
        running = 1 - (1 - share) ** batch  # some row is still live
        if running > 0:
            total += running * cycle_s(max(1.0, batch * share / running))
    return total


def speedup(s: Setting, batch: int, new_tokens: int, k: int | None = None) -> float:
    """Speculation's speedup over plain decoding for ``batch`` requests of ``new_tokens``
    each, started together: ``N t_step(B)`` over the expected time of the speculative run."""
    k = s.k if k is None else k
    plain = new_tokens * step_s(s, batch)
    if k == 0:
        return 1.0
    live = live_after(s.alpha, k, new_tokens)
    return plain / batch_seconds(
        lambda rows: k * draft_step_s(s, rows) + verify_step_s(s, rows, k), batch, live)
