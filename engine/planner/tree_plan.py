"""A token tree priced for SGLang, which verifies trees (vLLM 0.32 verifies chains only), and
the launch line that serves it.

    tokens a cycle  engine.analytic.trees on acceptance by rank and depth (from acceptance by
                    position with engine.analytic.trees.rank_model, an assumption it states)
    cycle           ``steps`` head passes, each over ``topk`` tokens a row, and one target pass
                    over the ``draft_tokens`` verified (the roofline, the setting's overheads)
    speedup(B)      tokens a cycle x a plain step / the cycle, at every batch up to
                    max_num_seqs; SGLang runs one tree at every batch (no per-batch schedule)

The launch line's option names are SGLang's (``sglang/srt/server_args.py``):
``tools/sglang_args_check.py`` parses the line with SGLang's own parser and keeps its option
names in ``measurements/sglang/server_args.json``, which the suite checks the line against.
"""

from __future__ import annotations

import shlex

from engine.analytic import trees
from engine.analytic.break_even import step_s
from engine.analytic.drafters import eagle_tree_cycle_s
from engine.analytic.passes import Setting
from engine.analytic.timed_costs import PlanError
from engine.analytic.trees import TreeShape
from engine.planner.schedule import Domain


def tree_cycle(s: Setting, head, shape: TreeShape, batch: int) -> float:
    """One tree cycle in plain steps at ``batch``: ``steps`` head passes over ``topk`` tokens a
    row and the verification over ``draft_tokens``."""
    return eagle_tree_cycle_s(s, head, shape.steps, shape.topk, shape.draft_tokens, batch) \
        / step_s(s, batch)


def tree_report(s: Setting, head, domains: list[Domain], shape: TreeShape, max_num_seqs: int,
                gpus: int) -> dict:
    """The tree's tokens a cycle, its speedup at each batch, and SGLang's launch line."""
    if len(domains) != 1:
        raise PlanError("a tree is priced for one traffic: give --alpha or --positions")
    domain = domains[0]
    survival = (list(domain.survival) if domain.survival is not None
                else [domain.alpha ** i for i in range(1, shape.steps + 1)])
    assumed = domain.survival is None
    while len(survival) < shape.steps:  # past the measured positions, the last rate holds
        survival.append(survival[-1] * (survival[-1] / (survival[-2] if len(survival) > 1
                                                        else 1.0)))
    acc = trees.rank_model(survival, shape.topk)
    paths = trees.sglang_tree(acc, shape.steps, shape.topk, shape.draft_tokens)
    tokens = trees.expected_tokens(paths, acc)
    chain = trees.expected_tokens(trees.chain(min(shape.steps, shape.draft_tokens - 1)), acc)
    batches = sorted({b for b in (1, 2, 4, 8, 16, 32, 64, 128, 256, 512) if b <= max_num_seqs}
                     | {max_num_seqs})
    rows = [{"batch": b, "speedup": tokens / tree_cycle(s, head, shape, b)} for b in batches]
    pays = [r["batch"] for r in rows if r["speedup"] > 1.0]
    launch = ["python", "-m", "sglang.launch_server", "--model-path", head.target_checkpoint
              or s.target.source.removesuffix(" config.json"),
              "--speculative-algorithm", "EAGLE3" if head.method == "eagle3" else "EAGLE",
              "--speculative-draft-model-path", head.checkpoint,
              "--speculative-num-steps", str(shape.steps),
              "--speculative-eagle-topk", str(shape.topk),
              "--speculative-num-draft-tokens", str(shape.draft_tokens),
              "--tp-size", str(gpus), "--max-running-requests", str(max_num_seqs)]
    return {
        "tree": shape.text(), "nodes": paths, "tokens_per_cycle": tokens,
        "chain_tokens_per_cycle": chain, "by_batch": rows,
        "pays_up_to": max(pays) if pays else None,
        "assumed": ("acceptance by rank: the top candidate at each depth is accepted at its "
                    "conditional rate a and each further one takes the share a of what is "
                    "left" + ("; by position: one alpha at every depth" if assumed else "")),
        "launch": launch, "launch_line": shlex.join(launch),
    }
