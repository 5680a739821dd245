"""Plain dataclasses: the settings of one generation, and the events the engine yields.

Every event turns into JSON with ``dataclasses.asdict``; its ``event`` field names its type.
Times are milliseconds of wall time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from engine import defaults
from engine.analytic.acceptance import DRAFT_SAMPLES
from engine.analytic.theory import ACCEPTED, DISCARDED, KINDS, REJECTED, TARGET

__all__ = [
    "ACCEPTED",
    "DEFAULT_SEED",
    "DISCARDED",
    "DRAFT_SAMPLES",
    "GREEDY_BELOW",
    "KINDS",
    "MAX_DRAFT_K",
    "REJECTED",
    "TARGET",
    "Acceptance",
    "CycleEvent",
    "DoneEvent",
    "GenerationConfig",
    "StepEvent",
    "SummaryEvent",
    "Token",
    "TreeDraft",
]

MAX_DRAFT_K = 32  # a verification pass over more than 33 positions is never worth it
DEFAULT_SEED = defaults.SEED  # the one default seed of every generation
GREEDY_BELOW = 1e-4  # temperatures below this are greedy decoding (engine.decoder.sampling)


@dataclass
class GenerationConfig:
    """What to generate and how. ``top_k = 0`` and ``top_p = 1`` switch those filters off;
    ``temperature = 0`` is greedy decoding.

    The field defaults are the generation defaults everywhere (the live panel, the API's
    schema, the command line read them from here); the server's own limits are settings.
    """

    prompt: str
    k: int = defaults.K
    temperature: float = defaults.TEMPERATURE
    top_p: float = defaults.TOP_P
    top_k: int = defaults.TOP_K
    max_new_tokens: int = defaults.MAX_NEW_TOKENS
    seed: int = DEFAULT_SEED
    draft_sample: str = "probabilistic"  # vLLM's draft_sample_method: or "greedy" (argmax)

    @property
    def greedy(self) -> bool:
        """Greedy decoding: temperature 0, or below ``GREEDY_BELOW``."""
        return self.temperature < GREEDY_BELOW

    def validate(self, max_new_tokens_limit: int | None = None) -> GenerationConfig:
        """Raise ``ValueError`` with a readable message for the first bad setting."""
        if not isinstance(self.prompt, str) or not self.prompt.strip():
            raise ValueError("the prompt is empty: give some text to continue")
        if not _is_int(self.k) or not 1 <= self.k <= MAX_DRAFT_K:
            raise ValueError(
                f"k (draft tokens per cycle) must be an integer 1..{MAX_DRAFT_K}, got {self.k!r}"
            )
        if not _is_number(self.temperature) or self.temperature < 0:
            raise ValueError(f"temperature must be a number >= 0, got {self.temperature!r}")
        if not _is_number(self.top_p) or not 0 < self.top_p <= 1:
            raise ValueError(f"top-p must be in (0, 1], got {self.top_p!r}")
        if not _is_int(self.top_k) or self.top_k < 0:
            raise ValueError(f"top-k must be an integer >= 0 (0 = off), got {self.top_k!r}")
        if not _is_int(self.max_new_tokens) or self.max_new_tokens < 1:
            raise ValueError(f"max new tokens must be an integer >= 1, got {self.max_new_tokens!r}")
        if max_new_tokens_limit is not None and self.max_new_tokens > max_new_tokens_limit:
            raise ValueError(
                f"max new tokens is {self.max_new_tokens}, over the configured limit "
                f"of {max_new_tokens_limit}"
            )
        if not _is_int(self.seed):
            raise ValueError(f"seed must be an integer, got {self.seed!r}")
        if self.draft_sample not in DRAFT_SAMPLES:
            raise ValueError(f"draft sampling must be one of {', '.join(DRAFT_SAMPLES)}, got "
                             f"{self.draft_sample!r}")
        return self


def _is_int(x: object) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _is_number(x: object) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)


@dataclass
class Token:
    """One token as shown: ``kind`` is "accepted", "rejected", "discarded" or "target".

    ``text`` is the token's share of the decoded text; a token that ends inside a UTF-8
    character has text "" and the next one carries the whole character.
    """

    id: int
    text: str
    kind: str


@dataclass
class TreeDraft:
    """A cycle's token tree (engine.decoder.tree_speculative): ``nodes[i]`` is node i + 1
    with its own text and its kind (accepted: on the accepted path; rejected: a child tried
    where the walk stopped; discarded: never reached), ``parents[i]`` its parent (0: the
    root, the newest token), ``paths`` the static tree's paths of ranks in node order, and
    ``ranks``: at each depth the target's token reached, its rank among that depth's
    candidates (None past those counted): acceptance by rank and depth, whatever the tree
    held."""

    nodes: list[Token]
    parents: list[int]
    paths: list[list[int]]
    ranks: list[int | None]
    shape: str = ""  # the tree as a link writes it: paths, or SGLang's steps,topk,draft tokens


@dataclass
class CycleEvent:
    """One cycle: k draft steps and one verification pass.

    ``tokens`` lists the drafts in order (accepted, then at most one rejected, then the
    discarded rest) and then the target's token. ``n_accepted`` and ``rejected`` are the
    verification outcome, which the statistics use; when the run stops inside the cycle
    (end of sequence or the token budget) the tokens past the stop are not emitted: accepted
    drafts past it are listed as discarded and the target token is left out.
    """

    index: int
    tokens: list[Token]
    draft_ms: float  # the k draft steps together
    verify_ms: float  # the target pass over k+1 positions, the rule, the cache rollback
    cycle_ms: float  # the whole cycle (draft + verification + bookkeeping)
    k: int
    n_accepted: int
    rejected: bool
    draft_step_ms: list[float]
    overlap: list[float]  # sum_x min(p(x), q(x)) at each verified position
    n_emitted: int  # tokens this cycle added to the output
    drafter: str = "model"  # "model" (a draft model), "ngram" (prompt lookup) or "eagle"
    # Tokens proposed: a draft model always proposes k (None says so); prompt lookup 0..k,
    # and 0 makes the cycle a plain target step. Its draft_step_ms is the one lookup.
    n_proposed: int | None = None
    match_n: int = 0  # prompt lookup: the length of the n-gram that matched (0: none)
    match_start: int = -1  # and where it starts in the context's ids (prompt + output)
    match_text: str = ""  # the matched n-gram's text
    match_before: str = ""  # the text just before its earlier occurrence (a few tokens)
    # A token tree's cycle (Medusa heads): the tree; ``tokens`` is then its accepted path,
    # the children tried where it stopped, the other nodes, and the target's token, and ``k``
    # the tree's depth (the positions a cycle can accept).
    tree: TreeDraft | None = None
    event: str = "cycle"

    @property
    def proposed(self) -> int:
        """Draft tokens proposed in this cycle."""
        return self.k if self.n_proposed is None else self.n_proposed

    @property
    def text(self) -> str:
        return "".join(t.text for t in self.tokens if t.kind in (ACCEPTED, TARGET))


@dataclass
class StepEvent:
    """One step of target-only decoding (the baseline)."""

    index: int
    token: Token
    step_ms: float
    event: str = "step"


@dataclass
class Acceptance:
    """What the cycles alone tell, before any target-only run: the figures shown live."""

    tokens: int
    cycles: int
    accepted: int
    drafted: int
    trials: int
    # None where there is nothing to divide by (engine.analytic.acceptance): no cycles yet,
    # or cycles that proposed nothing
    alpha_counted: float | None
    alpha_expected: float | None
    draft_acceptance_rate: float | None
    mean_acceptance_length: float | None
    spec_tok_s: float | None


@dataclass
class SummaryEvent(Acceptance):
    """A speculative run measured against the target-only run (docs/design.md, "The estimators")."""

    k: int
    # per draft position i = 1..k: the share of cycles that proposed i drafts and accepted i
    per_position_acceptance: list[float | None]
    # cycles with a proposal that accepted a = 0..k drafts (a draft model's: every cycle)
    acceptance_length_histogram: list[int]
    draft_step_ms: float  # mean (engine.decoder.stats.costs)
    verify_ms: float  # mean
    step_ms: float  # mean target-only decode step
    c: float
    v: float
    baseline_tok_s: float
    speedup_measured: float | None
    speedup_predicted: float | None
    baseline_tokens: int
    # How sure the measured speedup is (engine.measure.interleaved); a plain summary of one
    # speculative and one target-only run leaves them at the single figure.
    speedup_low: float = 0.0  # 95% interval
    speedup_high: float = 0.0
    speedup_median_costs: float = 0.0  # tokens per cycle x median step / median cycle
    speedup_per_repeat: list[float] = field(default_factory=list)  # the counted repeats
    # Prompt lookup (drafter "ngram"): the share of cycles with a proposal and the tokens
    # proposed per such cycle; c is then the lookup's time per cycle, v the verification's
    # over the cycles with a proposal (engine.analytic.lookup).
    drafter: str = "model"
    proposal_share: float = 1.0
    proposed_per_cycle: float = 0.0
    # The streamed pass (its cycles are the ones shown), timed but not counted: the page
    # renders it on the same CPUs. 0: a summary with no such pass.
    speedup_streamed: float = 0.0
    # Cycles that proposed m = 0..k tokens (a draft model's: all k).
    proposal_lengths: list[int] = field(default_factory=list)
    # Without independence (engine.analytic.geometric): the speedup from the measured
    # acceptance-length histogram's tokens per cycle at the same cycle cost, and the
    # chi-square of the cycles against the truncated geometric at the counted alpha (None:
    # nothing to test, df < 1 or no alpha).
    speedup_from_histogram: float | None = None
    geometric_chi2: float | None = None
    geometric_df: int = 0
    geometric_p: float | None = None
    geometric_smallest_expected: float | None = None
    tree: str = ""  # a token tree's paths as a link writes them (engine.analytic.trees.text)
    event: str = "summary"


@dataclass
class DoneEvent:
    """The end of a run (speculative or target-only)."""

    mode: str  # "speculative" or "target-only"
    text: str
    token_ids: list[int]
    stop_reason: str  # "length" (max new tokens) or "eos"
    prefill_ms: float
    decode_ms: float  # cycles (or steps) only, the prefill excluded
    tok_s: float  # tokens / decode time
    event: str = "done"
