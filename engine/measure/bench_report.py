"""The benchmark's results as a Markdown report."""

from __future__ import annotations

TARGETS = {
    "ours / hf-assisted (best k each)": 1.25,
    "ours-baseline / hf-generate": 1.0,
    "measured / predicted (ours, best k)": 0.9,
}


def markdown(result: dict, command: str | None = None) -> str:
    s, f = result["setting"], result["results"]
    cfg = s["config"]
    lookup = cfg.get("lookup")
    if lookup:
        drafter = (f"prompt lookup (n-gram), prompt_lookup_min {lookup['prompt_lookup_min']}, "
                   f"prompt_lookup_max {lookup['prompt_lookup_max']}; transformers: "
                   "prompt_lookup_num_tokens = k, max_matching_ngram_size "
                   f"{lookup['prompt_lookup_max']}")
    elif cfg.get("eagle"):
        drafter = (f"EAGLE head `{cfg['eagle']}` (the target's embedding and LM head shared; "
                   "our engine only)")
    elif cfg.get("medusa"):
        drafter = (f"Medusa heads `{cfg['medusa']}` (one pass over the target's hidden state; "
                   "our engine only)")
    else:
        drafter = f"draft `{s['draft']}` ({_model(s['draft_model'])})"
    lines = [
        "## specscope bench",
        "",
        f"- pair: target `{s['target']}` ({_model(s['target_model'])}), {drafter}",
        f"- device: {s['device']} ({s['device_name']}), {s['dtype']}, "
        f"{s['threads']} torch thread(s); torch {s['torch']}, transformers {s['transformers']}",
        f"- {len(cfg['prompts'])} prompts x {cfg['repeats']} repeats, "
        f"{cfg['max_new_tokens']} new tokens per run (end of sequence ignored), contenders "
        "interleaved; tok/s: new tokens / wall time of the call (prefill included), median "
        "(interquartile range)",
        "- predicted: docs/design.md's speedup from the counted alpha, c and v; measured: ours "
        "speculative / ours target-only in decode tok/s (prefill left out, as the theory "
        "counts; per prompt the median over the repeats, then pooled over the prompts)",
    ]
    if command:
        lines.append(f"- command: `{command}`")
    for key, t in f["temperatures"].items():
        lines += _temperature_section(float(key), t, f.get("greedy_check"), bool(lookup))
    lines.append("")
    return "\n".join(lines)


def _temperature_section(
    temperature: float, t: dict, check: dict | None, lookup: bool = False
) -> list[str]:
    hf_name = "hf-prompt-lookup" if lookup else "hf-assisted"
    title = f"### temperature {temperature:g}" + (" (greedy)" if temperature == 0 else "")
    lines = ["", title, ""]
    if temperature == 0 and check is not None:
        verdict = "yes" if check["match"] else f"NO: {check['mismatches']}"
        lines += [
            f"Same tokens from every contender: **{verdict}** "
            f"({check['compared']} outputs compared with ours-baseline).",
            "",
        ]
    base, gen = t["ours_baseline"], t["hf_generate"]
    line = f"Target-only: ours {_rate(base)} tok/s"
    if gen:
        ratio = base["median"] / gen["median"]
        line += f", transformers generate {_rate(gen)} tok/s, ratio **{ratio:.2f}**"
    lines += [
        line + f"; target step {t['step_ms']:.2f} ms (median).",
        "",
        f"| k | ours spec tok/s | {hf_name} tok/s | ours / hf | alpha | c | v "
        + ("| proposal share | proposed per proposal " if lookup else "")
        + "| predicted | by position | one alpha | measured | measured / predicted |",
        "|---:|---|---|---:|---:|---:|---:|" + ("---:|---:|" if lookup else "")
        + "---:|---:|---:|---:|---:|",
    ]
    for k, row in t["k"].items():
        hf = row["hf_assisted"]
        ratio = f"{row['ours_over_hf']:.2f}" if row["ours_over_hf"] else "-"
        lines.append(
            f"| {k} | {_rate(row['ours'])} | {_rate(hf)} | {ratio} "
            f"| {_num(row['alpha'], '.3f')} | {row['c']:.3f} | {row['v']:.3f} "
            + (f"| {row['proposal_share']:.2f} | {row['proposed_per_cycle']:.2f} "
               if lookup else "")
            + f"| {_num(row['predicted_speedup'], '.2f')}x "
            f"| {_x(row.get('predicted_by_position'))} | {_x(row.get('predicted_iid_longest'))} "
            f"| {row['measured_speedup']:.2f}x | {_num(row['measured_over_predicted'], '.2f')} |"
        )
    curve_k = next(iter(t["k"].values())).get("curve_k")
    if curve_k is not None and not lookup:
        lines += ["", f"By position: every k predicted from the per-position acceptance "
                      f"measured at k = {curve_k} (past the longest k nothing is assumed); one "
                      f"alpha: the i.i.d. model at that run's counted alpha. Both over the "
                      "model's cycle cost k c + v at each k."]
    best = t["best"]
    found = f"Best k: ours {best['k_ours']}"
    if "k_hf" in best:
        found += f", transformers {best['k_hf']}"
    lines += ["", found + ".", "", "| ratio | value | target | met |", "|---|---:|---:|---|"]
    for name, goal in TARGETS.items():
        if name in best and not (lookup and "hf-assisted" in name):
            met = "yes" if best[name] >= goal else "no"
            lines.append(f"| {name} | {best[name]:.2f} | >= {goal:g} | {met} |")
    if lookup and "ours / hf-assisted (best k each)" in best:
        lines.append(f"| ours / {hf_name} (best k each) "
                     f"| {best['ours / hf-assisted (best k each)']:.2f} | | |")
    if "ours / hf-assisted (same k)" in best:
        same = best["ours / hf-assisted (same k)"]
        lines.append(f"| ours / {hf_name} (same k = {best['k_ours']}) | {same:.2f} | | |")
    row = t["k"][best["k_ours"]]
    if row["time"]:
        lines += ["", f"Where the time goes (ours, k = {best['k_ours']}), ms:", ""]
        lines += _budget_table(row["time"], lookup)
        lines += [
            "",
            f"The prediction's two halves, measured (k = {best['k_ours']}): tokens per cycle "
            f"{row['tokens_per_cycle']:.2f} (model {row['tokens_per_cycle_predicted']:.2f}); "
            f"cycle cost {row['cycle_cost']:.2f} target steps, mean (model "
            + ("pi v + (1 - pi) + c" if lookup else "k c + v")
            + f" = {row['cycle_cost_predicted']:.2f}).",
        ]
    return lines


def _budget_table(b: dict, lookup: bool = False) -> list[str]:
    def both(mean, median):
        return "-" if mean is None else f"{mean:.3f} ({median:.3f})"

    rows = [
        ("the lookup (one a cycle), mean (median)" if lookup
         else "first draft step of a cycle, mean (median)",
         both(b["first_draft_step_ms"], b["first_draft_step_median_ms"])),
        ("later draft steps, mean (median)",
         both(b["later_draft_step_ms"], b["later_draft_step_median_ms"])),
        ("verification, mean (median)", both(b["verify_ms"], b["verify_median_ms"])),
        ("rest of the cycle (stacking, rollback, bookkeeping), mean", f"{b['cycle_rest_ms']:.3f}"),
        ("whole cycle, mean", f"{b['cycle_ms']:.3f}"),
        ("cycles per run", f"{b['cycles_per_run']:.1f}"),
        ("prefill per run", f"{b['prefill_ms_per_run']:.2f}"),
        ("events and text per run (outside the cycles)", f"{b['events_ms_per_run']:.2f}"),
        ("wall time per run", f"{b['wall_ms_per_run']:.1f}"),
    ]
    return ["| | ms |", "|---|---:|"] + [f"| {name} | {value} |" for name, value in rows]


def _model(m: dict) -> str:
    layers = f"{m['layers']} layer" + ("s" if m["layers"] != 1 else "")
    return f"{layers}, hidden {m['hidden']}, {m['params'] / 1e6:.2f}M params"


def _rate(r: dict | None) -> str:
    if r is None:
        return "-"
    return f"{r['median']:.1f} ({r['q1']:.1f}-{r['q3']:.1f})"


def _num(value: float | None, spec: str) -> str:
    """A figure, or n/a where there was nothing to estimate it from (no proposal)."""
    return "n/a" if value is None else format(value, spec)


def _x(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"
