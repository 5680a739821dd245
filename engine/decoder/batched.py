"""Batched speculative decoding: ``B`` sequences decode together, each row exactly as it would
alone (docs/design.md, "Batched speculation").

    prefill both models with every row's prompt (ragged: rows of different lengths)
    repeat while some row is live, with k from the schedule (a number per step, or a
    function of the live batch size):
        k = 0:   one target pass over each row's newest token; row b draws from p_b
        k > 0:   draft:  k lockstep steps for all rows; the first feeds each row what its
                         draft has not seen (1 token, 2 after a full acceptance, more after
                         steps with k = 0)
                 verify: ONE target pass over [last_b, x_b1..x_bk] for every row b
                         (n_b, t_b) = verify(x_b, q_b, p_b, generator_b)   per row, the
                         single stream's rule (engine.decoder.verify)
                 each row's caches (target and draft) roll back to its own length
        rows that stop (end of sequence, their max new tokens) leave the batch

Each row has its own ``torch.Generator`` and draws from it exactly what the single stream
draws (k draft samples, then the rule's k uniforms and one sample), so with the same k per
step a row's tokens are those of :func:`engine.decoder.speculative.speculate` with its seed,
whatever its companions (up to the ~1e-6 rounding by which batched logits differ).

With prompt lookup as the drafter (``lookup``, :mod:`engine.decoder.ngram`) there is no draft
model: each row proposes its own 0..k tokens from its own context, the target verifies every
row's ``[last_b, x_b1..x_bm_b]`` in one ragged pass (rows padded to the longest proposal),
and each row goes through the single stream's rule with a one-hot ``q``, so a row's tokens
are those of ``speculate(..., lookup=...)`` with its seed.

The per-row state sits in :class:`engine.decoder.forward.RaggedCache` (lengths, scattered
writes, masks); models the engine's fast forward pass does not cover decode one row only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import torch

from engine.decoder.common import Clock, encode_prompt, new_generator
from engine.decoder.events import (
    DEFAULT_SEED,
    GREEDY_BELOW,
    MAX_DRAFT_K,
    GenerationConfig,
    _is_int,
)
from engine.decoder.forward import FastDecoder, RaggedCache, forward, new_cache, rollback
from engine.decoder.loading import ModelPair
from engine.decoder.ngram import PromptLookup, one_hot_q
from engine.decoder.sampling import check_finite, sample_rows, warp
from engine.decoder.sampling import greedy as greedy_probs
from engine.decoder.verify import verify, verify_greedy

KSchedule = int | Sequence[int] | Callable[[int], int]
"""Draft tokens per step: one number for every step; a list, one per step (its last value
holds once it runs out); or a function of the live batch size. 0 is a plain target step."""


@dataclass
class BatchConfig:
    """What to generate for each row, and how. Sampling settings are the batch's; prompts,
    token budgets and seeds are per row (one number applies to every row)."""

    prompts: list[str]
    k: KSchedule = 4
    temperature: float = 0.8
    top_p: float = 1.0
    top_k: int = 0
    max_new_tokens: int | list[int] = 64
    seeds: int | list[int] = DEFAULT_SEED

    @property
    def greedy(self) -> bool:
        """Greedy decoding: temperature 0, or below ``GREEDY_BELOW``."""
        return self.temperature < GREEDY_BELOW

    def per_row(self, value) -> list:
        return list(value) if isinstance(value, list | tuple) else [value] * len(self.prompts)

    def row(self, b: int) -> GenerationConfig:
        """Row ``b``'s settings as a single-stream config (its ``k`` is the schedule's
        largest, at least 1)."""
        return GenerationConfig(
            prompt=self.prompts[b], k=max(self.k_max(), 1), temperature=self.temperature,
            top_p=self.top_p, top_k=self.top_k,
            max_new_tokens=self.per_row(self.max_new_tokens)[b],
            seed=self.per_row(self.seeds)[b],
        )

    def k_at(self, step: int, live: int) -> int:
        """The k of step ``step`` (0-based) with ``live`` rows left."""
        if callable(self.k):
            k = self.k(live)
        elif isinstance(self.k, int):
            k = self.k
        else:
            k = self.k[min(step, len(self.k) - 1)]
        return _checked_k(k, f"the schedule's k at batch size {live}" if callable(self.k)
                          else "k (draft tokens per step)")

    def k_max(self) -> int:
        if callable(self.k):
            return max(self.k_at(0, live) for live in range(1, len(self.prompts) + 1))
        if isinstance(self.k, int):
            return self.k_at(0, 1)
        if not self.k:
            raise ValueError("the k schedule is an empty list: give at least one k")
        return max(self.k_at(step, 1) for step in range(len(self.k)))

    def validate(self) -> BatchConfig:
        """Raise ``ValueError`` with a readable message for the first bad setting."""
        if not isinstance(self.prompts, list | tuple) or not self.prompts:
            raise ValueError("a batch needs at least one prompt")
        for name, value in (("max new tokens", self.max_new_tokens), ("seeds", self.seeds)):
            if isinstance(value, list | tuple) and len(value) != len(self.prompts):
                raise ValueError(
                    f"{name} lists {len(value)} values for {len(self.prompts)} prompts")
        self.k_max()
        for b in range(len(self.prompts)):
            self.row(b).validate()
        return self


def _checked_k(k, what: str) -> int:
    if not _is_int(k) or not 0 <= k <= MAX_DRAFT_K:
        raise ValueError(f"{what} must be an integer 0..{MAX_DRAFT_K}, got {k!r}")
    return k


@dataclass
class BatchStepEvent:
    """One step of the whole batch: a speculative cycle of every live row (k > 0) or one
    plain target step (k = 0). Lists are per row, in batch order."""

    index: int
    k: int
    rows: list[int]  # the live rows (indices into the request's prompts)
    n_accepted: list[int]  # drafts the rule accepted (0 when k = 0)
    n_emitted: list[int]  # tokens added to the row's output (fewer at a stop)
    draft_ms: float  # the k lockstep draft passes
    verify_ms: float  # the target pass, the rule for every row, the rollbacks
    step_ms: float  # the whole step, retiring finished rows included
    event: str = "batch_step"


@dataclass
class BatchDoneEvent:
    """The end of a batched run. ``accepted`` and ``trials`` (accepted drafts plus
    rejections, over all rows' speculative cycles) give the counted acceptance rate."""

    token_ids: list[list[int]]
    texts: list[str]
    stop_reasons: list[str]  # per row: "length" or "eos"
    steps: int
    prefill_ms: float
    decode_ms: float
    tokens: int
    tok_s: float  # all rows' tokens / decode time
    accepted: int
    trials: int
    drafted: int
    event: str = "batch_done"

    @property
    def alpha_counted(self) -> float:
        return self.accepted / self.trials if self.trials else 0.0


VerifyHook = Callable[[int, list[int], list[int], torch.Tensor, torch.Tensor, int], None]


def speculate_batch(
    pair: ModelPair, config: BatchConfig, *, on_verify: VerifyHook | None = None,
    lookup: PromptLookup | None = None,
) -> Iterator[BatchStepEvent | BatchDoneEvent]:
    """Decode ``config.prompts`` together: a :class:`BatchStepEvent` per step, then a
    :class:`BatchDoneEvent`. Bad settings raise ``ValueError`` here, before anything runs.

    ``on_verify(row, context_ids, drafts, q, p, n_accepted)`` sees each speculative cycle of
    each row (``q [k, V]``, ``p [k+1, V]``) before its tokens are emitted (tests, debugging).

    ``lookup``: each row drafts by prompt lookup (0..k tokens) instead of with the pair's
    draft model (which may be None); ``q`` and ``p`` of a row then have its own length.
    """
    config.validate()
    k_max = config.k_max()
    if lookup is not None:
        lookup.validate()
    elif k_max > 0 and pair.draft is None:
        raise ValueError("speculative decoding needs a draft model; this pair has none "
                         "(k = 0 on every step decodes with the target alone; prompt lookup "
                         "needs none)")
    models = [(pair.target_name or "the target", pair.target)]
    if k_max > 0 and lookup is None:
        models.append((pair.draft_name or "the draft", pair.draft))
    if len(config.prompts) > 1:
        for name, model in models:
            check_batchable(name, model)
    prompt_ids = [encode_prompt(pair, config.row(b), lookahead=k_max)
                  for b in range(len(config.prompts))]
    return _speculate_batch(pair, config, prompt_ids, k_max, on_verify, lookup)


def run_batch(pair: ModelPair, config: BatchConfig, lookup: PromptLookup | None = None
              ) -> tuple[list[BatchStepEvent], BatchDoneEvent]:
    """:func:`speculate_batch` run to the end."""
    *steps, done = speculate_batch(pair, config, lookup=lookup)
    return steps, done


def check_batchable(name: str, model) -> None:
    """Raise ``ValueError`` unless the engine's own forward pass runs ``model`` (a batch
    needs per-row lengths, positions and masks, which transformers' cache does not keep)."""
    decoder = FastDecoder.of(model)
    if decoder is None or decoder.hooked():
        raise ValueError(
            f"{name} runs through transformers' forward pass here (the engine's own pass "
            "covers Llama, Mistral without a sliding window and Qwen2 decoders with SDPA "
            "attention, and no forward hooks), which keeps one length for all rows: batched "
            "decoding needs the engine's pass. Decode one prompt at a time with this model"
        )


class _OneRow:
    """A batch of one through the single stream's cache: any model, including those only
    transformers runs."""

    def __init__(self, model, capacity: int):
        self.model, self.cache = model, new_cache(model, capacity)

    def run(self, ids: torch.Tensor, valid: list[int], keep: int) -> torch.Tensor:
        return forward(self.model, self.cache, ids[:, : valid[0]], keep)[None]

    def rollback(self, counts: list[int]) -> None:
        rollback(self.cache, counts[0])

    def keep_rows(self, rows: list[int]) -> None:
        pass  # the batch ends when its one row does


class _Rows:
    """``B`` rows in a :class:`RaggedCache`."""

    def __init__(self, model, capacity: int, batch: int):
        self.cache = RaggedCache(FastDecoder.of(model), capacity, batch)

    def run(self, ids: torch.Tensor, valid: list[int], keep: int) -> torch.Tensor:
        return self.cache.decoder.ragged(self.cache, ids, valid, keep)

    def rollback(self, counts: list[int]) -> None:
        self.cache.rollback(counts)

    def keep_rows(self, rows: list[int]) -> None:
        self.cache.keep_rows(rows)


def _rows(model, capacity: int, batch: int):
    decoder = FastDecoder.of(model)
    if batch == 1 and (decoder is None or decoder.hooked()):
        return _OneRow(model, capacity)
    return _Rows(model, capacity, batch)


@dataclass
class _Batch:
    """The live rows, in batch order (the caches' row order)."""

    rows: list[int]  # indices into the request
    last: list[int]  # each row's newest token: in neither cache yet
    pending: list[list[int]]  # what each row's draft has not seen yet (ends with ``last``)
    generators: list[torch.Generator]
    target: _Rows | _OneRow
    draft: _Rows | _OneRow | None


def _padded(lists: list[list[int]], device) -> torch.Tensor:
    width = max(len(ids) for ids in lists)
    return torch.tensor([ids + [0] * (width - len(ids)) for ids in lists], device=device)


def _speculate_batch(pair, config: BatchConfig, prompt_ids, k_max, on_verify, lookup):
    clock = Clock(pair.device)
    size = len(prompt_ids)
    limits = config.per_row(config.max_new_tokens)
    capacity = max(map(len, prompt_ids)) + max(limits) + k_max + 1
    batch = _Batch(
        rows=list(range(size)),
        last=[ids[-1] for ids in prompt_ids],
        pending=[[ids[-1]] for ids in prompt_ids],
        generators=[new_generator(pair, seed) for seed in config.per_row(config.seeds)],
        target=_rows(pair.target, capacity, size),
        draft=_rows(pair.draft, capacity, size) if k_max > 0 and lookup is None else None,
    )
    start = clock()
    with torch.inference_mode():
        prefixes = [ids[:-1] for ids in prompt_ids]  # the cache holds all but the newest
        if max(map(len, prefixes)) > 0:
            ids, valid = _padded(prefixes, pair.device), [len(p) for p in prefixes]
            for model_rows in (batch.target, batch.draft):
                if model_rows is not None:
                    model_rows.run(ids, valid, 1)
    prefill_ms = clock() - start

    out: list[list[int]] = [[] for _ in range(size)]
    stop_reasons = ["length"] * size
    tally = _Tally()
    decode_ms, step = 0.0, 0
    while batch.rows:
        start = clock()
        k = config.k_at(step, len(batch.rows))
        if k == 0:
            drafts, outcomes = _plain_step(pair, batch, config)
            mid = start
        elif lookup is not None:
            contexts = [prompt_ids[row] + out[row] for row in batch.rows]
            drafts = [lookup.propose(context, k).tokens for context in contexts]
            mid = clock()
            outcomes = _verify_lookup(pair, batch, config, drafts, contexts, on_verify)
        else:
            proposed, q, mid = _draft(pair, batch, config, k, clock)
            outcomes = _verify(pair, batch, config, proposed, q, prompt_ids, out, on_verify)
            drafts = proposed.tolist()
        tally.add(k, [n for n, _ in outcomes], [len(d) for d in drafts] if lookup else None)
        verify_end = clock()
        emitted_counts, live = [], []
        for i, (row, (n, token)) in enumerate(zip(batch.rows, outcomes, strict=True)):
            emitted = drafts[i][:n] + [token]
            keep = min(len(emitted), limits[row] - len(out[row]))
            stops = [j for j, t in enumerate(emitted[:keep]) if t in pair.stop_token_ids]
            if stops:
                keep, stop_reasons[row] = stops[0] + 1, "eos"
            out[row] += emitted[:keep]
            emitted_counts.append(keep)
            if not stops and len(out[row]) < limits[row]:
                live.append(i)
        rows = list(batch.rows)
        if len(live) < len(batch.rows):
            _retire(batch, live)
        step_ms = clock() - start
        decode_ms += step_ms
        yield BatchStepEvent(
            index=step, k=k, rows=rows, n_accepted=[n for n, _ in outcomes],
            n_emitted=emitted_counts, draft_ms=mid - start, verify_ms=verify_end - mid,
            step_ms=step_ms,
        )
        step += 1

    tokens = sum(map(len, out))
    yield BatchDoneEvent(
        token_ids=out,
        texts=[pair.tokenizer.decode(ids, skip_special_tokens=True) for ids in out],
        stop_reasons=stop_reasons, steps=step, prefill_ms=prefill_ms, decode_ms=decode_ms,
        tokens=tokens, tok_s=1000.0 * tokens / decode_ms if decode_ms > 0 else 0.0,
        accepted=tally.accepted, trials=tally.trials, drafted=tally.drafted,
    )


@torch.inference_mode()
def _plain_step(pair, batch: _Batch, config: BatchConfig):
    """k = 0: one target pass over every row's newest token. A row draws as the rule with
    k = 0 does (one sample from ``p``), which is also what target-only decoding draws. The
    draft sees nothing: its unseen tokens wait in ``pending`` until speculation resumes."""
    ids = torch.tensor(batch.last, device=pair.device)[:, None]
    logits = batch.target.run(ids, [1] * len(batch.rows), 1)[:, -1, : pair.shared_vocab_size]
    if config.greedy:
        tokens = logits.argmax(dim=-1).tolist()
    else:
        probs = warp(logits, config.temperature, config.top_k, config.top_p)  # [B, V]
        drawn = sample_rows(probs, batch.generators)
        check_finite(probs)  # tolist below waits for the device anyway
        tokens = drawn.tolist()
    for i, token in enumerate(tokens):
        if batch.draft is not None:
            batch.pending[i].append(token)
        batch.last[i] = token
    return [[] for _ in tokens], [(0, token) for token in tokens]


@torch.inference_mode()
def _draft(pair, batch: _Batch, config: BatchConfig, k: int, clock):
    """k lockstep draft passes: drafts (per row, a list of k ids), ``q [B, k, V]``, the
    time the drafting ended."""
    vocab = pair.shared_vocab_size
    valid = [len(p) for p in batch.pending]
    ids = _padded(batch.pending, pair.device)
    tokens, rows = [], []
    for _ in range(k):
        logits = batch.draft.run(ids, valid, 1)[:, -1, :vocab]  # [B, V]
        if config.greedy:
            row, token = logits, logits.argmax(dim=-1)
        else:
            row = warp(logits, config.temperature, config.top_k, config.top_p)
            token = sample_rows(row, batch.generators)  # on the device: no synchronisation
        tokens.append(token)
        rows.append(row)
        ids, valid = token[:, None], [1] * len(batch.rows)
    q = torch.stack(rows, dim=1)  # [B, k, V]
    drafts = torch.stack(tokens, dim=1)  # [B, k]
    return drafts, (greedy_probs(q) if config.greedy else q), clock()


@torch.inference_mode()
def _verify(pair, batch: _Batch, config, drafts, q, prompt_ids, out, on_verify):
    """One target pass over ``[last, x_1..x_k]`` of every row; the rule per row; each row's
    caches rolled back to its accepted prefix. ``[(n_accepted, next_token)]`` per row."""
    size, k = drafts.shape
    last = torch.tensor(batch.last, device=pair.device)[:, None]
    ids = torch.cat([last, drafts], dim=1)  # [B, k+1]
    logits = batch.target.run(ids, [k + 1] * size, k + 1)[..., : pair.shared_vocab_size]
    draft_ids = drafts.tolist()
    if config.greedy:
        p = greedy_probs(logits) if on_verify is not None else None
        targets = logits.argmax(dim=-1).tolist()
        outcomes = [verify_greedy(draft_ids[i], targets[i]) for i in range(size)]
    else:
        p = warp(logits, config.temperature, config.top_k, config.top_p)  # [B, k+1, V]
        check_finite(p, q)
        outcomes = [verify(drafts[i], q[i], p[i], batch.generators[i]) for i in range(size)]
    if on_verify is not None:
        for i, (row, (n, _)) in enumerate(zip(batch.rows, outcomes, strict=True)):
            on_verify(row, prompt_ids[row] + out[row], draft_ids[i], q[i], p[i], n)

    # The target cache holds ..., last, x_1..x_k of each row; keep ..., last, x_1..x_n.
    batch.target.rollback([k - n for n, _ in outcomes])
    # The draft cache holds ..., pending, x_1..x_{k-1}: keep ..., x_1..x_n; after a full
    # acceptance it never ran on x_k, so x_k waits with t for the next draft pass.
    batch.draft.rollback([k - 1 - n if n < k else 0 for n, _ in outcomes])
    for i, (n, token) in enumerate(outcomes):
        batch.pending[i] = [token] if n < k else [draft_ids[i][-1], token]
        batch.last[i] = token
    return outcomes


@torch.inference_mode()
def _verify_lookup(pair, batch: _Batch, config, drafts: list[list[int]], contexts, on_verify):
    """Prompt lookup's verification: ONE target pass over every row's ``[last_b, x_b1..x_bm]``
    (``m`` = 0..k tokens that row's lookup proposed; shorter rows padded), the single
    stream's rule per row with ``q`` one-hot at its proposal, each row's target cache rolled
    back to its accepted prefix. ``[(n_accepted, next_token)]`` per row."""
    vocab = pair.shared_vocab_size
    sizes = [len(d) + 1 for d in drafts]
    keep = max(sizes)
    ids = _padded([[last] + d for last, d in zip(batch.last, drafts, strict=True)], pair.device)
    logits = batch.target.run(ids, sizes, keep)[..., :vocab]  # [B, keep, V]
    outcomes = []
    for i, proposal in enumerate(drafts):
        row_logits = logits[i, keep - sizes[i]:]  # this row's m + 1 real positions
        x = torch.tensor(proposal, dtype=torch.long, device=pair.device)
        q = one_hot_q(x, vocab)
        if config.greedy:
            p = greedy_probs(row_logits)
            outcome = verify_greedy(proposal, row_logits.argmax(dim=-1).tolist())
        else:
            p = warp(row_logits, config.temperature, config.top_k, config.top_p)  # [m+1, V]
            check_finite(p, q)
            outcome = verify(x, q, p, batch.generators[i])
        if on_verify is not None:
            on_verify(batch.rows[i], contexts[i], proposal, q, p, outcome[0])
        outcomes.append(outcome)
    # The target cache holds ..., last, x_1..x_m of each row; keep ..., last, x_1..x_n.
    batch.target.rollback([len(d) - n for d, (n, _) in zip(drafts, outcomes, strict=True)])
    for i, (_, token) in enumerate(outcomes):
        batch.last[i] = token
    return outcomes


def _retire(batch: _Batch, live: list[int]) -> None:
    """Keep only the rows at positions ``live`` (rows that stopped leave both caches)."""
    for model_rows in (batch.target, batch.draft):
        if model_rows is not None:
            model_rows.keep_rows(live)
    batch.rows = [batch.rows[i] for i in live]
    batch.last = [batch.last[i] for i in live]
    batch.pending = [batch.pending[i] for i in live]
    batch.generators = [batch.generators[i] for i in live]


class _Tally:
    """The batch's acceptance counts: every row's speculative cycles pooled (all of this
    run's statistics are here, so an estimator can replace it)."""

    def __init__(self) -> None:
        self.accepted = self.trials = self.drafted = 0

    def add(self, k: int, accepted: list[int], proposed: list[int] | None = None) -> None:
        """``proposed``: each row's number of drafts when it is not ``k`` (prompt lookup)."""
        if k == 0:
            return
        proposed = proposed or [k] * len(accepted)
        self.accepted += sum(accepted)
        # accepted, plus the rejected one
        self.trials += sum(n + (n < m) for n, m in zip(accepted, proposed, strict=True))
        self.drafted += sum(proposed)
