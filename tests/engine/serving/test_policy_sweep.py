"""The vLLM policy sweep's bookkeeping: which server each policy starts, the k vLLM uses at a
batch, where its counters must show drafts, and vLLM's costs for ``specscope plan``. (The
sweep itself runs real servers; its figures are in the README and docs/design.md.)"""

from __future__ import annotations

import json

import pytest

from engine.analytic.timed_costs import COSTS_FILE_VERSION, timed_costs
from engine.planner.costs import file_costs
from engine.serving.metrics import SpecCounters
from engine.serving.policy_sweep import (
    VllmCell,
    costs_file,
    drafting_mismatches,
    parse_vllm_policies,
    server_spec,
)


def counts(drafts: int, k: int, accepted: int) -> SpecCounters:
    return SpecCounters(drafts=drafts, draft_tokens=k * drafts, accepted=accepted,
                        per_position=[0] * k)


def test_policies_start_off_first_and_map_to_server_configs():
    policies = parse_vllm_policies("2,off,0,4", [[1, 8, 4], [9, 256, 0]])
    assert [p.name for p in policies] == ["off", "k = 2", "k = 0", "k = 4", "schedule"]
    off, k2, zero, k4, planned = policies
    assert server_spec(off, "models/target", "models/draft").speculative_config() is None
    assert server_spec(k2, "models/target", "models/draft").speculative_config()[
        "num_speculative_tokens"] == 2
    # "0": a draft model that is asked for nothing at any batch
    config = server_spec(zero, "models/target", "models/draft").speculative_config()
    assert config["num_speculative_tokens_per_batch_size"] == [[1, 256, 0]]
    assert config["num_speculative_tokens"] == 1
    config = server_spec(planned, "models/target", "models/draft").speculative_config()
    assert config["num_speculative_tokens"] == 4
    assert config["num_speculative_tokens_per_batch_size"] == [[1, 8, 4], [9, 256, 0]]


def test_the_k_at_a_batch_follows_vllms_ranges_gaps_included():
    (_, planned) = parse_vllm_policies("off", [[1, 4, 3], [16, 64, 1]])
    assert [planned.k_at(b) for b in (1, 4, 5, 15, 16, 64, 100)] == [3, 3, 3, 3, 1, 1, 1]


@pytest.mark.parametrize("text", ["2,x", "-1", "1.5"])
def test_bad_policies_are_refused_with_a_message(text):
    with pytest.raises(ValueError, match="policies are 'off' or a whole k"):
        parse_vllm_policies(text, None)


def test_a_schedule_that_never_speculates_is_refused():
    with pytest.raises(ValueError, match="k is 0 everywhere"):
        parse_vllm_policies("off", [[1, 256, 0]])


def test_drafts_where_the_schedule_says_zero_are_reported():
    off, planned = parse_vllm_policies("off", [[1, 2, 4], [3, 256, 0]])
    results = {
        "off": [VllmCell(1, 8, [1.0]), VllmCell(4, 32, [1.0])],
        "schedule": [VllmCell(1, 8, [1.0], counts(3, 4, 5)),
                     VllmCell(4, 32, [1.0], counts(2, 4, 1))],
    }
    assert drafting_mismatches(results, [off, planned]) == [
        "schedule, B = 4: k = 0 there, but 2 drafts counted"]
    results["schedule"][1].counts = counts(0, 4, 0)
    assert drafting_mismatches(results, [off, planned]) == []


def test_vllms_costs_put_each_measured_step_on_the_planners_cycle():
    """Steps of 10 ms (off), 14 ms (k = 2) and 18 ms (k = 4) at B = 1: one more draft token
    costs 2 ms, so the planner's cycle at k = 2 and 4 is 1.4 and 1.8 target steps."""
    policies = parse_vllm_policies("off,2,4", None)
    new_tokens = 10
    # off: 10 steps of 10 ms; k = 2 with 2 tokens per step: 5 steps of 14 ms; k = 4, 4 per step
    results = {
        "off": [VllmCell(1, 10, [0.100, 0.100, 0.100])],
        "k = 2": [VllmCell(1, 10, [0.070], SpecCounters(5, 10, 5, [3, 2]))],
        "k = 4": [VllmCell(1, 10, [0.045], SpecCounters(2, 8, 6, [2, 2, 1, 1]))],
    }
    data = costs_file(results, policies, new_tokens, {"label": "test"})
    timed = timed_costs(data["passes"])
    assert timed.k_limit == 4
    assert timed.cycle(1, 2) == pytest.approx(1.4)
    assert timed.cycle(1, 4) == pytest.approx(1.8)
    assert timed.cycle(1, 3) == pytest.approx(1.6)


def test_the_0_policy_gives_the_price_of_a_k0_range_beside_off():
    """Off steps of 10 ms, the "0" policy's of 12 ms at B = 1: a k = 0 range costs 20%."""
    policies = parse_vllm_policies("off,0,2", None)
    results = {
        "off": [VllmCell(1, 10, [0.100])],
        "k = 0": [VllmCell(1, 10, [0.120], SpecCounters(0, 0, 0, [0]))],
        "k = 2": [VllmCell(1, 10, [0.070], SpecCounters(5, 10, 5, [3, 2]))],
    }
    data = costs_file(results, policies, 10, {"label": "test"})
    assert data["version"] == COSTS_FILE_VERSION and data["k0"] == [
        {"batch": 1, "median_ms": 12.0}]
    costs = file_costs(json.loads(json.dumps(data)), "vllm.json")
    assert costs.k0.overhead()(1) == pytest.approx(0.2)
    assert costs.k0.source == "test's measured k = 0 steps"
    without = costs_file({k: v for k, v in results.items() if k != "k = 0"},
                         parse_vllm_policies("off,2", None), 10, {})
    assert "k0" not in without


def test_costs_need_a_fixed_k():
    with pytest.raises(ValueError, match="at least one fixed k"):
        costs_file({"off": []}, parse_vllm_policies("off", None), 10, {})


def test_curves_give_speedups_over_off_and_say_which_acceptance_figure_they_carry():
    from engine.serving.policy_sweep import curves

    policies = parse_vllm_policies("off,2", [[1, 2, 2], [3, 256, 0]])
    results = {
        "off": [VllmCell(1, 10, [1.0]), VllmCell(4, 40, [2.0])],
        # k = 2: 4 drafts, 3 accepted at position 1, 1 at position 2: trials 4 + 4 - 1 = 7
        "k = 2": [VllmCell(1, 10, [0.5], SpecCounters(4, 8, 4, [3, 1])),
                  VllmCell(4, 40, [4.0], SpecCounters(0, 0, 0, [0, 0]))],
        "schedule": [VllmCell(1, 10, [0.8], SpecCounters(2, 4, 1, [1, 0])),
                     VllmCell(4, 40, [2.0], SpecCounters(0, 0, 0, [0, 0]))],
    }
    fixed, planned = curves(results, policies, {"hardware": "test"})
    assert [p["speedup"] for p in fixed["points"]] == [2.0, 0.5]
    assert fixed["alpha"] == round(4 / 7, 4) and fixed["alpha_measure"] == "counted alpha"
    assert planned["alpha"] == 0.25 and planned["alpha_measure"] == "draft acceptance rate"
    assert planned["schedule"] == [[1, 2, 2], [3, 256, 0]] and planned["k"] == 2


def test_the_cpu_clock_uses_the_servers_cpu_time():
    cell = VllmCell(4, 40, seconds=[4.0, 4.0, 4.0], cpu_seconds=[1.0, 2.0, 2.0], clock="cpu")
    assert cell.tok_s()[1] == 20.0
    cell.clock = "wall"
    assert cell.tok_s() == (10.0, 10.0, 10.0)
