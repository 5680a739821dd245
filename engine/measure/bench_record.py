"""What a benchmark measured, as plain data: its settings, the contenders' names, and every
timed run, cycle and step. The runner (:mod:`engine.measure.bench`) fills a record; the
results (:mod:`engine.measure.bench_results`) read one. Neither needs the other."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from engine.decoder.drafter_spec import kind_of
from engine.decoder.events import CycleEvent, StepEvent
from engine.decoder.ngram import PromptLookup
from engine.measure.prompt_sets import FALLBACK_PROMPTS

OURS_BASE, HF_GENERATE, OURS_SPEC, HF_ASSISTED = (
    "ours-baseline",
    "hf-generate",
    "ours-spec",
    "hf-assisted",
)
@dataclass
class BenchConfig:
    ks: Sequence[int] = (1, 2, 3, 4, 5, 6, 7, 8)
    temperatures: Sequence[float] = (0.0, 1.0)
    max_new_tokens: int = 64
    prompts: Sequence[str] = field(default_factory=lambda: FALLBACK_PROMPTS[:4])
    repeats: int = 3
    seed: int = 0
    warmup: bool = True
    transformers: bool = True  # False: our engine only
    lookup: PromptLookup | None = None  # draft by prompt lookup instead of the draft model
    eagle: str | None = None  # a folder: draft with this EAGLE head (our engine only)
    medusa: str | None = None  # a folder: draft with these Medusa heads (our engine only)

    @property
    def drafter(self) -> str:
        return kind_of(self.lookup, self.eagle, self.medusa)


@dataclass
class TimedRun:
    """One timed run of one contender on one prompt."""

    contender: str
    temperature: float
    k: int | None
    prompt: int
    repeat: int
    tokens: int
    wall_ms: float
    prefill_ms: float | None = None  # ours only: the engine's own prefill timing

    @property
    def tok_s(self) -> float:
        return 1000.0 * self.tokens / self.wall_ms

    @property
    def decode_tok_s(self) -> float | None:
        if self.prefill_ms is None:
            return None
        return 1000.0 * self.tokens / (self.wall_ms - self.prefill_ms)


@dataclass
class BenchRecord:
    """Every run of a benchmark, and what our engine's runs yielded."""

    config: BenchConfig
    runs: list[TimedRun] = field(default_factory=list)
    outputs: dict[tuple, list[int]] = field(default_factory=dict)  # (contender, k, T, prompt,
    # repeat) -> token ids
    cycles: dict[tuple[float, int], list[CycleEvent]] = field(default_factory=dict)
    steps: dict[float, list[StepEvent]] = field(default_factory=dict)
