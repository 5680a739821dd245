"""Traffic as a request rate: the batches it implies (Little's law, Poisson arrivals), each
side at its own batch, and the plan's answer for it."""

from __future__ import annotations

import json
import math

import pytest

from engine.cli import main
from engine.planner import traffic
from engine.planner.inputs import PlanInputs


def test_with_a_constant_time_per_token_the_mean_batch_is_littles_law():
    side = traffic.at_rate(4.0, 100, lambda b: 0.01, 256)  # 4 req/s x 100 tokens x 10 ms
    assert side.batch == pytest.approx(4.0, rel=1e-6)
    assert side.tpot_s == pytest.approx(0.01)
    # the time at each batch is Poisson(4), idle time left out
    p1 = 4 * math.exp(-4) / (1 - math.exp(-4))
    assert side.mix[1] == pytest.approx(p1) and sum(side.mix.values()) == pytest.approx(1)


def test_a_time_per_token_that_grows_with_the_batch_is_a_fixed_point():
    def tau(batch: int) -> float:
        return 0.005 + 0.0005 * batch

    mean = traffic.mean_batch(2.0, 200, tau, 256)
    assert mean == pytest.approx(2.0 * 200 * traffic.tau_between(tau, mean), rel=1e-6)
    # a faster side at the same traffic runs at a smaller batch, so it gains more than its
    # speed at the slower side's batch
    fast = traffic.at_rate(2.0, 200, lambda b: 0.7 * tau(b), 256)
    slow = traffic.at_rate(2.0, 200, tau, 256)
    assert fast.batch < slow.batch
    assert slow.tpot_s / fast.tpot_s > 1 / 0.7


def test_past_capacity_the_requests_would_queue_and_it_is_said():
    with pytest.raises(traffic.Overloaded, match="requests would queue"):
        traffic.mean_batch(1000.0, 1000, lambda b: 0.01, 64)
    with pytest.raises(ValueError, match="above 0"):
        traffic.mean_batch(0.0, 10, lambda b: 0.01, 64)


def _plan(capsys, *options: str) -> dict:
    assert main(["plan", "--alpha", "0.7", *options, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_the_plan_answers_for_a_request_rate_with_both_sides_at_their_own_batch(capsys):
    data = _plan(capsys, "--request-rate", "50", "--output-tokens", "256")
    rate = data["traffic"]
    assert rate["assumption"] == traffic.ASSUMPTION
    off, plan = rate["off"], rate["plan"]
    assert plan["mean_batch"] < off["mean_batch"]  # speculation shortens each request
    assert rate["gain"] == pytest.approx(off["tpot_ms"] / plan["tpot_ms"])
    assert data["verdict"].startswith("At 50 requests/s of 256 tokens (Poisson arrivals")
    assert data["band"] is None  # one answer for the traffic, not a band
    assert data["decision"] in ("configure", "measure first", "do not configure")
    overloaded = _plan(capsys, "--request-rate", "200", "--output-tokens", "512")
    assert "requests would queue" in overloaded["verdict"]
    assert overloaded["decision"] == "do not configure"


def test_the_traffic_is_given_once_and_its_command_reproduces_it(capsys):
    assert main(["plan", "--alpha", "0.7", "--request-rate", "2", "--batch-mix", "1=1"]) == 2
    assert "give the traffic once: --request-rate or --batch-mix" in capsys.readouterr().err
    assert main(["plan", "--alpha", "0.7", "--request-rate", "-1"]) == 2
    assert "--request-rate must be above 0" in capsys.readouterr().err
    command = PlanInputs(request_rate=2.5, output_tokens=128).command()
    assert "--request-rate 2.5 --output-tokens 128" in command


def test_a_mix_observed_while_speculating_is_converted_to_the_batches_without_it():
    """Half the time per token with speculation: the same requests need twice the batch
    without it (Little's law), and the time shares move with them."""
    off = traffic.unspeculated_mix({4: 0.25, 10: 0.75}, lambda b: 0.005, lambda b: 0.01, 256)
    assert off == {8: 0.25, 20: 0.75}
    capped = traffic.unspeculated_mix({200: 1.0}, lambda b: 0.005, lambda b: 0.01, 256)
    assert capped == {256: 1.0}  # past capacity without speculation: the top batch


def test_the_plan_weighs_the_converted_mix_and_says_so(capsys):
    given = _plan(capsys, "--batch-mix", "8=1,32=2,64=1")
    observed = _plan(capsys, "--batch-mix", "8=1,32=2,64=1", "--batch-mix-k", "2")
    said = [n for n in observed["notices"] if n.startswith("The batch mix was observed with")]
    assert said and "k = 2 running" in said[0]
    assert observed["plan"]["gain_over_off"] != given["plan"]["gain_over_off"]
    assert main(["plan", "--alpha", "0.7", "--batch-mix", "8=1", "--batch-mix-k", "40"]) == 2
    assert "--batch-mix-k must be from 0 to" in capsys.readouterr().err
