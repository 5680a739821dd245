"""A token tree priced for SGLang: its shape read and checked, more tokens a cycle than the
chain of its depth, a gain that fades with the batch as its verification grows, and a launch
line of SGLang's own option names."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from engine.analytic.trees import TreeShape
from engine.planner.drafters import eagle_head
from engine.planner.inputs import PlanInputs
from engine.planner.schedule import single
from engine.planner.tree_plan import tree_report

REPO = Path(__file__).resolve().parents[3]
OPTIONS = json.loads((REPO / "measurements/sglang/server_args.json").read_text())


def setting():
    return PlanInputs(models="llama-8b-1b", hardware="h100-sxm", engine="sglang").setting()


@pytest.mark.parametrize(("text", "message"), [
    ("5,4", "three whole numbers"), ("0,4,8", "steps must be from 1"),
    ("5,4,200", "draft_tokens must be from 2"),
])
def test_a_tree_shape_is_read_or_refused_with_the_reason(text, message):
    with pytest.raises(ValueError, match=message):
        TreeShape.parse(text)
    assert TreeShape.parse("5,4,8") == (TreeShape(5, 4, 8), [])
    chain, notes = TreeShape.parse("3,1,8")  # with topk 1, a chain: draft tokens steps + 1
    assert chain == TreeShape(3, 1, 4) and "a chain" in notes[0]


def test_a_tree_yields_more_than_its_chain_and_its_gain_fades_with_the_batch():
    s = setting()
    report = tree_report(s, eagle_head(s), single(0.7), TreeShape.parse("5,4,8")[0], 512, 1)
    assert report["tokens_per_cycle"] > report["chain_tokens_per_cycle"]
    assert len(report["nodes"]) == 7  # draft tokens, the root among them
    speedups = [r["speedup"] for r in report["by_batch"]]
    assert speedups[-1] < max(speedups)  # eight tokens verified a row: compute-bound first


def test_the_launch_line_uses_sglangs_own_option_names():
    s = setting()
    report = tree_report(s, eagle_head(s), single(0.7), TreeShape.parse("4,2,6")[0], 64, 2)
    options = [word for word in shlex.split(report["launch_line"]) if word.startswith("--")]
    assert options and set(options) <= set(OPTIONS["options"]), set(options) - set(
        OPTIONS["options"])
    assert "--speculative-eagle-topk" in options and "--tp-size" in options


def test_the_plan_prints_a_tree_only_for_sglangs_eagle(capsys):
    from engine.cli import main

    assert main(["plan", "--alpha", "0.7", "--engine", "sglang", "--drafter", "eagle",
                 "--models", "llama-8b-1b", "--tree", "5,4,8"]) == 0
    assert "sglang.launch_server" in capsys.readouterr().out
    assert main(["plan", "--alpha", "0.7", "--models", "llama-8b-1b", "--tree", "5,4,8"]) == 0
    out = capsys.readouterr().out
    assert "No tree priced" in out and "verifies chains only" in out
    assert "sglang.launch_server" not in out
