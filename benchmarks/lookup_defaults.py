"""Prompt lookup's n-gram range on the built-in prompt sets, replayed exactly at temperature 0.

At temperature 0 the output is the target's greedy output whatever the drafter, so prompt
lookup's cycles can be replayed over it without running the loop: for each
(prompt_lookup_min, prompt_lookup_max) the share of cycles with a proposal (pi), the counted
alpha over proposed tokens, tokens per cycle, and the speedup the slider model gives them at
two verification costs (engine.analytic.lookup, c taken as 0). docs/design.md, "Prompt lookup",
quotes its table.

    .venv/bin/python benchmarks/lookup_defaults.py [--tokens 64] [--k 4] [--sets scripture,...]
"""

from __future__ import annotations

import argparse
from collections import defaultdict

from engine.decoder.baseline import run_target_only
from engine.decoder.events import GenerationConfig
from engine.decoder.loading import load_pair, set_threads
from engine.decoder.ngram import propose
from engine.measure.prompt_sets import BUILTIN_SETS, builtin

RANGES = [(1, 1), (1, 2), (1, 3), (1, 4), (2, 2), (2, 3), (2, 4), (2, 5), (3, 3), (3, 5), (5, 5)]


def replay(context: list[int], out: list[int], k: int, lo: int, hi: int) -> list[int]:
    """[cycles, cycles with a proposal, accepted, trials, tokens] of prompt lookup over the
    greedy output ``out`` of ``context``."""
    counts = [0] * 5
    t = 0
    while t < len(out):
        drafts = propose(context + out[:t], k, lo, hi).tokens
        n = 0
        while n < len(drafts) and t + n < len(out) and drafts[n] == out[t + n]:
            n += 1
        rejected = n < len(drafts) and t + n < len(out)
        emitted = min(n + 1, len(out) - t)
        for i, x in enumerate((1, bool(drafts), n, n + rejected, emitted)):
            counts[i] += x
        t += n + 1
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--sets", default=",".join(BUILTIN_SETS))
    parser.add_argument("--target", default="models/target")
    args = parser.parse_args()
    set_threads(1, "cpu")
    pair = load_pair(args.target, None, device="cpu")
    totals: dict[tuple, list[int]] = defaultdict(lambda: [0] * 5)
    for name in args.sets.split(","):
        for p in builtin(name):
            config = GenerationConfig(p.text, temperature=0.0, max_new_tokens=args.tokens)
            _, done = run_target_only(pair, config)
            ids = list(pair.tokenizer(p.text).input_ids)
            for lo, hi in RANGES:
                counts = replay(ids, done.token_ids, args.k, lo, hi)
                total = totals[p.domain, lo, hi]
                for i, x in enumerate(counts):
                    total[i] += x
    print(f"k = {args.k}, {args.tokens} greedy tokens per prompt; S at c = 0")
    print("| domain | min..max | pi | alpha | tokens/cycle | S (v = 1.6) | S (v = 1) |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
    for (domain, lo, hi), (cycles, proposing, accepted, trials, tokens) in totals.items():
        pi, per_cycle = proposing / cycles, tokens / cycles
        alpha = accepted / trials if trials else 0.0
        cells = [f"{pi:.2f}", f"{alpha:.3f}", f"{per_cycle:.2f}"]
        cells += [f"{per_cycle / (pi * v + 1 - pi):.3f}" for v in (1.6, 1.0)]
        print(f"| {domain} | {lo}..{hi} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
