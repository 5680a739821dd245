"""Is a sample of the first two output tokens distributed as the target says? A chi-square test
against the target's exact joint distribution p(t1) p(t2 | t1), computed by the model itself.

Two tokens because a serving engine's first token may come from the prefill, without a draft
(vLLM's does): the second is the first one that speculation's verification decides.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass

import torch
from scipy.stats import chisquare

MIN_EXPECTED = 5.0  # the usual rule for the chi-square approximation: rarer cells are binned
REST = None  # the cell of a first token's rarer second tokens


@dataclass
class ChiSquare:
    samples: int
    cells: int  # after binning
    statistic: float
    p_value: float

    def __str__(self) -> str:
        return (f"chi-square {self.statistic:.1f} on {self.cells - 1} degrees of freedom, "
                f"p = {self.p_value:.3g} ({self.samples} samples)")


def exact_expected(target, prompt_ids: list[int], n: int) -> dict:
    """Expected counts among ``n`` samples of the cells (t1, t2), (t1, REST) and "other", at
    temperature 1; every cell at least :data:`MIN_EXPECTED`.

    (t1, t2) for each pair with ``n p(t1) p(t2 | t1) >= 5``; (t1, REST) for the rest of t1's
    second tokens when they are expected that often together; "other" for everything else.
    Only first tokens expected 5 times or more need their second-token distribution: one
    forward pass of ``target`` over [m, len(prompt_ids) + 1]."""
    with torch.inference_mode():
        p1 = torch.softmax(target(torch.tensor([prompt_ids])).logits[0, -1].double(), -1)
        firsts = (p1 * n >= MIN_EXPECTED).nonzero().view(-1)
        batch = torch.tensor([prompt_ids + [int(t)] for t in firsts])
        p2 = torch.softmax(target(batch).logits[:, -1].double(), -1)  # [m, vocab]
    expected: dict = {}
    for row, t1 in enumerate(firsts.tolist()):
        joint = p1[t1] * p2[row] * n
        kept = (joint >= MIN_EXPECTED).nonzero().view(-1).tolist()
        expected.update({(t1, t2): float(joint[t2]) for t2 in kept})
        rest = float(p1[t1] * n) - sum(float(joint[t2]) for t2 in kept)
        if rest >= MIN_EXPECTED:
            expected[(t1, REST)] = rest
    expected["other"] = n - sum(expected.values())
    assert expected["other"] >= MIN_EXPECTED, "too few samples for this prompt"
    return expected


def chi_square(samples: list[tuple[int, int]], expected: dict) -> ChiSquare:
    """``samples`` of (t1, t2) against :func:`exact_expected` of the same ``n``."""
    n = len(samples)
    assert abs(sum(expected.values()) - n) < 1e-6 * n

    def cell(t1: int, t2: int):
        for key in ((t1, t2), (t1, REST)):
            if key in expected:
                return key
        return "other"

    observed = collections.Counter(cell(t1, t2) for t1, t2 in samples)
    keys = list(expected)
    statistic, p_value = chisquare([observed[k] for k in keys], [expected[k] for k in keys])
    return ChiSquare(n, len(keys), float(statistic), float(p_value))
