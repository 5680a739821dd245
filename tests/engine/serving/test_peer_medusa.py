"""vLLM's Medusa (``method: "medusa"``) against our engine's heads, on the shipped target with
the heads in models/medusa: one real vLLM server (``.venv-vllm``) at k = 4 (the heads
trained), T = 0 and prefix caching off, started by these tests and stopped at the end of the
module (its own module, so it never runs beside the other peer tests' servers).

vLLM's prefill runs the target over the whole prompt and takes the first new token from it;
its Medusa proposer then applies every head to the target's hidden state at the prompt's last
position (the one that chose that token) and drafts each head's argmax. Our step's target
cache holds every token but the newest, so on P + [first token] our heads read the same
hidden state: the same drafts. Prompt by prompt, vLLM's counters must then equal the counts
of our cycles and the outputs must be the same tokens.
"""

from __future__ import annotations

import dataclasses

import pytest

from engine.decoder.drafter_spec import DrafterSpec
from engine.decoder.events import CycleEvent, DoneEvent, GenerationConfig
from engine.decoder.loading import load_pair
from engine.decoder.medusa import load_heads_for
from engine.decoder.speculative import speculate
from engine.measure.prompt_sets import heldout_prompts
from engine.serving.metrics import SpecCounters
from engine.serving.server import VLLM_PYTHON, ServerSpec, VllmServer

pytestmark = pytest.mark.slow

TARGET = "models/target"
HEAD = "models/medusa"
K = 4
NEW_TOKENS = 32


@pytest.fixture(scope="module")
def pair():
    # End of sequence never stops our runs: vLLM's requests say ignore_eos.
    return dataclasses.replace(load_pair(TARGET, None), stop_token_ids=frozenset())


@pytest.fixture(scope="module")
def head(pair):
    return load_heads_for(pair, HEAD)


@pytest.fixture(scope="module")
def prompt_ids(pair) -> list[list[int]]:
    texts = heldout_prompts(TARGET, per_domain=4)
    assert len(texts) == 8
    return [list(pair.tokenizer(text).input_ids) for text in texts]


@pytest.fixture(scope="module")
def server():
    assert VLLM_PYTHON.exists(), f"{VLLM_PYTHON} is missing: run `make install-vllm`"
    spec = ServerSpec(target=TARGET, draft=HEAD, k=K, method="medusa",
                      extra_args=["--no-enable-prefix-caching"])
    with VllmServer(spec) as running:
        yield running


@pytest.fixture(scope="module")
def greedy_runs(server, prompt_ids) -> list[tuple[list[int], SpecCounters]]:
    """Each prompt through vLLM, alone, with the counters read around it."""
    runs = []
    for ids in prompt_ids:
        before = server.client.counters()
        completion = server.client.complete(ids, NEW_TOKENS, temperature=0.0)
        runs.append((completion.token_ids, server.client.counters() - before))
    return runs


def ours(pair, head, ids: list[int], new_tokens: int) -> tuple[list[CycleEvent], list[int]]:
    """Our engine with the heads on token ids ``ids``: its cycles and its output ids."""
    text = pair.tokenizer.decode(ids)
    assert list(pair.tokenizer(text).input_ids) == ids  # the tokenizer round-trips
    config = GenerationConfig(prompt=text, k=K, temperature=0.0, max_new_tokens=new_tokens)
    events = list(speculate(pair, config, drafter=DrafterSpec.medusa(head)))
    cycles = [e for e in events if isinstance(e, CycleEvent)]
    done = next(e for e in events if isinstance(e, DoneEvent))
    return cycles, done.token_ids


def test_the_server_drafts_with_the_heads(server):
    config = server.spec.speculative_config()
    assert config["method"] == "medusa" and config["model"] == HEAD


def test_outputs_and_counters_equal_our_cycles(pair, head, prompt_ids, greedy_runs):
    """The final cycle: both count the whole verification outcome, also the accepted tokens
    past ``max_tokens`` that are cut from the output."""
    total = SpecCounters(drafts=0, draft_tokens=0, accepted=0, per_position=[0] * K)
    for ids, (vllm_ids, counts) in zip(prompt_ids, greedy_runs, strict=True):
        cycles, our_ids = ours(pair, head, ids + vllm_ids[:1], NEW_TOKENS - 1)
        assert our_ids == vllm_ids[1:]
        assert all(c.n_proposed == K for c in cycles)
        got = (counts.drafts, counts.draft_tokens, counts.accepted, counts.per_position)
        expected = (len(cycles), K * len(cycles), sum(c.n_accepted for c in cycles),
                    [sum(c.n_accepted > i for c in cycles) for i in range(K)])
        assert got == expected
        total = SpecCounters(total.drafts + counts.drafts,
                             total.draft_tokens + counts.draft_tokens,
                             total.accepted + counts.accepted,
                             [a + b for a, b in zip(total.per_position, counts.per_position,
                                                    strict=True)])
    print(f"vLLM medusa (models/medusa, k = {K}), {len(prompt_ids)} prompts x {NEW_TOKENS} tokens "
          f"at T = 0: drafts {total.drafts}, draft tokens {total.draft_tokens}, accepted "
          f"{total.accepted}, per position {total.per_position}; draft acceptance rate "
          f"{total.draft_acceptance_rate:.3f}, mean acceptance length "
          f"{total.mean_acceptance_length:.2f}")
