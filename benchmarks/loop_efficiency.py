"""How close the batched decoding loop runs to its forward passes.

For each batch B and draft length k: the mean step of the real loop (B of the shipped pair's
held-out prompts, every row live, end of sequence ignored, the first step left out) against
``k t_q(B) + t_v(B, k)``, the draft's and the target's passes timed alone in this process over
caches holding the same prompts (same B, context, k, threads and clock). A ratio of 1 is a loop
that costs nothing beyond its passes. Also the step's breakdown: draft passes, the draft's
sampling, the target pass, the rule with the rollbacks, and emitting the tokens.

    PYTHONPATH=. .venv/bin/python benchmarks/loop_efficiency.py [--batch 1,16,64] [--k 1,2,4]
        [--temperature 0] [--new-tokens 32] [--repeats 3]

CPU time of this thread, one torch thread.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time

import torch

from engine.decoder.batched import BatchConfig, BatchStepEvent, speculate_batch
from engine.decoder.common import Clock, encode_prompt
from engine.decoder.events import GenerationConfig
from engine.decoder.loading import load_pair
from engine.decoder.rows import padded, rows_for
from engine.measure.prompt_sets import pair_prompts


def pass_ms(model, prompt_ids: list[list[int]], tokens: int, runs: int = 9) -> float:
    """Median CPU ms of one pass of ``tokens`` new tokens a row over caches holding the
    prompts (rolled back after each run, so every run sees the same context)."""
    rows = rows_for(model, max(map(len, prompt_ids)) + tokens + 1, len(prompt_ids))
    with torch.inference_mode():
        rows.run(padded(prompt_ids, "cpu"), [len(p) for p in prompt_ids], 1)
        ids = torch.randint(0, 4000, (len(prompt_ids), tokens))
        times = []
        for _ in range(runs + 1):
            start = time.thread_time()
            rows.run(ids, [tokens] * len(prompt_ids), tokens)
            times.append((time.thread_time() - start) * 1000.0)
            rows.rollback([tokens] * len(prompt_ids))
    return statistics.median(times[1:])


def loop_steps(pair, prompts, k, temperature, new_tokens, repeats) -> list[BatchStepEvent]:
    clock = Clock(pair.device, cpu_time=True)
    steps = []
    for repeat in range(repeats):
        config = BatchConfig(prompts, k=k, temperature=temperature, max_new_tokens=new_tokens,
                             seeds=[repeat * 1000 + i for i in range(len(prompts))])
        events = list(speculate_batch(pair, config, clock=clock))[1:-1]
        steps += [e for e in events if len(e.rows) == len(prompts)]
    return steps


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch", default="1,16,64")
    parser.add_argument("--k", default="1,2,4")
    parser.add_argument("--temperature", type=float, default=0.0)
    parser.add_argument("--new-tokens", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(1)
    pair = load_pair("models/target", "models/draft", device="cpu")
    pair = dataclasses.replace(pair, stop_token_ids=frozenset())
    held_out = pair_prompts("models/target", per_domain=20)
    print(f"T = {args.temperature}, {args.new_tokens} new tokens a row, {args.repeats} repeats, "
          "CPU ms of the decoding thread, one torch thread\n")
    print("| B | k | loop step | k t_q + t_v (passes alone) | ratio | draft passes | draft "
          "sampling | target pass | rule and rollbacks | emitting |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for batch in (int(b) for b in args.batch.split(",")):
        prompts = [held_out[i % len(held_out)] for i in range(batch)]
        ids = [encode_prompt(pair, GenerationConfig(prompt=p))[:-1] or [0] for p in prompts]
        t_q = pass_ms(pair.draft, ids, 1)
        for k in (int(x) for x in args.k.split(",")):
            loop_steps(pair, prompts, k, args.temperature, 8, 1)  # warm-up
            steps = loop_steps(pair, prompts, k, args.temperature, args.new_tokens, args.repeats)
            t_v = pass_ms(pair.target, ids, k + 1)
            mean = {name: statistics.fmean(getattr(s, name) for s in steps)
                    for name in ("step_ms", "draft_ms", "draft_pass_ms", "verify_ms",
                                 "target_ms")}
            passes = k * t_q + t_v
            print(f"| {batch} | {k} | {mean['step_ms']:.2f} | {passes:.2f} | "
                  f"{mean['step_ms'] / passes:.3f} | {mean['draft_pass_ms']:.2f} | "
                  f"{mean['draft_ms'] - mean['draft_pass_ms']:.2f} | {mean['target_ms']:.2f} | "
                  f"{mean['verify_ms'] - mean['target_ms']:.2f} | "
                  f"{mean['step_ms'] - mean['draft_ms'] - mean['verify_ms']:.2f} |", flush=True)


if __name__ == "__main__":
    main()
