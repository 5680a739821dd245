"""The benchmark's results: per temperature and k, the spread of each contender's rates, our
counted alpha, c and v pooled over every cycle and step (engine.decoder.stats), the measured
against the predicted speedup, where the time goes, and the greedy check."""

from __future__ import annotations

import statistics

from engine.analytic import lookup, positions, theory
from engine.decoder.events import CycleEvent
from engine.decoder.stats import summarize
from engine.measure.bench_record import (
    HF_ASSISTED,
    HF_GENERATE,
    OURS_BASE,
    OURS_SPEC,
    BenchRecord,
    TimedRun,
)


def _spread(values: list[float]) -> dict[str, float]:
    values = sorted(values)
    if len(values) == 1:
        return {"median": values[0], "q1": values[0], "q3": values[0], "min": values[0],
                "max": values[0], "n": 1}
    q1, _, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return {
        "median": statistics.median(values),
        "q1": q1,
        "q3": q3,
        "min": values[0],
        "max": values[-1],
        "n": len(values),
    }


def greedy_check(bench: BenchRecord) -> dict:
    """At temperature 0 every run of every contender must give, for a prompt, the tokens of
    our first target-only run."""
    mismatches = []
    compared = 0
    for prompt in range(len(bench.config.prompts)):
        mine = sorted(
            (key, ids) for key, ids in bench.outputs.items() if key[2:4] == (0.0, prompt)
        )
        reference = next((ids for key, ids in mine if key[:2] == (OURS_BASE, None)), None)
        if reference is None:
            continue
        for (name, k, _, _, repeat), ids in mine:
            if ids is reference:
                continue
            compared += 1
            if ids != reference:
                first = next(
                    (i for i, (a, b) in enumerate(zip(ids, reference, strict=False)) if a != b),
                    min(len(ids), len(reference)),
                )
                mismatches.append(
                    {"contender": name, "k": k, "prompt": prompt, "repeat": repeat,
                     "first": first}
                )
    return {"match": not mismatches, "compared": compared, "mismatches": mismatches}


def results(bench: BenchRecord) -> dict:
    """Medians and spread per contender, our alpha, c and v, predicted against measured
    speedup, and the ratios the issue sets targets for."""
    cfg = bench.config
    out: dict = {"temperatures": {}}
    for temperature in cfg.temperatures:
        runs = [r for r in bench.runs if r.temperature == temperature]

        def rate(name, k=None, runs=runs, decode=False):
            chosen = [r for r in runs if r.contender == name and r.k == k]
            if not chosen:
                return None
            return _spread([r.decode_tok_s if decode else r.tok_s for r in chosen])

        steps = bench.steps.get(temperature, [])
        step_ms = statistics.median(s.step_ms for s in steps)
        base = rate(OURS_BASE)
        base_decode = rate(OURS_BASE, decode=True)
        hf_gen = rate(HF_GENERATE)
        per_k = {}
        # Acceptance by position, measured at the longest k, predicts every k (as the plan
        # chooses k from one curve); the i.i.d. model at that k's alpha beside it.
        longest = summarize(bench.cycles.get((temperature, max(cfg.ks)), []),
                            [s.step_ms for s in steps])
        curve = positions.measured(longest.per_position_acceptance)
        for k in cfg.ks:
            cycles = bench.cycles.get((temperature, k), [])
            spec = rate(OURS_SPEC, k)
            spec_decode = rate(OURS_SPEC, k, decode=True)
            hf = rate(HF_ASSISTED, k)
            summary = summarize(cycles, [s.step_ms for s in steps])
            alpha, c_cost, v_cost = summary.alpha_counted, summary.c, summary.v
            predicted = summary.speedup_predicted
            measured = decode_rate(runs, OURS_SPEC, k) / decode_rate(runs, OURS_BASE, None)
            # the two halves of the prediction, measured: tokens per cycle and cycle cost
            tokens_per_cycle = statistics.fmean(c.n_accepted + 1 for c in cycles)
            cycle_cost = statistics.fmean(c.cycle_ms for c in cycles) / step_ms
            pi = summary.proposal_share
            if cfg.lookup is not None:  # cycles with no proposal are plain target steps
                lengths = [sum(c.proposed == m for c in cycles) for m in range(k + 1)]
                # alpha is None only when nothing was proposed (pi = 0): it does not enter
                tokens_predicted = lookup.tokens_per_cycle(alpha or 0.0, k, pi, lengths)
                cost_predicted = lookup.cycle_cost(pi, c_cost, v_cost)
            else:
                tokens_predicted = theory.expected_tokens(alpha, k)
                cost_predicted = theory.cycle_cost(k, c_cost, v_cost)
            by_position = iid_longest = None
            if curve is not None and cfg.lookup is None:
                by_position = positions.tokens_per_cycle(positions.Curve(curve), k) / cost_predicted
                iid_longest = (theory.expected_tokens(longest.alpha_counted, k) / cost_predicted
                               if longest.alpha_counted is not None else None)
            per_k[k] = {
                "ours": spec,
                "ours_decode": spec_decode,
                "hf_assisted": hf,
                "ours_over_hf": spec["median"] / hf["median"] if hf else None,
                "alpha": alpha,
                "alpha_expected": summary.alpha_expected,
                "trials": summary.trials,
                "mean_acceptance_length": summary.mean_acceptance_length,
                "proposal_share": pi,
                "proposed_per_cycle": summary.proposed_per_cycle,
                "c": c_cost,
                "v": v_cost,
                "predicted_speedup": predicted,
                "measured_speedup": measured,
                "tokens_per_cycle": tokens_per_cycle,
                "tokens_per_cycle_predicted": tokens_predicted,
                "cycle_cost": cycle_cost,
                "cycle_cost_predicted": cost_predicted,
                "measured_over_predicted": measured / predicted if predicted else None,
                "predicted_by_position": by_position,  # from the longest k's curve
                "predicted_iid_longest": iid_longest,  # one alpha, the longest k's
                "curve_k": max(cfg.ks),
                "time": time_budget(cycles, [r for r in runs if r.contender == OURS_SPEC
                                             and r.k == k], bench, temperature, k),
            }
        best_ours = max(cfg.ks, key=lambda k: per_k[k]["ours"]["median"])
        best = {"k_ours": best_ours}
        if cfg.transformers:
            best_hf = max(cfg.ks, key=lambda k: per_k[k]["hf_assisted"]["median"])
            best["k_hf"] = best_hf
            best["ours / hf-assisted (best k each)"] = (
                per_k[best_ours]["ours"]["median"] / per_k[best_hf]["hf_assisted"]["median"]
            )
            best["ours / hf-assisted (same k)"] = per_k[best_ours]["ours_over_hf"]
            best["ours-baseline / hf-generate"] = base["median"] / hf_gen["median"]
        best["measured / predicted (ours, best k)"] = per_k[best_ours]["measured_over_predicted"]
        out["temperatures"][str(temperature)] = {
            "step_ms": step_ms,
            "ours_baseline": base,
            "ours_baseline_decode": base_decode,
            "hf_generate": hf_gen,
            "k": per_k,
            "best": best,
        }
    out["greedy_check"] = greedy_check(bench) if 0.0 in cfg.temperatures else None
    return out


def decode_rate(runs: list[TimedRun], name: str, k: int | None) -> float:
    """Tokens per second of decoding (prefill left out) over all prompts: per prompt the
    median time over the repeats (a run slowed by the machine drops out), then total tokens
    over total time, the same pooling as the counted alpha's."""
    tokens = ms = 0.0
    by_prompt: dict[int, list[TimedRun]] = {}
    for r in runs:
        if r.contender == name and r.k == k:
            by_prompt.setdefault(r.prompt, []).append(r)
    for chosen in by_prompt.values():
        tokens += chosen[0].tokens
        ms += statistics.median(r.wall_ms - r.prefill_ms for r in chosen)
    return 1000.0 * tokens / ms


def time_budget(cycles: list[CycleEvent], runs: list[TimedRun], bench: BenchRecord, t: float,
                k: int):
    """Where a speculative run's time goes, in ms: per cycle (first draft step, the other
    steps, verification, the rest of the cycle) and per run (prefill, turning cycles into
    events and text)."""
    if not cycles or not runs:
        return None
    first = [c.draft_step_ms[0] for c in cycles]
    later = [ms for c in cycles for ms in c.draft_step_ms[1:]]
    n_runs = len(runs)
    wall = sum(r.wall_ms for r in runs)
    prefill = sum(r.prefill_ms for r in runs)
    in_cycles = sum(c.cycle_ms for c in cycles)
    return {
        "cycles_per_run": len(cycles) / n_runs,
        "first_draft_step_ms": statistics.fmean(first),
        "first_draft_step_median_ms": statistics.median(first),
        "later_draft_step_ms": statistics.fmean(later) if later else None,
        "later_draft_step_median_ms": statistics.median(later) if later else None,
        "draft_ms": statistics.fmean(c.draft_ms for c in cycles),
        "verify_ms": statistics.fmean(c.verify_ms for c in cycles),
        "verify_median_ms": statistics.median(c.verify_ms for c in cycles),
        "cycle_rest_ms": statistics.fmean(c.cycle_ms - c.draft_ms - c.verify_ms for c in cycles),
        "cycle_ms": statistics.fmean(c.cycle_ms for c in cycles),
        "prefill_ms_per_run": prefill / n_runs,
        "events_ms_per_run": (wall - prefill - in_cycles) / n_runs,
        "wall_ms_per_run": wall / n_runs,
    }
