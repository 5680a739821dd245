"""``--target``, ``--draft`` and ``--k`` are defined once and mean the same in every command."""

from __future__ import annotations

import argparse

import pytest

from engine.cli import build_parser, defaults
from engine.cli_options import K_HELP, MODEL_HELP, add_models_option, add_pair_options


def test_the_options_take_the_given_defaults_and_values():
    parser = argparse.ArgumentParser()
    add_pair_options(parser, "t", "d", k=3)
    assert vars(parser.parse_args([])) == {"target": "t", "draft": "d", "k": 3}
    args = parser.parse_args(["--target", "T", "--draft", "D", "--k", "5"])
    assert (args.target, args.draft, args.k) == ("T", "D", 5)


def test_without_k_there_is_no_k_option():
    parser = argparse.ArgumentParser()
    add_pair_options(parser, "t", "d", k=None)
    assert "k" not in vars(parser.parse_args([]))
    with pytest.raises(SystemExit):
        parser.parse_args(["--k", "2"])


def test_no_default_says_the_command_picks_the_pair():
    parser = argparse.ArgumentParser()
    add_pair_options(parser, None, None)
    helps = {a.dest: a.help for a in parser._actions}
    assert helps["target"] == helps["draft"] == MODEL_HELP + " (default: the default pair's)"
    assert helps["k"] == K_HELP


def subcommands(parser: argparse.ArgumentParser, prefix: str = ""):
    """(name, parser) of every command, nested ones (``vllm serve``) included."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from [(prefix + name, sub), *subcommands(sub, prefix + name + " ")]


def test_every_command_with_a_pair_has_the_same_options():
    d = defaults()
    with_pair = {}
    for name, parser in subcommands(build_parser(d)):
        actions = {a.dest: a for a in parser._actions}
        if "target" in actions:
            with_pair[name] = actions
    assert set(with_pair) >= {"generate", "bench", "roofline", "probe", "sweep", "vllm serve"}
    for name, actions in with_pair.items():
        assert actions["target"].help.startswith(MODEL_HELP), name
        assert actions["draft"].help.startswith(MODEL_HELP), name
        if "k" in actions:
            assert actions["k"].type is int, name


def test_a_run_dtype_has_the_plans_short_names_and_torchs_are_still_read():
    import torch

    from engine.cli.commands import torch_dtype
    from engine.cli_options import TORCH_DTYPES
    from engine.serving.cli import add_parser as add_vllm
    from engine.serving.cli import serve_spec

    assert torch_dtype("bf16") is torch.bfloat16 is torch_dtype("bfloat16")
    assert torch_dtype("fp32") is torch.float32 and torch_dtype(None) is None
    parser = argparse.ArgumentParser()
    add_vllm(parser.add_subparsers(dest="command"), {"target": "t", "draft": "d",
                                                     "vllm_url": None, "pairs": {}})
    for given, sent in (("fp16", "float16"), ("float32", "float32")):
        args = parser.parse_args(["vllm", "serve", "--dtype", given])
        assert serve_spec(args).dtype == sent == TORCH_DTYPES.get(given, given)


def test_a_curves_models_preset_is_models_and_the_old_spelling_still_works(capsys):
    parser = argparse.ArgumentParser()
    add_models_option(parser)
    assert parser.parse_args(["--models", "shipped"]).models == "shipped"
    assert "--pair-preset" not in parser.format_help()
    assert parser.parse_args(["--pair-preset", "llama-8b-1b"]).models == "llama-8b-1b"
    assert "--pair-preset is now --models" in capsys.readouterr().err
