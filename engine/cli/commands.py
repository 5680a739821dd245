"""The bodies of the engine's commands that the package's dispatch hands over to:
``specscope generate`` (and the terminal's colours and summary), ``bench``, ``roofline`` and
``validate``. Torch is imported only when a command runs models."""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import asdict
from pathlib import Path

from engine.cli_options import (
    TORCH_DTYPES,
)
from engine.decoder.events import (
    ACCEPTED,
    DISCARDED,
    REJECTED,
    TARGET,
    CycleEvent,
    DoneEvent,
    GenerationConfig,
    StepEvent,
    SummaryEvent,
)

# ANSI styles. Colour is never the only cue: rejected is struck through, discarded faint,
# the target's token underlined.
STYLES = {
    ACCEPTED: "\033[32m",  # green
    REJECTED: "\033[31;9m",  # red, struck through
    DISCARDED: "\033[90;2m",  # grey, faint
    TARGET: "\033[34;4m",  # blue, underlined
}
RESET = "\033[0m"


def torch_dtype(name: str | None):
    """The torch dtype named ``name`` (None: the loader's default)."""
    if name is None:
        return None
    import torch

    return getattr(torch, TORCH_DTYPES.get(name, name))


def validate_command(args: argparse.Namespace) -> int:
    from engine.analytic import validate  # pure Python, imported only when it runs

    report = validate.run(rates=args.rates)
    if args.json:
        print(json.dumps(validate.report_json(report), indent=2))
    else:
        sys.stdout.write(validate.format_report(report))
    return 0


def drafter_of(args, pair):
    """The drafter the arguments ask for, built for ``pair`` (a head loaded)."""
    from engine.decoder.drafter_spec import options_of, spec_for

    return spec_for(pair, **options_of(args))


def loads_draft(args) -> bool:
    """Whether the drafter the arguments ask for is the draft model."""
    return getattr(args, "drafter", "model") == "model"


def generate(args: argparse.Namespace, d: dict) -> int:
    config = GenerationConfig(
        prompt=args.prompt,
        k=args.k,
        temperature=args.temperature,
        top_p=args.top_p,
        top_k=args.top_k,
        max_new_tokens=args.max_new_tokens,
        seed=args.seed,
    )
    try:
        config.validate(d["max_new_tokens_limit"])
        return _generate(args, config)
    except BrokenPipeError:  # the reader went away (`specscope ... | head`)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except (ValueError, OSError) as exc:  # bad settings, mismatched pair, missing model
        print(f"specscope: error: {exc}", file=sys.stderr)
        return 2


def _generate(args, config: GenerationConfig) -> int:
    from transformers.utils import logging as hf_logging

    from engine.decoder.baseline import run_target_only, target_only
    from engine.decoder.loading import load_pair, set_threads
    from engine.decoder.speculative import speculate

    hf_logging.disable_progress_bar()
    set_threads(None, args.device)
    draft = args.draft if loads_draft(args) and not args.no_draft else None
    pair = load_pair(args.target, draft, device=args.device, dtype=torch_dtype(args.dtype),
                     cuda_graphs=args.cuda_graphs)
    color = args.color == "always" or (
        args.color == "auto" and sys.stdout.isatty() and "NO_COLOR" not in os.environ
    )
    out = Printer(json_lines=args.json, color=color)
    if args.no_draft:
        events = target_only(pair, config)
    else:
        steps, _ = run_target_only(pair, config)
        events = speculate(pair, config, baseline_step_ms=[s.step_ms for s in steps],
                           drafter=drafter_of(args, pair))
    if not args.json:
        out.write(config.prompt)
    for event in events:
        out.show(event)
    return 0


def roofline(args) -> int:
    from transformers.utils import logging as hf_logging

    from engine.decoder.loading import load_pair, set_threads
    from engine.measure.roofline import SweepConfig, run_sweep, table, to_json

    if not args.batches or min(args.batches) < 1 or args.k < 1 or args.repeats < 1:
        raise ValueError("--batches, --k and --repeats must be at least 1")
    if not 0 <= args.alpha <= 1 or args.context < 0 or args.warmup < 0:
        raise ValueError("--alpha must be in 0..1; --context and --warmup at least 0")
    set_threads(args.threads, args.device)
    hf_logging.disable_progress_bar()
    pair = load_pair(args.target, args.draft, device=args.device, dtype=torch_dtype(args.dtype),
                     cuda_graphs=args.cuda_graphs)
    config = SweepConfig(tuple(args.batches), args.k, args.alpha, args.context, args.repeats,
                         args.warmup)
    label = args.label or (f"{Path(args.target).name} / {Path(args.draft).name}, forward passes "
                           "timed alone")

    def log(message: str) -> None:
        if not args.quiet:
            print(f"specscope roofline: {message}", file=sys.stderr, flush=True)

    sweep = run_sweep(pair, config, label, args.hardware, args.models, log)
    data = to_json(sweep)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(data, indent=1) if args.json else table(sweep))
    return 0


def bench(args, argv: list[str] | None) -> int:
    from transformers.utils import logging as hf_logging

    from engine.decoder.events import MAX_DRAFT_K
    from engine.decoder.loading import load_pair, set_threads
    from engine.measure.bench import BenchConfig, run_bench
    from engine.measure.bench_report import markdown

    if not args.ks or min(args.ks) < 1 or max(args.ks) > MAX_DRAFT_K:
        raise ValueError(f"--ks must be draft lengths in 1..{MAX_DRAFT_K}")
    if args.old_prompts is not None:
        print("specscope bench: --prompts is now --max-prompts (as in specscope probe; "
              "--prompts names a file elsewhere); the old spelling goes in the next release",
              file=sys.stderr)
        args.max_prompts = args.old_prompts
    if args.max_new_tokens < 1 or args.repeats < 1 or args.max_prompts < 1:
        raise ValueError("--max-new-tokens, --repeats and --max-prompts must be at least 1")
    if any(t < 0 for t in args.temperatures):
        raise ValueError("--temperatures must be >= 0")
    if args.prompts_file:
        prompts = json.loads(args.prompts_file.read_text(encoding="utf-8"))
        if not isinstance(prompts, list) or not all(isinstance(p, str) for p in prompts):
            raise ValueError(f"{args.prompts_file} must hold a JSON list of strings")
    else:
        from engine.measure.prompt_sets import pair_prompts

        prompts = pair_prompts(args.target, per_domain=args.max_prompts)
    prompts = prompts[: args.max_prompts]
    from engine.decoder.drafter_spec import options_of

    options = options_of(args)  # checked before the models load
    set_threads(args.threads, args.device)
    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()  # assisted generation warns about its own internals
    draft = args.draft if loads_draft(args) else None
    pair = load_pair(args.target, draft, device=args.device, dtype=torch_dtype(args.dtype),
                     cuda_graphs=args.cuda_graphs)
    config = BenchConfig(
        ks=args.ks,
        temperatures=args.temperatures,
        max_new_tokens=args.max_new_tokens,
        prompts=prompts,
        repeats=args.repeats,
        seed=args.seed,
        transformers=not args.ours_only,
        **options,
    )

    def log(message: str) -> None:
        if not args.quiet:
            print(f"specscope bench: {message}", file=sys.stderr, flush=True)

    result = run_bench(pair, config, log)
    command = "specscope " + " ".join(argv if argv is not None else sys.argv[1:])
    result["command"] = command
    if args.out:
        args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    if args.json:
        print(json.dumps(result, indent=1))
    else:
        print(markdown(result, command))
    check = result["results"]["greedy_check"]
    return 0 if check is None or check["match"] else 1


class Printer:
    """Events to stdout: coloured text and a summary, or JSON lines."""

    def __init__(self, json_lines: bool, color: bool):
        self.json_lines, self.color = json_lines, color

    def write(self, text: str) -> None:
        sys.stdout.write(text)
        sys.stdout.flush()

    def show(self, event) -> None:
        if self.json_lines:
            self.write(json.dumps(asdict(event), ensure_ascii=False) + "\n")
        elif isinstance(event, CycleEvent):
            self.write("".join(self._token(t.text, t.kind) for t in event.tokens))
        elif isinstance(event, StepEvent):
            self.write(event.token.text)
        elif isinstance(event, SummaryEvent):
            self.write("\n\n" + format_summary(event) + "\n")
        elif isinstance(event, DoneEvent):
            self.write("\n" + format_done(event) + "\n")

    def _token(self, text: str, kind: str) -> str:
        if self.color:
            return f"{STYLES[kind]}{text}{RESET}"
        # Without colour only the output is printed: rejected and discarded drafts are not text.
        return text if kind in (ACCEPTED, TARGET) else ""


def _num(x: float | None, digits: int, unit: str = "") -> str:
    """A figure, or n/a where there was nothing to estimate it from (None)."""
    return "n/a" if x is None else f"{x:.{digits}f}{unit}"


SUMMARY_DRAFTER = {"ngram": ", prompt lookup", "eagle": ", EAGLE head",
                   "medusa": ", Medusa heads"}  # model: the default


def format_summary(s: SummaryEvent) -> str:
    positions = " ".join(_num(x, 2) for x in s.per_position_acceptance)
    histogram = " ".join(f"{a}:{n}" for a, n in enumerate(s.acceptance_length_histogram))
    fit = ""
    if s.geometric_p is not None:
        p = "< 0.0001" if s.geometric_p < 1e-4 else f"{s.geometric_p:.4f}"
        fit = (f"; chi2 {_num(s.geometric_chi2, 1)}, df {s.geometric_df}, p {p} against the "
               "geometric (cycles taken as independent)")
    lookup = []
    if s.drafter == "ngram":
        lookup = [f"  prompt lookup          {s.proposal_share:.0%} of cycles proposed, "
                  f"{s.proposed_per_cycle:.2f} tokens each; c is the lookup's time per cycle"]
    return "\n".join(
        [
            f"summary (k = {s.k}{SUMMARY_DRAFTER.get(s.drafter, '')}): {s.tokens} tokens in "
            f"{s.cycles} cycles",
            *lookup,
            f"  alpha                  counted {_num(s.alpha_counted, 3)} "
            f"({s.accepted}/{s.trials}), expected {_num(s.alpha_expected, 3)}",
            f"  draft acceptance rate  {_num(s.draft_acceptance_rate, 3)} "
            f"({s.accepted}/{s.drafted})",
            f"  mean acceptance length {_num(s.mean_acceptance_length, 2)}",
            f"  per-position accepted  {positions}",
            f"  accepted per {'proposal' if s.drafter == 'ngram' else 'cycle    '} {histogram}",
            f"  c = {s.c:.3f}, v = {s.v:.3f}     draft step {s.draft_step_ms:.2f} ms, "
            f"verification {s.verify_ms:.2f} ms, target step {s.step_ms:.2f} ms",
            f"  tokens/s               target-only {s.baseline_tok_s:.1f}, "
            f"speculative {_num(s.spec_tok_s, 1)}",
            f"  speedup                measured {_num(s.speedup_measured, 3, 'x')}, "
            f"predicted {_num(s.speedup_predicted, 3, 'x')}",
            f"  from the lengths       {_num(s.speedup_from_histogram, 3, 'x')} predicted{fit}",
        ]
    )


def format_done(d: DoneEvent) -> str:
    return (
        f"{d.mode}: {len(d.token_ids)} tokens, stopped at {d.stop_reason}, "
        f"{d.tok_s:.1f} tok/s (prefill {d.prefill_ms:.1f} ms)"
    )
