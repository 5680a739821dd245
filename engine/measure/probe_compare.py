"""``specscope probe --drafter model,ngram``: the draft model and prompt lookup side by side.

Both probes run on the same prompts, temperatures, k and seeds; each (domain, temperature)
row of one is set beside the other's. The winner of a row is the drafter with the higher
predicted speedup at its own best k (each from its own alpha, c and v, and for prompt lookup
its share of cycles with a proposal: :mod:`engine.analytic.lookup`); by how much is the
ratio of the two. A drafter with no estimate (no proposal, so no alpha) counts as plain
decoding, 1x. When neither beats plain decoding, neither wins.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from engine.measure.probe import ProbeResult, ProbeRow, report_json


@dataclass
class DrafterRow:
    domain: str
    temperature: float
    model: ProbeRow
    ngram: ProbeRow
    winner: str | None  # "model", "ngram", or None: neither beats plain decoding
    ratio: float | None  # the winner's best speedup over the other's


def compare(model: ProbeResult, ngram: ProbeResult) -> list[DrafterRow]:
    """Rows present in both results, in the model probe's order."""
    by_key = {(r.domain, r.temperature): r for r in ngram.rows}
    out = []
    for m in model.rows:
        n = by_key.get((m.domain, m.temperature))
        if n is None:
            continue
        winner = ratio = None
        # A drafter with no estimate (prompt lookup that never proposed: no alpha) is plain
        # decoding at best: 1x.
        model_s, ngram_s = _or_plain(m.best_speedup), _or_plain(n.best_speedup)
        if max(model_s, ngram_s) > 1.0:
            winner = "ngram" if ngram_s > model_s else "model"
            high, low = sorted((model_s, ngram_s), reverse=True)
            ratio = high / low
        out.append(DrafterRow(m.domain, m.temperature, m, n, winner, ratio))
    return out


def _or_plain(best_speedup: float | None) -> float:
    return 1.0 if best_speedup is None else best_speedup


def comparison_json(model: ProbeResult, ngram: ProbeResult) -> dict:
    return {
        "drafters": {"model": report_json(model), "ngram": report_json(ngram)},
        "comparison": [
            {"domain": r.domain, "temperature": r.temperature, "winner": r.winner,
             "ratio": r.ratio,
             "model": _brief(r.model), "ngram": _brief(r.ngram)}
            for r in compare(model, ngram)
        ],
    }


def _brief(row: ProbeRow) -> dict:
    keys = ("alpha_counted", "alpha_counted_ci", "proposal_share", "proposed_per_cycle", "c",
            "v", "speedup_predicted", "best_k", "best_speedup")
    d = asdict(row)
    return {k: d[k] for k in keys}


def _ci(r: ProbeRow) -> str:
    return f"{r.alpha_counted:.2f} [{r.alpha_counted_ci[0]:.2f}, {r.alpha_counted_ci[1]:.2f}]"


def _x(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}x"


def _best(r: ProbeRow) -> str:
    return "n/a" if r.best_k is None else f"{r.best_k} ({r.best_speedup:.2f}x)"


def _num(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def markdown(model: ProbeResult, ngram: ProbeResult, command: str | None = None) -> str:
    lookup = ngram.lookup or {}
    head = [
        f"Probe: draft model `{model.draft}` against prompt lookup (prompt_lookup_min "
        f"{lookup.get('prompt_lookup_min')}, prompt_lookup_max "
        f"{lookup.get('prompt_lookup_max')}) on target `{model.target}`, k = {model.k}, "
        f"top-p {model.top_p:g}, {model.max_new_tokens} new tokens per prompt, seed "
        f"{model.seed}; 95% intervals from {model.bootstrap} bootstrap resamples of the prompts.",
        "alpha is counted over proposed tokens; prompt lookup's proposals: the share of cycles "
        "with one (pi) and tokens per proposal; c is a draft step (model) or one lookup per "
        "cycle (n-gram), in target steps; the winner has the higher predicted speedup at its "
        "own best k.",
    ]
    if command:
        head.append(f"Command: `{command}`")
    for result in (model, ngram):
        if not result.complete:
            head.append(f"**Stopped early** ({result.drafter}): {result.runs_measured} of "
                        f"{result.runs_planned} prompt runs measured.")
        head += [f"{result.drafter}: {n}" for n in result.notices]
    table = [
        "| domain | T | α model [95% CI] | α n-gram [95% CI] | n-gram proposals: pi, tokens "
        "| c model | c n-gram | v model | v n-gram | predicted at k: model | n-gram "
        "| best k: model | n-gram | wins |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
        "| ---: | --- |",
    ]
    for r in compare(model, ngram):
        m, n = r.model, r.ngram
        tokens = "n/a" if n.proposed_per_cycle is None else f"{n.proposed_per_cycle:.1f}"
        wins = ("neither (do not speculate)" if r.winner is None
                else f"{'n-gram' if r.winner == 'ngram' else 'model'} by {r.ratio:.2f}x")
        table.append(
            f"| {r.domain} | {r.temperature:g} | {_ci(m)} | {_ci(n)} "
            f"| {n.proposal_share:.2f}, {tokens} | {_num(m.c)} | {_num(n.c)} | {_num(m.v)} "
            f"| {_num(n.v)} | {_x(m.speedup_predicted)} | {_x(n.speedup_predicted)} "
            f"| {_best(m)} | {_best(n)} | {wins} |"
        )
    return "\n\n".join(["\n".join(head), "\n".join(table)]) + "\n"


# ---- any number of drafters (``--drafter model,ngram,eagle``) ----------------------------

NAMES = {"model": "draft model", "ngram": "n-gram", "eagle": "EAGLE head",
         "medusa": "Medusa heads"}


@dataclass
class ManyRow:
    domain: str
    temperature: float
    rows: dict[str, ProbeRow]  # each drafter's row, in the order the drafters ran
    winner: str | None  # the drafter with the highest best speedup; None: none beats 1x
    ratio: float | None  # the winner's best speedup over the runner-up's


def compare_many(results: list[ProbeResult]) -> list[ManyRow]:
    """Rows present in every result, in the first result's order."""
    by_key = [{(r.domain, r.temperature): r for r in result.rows} for result in results]
    out = []
    for first in results[0].rows:
        key = (first.domain, first.temperature)
        if not all(key in rows for rows in by_key):
            continue
        rows = {result.drafter: rows[key] for result, rows in zip(results, by_key, strict=True)}
        ranked = sorted(((_or_plain(r.best_speedup), name) for name, r in rows.items()),
                        reverse=True)
        winner = ratio = None
        if ranked[0][0] > 1.0:
            winner = ranked[0][1]
            ratio = ranked[0][0] / max(ranked[1][0], 1.0) if len(ranked) > 1 else None
        out.append(ManyRow(first.domain, first.temperature, rows, winner, ratio))
    return out


def many_json(results: list[ProbeResult]) -> dict:
    return {
        "drafters": {result.drafter: report_json(result) for result in results},
        "comparison": [
            {"domain": r.domain, "temperature": r.temperature, "winner": r.winner,
             "ratio": r.ratio} | {name: _brief(row) | {
                 "per_position_acceptance": row.per_position_acceptance}
                 for name, row in r.rows.items()}
            for r in compare_many(results)
        ],
    }


def _best_by_position(r: ProbeRow) -> str:
    if r.best_k_by_position is None:
        return "n/a"
    return f"{r.best_k_by_position} ({r.best_speedup_by_position:.2f}x)"


def _positions(r: ProbeRow) -> str:
    return " ".join("n/a" if x is None else f"{x:.2f}" for x in r.per_position_acceptance)


def markdown_many(results: list[ProbeResult], command: str | None = None) -> str:
    first = results[0]
    names = [result.drafter for result in results]
    described = []
    for result in results:
        if result.drafter == "ngram":
            lookup = result.lookup or {}
            described.append(f"prompt lookup (prompt_lookup_min "
                             f"{lookup.get('prompt_lookup_min')}, prompt_lookup_max "
                             f"{lookup.get('prompt_lookup_max')})")
        elif result.drafter in ("eagle", "medusa"):
            described.append(f"{NAMES[result.drafter]} `{getattr(result, result.drafter)}`")
        else:
            described.append(f"draft model `{result.draft}`")
    head = [
        f"Probe: {', '.join(described)} on target `{first.target}`, k = {first.k}, top-p "
        f"{first.top_p:g}, {first.max_new_tokens} new tokens per prompt, seed {first.seed}, "
        f"{first.draft_sample} drafting; 95% intervals from {first.bootstrap} bootstrap "
        "resamples of the prompts.",
        "alpha is counted over proposed tokens; c is a draft step (draft model, EAGLE head, a "
        "Medusa head) or one lookup per cycle (n-gram), in target steps; predicted: the "
        "speedup over target-only decoding that the drafter's own formula gives at k from its "
        "measured alpha, c and v (the heads propose k every cycle: the draft model's "
        "formula); best k: on one alpha, then on the acceptance by position (k at most the "
        "positions measured); the winner has the higher predicted speedup at its own best k.",
    ]
    if command:
        head.append(f"Command: `{command}`")
    for result in results:
        if not result.complete:
            head.append(f"**Stopped early** ({result.drafter}): {result.runs_measured} of "
                        f"{result.runs_planned} prompt runs measured.")
        head += [f"{result.drafter}: {n}" for n in result.notices]
    table = ["| domain | T | drafter | α [95% CI] | per-position acceptance | c | v "
             "| predicted at k | best k | by position | wins |",
             "| --- | ---: | --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | --- |"]
    for r in compare_many(results):
        wins = ("none (do not speculate)" if r.winner is None
                else NAMES.get(r.winner, r.winner)
                + (f" by {r.ratio:.2f}x" if r.ratio is not None else ""))
        for i, name in enumerate(names):
            row = r.rows[name]
            alpha = "n/a" if row.alpha_counted is None else _ci(row)
            lead = (f"| {r.domain} | {r.temperature:g} " if i == 0 else "| | ")
            table.append(
                f"{lead}| {NAMES.get(name, name)} | {alpha} | {_positions(row)} "
                f"| {_num(row.c)} | {_num(row.v)} | {_x(row.speedup_predicted)} "
                f"| {_best(row)} | {_best_by_position(row)} | {wins if i == 0 else ''} |")
    return "\n\n".join(["\n".join(head), "\n".join(table)]) + "\n"
