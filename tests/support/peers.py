"""What the vLLM peer tests share: the shipped target that ignores end of sequence (vLLM's
requests say ``ignore_eos``), held-out prompts as token ids, each prompt through vLLM alone
with its counters read around it, and our engine's cycles on the same ids."""

from __future__ import annotations

import dataclasses

from engine.decoder.drafter_spec import DrafterSpec
from engine.decoder.events import CycleEvent, DoneEvent, GenerationConfig
from engine.decoder.loading import load_pair
from engine.decoder.speculative import speculate
from engine.measure.prompt_sets import heldout_prompts
from engine.serving.metrics import SpecCounters

TARGET = "models/target"


def shipped_target():
    return dataclasses.replace(load_pair(TARGET, None), stop_token_ids=frozenset())


def heldout_ids(pair, per_domain: int = 4) -> list[list[int]]:
    texts = heldout_prompts(TARGET, per_domain=per_domain)
    assert len(texts) == 2 * per_domain
    return [list(pair.tokenizer(text).input_ids) for text in texts]


def each_through_vllm(server, prompt_ids, new_tokens: int, temperature: float = 0.0
                      ) -> list[tuple[list[int], SpecCounters]]:
    """Each prompt through vLLM, alone, with the counters read around it."""
    runs = []
    for ids in prompt_ids:
        before = server.client.counters()
        completion = server.client.complete(ids, new_tokens, temperature=temperature)
        runs.append((completion.token_ids, server.client.counters() - before))
    return runs


def ours(pair, drafter: DrafterSpec, ids: list[int], k: int, new_tokens: int
         ) -> tuple[list[CycleEvent], list[int]]:
    """Our engine on token ids ``ids`` at T = 0: its cycles and its output ids."""
    text = pair.tokenizer.decode(ids)
    assert list(pair.tokenizer(text).input_ids) == ids  # the tokenizer round-trips
    config = GenerationConfig(prompt=text, k=k, temperature=0.0, max_new_tokens=new_tokens)
    events = list(speculate(pair, config, drafter=drafter))
    cycles = [e for e in events if isinstance(e, CycleEvent)]
    done = next(e for e in events if isinstance(e, DoneEvent))
    return cycles, done.token_ids


def counters_equal_our_cycles(pair, drafter: DrafterSpec, prompt_ids, runs, k: int,
                              new_tokens: int) -> SpecCounters:
    """Prompt by prompt, vLLM's outputs and counters equal our cycles on the prompt and
    vLLM's first token (its prefill takes that token from the target; our step's cache holds
    every token but the newest, so our cycles then start where vLLM's do); every cycle
    drafts k, the last one included. The counters summed over the prompts."""
    total = SpecCounters(per_position=[0] * k)
    for ids, (vllm_ids, counts) in zip(prompt_ids, runs, strict=True):
        cycles, our_ids = ours(pair, drafter, ids + vllm_ids[:1], k, new_tokens - 1)
        assert our_ids == vllm_ids[1:]
        assert all(c.n_proposed == k for c in cycles)
        got = (counts.drafts, counts.draft_tokens, counts.accepted, counts.per_position)
        expected = (len(cycles), k * len(cycles), sum(c.n_accepted for c in cycles),
                    [sum(c.n_accepted > i for c in cycles) for i in range(k)])
        assert got == expected
        total = total + counts
    return total
