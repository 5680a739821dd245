"""Our engine against vLLM at temperature > 0 on the shipped pair, and both against the exact
target distribution (the figures of the README's "Temperature above 0").

    .venv/bin/python tools/vllm_temperature_experiment.py [--out result.json]

1. Draft acceptance at T = 0.5 and 1, k = 4, 8 held-out prompts of 48 tokens: our engine;
   the expected rates from both models' real distributions at the positions it verified
   (sum_x min(p, q) for drafts sampled from q; p(argmax q) for vLLM's default greedy drafts);
   vLLM with greedy and with probabilistic draft sampling (one server at a time).
2. The first two output tokens sampled 1,200 times at T = 1 on one prompt, from our engine
   and from vLLM, each compared with the target's exact p(t1) p(t2 | t1) by a chi-square
   test (cells with an expected count of at least 5, the rest pooled).

Minutes on two idle cores (two vLLM starts and 1,200 short runs of our engine).
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import sys
from pathlib import Path

import torch
from scipy.stats import chisquare

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine.analytic import acceptance as estimators  # noqa: E402
from engine.decoder.events import CycleEvent, DoneEvent, GenerationConfig  # noqa: E402
from engine.decoder.loading import load_pair  # noqa: E402
from engine.decoder.speculative import speculate  # noqa: E402
from engine.measure.prompt_sets import heldout_prompts  # noqa: E402
from engine.serving.server import ServerSpec, VllmServer  # noqa: E402

TARGET, DRAFT = "models/target", "models/draft"
K, NEW_TOKENS, SAMPLES, TEMPERATURES = 4, 48, 1200, (0.5, 1.0)


def rates(accepted_per_position: list[int], cycles: int, drafted: int) -> dict:
    rate = estimators.draft_acceptance_rate(sum(accepted_per_position), drafted)
    return {"draft_acceptance_rate": None if rate is None else round(rate, 4),
            "per_position": [None if x is None else round(x, 4)
                             for x in estimators.per_position_vllm(accepted_per_position, cycles)],
            "cycles": cycles}


def ours_acceptance(pair, prompts: list[str], temperature: float) -> dict:
    per_position, cycles, overlap, p_of_argmax_q = [0] * K, 0, [], []

    def seen(prefix, outcome) -> None:
        for i in range(min(outcome.n_accepted + 1, K)):  # the positions it verified
            p, q = outcome.p[i], outcome.q[i]
            overlap.append(float(torch.minimum(p, q).sum()))
            p_of_argmax_q.append(float(p[q.argmax()]))

    for seed, prompt in enumerate(prompts):
        config = GenerationConfig(prompt=prompt, k=K, temperature=temperature,
                                  max_new_tokens=NEW_TOKENS, seed=seed)
        for event in speculate(pair, config, on_verify=seen):
            if isinstance(event, CycleEvent):
                cycles += 1
                for i in range(event.n_accepted):
                    per_position[i] += 1
    result = rates(per_position, cycles, K * cycles)
    result["expected_sum_min_p_q"] = round(sum(overlap) / len(overlap), 4)
    result["expected_p_of_argmax_q"] = round(sum(p_of_argmax_q) / len(p_of_argmax_q), 4)
    return result


def chi_square(pair, prompt_ids: list[int], samples: list[tuple[int, int]]) -> dict:
    """``samples`` of (t1, t2) against p(t1) p(t2 | t1) at T = 1."""
    with torch.inference_mode():
        p1 = torch.softmax(pair.target(torch.tensor([prompt_ids])).logits[0, -1].float(), -1)
        firsts = {int(t) for t in torch.topk(p1, 30).indices} | {a for a, _ in samples}
        joint = {}
        for t1 in sorted(firsts):
            logits = pair.target(torch.tensor([prompt_ids + [t1]])).logits[0, -1].float()
            p2 = torch.softmax(logits, -1)
            joint.update({(t1, t2): float(p1[t1] * p2[t2]) for t2 in range(p2.shape[0])})
    n, counts = len(samples), collections.Counter(samples)
    cells = [c for c, probability in joint.items() if probability * n >= 5]
    observed = [counts.get(c, 0) for c in cells]
    expected = [joint[c] * n for c in cells]
    observed.append(n - sum(observed))
    expected.append(n - sum(expected))
    stat, p_value = chisquare(observed, expected)
    return {"cells": len(cells) + 1, "chi2": round(float(stat), 1), "p_value": float(p_value)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    torch.set_num_threads(1)
    pair = dataclasses.replace(load_pair(TARGET, DRAFT), stop_token_ids=frozenset())
    prompts = heldout_prompts(TARGET, per_domain=4)
    prompt_ids = [list(pair.tokenizer(p).input_ids) for p in prompts]
    result: dict = {}

    def report(key: str, value: dict) -> None:
        result[key] = value
        print(f"{key}: {json.dumps(value)}", flush=True)

    for temperature in TEMPERATURES:
        report(f"ours T={temperature}", ours_acceptance(pair, prompts, temperature))
    pairs = []
    for i in range(SAMPLES):
        config = GenerationConfig(prompt=prompts[0], k=K, temperature=1.0, max_new_tokens=2,
                                  seed=10_000 + i)
        done = [e for e in speculate(pair, config) if isinstance(e, DoneEvent)][0]
        pairs.append(tuple(done.token_ids[:2]))
    report("ours first two tokens at T=1", chi_square(pair, prompt_ids[0], pairs))

    for method in ("greedy", "probabilistic"):
        with VllmServer(ServerSpec(TARGET, DRAFT, k=K, draft_sampling=method)) as server:
            client = server.client
            for temperature in TEMPERATURES:
                before = client.counters()
                for seed, ids in enumerate(prompt_ids):
                    client.complete(ids, NEW_TOKENS, temperature, seed=seed)
                c = client.counters() - before
                report(f"vLLM {method} drafts T={temperature}",
                       rates(c.per_position, c.drafts, c.draft_tokens))
            if method == "greedy":
                pairs = []
                for _ in range(SAMPLES // 100):
                    pairs += [tuple(ids[:2]) for ids in client.complete_n(
                        prompt_ids[0], 2, 1.0, n=100)]
                report("vLLM first two tokens at T=1", chi_square(pair, prompt_ids[0], pairs))
    if args.out:
        args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
