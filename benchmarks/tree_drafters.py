"""Trees against chains for the draft model and the EAGLE head on the shipped pair, one row.

    .venv/bin/python benchmarks/tree_drafters.py [--prompts 8] [--tokens 48]

On held-out prompts (Scripture and Jargon in turn), at T = 0 and T = 1: the draft model's
chain (k = 4) and its static trees (the 10-node default, and a 5-node one), the EAGLE head's
chain (k = 4) and its confidence trees of SGLang's shape (steps, topk, draft tokens), each
with its tokens a cycle and tokens per second of CPU time of this thread (one torch thread),
and the EAGLE head's calibration: its mean top-1 probability at each cycle's first draft
beside how often that draft was the target's token at T = 0 (EAGLE-2 ranks nodes by the
former; it pays where the two agree).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine.analytic import trees  # noqa: E402
from engine.analytic.trees import TreeShape  # noqa: E402
from engine.decoder.drafter_spec import DrafterSpec  # noqa: E402
from engine.decoder.eagle import load_head_for  # noqa: E402
from engine.decoder.eagle_tree import speculate_eagle_tree  # noqa: E402
from engine.decoder.events import CycleEvent, GenerationConfig  # noqa: E402
from engine.decoder.loading import load_pair, set_threads  # noqa: E402
from engine.decoder.speculative import speculate  # noqa: E402
from engine.decoder.tree_speculative import speculate_draft_tree  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SHAPES = (TreeShape(4, 1, 5), TreeShape(4, 2, 6), TreeShape(5, 4, 8), TreeShape(6, 4, 16))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--prompts", type=int, default=8)
    ap.add_argument("--tokens", type=int, default=48)
    args = ap.parse_args()
    set_threads(1, "cpu")
    pair = load_pair(str(REPO / "models/target"), str(REPO / "models/draft"), device="cpu")
    pair = pair.__class__(**{**pair.__dict__, "stop_token_ids": frozenset()})
    head = load_head_for(pair, REPO / "models/eagle")
    held = json.loads((REPO / "models/heldout_prompts.json").read_text())
    prompts = [p[:160] for two in zip(held["kjv"], held["jargon"], strict=False)
               for p in two][: args.prompts]
    print("| T | drafter | tokens a cycle | tok/CPU-s |")
    print("|---:|---|---:|---:|")
    for temperature in (0.0, 1.0):
        configs = [GenerationConfig(prompt=p, temperature=temperature, k=4, seed=i,
                                    max_new_tokens=args.tokens) for i, p in enumerate(prompts)]
        runs = {"draft model chain, k = 4": lambda c: [
            e.n_accepted + 1 for e in speculate(pair, c) if isinstance(e, CycleEvent)]}
        for tree in (trees.MEDUSA_TREE, ((0,), (1,), (0, 0), (0, 0, 0), (0, 0, 0, 0))):
            runs[f"draft model tree {trees.text(tree)}"] = (
                lambda c, tree=tree: [x.n_accepted + 1 for x in
                                      list(speculate_draft_tree(pair, c, tree))[:-1]])
        runs["EAGLE chain, k = 4"] = lambda c: [
            e.n_accepted + 1 for e in speculate(pair, c, drafter=DrafterSpec.eagle(head))
            if isinstance(e, CycleEvent)]
        for shape in SHAPES:
            runs[f"EAGLE-2 tree {shape.steps},{shape.topk},{shape.draft_tokens}"] = (
                lambda c, shape=shape: [x.n_accepted + 1 for x in
                                        list(speculate_eagle_tree(pair, c, head, shape))[:-1]])
        for name, run in runs.items():
            start, per_cycle = time.thread_time(), []
            for config in configs:
                per_cycle += run(config)
            seconds = time.thread_time() - start
            print(f"| {temperature:g} | {name} | {sum(per_cycle) / len(per_cycle):.2f} | "
                  f"{sum(per_cycle) / seconds:.0f} |", flush=True)
    print()
    print(f"calibration: {calibration(pair, head, prompts, args.tokens)}")


def calibration(pair, head, prompts, tokens) -> str:
    """The head's mean top-1 probability at its first draft, and how often that draft was
    accepted, greedy, over the chain's cycles."""
    confidence, accepted = [], []

    def spy(tokens_, features, positions, cache):
        out = forward(tokens_, features, positions, cache)
        q = torch.softmax(head.logits(out[0, -1])[: pair.shared_vocab_size].float(), -1)
        confidence.append(float(q.max()))
        return out

    forward = head.forward
    head.forward = spy
    try:
        for prompt in prompts:
            config = GenerationConfig(prompt=prompt, temperature=0.0, k=1, max_new_tokens=tokens)
            accepted += [e.n_accepted for e in speculate(pair, config,
                                                         drafter=DrafterSpec.eagle(head))
                         if isinstance(e, CycleEvent)]
    finally:
        del head.forward
    return (f"mean top-1 q {sum(confidence) / len(confidence):.2f}, the first draft accepted "
            f"at T = 0 in {sum(accepted) / len(accepted):.2f} of cycles")


if __name__ == "__main__":
    with torch.inference_mode():
        main()
