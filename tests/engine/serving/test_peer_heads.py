"""vLLM serving the heads trained for the shipped target against our engine's: the EAGLE head
(``method: "eagle"``, models/eagle) and the Medusa heads (``method: "medusa"``,
models/medusa), one real vLLM server (``.venv-vllm``) at a time, k = 4, T = 0, prefix caching
off, started for each drafter and stopped before the next (this module only, so it never runs
beside the other peer tests' servers).

vLLM's prefill runs the target over the whole prompt and takes the first new token from it;
the EAGLE proposer then drafts from the head's entries over the prompt and that token, the
Medusa proposer applies every head to the target's hidden state at the prompt's last position
(the one that chose that token) and drafts each head's argmax. Our step's target cache holds
every token but the newest, so our cycles on P + [first token] see exactly vLLM's state after
its prefill on P: the same drafts. Prompt by prompt, vLLM's counters must then equal the
counts of our cycles and the outputs must be the same tokens
(:func:`support.peers.counters_equal_our_cycles`).
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
from engine.decoder.eagle import load_head_for
from engine.decoder.medusa import load_heads_for
from engine.serving.server import VLLM_PYTHON, ServerSpec, VllmServer

pytestmark = pytest.mark.slow

K = 4
NEW_TOKENS = 32
HEADS = {"eagle": ("models/eagle", load_head_for, DrafterSpec.eagle),
         "medusa": ("models/medusa", load_heads_for, DrafterSpec.medusa)}


@pytest.fixture(scope="module")
def pair():
    return shipped_target()


@pytest.fixture(scope="module")
def prompt_ids(pair) -> list[list[int]]:
    return heldout_ids(pair)


@pytest.fixture(scope="module", params=sorted(HEADS))
def server(request):
    assert VLLM_PYTHON.exists(), f"{VLLM_PYTHON} is missing: run `make install-vllm`"
    folder = HEADS[request.param][0]
    spec = ServerSpec(target=TARGET, draft=folder, k=K, method=request.param,
                      extra_args=["--no-enable-prefix-caching"])
    with VllmServer(spec) as running:
        yield running


def test_the_server_drafts_with_the_head(server):
    config = server.spec.speculative_config()
    assert config["model"] == HEADS[config["method"]][0]


def test_outputs_and_counters_equal_our_cycles(pair, prompt_ids, server):
    """The final cycle: both count the whole verification outcome, also the accepted tokens
    past ``max_tokens`` that are cut from the output."""
    method = server.spec.method
    folder, load, spec = HEADS[method]
    runs = each_through_vllm(server, prompt_ids, NEW_TOKENS)
    total = counters_equal_our_cycles(pair, spec(load(pair, folder)), prompt_ids, runs, K,
                                      NEW_TOKENS)
    print(f"vLLM {method} ({folder}, k = {K}), {len(prompt_ids)} prompts x {NEW_TOKENS} "
          f"tokens at T = 0: drafts {total.drafts}, draft tokens {total.draft_tokens}, "
          f"accepted {total.accepted}, per position {total.per_position}; draft acceptance "
          f"rate {total.draft_acceptance_rate:.3f}, mean acceptance length "
          f"{total.mean_acceptance_length:.2f}")
