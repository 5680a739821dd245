"""``specscope bench``: our engine against Hugging Face transformers on one pair.

Four contenders, in one process, on the same model objects, the same prompt ids and the
same number of new tokens (end of sequence is ignored on every side, so every run makes
exactly ``max_new_tokens`` tokens):

    ours-baseline     target-only decoding with the engine (engine.decoder.baseline)
    hf-generate       target-only ``model.generate`` from transformers
    ours-spec k       speculative decoding with the engine (engine.decoder.speculative)
    hf-assisted k     ``model.generate(..., assistant_model=draft)``, k assistant tokens
                      per cycle (constant schedule, confidence threshold off)

Every run is timed end to end (prompt ids in, token ids out, prefill included) and the
contenders are interleaved: each repeat runs every (prompt, contender) once, in an order
rotated from one prompt to the next, so drift in the machine's speed touches them all alike.
At temperature 0 all outputs must be the same tokens; the benchmark checks it.

For our speculative runs it also pools the cycles into the DESIGN.md figures (counted alpha,
c and v against our target-only steps) and sets the measured speedup (decode time, the
prefill left out, as the theory counts it) beside the predicted one.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch

from engine.analytic import theory
from engine.decoder.baseline import run_target_only
from engine.decoder.events import CycleEvent, DoneEvent, GenerationConfig, StepEvent
from engine.decoder.loading import ModelPair
from engine.decoder.speculative import speculate
from engine.decoder.stats import summarize

OURS_BASE, HF_GENERATE, OURS_SPEC, HF_ASSISTED = (
    "ours-baseline",
    "hf-generate",
    "ours-spec",
    "hf-assisted",
)
TARGETS = {
    "ours / hf-assisted (best k each)": 1.25,
    "ours-baseline / hf-generate": 1.0,
    "measured / predicted (ours, best k)": 0.9,
}
# Used when the pair ships no held-out prompts (heldout_prompts.json next to its models).
FALLBACK_PROMPTS = [
    "In the beginning God created the heaven and the earth. And the earth was",
    ":hacker: n.\n\n[originally, someone who makes furniture with an axe] 1. A person who",
    "And it came to pass, when the king heard the words of the law, that he",
    ":kluge: /klooj/\n\n[from the German `klug', clever] 1. n. A Rube Goldberg device in",
    "The quick brown fox jumps over the lazy dog, and then",
    "Speculative decoding drafts several tokens with a small model and",
]


@dataclass
class BenchConfig:
    ks: Sequence[int] = (1, 2, 3, 4, 5, 6, 7, 8)
    temperatures: Sequence[float] = (0.0, 1.0)
    max_new_tokens: int = 64
    prompts: Sequence[str] = field(default_factory=lambda: FALLBACK_PROMPTS[:4])
    repeats: int = 3
    seed: int = 0
    warmup: bool = True
    transformers: bool = True  # False: our engine only


@dataclass
class TimedRun:
    """One timed run of one contender on one prompt."""

    contender: str
    temperature: float
    k: int | None
    prompt: int
    repeat: int
    tokens: int
    wall_ms: float
    prefill_ms: float | None = None  # ours only: the engine's own prefill timing

    @property
    def tok_s(self) -> float:
        return 1000.0 * self.tokens / self.wall_ms

    @property
    def decode_tok_s(self) -> float | None:
        if self.prefill_ms is None:
            return None
        return 1000.0 * self.tokens / (self.wall_ms - self.prefill_ms)


@dataclass
class Contender:
    name: str
    k: int | None
    # (prompt, prompt ids, temperature, seed) -> (new token ids, prefill ms or None, events)
    run: Callable[[str, list[int], float, int], tuple[list[int], float | None, list]]


def heldout_prompts(target: str, per_domain: int = 2) -> list[str] | None:
    """Prompts the pair was not trained on, when its training left them next to the models
    (``heldout_prompts.json``: domain -> prompts); taken round-robin over the domains."""
    path = Path(target).parent / "heldout_prompts.json"
    if not path.is_file():
        return None
    domains = list(json.loads(path.read_text(encoding="utf-8")).values())
    prompts = [d[i] for i in range(per_domain) for d in domains if i < len(d)]
    return prompts or None


# ---- running ----------------------------------------------------------------------------


class Bench:
    """Runs the contenders and keeps every run, every cycle and every target-only step."""

    def __init__(self, pair: ModelPair, config: BenchConfig, log: Callable[[str], None]):
        if pair.draft is None:
            raise ValueError("the benchmark needs a draft model; this pair has none")
        self.pair = pair
        self.config = config
        self.log = log
        # End of sequence never stops our runs (transformers' side: eos_token_id=[]).
        self.ours = dataclasses.replace(pair, stop_token_ids=frozenset())
        self.runs: list[TimedRun] = []
        self.outputs: dict[tuple, list[int]] = {}  # (contender, k, T, prompt, repeat) -> ids
        self.cycles: dict[tuple[float, int], list[CycleEvent]] = {}
        self.steps: dict[float, list[StepEvent]] = {}
        self.cuda = pair.device.type == "cuda"

    def contenders(self) -> list[Contender]:
        out = [Contender(OURS_BASE, None, self._ours_baseline)]
        if self.config.transformers:
            out.append(Contender(HF_GENERATE, None, self._hf(None)))
        for k in self.config.ks:
            out.append(Contender(OURS_SPEC, k, self._ours_spec(k)))
            if self.config.transformers:
                out.append(Contender(HF_ASSISTED, k, self._hf(k)))
        return out

    def run(self) -> None:
        cfg = self.config
        contenders = self.contenders()
        if cfg.warmup:
            self.log("warm-up")
            for temperature in cfg.temperatures:
                for c in contenders:
                    self._once(c, temperature, 0, repeat=-1)
        for repeat in range(cfg.repeats):
            self.log(f"repeat {repeat + 1}/{cfg.repeats}")
            for temperature in cfg.temperatures:
                for i in range(len(cfg.prompts)):
                    shift = (repeat * len(cfg.prompts) + i) % len(contenders)
                    for c in contenders[shift:] + contenders[:shift]:
                        self._once(c, temperature, i, repeat)

    def _once(self, c: Contender, temperature: float, prompt: int, repeat: int) -> None:
        text = self.config.prompts[prompt]
        ids = list(self.pair.tokenizer(text).input_ids)  # as decoder.common.encode_prompt
        seed = self.config.seed + prompt
        self._sync()
        start = time.perf_counter()
        token_ids, prefill_ms, events = c.run(text, ids, temperature, seed)
        self._sync()
        wall_ms = 1000.0 * (time.perf_counter() - start)
        if repeat < 0:
            return  # warm-up
        self.runs.append(
            TimedRun(c.name, temperature, c.k, prompt, repeat, len(token_ids), wall_ms, prefill_ms)
        )
        self.outputs[c.name, c.k, temperature, prompt, repeat] = token_ids
        if c.name == OURS_BASE:
            self.steps.setdefault(temperature, []).extend(events)
        elif c.name == OURS_SPEC:
            self.cycles.setdefault((temperature, c.k), []).extend(events)

    def _sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize(self.pair.device)

    def _config(self, prompt: str, temperature: float, seed: int, k: int = 1):
        return GenerationConfig(
            prompt=prompt,
            k=k,
            temperature=temperature,
            max_new_tokens=self.config.max_new_tokens,
            seed=seed,
        )

    def _ours_baseline(self, prompt, ids, temperature, seed):
        steps, done = run_target_only(self.ours, self._config(prompt, temperature, seed))
        return done.token_ids, done.prefill_ms, steps

    def _ours_spec(self, k: int):
        def run(prompt, ids, temperature, seed):
            *events, done = speculate(self.ours, self._config(prompt, temperature, seed, k))
            assert isinstance(done, DoneEvent)
            return done.token_ids, done.prefill_ms, events

        return run

    def _hf(self, k: int | None):
        pair = self.pair
        pad = pair.tokenizer.pad_token_id
        pad = pad if pad is not None else next(iter(pair.stop_token_ids), 0)

        def run(prompt, ids, temperature, seed):
            input_ids = torch.tensor([ids], device=pair.device)
            kwargs = dict(
                attention_mask=torch.ones_like(input_ids),
                max_new_tokens=self.config.max_new_tokens,
                eos_token_id=[],  # never stop early: exactly max_new_tokens, like ours
                pad_token_id=pad,
            )
            if temperature == 0:
                kwargs.update(do_sample=False)
            else:
                kwargs.update(do_sample=True, temperature=temperature, top_k=0, top_p=1.0)
            if k is not None:
                assistant = pair.draft.generation_config
                assistant.num_assistant_tokens = k
                assistant.num_assistant_tokens_schedule = "constant"
                assistant.assistant_confidence_threshold = 0.0  # off
                kwargs["assistant_model"] = pair.draft
            torch.manual_seed(seed)
            with torch.inference_mode():
                out = pair.target.generate(input_ids, **kwargs)
            return out[0, len(ids) :].tolist(), None, []

        return run


# ---- results ----------------------------------------------------------------------------


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


def greedy_check(bench: Bench) -> dict:
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


def results(bench: Bench) -> dict:
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
            per_k[k] = {
                "ours": spec,
                "ours_decode": spec_decode,
                "hf_assisted": hf,
                "ours_over_hf": spec["median"] / hf["median"] if hf else None,
                "alpha": alpha,
                "alpha_expected": summary.alpha_expected,
                "mean_acceptance_length": summary.mean_acceptance_length,
                "c": c_cost,
                "v": v_cost,
                "predicted_speedup": predicted,
                "measured_speedup": measured,
                "tokens_per_cycle": tokens_per_cycle,
                "tokens_per_cycle_predicted": theory.expected_tokens(alpha, k),
                "cycle_cost": cycle_cost,
                "cycle_cost_predicted": theory.cycle_cost(k, c_cost, v_cost),
                "measured_over_predicted": measured / predicted,
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


def time_budget(cycles: list[CycleEvent], runs: list[TimedRun], bench: Bench, t: float, k: int):
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


# ---- the whole benchmark ----------------------------------------------------------------


def run_bench(
    pair: ModelPair, config: BenchConfig, log: Callable[[str], None] = lambda _: None
) -> dict:
    """Run everything; a JSON-ready dict of the setting, every run and the results."""
    for prompt in config.prompts:
        if not prompt.strip():
            raise ValueError("a benchmark prompt is empty")
    draft_config = copy.deepcopy(pair.draft.generation_config) if pair.draft else None
    bench = Bench(pair, config, log)
    try:
        bench.run()
    finally:
        if draft_config is not None:
            pair.draft.generation_config = draft_config
    return {
        "setting": setting(pair, config),
        "results": results(bench),
        "runs": [dataclasses.asdict(r) for r in bench.runs],
    }


def setting(pair: ModelPair, config: BenchConfig) -> dict:
    def describe(model) -> dict:
        c = model.config
        return {
            "layers": c.num_hidden_layers,
            "hidden": c.hidden_size,
            "params": sum(p.numel() for p in model.parameters()),
        }

    return {
        "target": pair.target_name,
        "draft": pair.draft_name,
        "target_model": describe(pair.target),
        "draft_model": describe(pair.draft),
        "device": str(pair.device),
        "device_name": (
            torch.cuda.get_device_name(pair.device) if pair.device.type == "cuda" else "cpu"
        ),
        "dtype": str(pair.dtype).removeprefix("torch."),
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "transformers": _transformers_version(),
        "config": dataclasses.asdict(config) | {"prompts": list(config.prompts)},
    }


def _transformers_version() -> str:
    import transformers

    return transformers.__version__


# ---- Markdown ---------------------------------------------------------------------------


def markdown(result: dict, command: str | None = None) -> str:
    s, f = result["setting"], result["results"]
    cfg = s["config"]
    lines = [
        "## specscope bench",
        "",
        f"- pair: target `{s['target']}` ({_model(s['target_model'])}), "
        f"draft `{s['draft']}` ({_model(s['draft_model'])})",
        f"- device: {s['device']} ({s['device_name']}), {s['dtype']}, "
        f"{s['threads']} torch thread(s); torch {s['torch']}, transformers {s['transformers']}",
        f"- {len(cfg['prompts'])} prompts x {cfg['repeats']} repeats, "
        f"{cfg['max_new_tokens']} new tokens per run (end of sequence ignored), contenders "
        "interleaved; tok/s: new tokens / wall time of the call (prefill included), median "
        "(interquartile range)",
        "- predicted: DESIGN.md's speedup from the counted alpha, c and v; measured: ours "
        "speculative / ours target-only in decode tok/s (prefill left out, as the theory "
        "counts; per prompt the median over the repeats, then pooled over the prompts)",
    ]
    if command:
        lines.append(f"- command: `{command}`")
    for key, t in f["temperatures"].items():
        lines += _temperature_section(float(key), t, f.get("greedy_check"))
    lines.append("")
    return "\n".join(lines)


def _temperature_section(temperature: float, t: dict, check: dict | None) -> list[str]:
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
        "| k | ours spec tok/s | hf-assisted tok/s | ours / hf | alpha | c | v "
        "| predicted | measured | measured / predicted |",
        "|---:|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for k, row in t["k"].items():
        hf = row["hf_assisted"]
        ratio = f"{row['ours_over_hf']:.2f}" if row["ours_over_hf"] else "-"
        lines.append(
            f"| {k} | {_rate(row['ours'])} | {_rate(hf)} | {ratio} "
            f"| {row['alpha']:.3f} | {row['c']:.3f} | {row['v']:.3f} "
            f"| {row['predicted_speedup']:.2f}x | {row['measured_speedup']:.2f}x "
            f"| {row['measured_over_predicted']:.2f} |"
        )
    best = t["best"]
    found = f"Best k: ours {best['k_ours']}"
    if "k_hf" in best:
        found += f", transformers {best['k_hf']}"
    lines += ["", found + ".", "", "| ratio | value | target | met |", "|---|---:|---:|---|"]
    for name, goal in TARGETS.items():
        if name in best:
            met = "yes" if best[name] >= goal else "no"
            lines.append(f"| {name} | {best[name]:.2f} | >= {goal:g} | {met} |")
    if "ours / hf-assisted (same k)" in best:
        same = best["ours / hf-assisted (same k)"]
        lines.append(f"| ours / hf-assisted (same k = {best['k_ours']}) | {same:.2f} | | |")
    row = t["k"][best["k_ours"]]
    if row["time"]:
        lines += ["", f"Where the time goes (ours, k = {best['k_ours']}), ms:", ""]
        lines += _budget_table(row["time"])
        lines += [
            "",
            f"The prediction's two halves, measured (k = {best['k_ours']}): tokens per cycle "
            f"{row['tokens_per_cycle']:.2f} (model {row['tokens_per_cycle_predicted']:.2f}); "
            f"cycle cost {row['cycle_cost']:.2f} target steps, mean (model k c + v = "
            f"{row['cycle_cost_predicted']:.2f}).",
        ]
    return lines


def _budget_table(b: dict) -> list[str]:
    def both(mean, median):
        return "-" if mean is None else f"{mean:.3f} ({median:.3f})"

    rows = [
        ("first draft step of a cycle, mean (median)",
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
