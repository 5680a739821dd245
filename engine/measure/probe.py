"""``specscope probe``: alpha on your own traffic, by domain and temperature.

For every temperature and every prompt, a speculative run (the figures) and a short
target-only run of the same prompt (the baseline step that ``c`` and ``v`` are relative to).
The runs are pooled by (domain, temperature) into one :class:`ProbeRow` each:

- counted alpha: accepted / trials (docs/design.md, "The estimators"; every estimator here
  comes from engine.analytic.acceptance, and is None where there is nothing to divide by)
- expected alpha: mean of ``sum_x min(p(x), q(x))`` over the verified positions
- top-1 agreement: share of the verified positions where the draft's most likely token is the
  target's; at temperature 0 it is the counted alpha, above it the two part ways
- per-position acceptance (share of cycles accepting draft position i) beside ``alpha^i``
- the vLLM dashboard figures: draft acceptance rate (accepted / drafted) and mean
  acceptance length (1 + accepted / cycles that proposed drafts)
- ``c`` and ``v`` (medians against the target-only step), the predicted speedup at ``k`` and
  the best ``k`` for the counted alpha
- a 95% interval for every alpha: a percentile bootstrap that resamples prompts (a prompt's
  tokens are not independent of each other; prompts are), seeded

With prompt lookup as the drafter (``ProbeConfig.lookup``) alpha is counted over the proposed
tokens, the row adds the share ``pi`` of cycles with a proposal and the tokens per proposal,
``c`` is the lookup's time per cycle, ``v`` prices the cycles that verify a proposal, and the
prediction and best k come from :mod:`engine.analytic.lookup`.

The result is plain dataclasses (``dataclasses.asdict`` gives JSON). The format does not
depend on the engine that measured it: an engine that cannot see the distributions (a
serving engine's counters) leaves ``alpha_expected`` and ``top1_agreement`` as ``None``.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field, replace

from engine import defaults
from engine.analytic import acceptance as estimators
from engine.analytic import lookup as lookup_model
from engine.analytic import positions, theory
from engine.analytic.drafters import DRAFTER_WORDS
from engine.decoder.baseline import target_only
from engine.decoder.drafter_spec import DrafterSpec, kind_of, spec_for
from engine.decoder.events import CycleEvent, GenerationConfig, StepEvent
from engine.decoder.loading import ModelPair
from engine.decoder.ngram import PromptLookup
from engine.decoder.speculative import Outcome, speculate
from engine.decoder.stats import costs, proposals
from engine.measure.prompt_sets import Prompt

BOOTSTRAP_SAMPLES = 1000
BASELINE_TOKENS = 16  # target-only steps per prompt: enough for a median step time


@dataclass
class ProbeConfig:
    k: int = defaults.K
    temperatures: list[float] = field(default_factory=lambda: [0.0, 0.7, 1.0])
    top_p: float = defaults.TOP_P
    max_new_tokens: int = 32
    seed: int = 0
    bootstrap: int = BOOTSTRAP_SAMPLES
    lookup: PromptLookup | None = None  # draft by prompt lookup instead of the draft model
    eagle: str | None = None  # a folder: draft with this EAGLE head instead of the draft model
    medusa: str | None = None  # a folder: draft with these Medusa heads
    # How the draft model picks its tokens (vLLM's draft_sample_method): "probabilistic"
    # samples from q, accepted with min(1, p/q); "greedy" drafts the argmax (q one-hot),
    # accepted with p(x). Alpha differs between them, so a plan says which it was measured for.
    draft_sample: str = "probabilistic"

    @property
    def drafter(self) -> str:
        return kind_of(self.lookup, self.eagle, self.medusa)

    def validate(self) -> ProbeConfig:
        if not self.temperatures:
            raise ValueError("give at least one temperature")
        for t in self.temperatures:
            GenerationConfig("x", k=self.k, temperature=t, top_p=self.top_p,
                             max_new_tokens=self.max_new_tokens, seed=self.seed,
                             draft_sample=self.draft_sample).validate()
        if not isinstance(self.bootstrap, int) or self.bootstrap < 1:
            raise ValueError(f"bootstrap samples must be an integer >= 1, got {self.bootstrap!r}")
        if self.drafter == "ngram":
            self.lookup.validate()
        return self


@dataclass
class PromptMeasure:
    """One prompt at one temperature: counts and times, before any pooling."""

    domain: str
    temperature: float
    prompt_index: int
    tokens: int
    cycles: int
    proposing: int  # cycles that proposed at least one draft token
    accepted: int
    drafted: int
    trials: int
    verified: int  # positions whose acceptance was decided (accepted + rejected)
    overlap_sum: float  # sum over them of sum_x min(p(x), q(x))
    top1_agreements: int  # of them, where argmax q == argmax p
    histogram: list[int]  # cycles with a proposal that accepted a = 0..k drafts
    draft_step_ms: list[float]  # prompt lookup: one lookup per cycle
    verify_ms: list[float]  # prompt lookup: the cycles with a proposal only
    baseline_step_ms: list[float]
    proposal_lengths: list[int] | None = None  # proposals of m = 0..k tokens (prompt lookup)
    # Per draft position i = 1..k: cycles that proposed at least i tokens, and those that
    # accepted position i (None: only the histogram is known, every cycle proposing k).
    offered: list[int] | None = None
    taken: list[int] | None = None


@dataclass
class ProbeRow:
    """One (domain, temperature): the pooled figures. Intervals are ``[low, high]``."""

    domain: str
    temperature: float
    k: int
    prompts: int
    tokens: int
    cycles: int
    accepted: int
    drafted: int
    trials: int
    # None where there is nothing to divide by (engine.analytic.acceptance)
    alpha_counted: float | None
    alpha_counted_ci: list[float] | None
    alpha_expected: float | None
    alpha_expected_ci: list[float] | None
    top1_agreement: float | None
    top1_agreement_ci: list[float] | None
    per_position_acceptance: list[float | None]  # draft positions i = 1..k
    alpha_powers: list[float | None]  # alpha_counted^i, i = 1..k: the i.i.d. model
    draft_acceptance_rate: float | None
    mean_acceptance_length: float | None
    c: float | None
    v: float | None
    step_ms: float | None  # mean target-only step (engine.decoder.stats.costs)
    speedup_predicted: float | None  # at k, from the counted alpha, c and v
    best_k: int | None
    best_speedup: float | None
    drafter: str = "model"  # a name of engine.analytic.drafters.DRAFTER_NAMES
    proposal_share: float = 1.0  # pi: cycles with a proposal / cycles
    proposed_per_cycle: float | None = None  # tokens per proposal (prompt lookup)
    # the best k on the measured acceptance by position, at most the probe's k (nothing past
    # the positions measured is assumed); None for prompt lookup and without every position
    best_k_by_position: int | None = None
    best_speedup_by_position: float | None = None


@dataclass
class ProbeResult:
    """A whole probe. ``complete`` is False when it was stopped early (Ctrl-C, a time limit):
    the rows then pool the prompts measured so far."""

    engine: str
    target: str
    draft: str
    k: int
    temperatures: list[float]
    top_p: float
    max_new_tokens: int
    seed: int
    bootstrap: int
    rows: list[ProbeRow]
    runs_measured: int
    runs_planned: int
    complete: bool
    notices: list[str] = field(default_factory=list)
    drafter: str = "model"
    lookup: dict | None = None  # prompt_lookup_min and prompt_lookup_max, for "ngram"
    draft_sample: str = "probabilistic"  # how the draft sampled (vLLM's draft_sample_method)
    eagle: str | None = None  # the EAGLE head's folder, for "eagle"
    medusa: str | None = None  # the Medusa heads' folder, for "medusa"


# ---- measuring ----------------------------------------------------------------------------


def fit_prompt(pair: ModelPair, text: str, room: int) -> tuple[str, bool]:
    """``text``, its start cut off so that it plus ``room`` more positions fit in both models'
    context; and whether it was cut. The end is kept: it is what the models continue."""
    limits = [getattr(m.config, "max_position_embeddings", None)
              for m in (pair.target, pair.draft) if m is not None]
    limit = min((x for x in limits if x), default=None)
    if limit is None:
        return text, False
    keep = limit - room
    if keep < 1:
        raise ValueError(f"max new tokens plus k ({room}) leaves no room for a prompt in the "
                         f"models' context of {limit} positions")
    cut = False
    while True:  # a cut can re-tokenise to a few more tokens; cut again until it fits
        encoded = pair.tokenizer(text, return_offsets_mapping=True)
        excess = len(encoded.input_ids) - keep
        if excess <= 0:
            return text, cut
        # Where the text's tokens start; special tokens (a BOS the tokenizer adds) are no
        # text and cannot be cut off, so they are counted but never cut at.
        starts = [start for start, end in encoded.offset_mapping if end > start]
        if excess >= len(starts):
            raise ValueError(f"the tokenizer's own tokens leave no room for a prompt in the "
                             f"models' context of {limit} positions with {room} more")
        # Drop the first ``excess`` text tokens: the text gets shorter every time round.
        text, cut = text[starts[excess]:], True


def measure_prompt(
    pair: ModelPair, prompt: Prompt, index: int, temperature: float, config: ProbeConfig
) -> PromptMeasure:
    """The speculative run and the target-only baseline for one prompt at one temperature."""
    *_, measure = measure_events(pair, prompt, index, temperature, config)
    return measure


def measure_events(
    pair: ModelPair, prompt: Prompt, index: int, temperature: float, config: ProbeConfig,
    drafter: DrafterSpec | None = None,
) -> Iterator[CycleEvent | StepEvent | PromptMeasure]:
    """:func:`measure_prompt` step by step: the engine's cycle and step events as they
    happen (a caller may stop between any two), then the :class:`PromptMeasure`.
    ``drafter``: ``config``'s drafter, built (built here when not given)."""
    drafter = drafter or spec_for(pair, config.lookup, config.eagle, config.medusa)
    gen = GenerationConfig(prompt.text, k=config.k, temperature=temperature, top_p=config.top_p,
                           max_new_tokens=config.max_new_tokens, seed=config.seed + index,
                           draft_sample=config.draft_sample)
    agreements = 0

    def count_top1(_prefix: list[int], outcome: Outcome) -> None:
        nonlocal agreements
        verified = estimators.cycle_trials(len(outcome.drafts), outcome.n_accepted)
        q_top = outcome.q[:verified].argmax(dim=-1)
        p_top = outcome.p[:verified].argmax(dim=-1)
        agreements += int((q_top == p_top).sum())

    cycles: list[CycleEvent] = []
    for event in speculate(pair, gen, on_verify=count_top1, drafter=drafter):
        if isinstance(event, CycleEvent):
            cycles.append(event)
            yield event
    # The baseline ignores end of sequence so that it always has its steps to time.
    baseline_pair = replace(pair, stop_token_ids=frozenset())
    baseline = replace(gen, max_new_tokens=min(BASELINE_TOKENS, config.max_new_tokens))
    steps: list[StepEvent] = []
    for event in target_only(baseline_pair, baseline):
        if isinstance(event, StepEvent):
            steps.append(event)
            yield event
    counts = estimators.tally(proposals(cycles))
    pad = [0] * config.k
    lengths = [0] * (config.k + 1)
    for c in cycles:
        lengths[c.proposed] += 1
    overlaps = [o for c in cycles for o in c.overlap]
    lookup = config.lookup is not None
    verified_cycles = [c for c in cycles if c.proposed > 0] if lookup else cycles
    yield PromptMeasure(
        domain=prompt.domain,
        temperature=temperature,
        prompt_index=index,
        tokens=sum(c.n_emitted for c in cycles),
        cycles=counts.cycles,
        proposing=counts.proposing,
        accepted=counts.accepted,
        drafted=counts.proposed,
        trials=counts.trials,
        verified=len(overlaps),
        overlap_sum=sum(overlaps),
        top1_agreements=agreements,
        histogram=estimators.acceptance_histogram(
            [(p, a) for p, a in proposals(cycles) if p > 0], config.k),
        draft_step_ms=[ms for c in cycles for ms in c.draft_step_ms],
        verify_ms=[c.verify_ms for c in verified_cycles],
        baseline_step_ms=[s.step_ms for s in steps],
        proposal_lengths=lengths if lookup else None,
        offered=(list(counts.offered) + pad)[:config.k],
        taken=(list(counts.taken) + pad)[:config.k],
    )


def plan(prompts: Sequence[Prompt], config: ProbeConfig) -> list[tuple[float, int, Prompt]]:
    """Every (temperature, prompt index, prompt) the probe runs, in order."""
    return [(t, i, p) for t in config.temperatures for i, p in enumerate(prompts)]


def probe(
    pair: ModelPair, prompts: Sequence[Prompt], config: ProbeConfig, *, steps: bool = False
) -> Iterator[PromptMeasure]:
    """One :class:`PromptMeasure` per (temperature, prompt); stop iterating at any time and
    :func:`summarize_probe` what came so far. With ``steps`` the engine's cycle and step
    events come too, so that a caller can stop inside a prompt's runs. Prompts too long for
    the models' context must be cut first (:func:`fit_prompts`)."""
    config.validate()
    drafter = spec_for(pair, config.lookup, config.eagle, config.medusa).check(pair, config.k)
    for temperature, index, prompt in plan(prompts, config):
        for event in measure_events(pair, prompt, index, temperature, config, drafter):
            if steps or isinstance(event, PromptMeasure):
                yield event


def fit_prompts(
    pair: ModelPair, prompts: Sequence[Prompt], config: ProbeConfig
) -> tuple[list[Prompt], list[str]]:
    """The prompts cut to fit the models' context, and a notice when any was cut."""
    fitted, cut = [], 0
    for p in prompts:
        text, was_cut = fit_prompt(pair, p.text, config.max_new_tokens + config.k + 1)
        fitted.append(Prompt(text, p.domain))
        cut += was_cut
    notices = []
    if cut:
        notices.append(f"{cut} prompt(s) were longer than the models' context allows with "
                       f"{config.max_new_tokens} new tokens; their starts were cut off.")
    return fitted, notices


# ---- pooling ------------------------------------------------------------------------------


def summarize_probe(
    measures: Sequence[PromptMeasure],
    config: ProbeConfig,
    *,
    engine: str,
    target: str,
    draft: str,
    runs_planned: int,
    notices: Sequence[str] = (),
) -> ProbeResult:
    """Pool the measures by (domain, temperature), in order of first appearance."""
    groups: dict[tuple[str, float], list[PromptMeasure]] = {}
    for m in measures:
        groups.setdefault((m.domain, m.temperature), []).append(m)
    rows = [pool(group, config.k, config.bootstrap, config.seed) for group in groups.values()]
    if config.lookup is not None:  # vLLM's lookup measures carry no proposal lengths
        rows = [replace(r, drafter="ngram") for r in rows]
    elif config.drafter != "model":  # priced as a draft model: k proposed a cycle at its c
        rows = [replace(r, drafter=config.drafter) for r in rows]
    rows.sort(key=lambda r: (r.temperature, _first(groups, r)))
    return ProbeResult(
        engine=engine, target=target, draft=draft, k=config.k,
        temperatures=list(config.temperatures), top_p=config.top_p,
        max_new_tokens=config.max_new_tokens, seed=config.seed, bootstrap=config.bootstrap,
        rows=rows, runs_measured=len(measures), runs_planned=runs_planned,
        complete=len(measures) == runs_planned, notices=list(notices),
        drafter=config.drafter, lookup=asdict(config.lookup) if config.lookup else None,
        draft_sample=config.draft_sample, eagle=config.eagle, medusa=config.medusa,
    )


def _per_position(group: Sequence[PromptMeasure], histogram: list[int], k: int
                  ) -> list[float | None]:
    """Acceptance at each draft position over the cycles that proposed at least i tokens
    (the base alpha and the histogram share); from the histogram where that is all a
    measure knows (a vLLM server's counters: every draft proposes k)."""
    if all(m.offered is not None and m.taken is not None for m in group):
        return estimators.per_position([sum(m.taken[i] for m in group) for i in range(k)],
                                       [sum(m.offered[i] for m in group) for i in range(k)])
    return estimators.tally_histogram(histogram).per_position(k)


def _first(groups, row: ProbeRow) -> int:
    return list(dict.fromkeys(d for d, _ in groups)).index(row.domain)


def pool(group: Sequence[PromptMeasure], k: int, samples: int, seed: int) -> ProbeRow:
    """One row from the measures of one (domain, temperature)."""
    accepted = sum(m.accepted for m in group)
    trials = sum(m.trials for m in group)
    drafted = sum(m.drafted for m in group)
    cycles = sum(m.cycles for m in group)
    proposing = sum(m.proposing for m in group)
    verified = sum(m.verified for m in group)
    histogram = [sum(m.histogram[a] for m in group) for a in range(k + 1)]
    alpha = estimators.counted_alpha(accepted, trials)
    rng = random.Random(seed)

    def ci(num: Callable[[PromptMeasure], float], den: Callable[[PromptMeasure], float]):
        return bootstrap_ratio(group, num, den, samples, rng)

    expected = sum(m.overlap_sum for m in group) / verified if verified else None
    top1 = sum(m.top1_agreements for m in group) / verified if verified else None
    c = v = step_ms = predicted = best = best_speedup = None
    by_position: tuple[int, float] | tuple[None, None] = (None, None)
    per_position = _per_position(group, histogram, k)
    baseline = [ms for m in group for ms in m.baseline_step_ms]
    draft_steps = [ms for m in group for ms in m.draft_step_ms]
    verify_ms = [ms for m in group for ms in m.verify_ms]
    lookup = group[0].proposal_lengths is not None
    pi = proposing / cycles if cycles else 0.0
    if baseline and draft_steps:
        # no proposal at all: v is never paid; price it as one target step
        cost = costs(draft_steps, verify_ms or baseline, baseline)
        step_ms, c = cost.step_ms, cost.c
        v = cost.v if verify_ms else 1.0
        if alpha is not None and lookup:
            lengths = [sum(m.proposal_lengths[i] for m in group) for i in range(k + 1)]
            predicted = lookup_model.speedup(alpha, k, pi, c, v, lengths)
            best, best_speedup = lookup_model.best_k(alpha, pi, c, v, k)
        elif alpha is not None:
            predicted = theory.speedup(alpha, k, c, v)
            best, best_speedup = theory.best_k(alpha, c, v)
            curve = positions.measured(per_position)
            if curve is not None:
                by_position = positions.best_k(positions.Curve(curve), c, v, k_max=len(curve))
    return ProbeRow(
        domain=group[0].domain,
        temperature=group[0].temperature,
        k=k,
        prompts=len(group),
        tokens=sum(m.tokens for m in group),
        cycles=cycles,
        accepted=accepted,
        drafted=drafted,
        trials=trials,
        alpha_counted=alpha,
        alpha_counted_ci=ci(lambda m: m.accepted, lambda m: m.trials) if trials else None,
        alpha_expected=expected,
        alpha_expected_ci=ci(lambda m: m.overlap_sum, lambda m: m.verified) if verified else None,
        top1_agreement=top1,
        top1_agreement_ci=(ci(lambda m: m.top1_agreements, lambda m: m.verified)
                           if verified else None),
        per_position_acceptance=per_position,
        alpha_powers=[None] * k if alpha is None else theory.position_acceptance(alpha, k),
        draft_acceptance_rate=estimators.draft_acceptance_rate(accepted, drafted),
        mean_acceptance_length=estimators.mean_acceptance_length(accepted, proposing),
        c=c,
        v=v,
        step_ms=step_ms,
        speedup_predicted=predicted,
        best_k=best,
        best_speedup=best_speedup,
        drafter="ngram" if lookup else "model",
        proposal_share=pi,
        proposed_per_cycle=drafted / proposing if lookup and proposing else None,
        best_k_by_position=by_position[0],
        best_speedup_by_position=by_position[1],
    )


def bootstrap_ratio(
    items: Sequence,
    num: Callable,
    den: Callable,
    samples: int,
    rng: random.Random,
) -> list[float] | None:
    """95% percentile interval of ``sum(num) / sum(den)`` over resamples of ``items``;
    None when no resample has a denominator (no data)."""
    nums = [float(num(x)) for x in items]
    dens = [float(den(x)) for x in items]
    n = len(items)
    ratios = []
    for _ in range(samples):
        picks = [rng.randrange(n) for _ in range(n)]
        d = sum(dens[i] for i in picks)
        if d > 0:
            ratios.append(sum(nums[i] for i in picks) / d)
    if not ratios:
        return None
    ratios.sort()
    return [_quantile(ratios, 0.025), _quantile(ratios, 0.975)]


def _quantile(ordered: list[float], q: float) -> float:
    """Linear interpolation between order statistics (numpy's default)."""
    pos = q * (len(ordered) - 1)
    low = math.floor(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


# ---- output -------------------------------------------------------------------------------


def chart_data(result: ProbeResult) -> dict:
    """What the two charts need: alpha per domain with its interval (one bar per domain and
    temperature), and alpha against temperature, one line per domain. A row without an alpha
    (no trials) has no point on either."""
    rows = [r for r in result.rows if r.alpha_counted is not None and r.alpha_counted_ci]
    domains = list(dict.fromkeys(r.domain for r in rows))
    temperatures = sorted({r.temperature for r in rows})
    by_key = {(r.domain, r.temperature): r for r in rows}
    return {
        "alpha_by_domain": [
            {"domain": r.domain, "temperature": r.temperature, "alpha": r.alpha_counted,
             "low": r.alpha_counted_ci[0], "high": r.alpha_counted_ci[1]}
            for r in rows
        ],
        "alpha_vs_temperature": {
            "temperatures": temperatures,
            "series": [
                {"domain": d,
                 "points": [{"temperature": t, "alpha": by_key[d, t].alpha_counted,
                             "low": by_key[d, t].alpha_counted_ci[0],
                             "high": by_key[d, t].alpha_counted_ci[1]}
                            for t in temperatures if (d, t) in by_key]}
                for d in domains
            ],
        },
    }


def report_json(result: ProbeResult) -> dict:
    """The result and the two charts' data, as one JSON-ready object."""
    return {**asdict(result), "charts": chart_data(result)}


def _num(x: float | None, digits: int = 3) -> str:
    return "n/a" if x is None else f"{x:.{digits}f}"


def _with_ci(x: float | None, ci: list[float] | None) -> str:
    if x is None or ci is None:
        return "n/a"
    return f"{x:.3f} [{ci[0]:.3f}, {ci[1]:.3f}]"


def markdown(result: ProbeResult, command: str | None = None) -> str:
    """The result as a Markdown report: the main table, then per-position acceptance."""
    drafter = f"draft `{result.draft}` ({result.draft_sample} drafting)"
    if result.drafter in ("eagle", "medusa"):
        drafter = (f"{DRAFTER_WORDS[result.drafter]} `{getattr(result, result.drafter)}` "
                   f"({result.draft_sample} drafting)")
    if result.drafter == "ngram" and result.lookup:
        drafter = (f"prompt lookup (prompt_lookup_min {result.lookup['prompt_lookup_min']}, "
                   f"prompt_lookup_max {result.lookup['prompt_lookup_max']})")
    head = [f"Probe: {result.engine}, target `{result.target}`, {drafter}, "
            f"k = {result.k}, top-p {result.top_p:g}, {result.max_new_tokens} new tokens per "
            f"prompt, seed {result.seed}; 95% intervals from {result.bootstrap} bootstrap "
            "resamples of the prompts."]
    if result.drafter == "ngram":
        shares = ", ".join(f"{r.domain} T={r.temperature:g}: {r.proposal_share:.2f}"
                           for r in result.rows)
        head.append("alpha is counted over proposed tokens; c is one lookup per cycle; share of "
                    f"cycles with a proposal: {shares}.")
    if command:
        head.append(f"Command: `{command}`")
    if not result.complete:
        head.append(f"**Stopped early**: {result.runs_measured} of {result.runs_planned} "
                    "prompt runs measured; the rows pool those.")
    head += result.notices
    table = [
        "| domain | T | prompts | counted α [95% CI] | expected α [95% CI] | top-1 agreement "
        "| draft acceptance rate | mean acceptance length | c | v | predicted speedup | best k |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in result.rows:
        best = "n/a" if r.best_k is None else f"{r.best_k} ({r.best_speedup:.2f}x)"
        speedup = "n/a" if r.speedup_predicted is None else f"{r.speedup_predicted:.2f}x"
        table.append(
            f"| {r.domain} | {r.temperature:g} | {r.prompts} "
            f"| {_with_ci(r.alpha_counted, r.alpha_counted_ci)} "
            f"| {_with_ci(r.alpha_expected, r.alpha_expected_ci)} "
            f"| {_num(r.top1_agreement)} | {_num(r.draft_acceptance_rate)} "
            f"| {_num(r.mean_acceptance_length, 2)} | {_num(r.c)} | {_num(r.v)} | {speedup} "
            f"| {best} |"
        )
    positions = [
        "Acceptance at each draft position i (measured / α^i from the counted α):",
        "",
        "| domain | T | " + " | ".join(f"i = {i}" for i in range(1, result.k + 1)) + " |",
        "| --- | ---: | " + " | ".join("---:" for _ in range(result.k)) + " |",
    ]
    for r in result.rows:
        cells = " | ".join(f"{_num(m, 2)} / {_num(a, 2)}"
                           for m, a in zip(r.per_position_acceptance, r.alpha_powers, strict=True))
        positions.append(f"| {r.domain} | {r.temperature:g} | {cells} |")
    return "\n\n".join(["\n".join(head), "\n".join(table), "\n".join(positions)]) + "\n"
