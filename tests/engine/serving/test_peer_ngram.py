"""vLLM's prompt lookup (``method: "ngram"``) against our engine's, on the shipped pair's
target: one real vLLM server (``.venv-vllm``) with the same n-gram bounds as our drafter
(:mod:`engine.decoder.ngram`'s defaults) and k = 4, started by these tests and stopped at the
end of the module (its own module, so it never runs beside test_peer.py's servers).

At T = 0 the two engines see the same contexts and propose by the same rule, so vLLM's
counters must equal the counts from our cycles, prompt by prompt: drafts (vLLM counts a
step only when it proposed at least one token), draft tokens, accepted tokens and accepted
counts per position; and the outputs are the same tokens. The prompts: the held-out prompts
and two of each domain of the ``lookup`` set (text the output repeats, where lookup proposes
often).
"""

from __future__ import annotations

import dataclasses
import itertools

import pytest

from engine.decoder.drafter_spec import DrafterSpec
from engine.decoder.events import CycleEvent, DoneEvent, GenerationConfig
from engine.decoder.loading import load_pair
from engine.decoder.ngram import PromptLookup
from engine.decoder.speculative import speculate
from engine.measure.probe import ProbeConfig, summarize_probe
from engine.measure.prompt_sets import Prompt, builtin, heldout_prompts
from engine.serving.metrics import SpecCounters
from engine.serving.probe import probe_vllm
from engine.serving.server import VLLM_PYTHON, ServerSpec, VllmServer

pytestmark = pytest.mark.slow

TARGET = "models/target"
K = 4
NEW_TOKENS = 32
LOOKUP = PromptLookup()  # the defaults, min 2 and max 4, on both sides
PER_LOOKUP_DOMAIN = 2


@pytest.fixture(scope="module")
def pair():
    # End of sequence never stops our runs: vLLM's requests say ignore_eos.
    return dataclasses.replace(load_pair(TARGET, None), stop_token_ids=frozenset())


@pytest.fixture(scope="module")
def prompt_ids(pair) -> list[list[int]]:
    texts = heldout_prompts(TARGET, per_domain=4)
    assert len(texts) == 8
    by_domain = itertools.groupby(builtin("lookup"), key=lambda p: p.domain)
    lookup = [p.text for _, group in by_domain for p in list(group)[:PER_LOOKUP_DOMAIN]]
    assert len(lookup) >= 2 * PER_LOOKUP_DOMAIN
    return [list(pair.tokenizer(text).input_ids) for text in texts + lookup]


@pytest.fixture(scope="module")
def server():
    assert VLLM_PYTHON.exists(), f"{VLLM_PYTHON} is missing: run `make install-vllm`"
    spec = ServerSpec(target=TARGET, k=K, method="ngram",
                      prompt_lookup_min=LOOKUP.prompt_lookup_min,
                      prompt_lookup_max=LOOKUP.prompt_lookup_max)
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


def ours(pair, ids: list[int], new_tokens: int) -> tuple[list[CycleEvent], list[int]]:
    """Our engine with prompt lookup on token ids ``ids``: its cycles and its output ids."""
    text = pair.tokenizer.decode(ids)
    assert list(pair.tokenizer(text).input_ids) == ids  # the tokenizer round-trips
    config = GenerationConfig(prompt=text, k=K, temperature=0.0, max_new_tokens=new_tokens)
    events = list(speculate(pair, config, drafter=DrafterSpec.ngram(LOOKUP)))
    cycles = [e for e in events if isinstance(e, CycleEvent)]
    done = next(e for e in events if isinstance(e, DoneEvent))
    return cycles, done.token_ids


def test_the_server_drafts_by_prompt_lookup(server):
    config = server.spec.speculative_config()
    assert config["method"] == "ngram" and "model" not in config


def test_counters_equal_our_lookup_cycles(pair, prompt_ids, greedy_runs):
    """vLLM's first output token comes from the prefill, with no lookup; its first lookup is
    for the second token. So vLLM's steps on prompt P are our cycles on P + [first token], one
    token shorter. A cycle with no proposal is a plain target step: vLLM does not count it as
    a draft, and neither do we here.

    The final cycle: both count the whole verification outcome, also the accepted tokens past
    ``max_tokens`` that are cut from the output, so accepted + proposing steps + plain steps =
    (tokens from cycles) + (tokens cut from the last cycle)."""
    total = SpecCounters(drafts=0, draft_tokens=0, accepted=0, per_position=[0] * K)
    proposing_prompts = 0
    for ids, (vllm_ids, counts) in zip(prompt_ids, greedy_runs, strict=True):
        cycles, our_ids = ours(pair, ids + vllm_ids[:1], NEW_TOKENS - 1)
        assert our_ids == vllm_ids[1:]
        proposing = [c for c in cycles if c.n_proposed]
        proposing_prompts += bool(proposing)
        assert all(c.n_proposed <= K for c in cycles)
        assert counts.drafts == len(proposing)
        assert counts.draft_tokens == sum(c.n_proposed for c in proposing)
        assert counts.accepted == sum(c.n_accepted for c in proposing)
        assert counts.per_position == [sum(c.n_accepted > i for c in proposing)
                                       for i in range(K)]
        plain = len(cycles) - len(proposing)
        cut = cycles[-1].n_accepted + 1 - cycles[-1].n_emitted
        assert counts.accepted + counts.drafts + plain == (NEW_TOKENS - 1) + cut
        total = SpecCounters(total.drafts + counts.drafts,
                             total.draft_tokens + counts.draft_tokens,
                             total.accepted + counts.accepted,
                             [a + b for a, b in zip(total.per_position, counts.per_position,
                                                    strict=True)])
    # The comparison means something only where lookup proposed, on most prompts.
    assert proposing_prompts >= len(prompt_ids) // 2, proposing_prompts
    print(f"vLLM ngram (min {LOOKUP.prompt_lookup_min}, max {LOOKUP.prompt_lookup_max}, k = {K}),"
          f" {len(prompt_ids)} prompts x {NEW_TOKENS} tokens at T = 0: drafts {total.drafts}, "
          f"draft tokens {total.draft_tokens}, accepted {total.accepted}, per position "
          f"{total.per_position}; draft acceptance rate {total.draft_acceptance_rate:.3f}, "
          f"mean acceptance length {total.mean_acceptance_length:.2f}")


def test_the_probe_through_vllm_reports_rates_not_an_alpha(server, pair, prompt_ids, greedy_runs):
    """``specscope probe --engine vllm --drafter ngram`` on the same prompts at T = 0: the
    same requests as above, so its draft acceptance rate and mean acceptance length are the
    counters' above; counted alpha is not given (no per-position draft counts in vLLM)."""
    prompts = [Prompt(pair.tokenizer.decode(ids), "all") for ids in prompt_ids]
    config = ProbeConfig(k=K, temperatures=[0.0], max_new_tokens=NEW_TOKENS, bootstrap=20,
                         lookup=LOOKUP)
    measures = list(probe_vllm(server.client, prompts, prompt_ids, config))
    row = summarize_probe(measures, config, engine="vllm", target=TARGET, draft="",
                          runs_planned=len(measures)).rows[0]
    accepted = sum(c.accepted for _, c in greedy_runs)
    drafted = sum(c.draft_tokens for _, c in greedy_runs)
    drafts = sum(c.drafts for _, c in greedy_runs)
    assert row.drafter == "ngram" and row.alpha_counted is None
    assert (row.accepted, row.drafted) == (accepted, drafted)
    assert row.draft_acceptance_rate == pytest.approx(accepted / drafted)
    assert row.mean_acceptance_length == pytest.approx(1 + accepted / drafts)
