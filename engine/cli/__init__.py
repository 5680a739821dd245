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
(:mod:`engine.cli.plan`). ``specscope costs``: a step's costs measured through the
decoding loop, for the plan (:mod:`engine.measure.loop_costs`; the command in
:mod:`engine.measure.commands`).
``specscope validate``: the cost model against published GPU measurements
(:mod:`engine.analytic.validate`).
``specscope watch URL``: a vLLM server's acceptance over time against the plan
(:mod:`engine.serving.watch.command`).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from engine.cli import commands, plan
from engine.cli_options import (
    TORCH_DTYPES,
    Parser,
    add_drafter_options,
    add_models_option,
    add_pair_options,
)
from engine.decoder.events import (
    DEFAULT_SEED,
    GenerationConfig,
)

# torch's dtypes by name; torch itself is imported only by the commands that run models, so
# `specscope --help` and `specscope plan` start without it.
DTYPES = (*TORCH_DTYPES, *TORCH_DTYPES.values())


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
    parser = Parser(prog="specscope", description=DESCRIPTION)
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
    plan.add_parser(sub)
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
    parser = Parser(prog="specscope", description=DESCRIPTION)
    plan.add_parser(parser.add_subparsers(dest="command", required=True, metavar="COMMAND"))
    return parser


def main(argv: list[str] | None = None, add_commands: Callable | None = None) -> int:
    """Parse and dispatch: every command carries its handler (``run``), which takes the
    parsed arguments (with ``argv``, the words given, for those that record them)."""
    given = sys.argv[1:] if argv is None else argv
    if given[:1] == ["plan"]:
        return plan.run(plan_parser().parse_args(given))
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
        "generate": lambda args: commands.generate(args, d),
        "bench": _errors_exit(lambda args: commands.bench(args, args.argv), ValueError, OSError),
        "roofline": _errors_exit(commands.roofline, ValueError, OSError),
        "probe": _errors_exit(probe, ValueError, OSError, VllmError, name="probe"),
        "calibrate": _errors_exit(vllm_cli.calibrate_command, ValueError, OSError, VllmError,
                                  name="calibrate"),
        "vllm": vllm_cli.run, "sweep": vllm_cli.run, "plan": plan.run,
        "costs": measure_commands.run_costs, "watch": watch_cli.run,
        "validate": commands.validate_command,
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

