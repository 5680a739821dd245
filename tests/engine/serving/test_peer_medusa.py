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

import pytest
from support.peers import (
    TARGET,
    counters_equal_our_cycles,
    each_through_vllm,
    heldout_ids,
    shipped_target,
)

from engine.decoder.drafter_spec import DrafterSpec
from engine.decoder.medusa import load_heads_for
from engine.serving.server import VLLM_PYTHON, ServerSpec, VllmServer

pytestmark = pytest.mark.slow

HEAD = "models/medusa"
K = 4
NEW_TOKENS = 32


@pytest.fixture(scope="module")
def pair():
    return shipped_target()


@pytest.fixture(scope="module")
def head(pair):
    return load_heads_for(pair, HEAD)


@pytest.fixture(scope="module")
def prompt_ids(pair) -> list[list[int]]:
    return heldout_ids(pair)


@pytest.fixture(scope="module")
def server():
    assert VLLM_PYTHON.exists(), f"{VLLM_PYTHON} is missing: run `make install-vllm`"
    spec = ServerSpec(target=TARGET, draft=HEAD, k=K, method="medusa",
                      extra_args=["--no-enable-prefix-caching"])
    with VllmServer(spec) as running:
        yield running


def test_the_server_drafts_with_the_head(server):
    config = server.spec.speculative_config()
    assert config["method"] == "medusa" and config["model"] == HEAD


def test_outputs_and_counters_equal_our_cycles(pair, head, prompt_ids, server):
    """The final cycle: both count the whole verification outcome, also the accepted tokens
    past ``max_tokens`` that are cut from the output."""
    runs = each_through_vllm(server, prompt_ids, NEW_TOKENS)
    total = counters_equal_our_cycles(pair, DrafterSpec.medusa(head), prompt_ids, runs, K,
                                      NEW_TOKENS)
    print(f"vLLM medusa (models/medusa, k = {K}), {len(prompt_ids)} prompts x {NEW_TOKENS} tokens "
          f"at T = 0: drafts {total.drafts}, draft tokens {total.draft_tokens}, accepted "
          f"{total.accepted}, per position {total.per_position}; draft acceptance rate "
          f"{total.draft_acceptance_rate:.3f}, mean acceptance length "
          f"{total.mean_acceptance_length:.2f}")
