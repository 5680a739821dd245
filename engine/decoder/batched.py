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
                         (n, t) = verify_batch(x, q, p, m, u)   every row at once
                 each row's caches (target and draft) roll back to its own length
        rows that stop (end of sequence, their max new tokens) leave the batch

The step is :class:`engine.decoder.step.Stepper`'s, the same for a batch of one (the single
stream, :func:`engine.decoder.speculative.speculate`) and for ``B`` rows. Each row has its own
``torch.Generator`` and draws from it what the single stream draws, so with the same k per
step a row's tokens are those of ``speculate`` with its seed, whatever its companions (up to
the ~1e-6 rounding by which batched logits differ).

The drafter is a :class:`engine.decoder.drafter_spec.DrafterSpec`. With prompt lookup
(:mod:`engine.decoder.ngram`) there is no draft model: each row proposes its own 0..k tokens
from its own context, the target verifies every row's ``[last_b, x_b1..x_bm_b]`` in one ragged
pass (rows padded to the longest proposal).

The per-row state sits in :class:`engine.decoder.forward.RaggedCache` (lengths, scattered
writes, masks); models the engine's fast forward pass does not cover decode one row only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import torch

from engine import defaults
from engine.decoder.common import Clock, encode_prompt, new_generator
from engine.decoder.drafter_spec import DRAFT_MODEL, DrafterSpec
from engine.decoder.events import (
    DEFAULT_SEED,
    GREEDY_BELOW,
    MAX_DRAFT_K,
    GenerationConfig,
    _is_int,
)
from engine.decoder.forward import FastDecoder
from engine.decoder.loading import ModelPair
from engine.decoder.rows import survivors_order
from engine.decoder.step import Sampling, Stepper, StepResult

KSchedule = int | Sequence[int] | Callable[[int], int]
"""Draft tokens per step: one number for every step; a list, one per step (its last value
holds once it runs out); or a function of the live batch size. 0 is a plain target step."""


@dataclass
class BatchConfig:
    """What to generate for each row, and how. Sampling settings are the batch's; prompts,
    token budgets and seeds are per row (one number applies to every row)."""

    prompts: list[str]
    k: KSchedule = defaults.K
    temperature: float = defaults.TEMPERATURE
    top_p: float = defaults.TOP_P
    top_k: int = defaults.TOP_K
    max_new_tokens: int | list[int] = defaults.MAX_NEW_TOKENS
    seeds: int | list[int] = DEFAULT_SEED
    draft_sample: str = "probabilistic"  # or "greedy": the draft proposes its argmax

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
            seed=self.per_row(self.seeds)[b], draft_sample=self.draft_sample,
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
    draft_ms: float  # the k lockstep draft passes and their sampling (or the lookups)
    verify_ms: float  # the target pass, the rule for every row, the rollbacks
    step_ms: float  # the whole step, emitting tokens and retiring finished rows included
    draft_pass_ms: float = 0.0  # the draft's forward passes alone
    target_ms: float = 0.0  # the target's forward pass alone
    event: str = "batch_step"

    @property
    def loop_ms(self) -> float:
        """The step's time outside the forward passes: sampling, the rule, bookkeeping."""
        return self.step_ms - self.draft_pass_ms - self.target_ms


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
    drafter: DrafterSpec = DRAFT_MODEL, clock: Clock | None = None,
) -> Iterator[BatchStepEvent | BatchDoneEvent]:
    """Decode ``config.prompts`` together: a :class:`BatchStepEvent` per step, then a
    :class:`BatchDoneEvent`. Bad settings raise ``ValueError`` here, before anything runs.

    ``on_verify(row, context_ids, drafts, q, p, n_accepted)`` sees each speculative cycle of
    each row (``q [m, V]``, ``p [m+1, V]``) after the step (tests, debugging).

    ``drafter``: what proposes (the pair's draft model by default; prompt lookup proposes
    0..k tokens a row, so ``q`` and ``p`` of a row then have its own length).
    ``clock``: what the events' times are read from (default: wall time).
    """
    config.validate()
    k_max = config.k_max()
    drafter.check(pair, k_max)
    if len(config.prompts) > 1:
        for name, model in drafter.models(pair, k_max):
            check_batchable(name, model)
    prompt_ids = [encode_prompt(pair, config.row(b), lookahead=k_max)
                  for b in range(len(config.prompts))]
    return _speculate_batch(pair, config, prompt_ids, k_max, on_verify, drafter,
                            clock or Clock(pair.device))


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


def new_stepper(pair: ModelPair, config: BatchConfig, prompt_ids: list[list[int]], k_max: int,
                drafter: DrafterSpec, clock: Clock, distributions: bool = False) -> Stepper:
    """The step's state for these rows, prefilled: the drafter (none when k is 0
    throughout), the target's cache and each row's generator."""
    size = len(prompt_ids)
    limits = config.per_row(config.max_new_tokens)
    capacity = max(map(len, prompt_ids)) + max(limits) + k_max + 1
    sampling = Sampling(config.temperature, config.top_k, config.top_p, config.greedy)
    draft_sampling = dict(temperature=config.temperature, top_k=config.top_k,
                          top_p=config.top_p)
    draft_greedy = config.greedy or config.draft_sample == "greedy"
    proposer = drafter.build(pair, capacity, size, k_max, pair.device, draft_sampling,
                             draft_greedy)
    generators = [new_generator(pair, seed) for seed in config.per_row(config.seeds)]
    stepper = Stepper(pair, proposer, sampling, generators, capacity, k_max, clock,
                      distributions)
    stepper.prefill(prompt_ids)
    return stepper


@dataclass
class Emitted:
    """One step as the output saw it: the step's result, the rows it ran (request indices,
    in batch order), the tokens each row kept (fewer than it produced at a stop), each row's
    output length before the step, and the host time spent emitting and retiring."""

    result: StepResult
    rows: list[int]
    kept: list[int]
    before: list[int]
    emit_ms: float


class Decoding:
    """The loop both public loops share: step, emit each row's tokens up to its stop, retire
    the rows that stopped, until none is live."""

    def __init__(self, stepper: Stepper, limits: list[int], stop_token_ids: frozenset[int]):
        self.stepper, self.limits, self.stop_token_ids = stepper, limits, stop_token_ids
        self.rows = list(range(len(limits)))
        self.out: list[list[int]] = [[] for _ in limits]
        self.stop_reasons = ["length"] * len(limits)

    def steps(self, k_at: Callable[[int, int], int]) -> Iterator[Emitted]:
        """``k_at(step, live rows)``: the draft length of each step."""
        step = 0
        while self.rows:
            result = self.stepper.step(k_at(step, len(self.rows)))
            start = self.stepper.clock.now()  # host time: the emitting is Python only
            rows, kept, before, live = list(self.rows), [], [], []
            for i, row in enumerate(rows):
                out, limit = self.out[row], self.limits[row]
                before.append(len(out))
                n = result.n_accepted[i]
                emitted = result.drafts[i][:n] + [result.next_tokens[i]]
                keep = min(len(emitted), limit - len(out))
                stop = next((j for j, t in enumerate(emitted[:keep]) if t in self.stop_token_ids),
                            None)
                if stop is not None:
                    keep, self.stop_reasons[row] = stop + 1, "eos"
                out += emitted[:keep]
                kept.append(keep)
                if stop is None and len(out) < limit:
                    live.append(i)
            if len(live) < len(rows):
                order = survivors_order(live)
                self.stepper.keep_rows(order)
                self.rows = [rows[i] for i in order]
            emit_ms = (self.stepper.clock.now() - start) * 1000.0
            yield Emitted(result, rows, kept, before, emit_ms)
            step += 1


def _speculate_batch(pair, config: BatchConfig, prompt_ids, k_max, on_verify,
                     drafter: DrafterSpec, clock):
    start = clock()
    stepper = new_stepper(pair, config, prompt_ids, k_max, drafter, clock,
                          distributions=on_verify is not None)
    prefill_ms = clock() - start
    decoding = Decoding(stepper, config.per_row(config.max_new_tokens), pair.stop_token_ids)
    tally = _Tally()
    decode_ms, steps = 0.0, 0
    for index, emitted in enumerate(decoding.steps(config.k_at)):
        result, times = emitted.result, emitted.result.times
        if on_verify is not None and result.k > 0:
            for i, row in enumerate(emitted.rows):
                m = len(result.drafts[i])
                context = prompt_ids[row] + decoding.out[row][: emitted.before[i]]
                on_verify(row, context, result.drafts[i], result.q[i, :m], result.p[i, : m + 1],
                          result.n_accepted[i])
        tally.add(result.k, result.n_accepted, [len(d) for d in result.drafts])
        step_ms = times.total_ms + emitted.emit_ms
        decode_ms, steps = decode_ms + step_ms, index + 1
        yield BatchStepEvent(
            index=index, k=result.k, rows=emitted.rows, n_accepted=result.n_accepted,
            n_emitted=emitted.kept, draft_ms=times.draft_ms, verify_ms=times.verify_ms,
            step_ms=step_ms, draft_pass_ms=sum(times.draft_pass_ms), target_ms=times.target_ms,
        )

    out = decoding.out
    tokens = sum(map(len, out))
    yield BatchDoneEvent(
        token_ids=out,
        texts=[pair.tokenizer.decode(ids, skip_special_tokens=True) for ids in out],
        stop_reasons=decoding.stop_reasons, steps=steps, prefill_ms=prefill_ms,
        decode_ms=decode_ms, tokens=tokens,
        tok_s=1000.0 * tokens / decode_ms if decode_ms > 0 else 0.0,
        accepted=tally.accepted, trials=tally.trials, drafted=tally.drafted,
    )


class _Tally:
    """The batch's acceptance counts: every row's speculative cycles pooled (all of this
    run's statistics are here, so an estimator can replace it)."""

    def __init__(self) -> None:
        self.accepted = self.trials = self.drafted = 0

    def add(self, k: int, accepted: list[int], proposed: list[int]) -> None:
        """``proposed``: each row's number of drafts (``k``, or fewer with prompt lookup)."""
        if k == 0:
            return
        self.accepted += sum(accepted)
        # accepted, plus the rejected one
        self.trials += sum(n + (n < m) for n, m in zip(accepted, proposed, strict=True))
        self.drafted += sum(proposed)
