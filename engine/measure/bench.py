"""``specscope bench``: our engine against Hugging Face transformers on one pair.

Four contenders, in one process, on the same model objects, the same prompt ids and the
same number of new tokens (end of sequence is ignored on every side, so every run makes
exactly ``max_new_tokens`` tokens):

    ours-baseline     target-only decoding with the engine (engine.decoder.baseline)
    hf-generate       target-only ``model.generate`` from transformers
    ours-spec k       speculative decoding with the engine (engine.decoder.speculative)
    hf-assisted k     ``model.generate(..., assistant_model=draft)``, k assistant tokens
                      per cycle (constant schedule, confidence threshold off)

With prompt lookup as the drafter (``BenchConfig.lookup``) the draft model is not used:
``ours-spec`` drafts by lookup (:mod:`engine.decoder.ngram`) and ``hf-assisted`` is
transformers' prompt lookup, ``model.generate(..., prompt_lookup_num_tokens=k,
max_matching_ngram_size=prompt_lookup_max)``: the same maximum n. transformers' smallest n is
always 1 (docs/design.md, "Prompt lookup"), so at ``prompt_lookup_min = 1`` the two propose the
same tokens.

Every run is timed end to end (prompt ids in, token ids out, prefill included) and the
contenders are interleaved: each repeat runs every (prompt, contender) once, in an order
rotated from one prompt to the next, so drift in the machine's speed touches them all alike.
At temperature 0 all outputs must be the same tokens; the benchmark checks it.

For our speculative runs it also pools the cycles into the docs/design.md estimators (counted
alpha, c and v against our target-only steps) and sets the measured speedup (decode time, the
prefill left out, as the theory counts it) beside the predicted one: that is
:mod:`engine.measure.bench_results`; :mod:`engine.measure.bench_report` writes it as Markdown.
"""

from __future__ import annotations

import copy
import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

from engine.analytic.drafters import DRAFTER_WORDS
from engine.decoder.baseline import run_target_only
from engine.decoder.drafter_spec import spec_for
from engine.decoder.events import DoneEvent, GenerationConfig
from engine.decoder.loading import ModelPair
from engine.decoder.speculative import speculate
from engine.measure.bench_record import (
    HF_ASSISTED,
    HF_GENERATE,
    OURS_BASE,
    OURS_SPEC,
    BenchConfig,
    BenchRecord,
    TimedRun,
)
from engine.measure.bench_results import results

__all__ = ["HF_ASSISTED", "HF_GENERATE", "OURS_BASE", "OURS_SPEC", "Bench", "BenchConfig",
           "Contender", "TimedRun", "run_bench", "setting"]


@dataclass
class Contender:
    name: str
    k: int | None
    # (prompt, prompt ids, temperature, seed) -> (new token ids, prefill ms or None, events)
    run: Callable[[str, list[int], float, int], tuple[list[int], float | None, list]]


# ---- running ----------------------------------------------------------------------------


class Bench(BenchRecord):
    """Runs the contenders and keeps every run, every cycle and every target-only step."""

    def __init__(self, pair: ModelPair, config: BenchConfig, log: Callable[[str], None]):
        if config.drafter in ("eagle", "medusa") and config.transformers:
            raise ValueError(f"transformers has no {DRAFTER_WORDS[config.drafter]} to compare "
                             "with: bench them with our engine only (--ours-only)")
        super().__init__(config)
        self.spec = spec_for(pair, config.lookup, config.eagle, config.medusa).check(
            pair, max(config.ks))
        self.pair = pair
        self.log = log
        # End of sequence never stops our runs (transformers' side: eos_token_id=[]).
        self.ours = dataclasses.replace(pair, stop_token_ids=frozenset())
        self.cuda = pair.device.type == "cuda"

    def contenders(self) -> list[Contender]:
        out = [Contender(OURS_BASE, None, self._ours_baseline)]
        if self.config.transformers:
            out.append(Contender(HF_GENERATE, None, self._hf(None)))
        for k in self.config.ks:
            out.append(Contender(OURS_SPEC, k, self._ours_spec(k)))
            if self.config.transformers:
                out.append(Contender(HF_ASSISTED, k, self._hf(k)))
        return out

    def run(self) -> None:
        cfg = self.config
        contenders = self.contenders()
        if cfg.warmup:
            self.log("warm-up")
            for temperature in cfg.temperatures:
                for c in contenders:
                    self._once(c, temperature, 0, repeat=-1)
        for repeat in range(cfg.repeats):
            self.log(f"repeat {repeat + 1}/{cfg.repeats}")
            for temperature in cfg.temperatures:
                for i in range(len(cfg.prompts)):
                    shift = (repeat * len(cfg.prompts) + i) % len(contenders)
                    for c in contenders[shift:] + contenders[:shift]:
                        self._once(c, temperature, i, repeat)

    def _once(self, c: Contender, temperature: float, prompt: int, repeat: int) -> None:
        text = self.config.prompts[prompt]
        ids = list(self.pair.tokenizer(text).input_ids)  # as decoder.common.encode_prompt
        seed = self.config.seed + prompt
        self._sync()
        start = time.perf_counter()
        token_ids, prefill_ms, events = c.run(text, ids, temperature, seed)
        self._sync()
        wall_ms = 1000.0 * (time.perf_counter() - start)
        if repeat < 0:
            return  # warm-up
        self.runs.append(
            TimedRun(c.name, temperature, c.k, prompt, repeat, len(token_ids), wall_ms, prefill_ms)
        )
        self.outputs[c.name, c.k, temperature, prompt, repeat] = token_ids
        if c.name == OURS_BASE:
            self.steps.setdefault(temperature, []).extend(events)
        elif c.name == OURS_SPEC:
            self.cycles.setdefault((temperature, c.k), []).extend(events)

    def _sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize(self.pair.device)

    def _config(self, prompt: str, temperature: float, seed: int, k: int = 1):
        return GenerationConfig(
            prompt=prompt,
            k=k,
            temperature=temperature,
            max_new_tokens=self.config.max_new_tokens,
            seed=seed,
        )

    def _ours_baseline(self, prompt, ids, temperature, seed):
        steps, done = run_target_only(self.ours, self._config(prompt, temperature, seed))
        return done.token_ids, done.prefill_ms, steps

    def _ours_spec(self, k: int):
        def run(prompt, ids, temperature, seed):
            config = self._config(prompt, temperature, seed, k)
            *events, done = speculate(self.ours, config, drafter=self.spec)
            assert isinstance(done, DoneEvent)
            return done.token_ids, done.prefill_ms, events

        return run

    def _hf(self, k: int | None):
        pair = self.pair
        pad = pair.tokenizer.pad_token_id
        pad = pad if pad is not None else next(iter(pair.stop_token_ids), 0)

        def run(prompt, ids, temperature, seed):
            input_ids = torch.tensor([ids], device=pair.device)
            kwargs = dict(
                attention_mask=torch.ones_like(input_ids),
                max_new_tokens=self.config.max_new_tokens,
                eos_token_id=[],  # never stop early: exactly max_new_tokens, like ours
                pad_token_id=pad,
            )
            if temperature == 0:
                kwargs.update(do_sample=False)
            else:
                kwargs.update(do_sample=True, temperature=temperature, top_k=0, top_p=1.0)
            if k is not None and self.config.lookup is not None:
                kwargs.update(prompt_lookup_num_tokens=k,
                              max_matching_ngram_size=self.config.lookup.prompt_lookup_max)
            elif k is not None:
                assistant = pair.draft.generation_config
                assistant.num_assistant_tokens = k
                assistant.num_assistant_tokens_schedule = "constant"
                assistant.assistant_confidence_threshold = 0.0  # off
                kwargs["assistant_model"] = pair.draft
            torch.manual_seed(seed)
            with torch.inference_mode():
                out = pair.target.generate(input_ids, **kwargs)
            return out[0, len(ids) :].tolist(), None, []

        return run


# ---- the whole benchmark ----------------------------------------------------------------


def run_bench(
    pair: ModelPair, config: BenchConfig, log: Callable[[str], None] = lambda _: None
) -> dict:
    """Run everything; a JSON-ready dict of the setting, every run and the results."""
    for prompt in config.prompts:
        if not prompt.strip():
            raise ValueError("a benchmark prompt is empty")
    draft_config = copy.deepcopy(pair.draft.generation_config) if pair.draft else None
    bench = Bench(pair, config, log)
    try:
        bench.run()
    finally:
        if draft_config is not None:
            pair.draft.generation_config = draft_config
    return {
        "setting": setting(pair, config),
        "results": results(bench),
        "runs": [dataclasses.asdict(r) for r in bench.runs],
    }


def setting(pair: ModelPair, config: BenchConfig) -> dict:
    def describe(model) -> dict:
        c = model.config
        return {
            "layers": c.num_hidden_layers,
            "hidden": c.hidden_size,
            "params": sum(p.numel() for p in model.parameters()),
        }

    return {
        "target": pair.target_name,
        "draft": pair.draft_name,
        "target_model": describe(pair.target),
        "draft_model": describe(pair.draft) if pair.draft is not None else None,
        "drafter": config.drafter,
        "device": str(pair.device),
        "device_name": (
            torch.cuda.get_device_name(pair.device) if pair.device.type == "cuda" else "cpu"
        ),
        "dtype": str(pair.dtype).removeprefix("torch."),
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "transformers": _transformers_version(),
        "config": dataclasses.asdict(config) | {"prompts": list(config.prompts)}
        | {"lookup": dataclasses.asdict(config.lookup) if config.lookup else None},
    }


def _transformers_version() -> str:
    import transformers

    return transformers.__version__
