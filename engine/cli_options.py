"""The options every ``specscope`` command that runs a pair shares, defined once:
``--target``, ``--draft`` and ``--k``. Standard library only, so that any layer's command
(:mod:`engine.cli`, :mod:`engine.measure.commands`, :mod:`engine.serving.cli`) can use it."""

from __future__ import annotations

import argparse
import copy
import sys

from engine import defaults

TORCH_DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}
"""The dtypes a model runs in, by the names the plan's --dtype uses (bf16, fp32; fp16 runs
here, the plan prices fp8, int8 and int4 too), and torch's and vLLM's names for them, which are
still read."""
MODEL_HELP = "path or Hugging Face id"
K_HELP = "draft tokens per cycle"


def _has_default_to_show(action: argparse.Action) -> bool:
    """An option with a value it takes when not given (not None, a flag's False or True)."""
    default = action.default
    return bool(action.option_strings) and not (
        default is None or isinstance(default, bool) or default is argparse.SUPPRESS
        or default == [])


class DefaultsShown(argparse.HelpFormatter):
    """Each option's help ends with its default, unless the help names it already."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if "default" in text or not _has_default_to_show(action):
            return text
        return f"{text} (default: %(default)s)"

    def _format_action(self, action: argparse.Action) -> str:
        # argparse prints no help line for an option without help, so its default would not
        # show: give it one.
        if action.help is None and _has_default_to_show(action):
            action = copy.copy(action)
            action.help = "default: %(default)s"
        return super()._format_action(action)


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose help shows the defaults; its subcommands' parsers are of this
    class too (argparse makes them with the parent's class)."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("formatter_class", DefaultsShown)
        super().__init__(*args, **kwargs)


def add_pair_options(parser: argparse.ArgumentParser, target: str | None, draft: str | None,
                     *, k: int | None = defaults.K, k_help: str = K_HELP) -> None:
    """Add ``--target`` and ``--draft`` (defaulting to ``target`` and ``draft``; None: the
    command picks them, from the default pair) and, unless ``k`` is None, ``--k``."""
    picked = " (default: the default pair's)"
    parser.add_argument("--target", default=target,
                        help=MODEL_HELP + ("" if target is not None else picked))
    parser.add_argument("--draft", default=draft,
                        help=MODEL_HELP + ("" if draft is not None else picked))
    if k is not None:
        parser.add_argument("--k", type=int, default=k, help=k_help)


EAGLE_FOLDER = "models/eagle"  # the EAGLE head trained for the shipped target
MEDUSA_FOLDER = "models/medusa"  # the Medusa heads trained for the shipped target


def add_drafter_options(parser, *, several: bool = False, help_note: str = "") -> None:
    """Add ``--drafter`` (one of ``DRAFTER_NAMES``, or with ``several`` a comma-separated
    list of them), ``--eagle`` and ``--prompt-lookup-min/max``: every command that runs a
    drafter takes these, with these defaults. ``help_note``: what the command adds."""
    from engine.analytic.drafters import DRAFTER_NAMES, DRAFTER_WORDS
    from engine.analytic.lookup import PROMPT_LOOKUP_MAX, PROMPT_LOOKUP_MIN

    words = "; ".join(f"{name}: {DRAFTER_WORDS[name]}" for name in DRAFTER_NAMES)
    if several:
        parser.add_argument("--drafter", default="model",
                            help=f"{words}; or several comma-separated ({','.join(DRAFTER_NAMES)})"
                                 f", side by side (default model){help_note}")
    else:
        parser.add_argument("--drafter", choices=DRAFTER_NAMES, default="model",
                            help=f"{words} (default model; only model loads the draft model)"
                                 f"{help_note}")
    parser.add_argument("--eagle", default=EAGLE_FOLDER,
                        help=f"the EAGLE head's folder (--drafter eagle; default {EAGLE_FOLDER})")
    parser.add_argument("--medusa", default=MEDUSA_FOLDER,
                        help=f"the Medusa heads' folder (--drafter medusa; default "
                             f"{MEDUSA_FOLDER}; k at most their number)")
    parser.add_argument("--prompt-lookup-min", type=int, default=PROMPT_LOOKUP_MIN,
                        help="smallest n-gram prompt lookup matches (--drafter ngram; default "
                             f"{PROMPT_LOOKUP_MIN})")
    parser.add_argument("--prompt-lookup-max", type=int, default=PROMPT_LOOKUP_MAX,
                        help="largest n-gram prompt lookup matches (--drafter ngram; default "
                             f"{PROMPT_LOOKUP_MAX})")


class _Renamed(argparse.Action):
    """An old flag spelling, kept for one release: stores as the new one and says so."""

    def __call__(self, parser, namespace, values, option_string=None):
        print(f"specscope: {option_string} is now {self.metavar} (the name the page, the API "
              "and specscope plan use); the old spelling goes in the next release",
              file=sys.stderr)
        setattr(namespace, self.dest, values)


def add_models_option(parser: argparse.ArgumentParser) -> None:
    """``--models``: the page's model-pair preset a measured curve belongs to (the plan's,
    the page's and the API's ``models``); ``--pair-preset``, its old spelling."""
    parser.add_argument("--models", default=None,
                        help="the page's model-pair preset this curve belongs to (e.g. "
                             "shipped; the page shows the curve only with it)")
    parser.add_argument("--pair-preset", dest="models", action=_Renamed, metavar="--models",
                        help=argparse.SUPPRESS)
