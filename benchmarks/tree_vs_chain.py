"""A token tree against a chain at equal verified tokens a cycle, by batch, on the shipped
target and its Medusa heads, beside the model's prediction (engine.analytic.trees).

    .venv/bin/python benchmarks/tree_vs_chain.py [--batches 1,2,4,8,16] [--tokens 48]

At T = 0 on the held-out prompts (Scripture and Jargon in turn): the target alone (k = 0),
the heads' chain at k = 4 and the best 4-node tree for the acceptance by rank and depth
counted on a first pass (both verify 5 tokens a row a cycle), and the default 10-node tree
(11 tokens). Tokens per second of CPU time of this thread (one torch thread), median of
``--repeats``. The prediction: tokens a cycle of each from the same counts; at equal verified
tokens the cycles cost about the same, so the tree's gain over the chain is predicted as the
ratio of their tokens a cycle.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine.analytic import trees  # noqa: E402
from engine.decoder.batched import BatchConfig, speculate_batch  # noqa: E402
from engine.decoder.drafter_spec import DrafterSpec  # noqa: E402
from engine.decoder.events import GenerationConfig  # noqa: E402
from engine.decoder.loading import load_pair, set_threads  # noqa: E402
from engine.decoder.medusa import load_heads_for  # noqa: E402
from engine.decoder.tree_speculative import (  # noqa: E402
    rank_acceptance,
    speculate_tree,
    speculate_tree_batch,
)

REPO = Path(__file__).resolve().parents[1]


def cpu_rate(run) -> float:
    start = time.thread_time()
    tokens = run()
    return tokens / (time.thread_time() - start)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batches", default="1,2,4,8,16")
    ap.add_argument("--tokens", type=int, default=48)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    set_threads(1, "cpu")
    pair = load_pair(str(REPO / "models/target"), None, device="cpu")
    pair = pair.__class__(**{**pair.__dict__, "stop_token_ids": frozenset()})
    heads = load_heads_for(pair, REPO / "models/medusa")
    held = json.loads((REPO / "models/heldout_prompts.json").read_text())
    prompts = [p[:160] for pair_of in zip(held["kjv"], held["jargon"], strict=False)
               for p in pair_of]

    cycles = []
    for prompt in prompts[:12]:  # the counts the trees are priced and chosen with
        *got, _ = speculate_tree(pair, GenerationConfig(prompt=prompt, temperature=0.0,
                                                        max_new_tokens=args.tokens), heads)
        cycles += got
    acc = rank_acceptance(cycles, depth=4, ranks=4)
    best4 = trees.best_tree(acc, 4)
    predicted = {"chain": trees.expected_tokens(trees.chain(4), acc),
                 "tree4": trees.expected_tokens(best4, acc),
                 "tree10": trees.expected_tokens(list(trees.MEDUSA_TREE), acc)}
    print(f"acceptance by rank and depth (rows: depth 1-4, ranks 1-4): "
          f"{[[round(x, 3) for x in row] for row in acc]}")
    print(f"best 4-node tree: {best4}; predicted tokens a cycle: "
          + ", ".join(f"{k} {v:.2f}" for k, v in predicted.items()))
    print()
    print("| batch | off tok/CPU-s | chain k = 4 | tree, 4 nodes | tree, 10 nodes | tree 4 / chain "
          "measured | predicted |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for batch in [int(b) for b in args.batches.split(",")]:
        rows = [prompts[i % len(prompts)] for i in range(batch)]
        config = BatchConfig(rows, k=4, temperature=0.0, max_new_tokens=args.tokens)

        def off(config=config):
            *_, done = speculate_batch(pair, BatchConfig(config.prompts, k=0, temperature=0.0,
                                                         max_new_tokens=args.tokens))
            return done.tokens

        def chain(config=config):
            *_, done = speculate_batch(pair, config, drafter=DrafterSpec.medusa(heads))
            return done.tokens

        def tree4(config=config):
            return speculate_tree_batch(pair, config, heads, best4).tokens

        def tree10(config=config):
            return speculate_tree_batch(pair, config, heads, trees.MEDUSA_TREE).tokens

        rates = {name: statistics.median(cpu_rate(run) for _ in range(args.repeats))
                 for name, run in (("off", off), ("chain", chain), ("tree4", tree4),
                                   ("tree10", tree10))}
        print(f"| {batch} | {rates['off']:.0f} | {rates['chain']:.0f} | {rates['tree4']:.0f} "
              f"| {rates['tree10']:.0f} | {rates['tree4'] / rates['chain']:.2f} "
              f"| {predicted['tree4'] / predicted['chain']:.2f} |", flush=True)


if __name__ == "__main__":
    with torch.inference_mode():
        main()
