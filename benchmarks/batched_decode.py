"""Batched decoding with the shipped pair: what the batched path costs at B = 1, and what a
batch buys.

1. B = 1: the batched loop against the single-stream loops on the same prompts and seeds,
   target-only (k = 0) and speculative (k = 4): decode tokens/s of each, and the ratio.
2. Plain batched decoding (k = 0) and fixed k at B = 1, 2, 4, ..., 32: all rows' tokens per
   second of decode time, and the ratio to B = 1.

Rows decode a fixed number of new tokens (end-of-sequence tokens do not stop them), from the
held-out prompts (cycled when the batch is larger). After one untimed run of each, runs are
interleaved and repeated; the figures are medians, with the interquartile range, per second
of wall time and per second of CPU time of the decoding thread (on a shared machine the wall
clock also counts the time other processes held the core). One CPU thread unless --threads
says otherwise (the engine's CPU default).

    .venv/bin/python benchmarks/batched_decode.py [--repeats 5] [--tokens 64] [--k 2,4]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import time
from pathlib import Path

import torch

from engine.decoder.baseline import target_only
from engine.decoder.batched import BatchConfig, BatchStepEvent, speculate_batch
from engine.decoder.events import CycleEvent, GenerationConfig, StepEvent
from engine.decoder.loading import load_pair
from engine.decoder.speculative import speculate

MODELS = Path(__file__).parents[1] / "models"
TEMPERATURE = 0.8


def prompts(count: int) -> list[str]:
    held_out = json.loads((MODELS / "heldout_prompts.json").read_text())
    mixed = [p for pair in zip(*held_out.values(), strict=False) for p in pair]
    return [mixed[i % len(mixed)] for i in range(count)]


def rates(events, tokens_of) -> tuple[float, float]:
    """Tokens per second of wall time and per second of this thread's CPU time, over every
    step but the first (whose call also runs the prefill). With one torch thread the work
    runs on this thread, so CPU time leaves out the time other processes held the core."""
    events = iter(events)
    next(events)
    wall, cpu, tokens = time.perf_counter(), time.thread_time(), 0
    for event in events:
        tokens += tokens_of(event)
    return tokens / (time.perf_counter() - wall), tokens / (time.thread_time() - cpu)


def batched(pair, batch: int, k: int, tokens: int, seed: int) -> tuple[float, float]:
    config = BatchConfig(prompts(batch), k=k, temperature=TEMPERATURE, max_new_tokens=tokens,
                         seeds=[seed + i for i in range(batch)])
    return rates(speculate_batch(pair, config),
                 lambda e: sum(e.n_emitted) if isinstance(e, BatchStepEvent) else 0)


def single(pair, k: int, tokens: int, seed: int) -> tuple[float, float]:
    config = GenerationConfig(prompts(1)[0], k=max(k, 1), temperature=TEMPERATURE,
                              max_new_tokens=tokens, seed=seed)
    if k == 0:
        return rates(target_only(pair, config), lambda e: isinstance(e, StepEvent))
    return rates(speculate(pair, config),
                 lambda e: e.n_emitted if isinstance(e, CycleEvent) else 0)


def spread(values: list[float]) -> str:
    q1, median, q3 = statistics.quantiles(values, n=4) if len(values) > 1 else values * 3
    return f"{median:.0f} ({q1:.0f}-{q3:.0f})"


def median(values: list[float]) -> float:
    return statistics.median(values)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--tokens", type=int, default=64, help="new tokens per row")
    parser.add_argument("--batches", default="1,2,4,8,16,32")
    parser.add_argument("--k", default="2,4", help="fixed k to sweep besides k = 0")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    pair = load_pair(str(MODELS / "target"), str(MODELS / "draft"), device="cpu")
    pair = dataclasses.replace(pair, stop_token_ids=frozenset())  # fixed tokens per row
    batches = [int(b) for b in args.batches.split(",")]
    ks = [0] + [int(k) for k in args.k.split(",") if k]
    print(f"shipped pair, {pair.device}, {torch.get_num_threads()} thread(s), temperature "
          f"{TEMPERATURE}, {args.tokens} new tokens per row, {args.repeats} repeats; decode "
          "tokens/s (first step and prefill left out): median (interquartile range)")

    # Warm-up: every contender once, untimed (first calls allocate caches and rope tables).
    for k in (0, 4):
        single(pair, k, args.tokens, 0)
    for k in ks:
        for b in batches:
            batched(pair, b, k, args.tokens, 0)

    # 1. B = 1: the batched loop against the single stream, interleaved.
    print("\nB = 1     single stream: wall, CPU   batched loop: wall, CPU    batched / single")
    for k in (0, 4):
        runs = {"single": [], "batched": []}
        for repeat in range(args.repeats):
            runs["single"].append(single(pair, k, args.tokens, repeat))
            runs["batched"].append(batched(pair, 1, k, args.tokens, repeat))
        cells = []
        for name in ("single", "batched"):
            cells += [spread([r[0] for r in runs[name]]), spread([r[1] for r in runs[name]])]
        ratios = [median([r[i] for r in runs["batched"]]) / median([r[i] for r in runs["single"]])
                  for i in (0, 1)]
        print(f"k = {k}:   {cells[0]:>13} {cells[1]:>13}   {cells[2]:>13} {cells[3]:>13}   "
              f"wall {ratios[0]:.3f}, CPU {ratios[1]:.3f}")

    # 2. The batch sweep: each repeat visits every (k, B) once.
    results = {(k, b): [] for k in ks for b in batches}
    for repeat in range(args.repeats):
        for k in ks:
            for b in batches:
                results[k, b].append(batched(pair, b, k, args.tokens, repeat))
    for i, clock in enumerate(("wall time", "CPU time")):
        base = median([r[i] for r in results[0, batches[0]]])
        print(f"\ntokens/s of {clock} (x: against k = 0 at B = {batches[0]})")
        print("  B  " + "".join(f"{'k = ' + str(k):>26}" for k in ks))
        for b in batches:
            cells = [f"{spread([r[i] for r in results[k, b]])} "
                     f"{median([r[i] for r in results[k, b]]) / base:5.2f}x" for k in ks]
            print(f"{b:3d}  " + "".join(f"{c:>26}" for c in cells))


if __name__ == "__main__":
    main()
