"""``--target``, ``--draft`` and ``--k`` are defined once and mean the same in every command."""

from __future__ import annotations

import argparse

import pytest

from engine.cli import build_parser, defaults
from engine.cli_options import K_HELP, MODEL_HELP, add_pair_options


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
