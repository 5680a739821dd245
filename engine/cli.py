"""The ``specscope`` commands that measure the engine (``specscope serve``, the page, is
added by :mod:`app.cli`, the installed entry point: the engine never imports the web app).

``specscope generate "PROMPT"``: run the engine from a terminal. Runs target-only decoding
first (the baseline for c, v and the measured speedup), then speculative decoding,
printing the text with the four kinds of token coloured as it goes, and the summary.
``--json`` prints one JSON object per line instead; ``--no-draft`` runs the target alone.
``--drafter ngram`` drafts by prompt lookup instead of the draft model
(``--prompt-lookup-min``/``--prompt-lookup-max``, vLLM's names); ``--drafter eagle`` with the
EAGLE head in ``--eagle`` (default ``models/eagle``); ``--drafter medusa`` with the Medusa heads
in ``--medusa`` (default ``models/medusa``); only ``model`` loads the draft model.

``specscope bench``: the engine against transformers' ``generate`` and assisted generation
on one pair (see :mod:`engine.measure.bench`); a Markdown report, or ``--json``.

``specscope roofline``: batched forward passes of the pair timed at batch 1..64; the measured
c(B), v(B), the speedup they predict and the fitted roofline of this machine
(:mod:`engine.measure.roofline`); a table, ``--json``, ``--out`` a measured-curve file.
``specscope probe`` and ``specscope calibrate``: alpha by domain and temperature on prompts,
and from a vLLM server's ``/metrics`` (see :mod:`engine.measure.commands` and
:mod:`engine.serving.cli`).
``specscope plan``: the draft length for each batch size and vLLM's config for it
(:mod:`engine.serving.plan_cli`). ``specscope costs``: a step's costs measured through the
decoding loop, for the plan (:mod:`engine.measure.loop_costs`; the command in
:mod:`engine.measure.commands`).
``specscope validate``: the cost model against published GPU measurements
(:mod:`engine.analytic.validate`).
``specscope watch URL``: a vLLM server's acceptance over time against the plan
(:mod:`engine.serving.watch.command`).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

from engine.cli_options import (
    TORCH_DTYPES,
    add_drafter_options,
    add_models_option,
    add_pair_options,
)
from engine.decoder.events import (
    ACCEPTED,
    DEFAULT_SEED,
    DISCARDED,
    REJECTED,
    TARGET,
    CycleEvent,
    DoneEvent,
    GenerationConfig,
    StepEvent,
    SummaryEvent,
)
from engine.serving import plan_cli

# ANSI styles. Colour is never the only cue: rejected is struck through, discarded faint,
# the target's token underlined.
STYLES = {
    ACCEPTED: "\033[32m",  # green
    REJECTED: "\033[31;9m",  # red, struck through
    DISCARDED: "\033[90;2m",  # grey, faint
    TARGET: "\033[34;4m",  # blue, underlined
}
RESET = "\033[0m"
# torch's dtypes by name; torch itself is imported only by the commands that run models, so
# `specscope --help` and `specscope plan` start without it.
DTYPES = (*TORCH_DTYPES, *TORCH_DTYPES.values())


def torch_dtype(name: str | None):
    """The torch dtype named ``name`` (None: the loader's default)."""
    if name is None:
        return None
    import torch

    return getattr(torch, TORCH_DTYPES.get(name, name))


def defaults() -> dict:
    """Target, draft, device, token limit and CUDA graphs from the settings (SPECSCOPE_...)."""
    from engine.settings import Settings  # pydantic: only for the commands that read settings

    settings = Settings()
    return {
        "target": settings.target,
        "draft": settings.draft,
        "max_new_tokens_limit": settings.max_new_tokens_limit,
        "device": settings.device,
        "cuda_graphs": settings.cuda_graphs,
        "pairs": settings.pairs,
        "vllm_url": settings.vllm_url,
    }


# The top-level help lists the commands, not their options: it needs no settings.
UNREAD_DEFAULTS = {"target": None, "draft": None, "max_new_tokens_limit": None, "device": None,
                   "cuda_graphs": False, "pairs": {}, "vllm_url": None}

DESCRIPTION = (
    "specscope: speculative decoding, explained and measured. Each command's --help says "
    "more; settings come from SPECSCOPE_* environment variables (see the README).")


def build_parser(d: dict, add_commands: Callable | None = None) -> argparse.ArgumentParser:
    """The parser of every command; ``add_commands(subparsers)`` adds more, first."""
    parser = argparse.ArgumentParser(prog="specscope", description=DESCRIPTION)
    parser.set_defaults(cuda_graphs=d["cuda_graphs"])  # a setting: SPECSCOPE_CUDA_GRAPHS
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    if add_commands is not None:
        add_commands(sub)
    gen = sub.add_parser("generate", help="generate text with speculative decoding")
    gen.add_argument("prompt")
    g = GenerationConfig  # its field defaults are the generation defaults
    add_pair_options(gen, d["target"], d["draft"], k=g.k)
    gen.add_argument("--no-draft", action="store_true", help="run the target alone")
    add_drafter_options(gen)
    gen.add_argument("--temperature", type=float, default=g.temperature, help="0 = greedy")
    gen.add_argument("--top-p", type=float, default=g.top_p)
    gen.add_argument("--top-k", type=int, default=g.top_k, help="0 = off")
    gen.add_argument("--max-new-tokens", type=int, default=g.max_new_tokens)
    gen.add_argument("--seed", type=int, default=g.seed)
    gen.add_argument(
        "--device", default=d["device"], help="cuda, cpu, ... (default: CUDA if present)"
    )
    gen.add_argument(
        "--dtype", choices=DTYPES, metavar="{bf16,fp16,fp32}",
        help="the dtype the models run in (default: bf16 on CUDA, else fp32; torch's names "
             "bfloat16, float16, float32 are read too)"
    )
    gen.add_argument("--json", action="store_true", help="one JSON object per line")
    gen.add_argument("--color", choices=["auto", "always", "never"], default="auto")

    bench = sub.add_parser(
        "bench", help="our engine against transformers (generate, assisted generation)"
    )
    add_pair_options(bench, d["target"], d["draft"], k=None)  # --ks instead
    bench.add_argument("--ks", type=_int_list, default=[1, 2, 3, 4, 5, 6, 7, 8],
                       help="draft lengths, e.g. 1-8 or 2,4 (default 1-8)")
    bench.add_argument("--temperatures", type=_float_list, default=[0.0, 1.0],
                       help="comma-separated (default 0,1; 0 = greedy)")
    bench.add_argument("--max-new-tokens", type=int, default=64)
    bench.add_argument("--max-prompts", type=int, default=4,
                       help="how many prompts (the pair's held-out prompts when it has them; "
                            "default 4)")
    bench.add_argument("--prompts", dest="old_prompts", type=int, default=None,
                       help=argparse.SUPPRESS)  # the old spelling of --max-prompts, one release
    bench.add_argument("--prompts-file", type=Path,
                       help="a JSON list of prompts to use instead")
    bench.add_argument("--repeats", type=int, default=3)
    bench.add_argument("--seed", type=int, default=DEFAULT_SEED)
    bench.add_argument("--threads", type=int, default=None,
                       help="torch.set_num_threads (default: 1 on a CPU, torch's own on CUDA)")
    bench.add_argument(
        "--device", default=d["device"], help="cuda, cpu, ... (default: CUDA if present)"
    )
    bench.add_argument(
        "--dtype", choices=DTYPES, metavar="{bf16,fp16,fp32}",
        help="the dtype the models run in (default: bf16 on CUDA, else fp32; torch's names "
             "bfloat16, float16, float32 are read too)"
    )
    add_drafter_options(bench)
    bench.add_argument("--ours-only", action="store_true", help="skip transformers' runs")
    bench.add_argument("--json", action="store_true", help="print the JSON result instead")
    bench.add_argument("--out", type=Path, help="also write the JSON result to this file")
    bench.add_argument("--quiet", action="store_true", help="no progress on stderr")

    roof = sub.add_parser(
        "roofline", help="time batched forward passes: where speculation stops paying here"
    )
    add_pair_options(roof, d["target"], d["draft"], k_help="draft length: verification is k+1")
    roof.add_argument("--batches", type=_int_list, default=[1, 2, 4, 8, 16, 32, 64],
                      help="comma-separated batch sizes (default 1,2,4,...,64)")
    roof.add_argument("--alpha", type=float, default=0.7, help="for the predicted speedup")
    roof.add_argument("--context", type=int, default=128, help="tokens in the KV cache")
    roof.add_argument("--repeats", type=int, default=15)
    roof.add_argument("--warmup", type=int, default=3)
    roof.add_argument("--threads", type=int, default=None,
                      help="torch.set_num_threads (default: 1 on a CPU, torch's own on CUDA)")
    roof.add_argument(
        "--device", default=d["device"], help="cuda, cpu, ... (default: CUDA if present)"
    )
    roof.add_argument(
        "--dtype", choices=DTYPES, metavar="{bf16,fp16,fp32}",
        help="the dtype the models run in (default: bf16 on CUDA, else fp32; torch's names "
             "bfloat16, float16, float32 are read too)"
    )
    roof.add_argument("--label", default=None, help="the curve's label on the page")
    roof.add_argument("--hardware", default="this machine", help="the hardware, in words")
    add_models_option(roof)
    roof.add_argument("--out", type=Path,
                      help="write the measured curve here (e.g. measurements/NAME.json)")
    roof.add_argument("--json", action="store_true", help="print the JSON instead")
    roof.add_argument("--quiet", action="store_true", help="no progress on stderr")

    from engine.measure import commands as measure_commands
    from engine.serving import cli as vllm_cli
    from engine.serving.watch import command as watch_cli

    measure_commands.add_parsers(sub, d, _float_list)
    measure_commands.add_costs_parser(sub, d, _int_list)
    vllm_cli.add_parser(sub, d)
    plan_cli.add_parser(sub)
    validate = sub.add_parser(
        "validate", help="the cost model held against published GPU measurements",
        description="Fit the overhead terms on the published measurements marked 'fit' "
                    "(measurements/published), then print every fitted and held-out series: "
                    "per point the model against the measurement and its error, and the "
                    "median absolute error per series (engine/analytic/validate.py).")
    validate.add_argument("--rates", choices=("achieved", "datasheet"), default="achieved",
                          help="the roofline's bandwidth and FLOP/s: the page's achieved "
                               "fractions (default) or the datasheet's")
    validate.add_argument("--json", action="store_true", help="print the JSON instead")
    watch_cli.add_parser(sub, d)
    for name, run in handlers(d).items():
        sub.choices[name].set_defaults(run=run)
    return parser


def _validate(args: argparse.Namespace) -> int:
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


def _int_list(text: str) -> list[int]:
    """"1-8" or "1,2,4" (or a mix)."""
    values: list[int] = []
    for part in text.split(","):
        first, _, last = part.partition("-")
        values += list(range(int(first), int(last or first) + 1))
    return values


def _float_list(text: str) -> list[float]:
    return [float(x) for x in text.split(",")]


def plan_parser() -> argparse.ArgumentParser:
    """``specscope plan`` alone: arithmetic that needs no settings, models or servers, so it
    starts without pydantic or torch."""
    parser = argparse.ArgumentParser(prog="specscope", description=DESCRIPTION)
    plan_cli.add_parser(parser.add_subparsers(dest="command", required=True, metavar="COMMAND"))
    return parser


def main(argv: list[str] | None = None, add_commands: Callable | None = None) -> int:
    """Parse and dispatch: every command carries its handler (``run``), which takes the
    parsed arguments (with ``argv``, the words given, for those that record them)."""
    given = sys.argv[1:] if argv is None else argv
    if given[:1] == ["plan"]:
        return plan_cli.run(plan_parser().parse_args(given))
    d = UNREAD_DEFAULTS if given in ([], ["-h"], ["--help"]) else defaults()
    args = build_parser(d, add_commands).parse_args(argv)
    args.argv = argv
    return args.run(args)


def handlers(d: dict) -> dict[str, Callable[[argparse.Namespace], int]]:
    """Each engine command's handler; a user's mistake is one line on stderr and exit 2."""
    from engine.measure import commands as measure_commands
    from engine.serving import cli as vllm_cli
    from engine.serving.client import VllmError
    from engine.serving.watch import command as watch_cli

    def probe(args):
        if args.engine == "vllm":
            return vllm_cli.probe_command(args, args.argv, d)
        return measure_commands.run(args, args.argv, d)

    return {
        "generate": lambda args: _generate_command(args, d),
        "bench": _errors_exit(lambda args: _bench(args, args.argv), ValueError, OSError),
        "roofline": _errors_exit(_roofline, ValueError, OSError),
        "probe": _errors_exit(probe, ValueError, OSError, VllmError, name="probe"),
        "calibrate": _errors_exit(vllm_cli.calibrate_command, ValueError, OSError, VllmError,
                                  name="calibrate"),
        "vllm": vllm_cli.run, "sweep": vllm_cli.run, "plan": plan_cli.run,
        "costs": measure_commands.run_costs, "watch": watch_cli.run, "validate": _validate,
    }


def _errors_exit(run: Callable, *errors: type[Exception], name: str = ""
                 ) -> Callable[[argparse.Namespace], int]:
    def handler(args: argparse.Namespace) -> int:
        try:
            return run(args)
        except errors as exc:
            print(f"specscope{' ' + name if name else ''}: error: {exc}", file=sys.stderr)
            return 2

    return handler


def _generate_command(args: argparse.Namespace, d: dict) -> int:
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


def _roofline(args) -> int:
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


def _bench(args, argv: list[str] | None) -> int:
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


if __name__ == "__main__":
    sys.exit(main())
