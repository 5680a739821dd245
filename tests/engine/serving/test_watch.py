"""The watch: per-interval figures from two readings of vLLM's /metrics, its states, the
Wilson interval, and the verdict against a plan and vLLM's costs."""

from __future__ import annotations

import dataclasses
import json
import math
import threading

import pytest
from support.watch_pages import Counts, PageServer, page

from engine.analytic.break_even_alpha import break_even as break_even_of
from engine.analytic.break_even_alpha import expected_tokens, step_costs
from engine.serving.watch import intervals as w
from engine.settings import REPO_ROOT

K = 4
START = Counts(drafts=100, accepted_per_position=(60, 40, 20, 10), generated=1000, running=2)


def watch(plan=None, costs=None, window=1, **kw) -> w.Watch:
    return w.Watch("prod", "http://127.0.0.1:9", plan=plan, costs=costs, window=window, **kw)


def observed(wt: w.Watch, *counts: Counts, every_s: float = 10.0) -> list[w.Interval]:
    return [wt.observe(page(c), at=1000.0 + i * every_s) for i, c in enumerate(counts)]


# Costs where a plain step is 10 ms, a draft step 2 ms and a verification 11 ms at batch 1:
# cycle(1, k) = (2k + 11) / 10, so k = 2 breaks even where 1 + a + a^2 = 1.5.
COSTS = step_costs({"passes": [
    {"model": "target", "batch": 1, "tokens": 1, "median_ms": 10.0},
    {"model": "draft", "batch": 1, "tokens": 1, "median_ms": 2.0},
    *({"model": "target", "batch": 1, "tokens": t, "median_ms": 11.0} for t in range(2, 6))]})


def plan_at(k: int, alpha: float = 0.7) -> w.PlanView:
    return w.read_plan({"plan": {"ranges": [{"lo": 1, "hi": 64, "k": k}],
                                 "domains": [{"name": "all", "weight": 1, "alpha": alpha}]},
                        "speculative_config": {"num_speculative_tokens": k}})


def test_the_first_reading_starts_the_count_and_the_second_measures_the_interval():
    later = START + [4, 2, 0, 1] * 25  # 100 drafts: 25 of each
    first, second = observed(watch(), START, later)
    assert first.state == w.STARTED and first.alpha is None
    assert second.state == w.MOVING
    assert (second.drafts, second.draft_tokens, second.accepted) == (100, 400, 175)
    assert second.per_position_counts == [75, 50, 25, 25]
    assert second.full_k and second.k == K
    # trials: each draft one more than it accepted, except the 25 that accepted all four
    assert second.trials == 175 + 100 - 25
    assert second.alpha == pytest.approx(175 / 250)
    assert second.draft_acceptance_rate == pytest.approx(175 / 400)
    assert second.mean_acceptance_length == pytest.approx(1 + 175 / 100)
    assert second.per_position_acceptance == pytest.approx([0.75, 0.5, 0.25, 0.25])
    assert second.drafts_per_s == pytest.approx(10.0)
    assert second.tokens_per_s == pytest.approx((175 + 100) / 10)
    assert second.batch == 2
    assert second.alpha_low < second.alpha < second.alpha_high


def test_the_counters_of_every_engine_are_summed():
    one = [w.read_snapshot(page(START, engines=1)), w.read_snapshot(page(START, engines=3))]
    assert one[0] == one[1]
    assert one[0].counters.drafts == 100 and one[0].counters.per_position == [60, 40, 20, 10]


def test_the_wilson_interval_is_the_textbook_one():
    lo, hi = w.wilson(70, 100)
    # Wilson (1927): centre (p + z^2/2n) / (1 + z^2/n), half-width z sqrt(pq/n + z^2/4n^2) / ...
    z = 1.959963984540054
    centre = (0.7 + z * z / 200) / (1 + z * z / 100)
    half = z * math.sqrt(0.21 / 100 + z * z / 40000) / (1 + z * z / 100)
    assert (lo, hi) == pytest.approx((centre - half, centre + half))
    assert (lo, hi) == pytest.approx((0.6041, 0.7810), abs=1e-4)  # the published figures
    assert w.wilson(0, 10)[0] == 0.0 and w.wilson(10, 10)[1] == pytest.approx(1.0)
    assert w.wilson(0, 0) is None


def test_drafts_shorter_than_k_give_the_draft_acceptance_rate_and_say_why():
    mixed = dataclasses.replace(START + [2] * 10, draft_tokens=START.drafts * K + 30)
    _, iv = observed(watch(), START, mixed)
    assert iv.state == w.MOVING and not iv.full_k
    assert iv.alpha is None and iv.per_position_acceptance is None
    assert iv.draft_acceptance_rate == pytest.approx(20 / 30)
    assert any("per position but not drafts per position" in line for line in iv.lines)


def test_flat_counters_are_idle_or_k_0_at_this_batch():
    wt = watch()
    _, idle, k0 = observed(wt, START, START, dataclasses.replace(START, generated=1500))
    assert idle.state == w.FLAT and "idle" in idle.message
    assert k0.state == w.FLAT and "k = 0 at this batch" in k0.message
    assert idle.alpha is None and k0.alpha is None


def test_a_restart_is_a_reset_not_a_spike_and_counting_goes_on_from_it():
    fresh = Counts(drafts=10, accepted_per_position=(5, 3, 1, 0), generated=40, running=1,
                   start=1.8e9)
    wt = watch()
    _, reset, after = observed(wt, START, fresh, fresh + [1] * 10)
    assert reset.state == w.RESET and "restarted" in reset.message
    assert reset.alpha is None and reset.drafts is None
    assert after.state == w.MOVING and after.drafts == 10 and after.accepted == 10


def test_a_restart_is_seen_even_when_the_new_counters_are_higher():
    bigger = dataclasses.replace(START + [4] * 500, start=START.start + 60)
    _, iv = observed(watch(), START, bigger)
    assert iv.state == w.RESET


def test_one_decreasing_counter_is_a_reset():
    _, iv = observed(watch(), START, dataclasses.replace(START + [1] * 5, generated=10))
    assert iv.state == w.RESET


def test_a_page_without_speculative_counters_or_without_vllm():
    wt = watch()
    plain = "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 3\n"
    assert wt.observe(plain, 1.0).state == w.NO_SPECULATION
    other = "# TYPE node_load1 gauge\nnode_load1 0.5\n"
    assert wt.observe(other, 2.0).state == w.NOT_VLLM


@pytest.mark.parametrize("text, words", [
    ("vllm:spec_decode_num_drafts_total{engine=0} 5\n", "line 1"),
    (page(START) + "this is not a metric line\n", "not Prometheus text"),
    (page(START).replace('position="0"} 30', 'position="0"} NaN'), "finite number"),
    (page(START) + "x" * (4 * 1024 * 1024), "over 4 MB"),
])
def test_an_unreadable_page_is_a_clear_line_and_the_last_good_reading_stays(text, words):
    wt = watch()
    wt.observe(page(START), 1000.0)
    bad = wt.observe(text, 1010.0)
    assert bad.state == w.UNREADABLE and words in bad.message
    assert bad.alpha is None and bad.drafts is None
    good = wt.observe(page(START + [4] * 10), 1020.0)
    assert good.state == w.MOVING and good.drafts == 10
    assert good.started == 1000.0


def test_contradicting_counters_are_not_stored_as_a_measurement():
    lying = dataclasses.replace(START + [1] * 10, accepted_per_position=(200, 40, 20, 10))
    _, iv = observed(watch(), START, lying)
    assert iv.state == w.UNREADABLE and iv.alpha is None and "nothing stored" in iv.message


def test_the_verdict_warns_below_the_break_even_and_holds_above_it():
    break_even = break_even_of(COSTS, 1, 2)
    assert expected_tokens(break_even, 2) == pytest.approx(1.5)
    base = Counts(drafts=0, accepted_per_position=(0, 0), generated=0, running=1)
    wt = watch(plan_at(2, alpha=0.5), COSTS, window=1)
    high = base + [2, 2, 1] * 100  # alpha 500 / 600 = 0.83
    low = high + [0] * 300  # alpha 0
    _, good, bad = observed(wt, base, high, low)
    assert good.break_even == pytest.approx(break_even)
    assert good.planned_k == 2 and good.verdict == w.DRIFT  # 0.83 is far from the plan's 0.5
    assert bad.verdict == w.WARNING and "stops paying" in bad.lines[0]
    assert bad.window_high < break_even


def test_the_verdict_pools_the_last_intervals():
    base = Counts(drafts=0, accepted_per_position=(0, 0), generated=0, running=1)
    wt = watch(plan_at(2, alpha=0.6), COSTS, window=3)
    steps = [base]
    for _ in range(3):
        steps.append(steps[-1] + [2, 1, 0] * 20)  # alpha 3/5 = 0.6 each time
    steps.append(steps[-1] + [0] * 20)  # one bad interval among three
    ivs = observed(wt, *steps)
    assert [iv.verdict for iv in ivs[1:4]] == [w.HOLDS] * 3
    last = ivs[-1]
    # (60 + 60 + 0) / (100 + 100 + 20): pooled, not the last interval alone
    assert last.window_alpha == pytest.approx(120 / 220)
    assert last.alpha == 0.0


def test_no_break_even_where_the_plan_does_not_speculate_or_without_costs():
    base = Counts(drafts=0, accepted_per_position=(0, 0), generated=0, running=1)
    _, iv = observed(watch(plan_at(0), COSTS), base, base + [1] * 10)
    assert iv.break_even is None and iv.planned_k == 0
    assert any("does not speculate at batch 1" in x for x in iv.lines)
    _, iv = observed(watch(plan_at(2), None), base, base + [1] * 10)
    assert iv.break_even is None and any("No costs file" in x for x in iv.lines)


def test_a_k_that_never_pays_warns():
    dear = step_costs({"passes": [
        {"model": "target", "batch": 1, "tokens": 1, "median_ms": 10.0},
        {"model": "draft", "batch": 1, "tokens": 1, "median_ms": 20.0},
        *({"model": "target", "batch": 1, "tokens": t, "median_ms": 11.0} for t in (2, 3))]})
    base = Counts(drafts=0, accepted_per_position=(0, 0), generated=0, running=1)
    _, iv = observed(watch(plan_at(2), dear), base, base + [2] * 50)
    assert iv.break_even is None and iv.verdict == w.WARNING


def test_the_batch_falls_back_to_the_last_one_seen_when_the_server_looked_idle():
    wt = watch()
    quiet = dataclasses.replace(START + [1] * 5, running=0)
    _, first, second = observed(wt, START, quiet, quiet + [1] * 10)
    assert first.batch == 2
    assert second.batch == 2 and "last one seen" in second.batch_note


def test_the_batch_is_the_mean_over_the_intervals_engine_steps_from_vllms_counters():
    """Four requests ran together and finished between two scrapes: the running gauge says 0
    at both, vLLM's step count says 4. 40 request-steps (drafts), each of one token plus the
    2 it accepted, over 10 engine steps: (120 - 80) / 10 = 4 requests a step."""
    idle = dataclasses.replace(START, running=0, steps=500)
    after = dataclasses.replace(idle + [2] * 40, steps=510)
    _, iv = observed(watch(plan_at(4), COSTS), idle, after)
    assert iv.state == w.MOVING
    assert iv.batch == 4 and iv.batch_mean == pytest.approx(4.0) and iv.batch_steps == 10
    assert iv.batch_note is None


def test_without_vllms_step_count_the_batch_is_the_gauge_and_the_interval_says_so():
    quiet = dataclasses.replace(START, running=0)
    _, iv = observed(watch(), quiet, quiet + [2] * 40)
    assert iv.batch == 1
    assert iv.batch_note.startswith("vLLM's /metrics has no vllm:iteration_tokens_total "
                                    "histogram, which would give the mean batch over the "
                                    "interval, and no requests were running at either scrape")
    assert iv.batch_note.endswith("batch 1 assumed")


def test_a_plan_is_read_from_the_json_specscope_plan_prints():
    data = json.loads((REPO_ROOT / "measurements/schedule/shipped-cpu-plan.json").read_text())
    plan = w.read_plan(data)
    domains = data["plan"]["domains"]
    weights = sum(d["weight"] for d in domains)
    assumed = sum(d["weight"] * d["alpha"] for d in domains) / weights
    assert plan.assumed_alpha == pytest.approx(assumed)
    schedule = data["speculative_config"]["num_speculative_tokens_per_batch_size"]
    assert [list(r) for r in plan.ranges] == schedule
    for lo, hi, k in schedule:
        assert plan.k_at(lo) == k and plan.k_at(hi) == k
    assert plan.k_at(10 * schedule[-1][1]) == schedule[-1][2]  # past the last range


def test_a_plan_from_its_config_alone_a_bare_schedule_and_a_mix():
    plan = w.read_plan({"speculative_config": {"num_speculative_tokens": 3}})
    assert plan.k_at(1) == 3 and plan.k_at(10_000) == 3 and plan.assumed_alpha is None
    bare = w.read_plan([[1, 4, 2], [5, 8, 0]])
    assert bare.k_at(4) == 2 and bare.k_at(6) == 0
    mix = w.read_plan({"plan": {"ranges": [[1, 8, 2]], "domains": [
        {"alpha": 0.8, "weight": 3}, {"alpha": 0.4, "weight": 1}]}})
    assert mix.assumed_alpha == pytest.approx(0.7)
    assert any("weighted mean" in n for n in mix.notices)
    off = w.read_plan({"plan": {"ranges": []}, "speculative_config": None})
    assert off.k_at(1) == 0


@pytest.mark.parametrize("data", [{}, "plan", {"plan": {"ranges": [[0, 4, 2]]}},
                                  {"plan": {"ranges": [[1, 4, -1]]}}, [[4, 1, 2]]])
def test_a_file_that_is_not_a_plan_is_refused(data):
    with pytest.raises(w.WatchError):
        w.read_plan(data)


# ---- over HTTP -------------------------------------------------------------------------------


def test_scraping_a_server_and_a_gap_when_it_stops_answering():
    with PageServer() as server:
        wt = w.Watch("prod", server.url, timeout_s=2.0)
        server.page = page(START)
        assert wt.scrape().state == w.STARTED
        server.page = page(START + [4] * 10)
        assert wt.scrape().state == w.MOVING
        url = server.url
    gap = w.Watch("prod", url, timeout_s=1.0)
    gap.previous = wt.previous
    iv = gap.scrape()
    assert iv.state == w.GAP and "not answering" in iv.message
    assert iv.alpha is None and iv.drafts is None
    assert gap.previous is wt.previous  # the next reading counts from the last good one


def test_a_slow_server_is_a_gap_within_the_timeout():
    with PageServer() as server:
        server.page, server.delay_s = page(START), 1.5
        iv = w.Watch("prod", server.url, timeout_s=0.3).scrape()
        assert iv.state == w.GAP and "within 0.3 s" in iv.message


def test_a_server_that_trickles_its_body_is_a_gap_at_the_deadline():
    """Every byte comes within any per-read timeout; the whole answer does not."""
    with PageServer() as server:
        server.page, server.trickle_s = page(START), 0.2
        found: list[w.Interval] = []
        scraping = threading.Thread(
            target=lambda: found.append(w.Watch("prod", server.url, timeout_s=1.0).scrape()),
            daemon=True)
        scraping.start()
        scraping.join(timeout=3.0)
        assert found, "the scrape was still reading 3 s after its 1 s deadline"
        assert found[0].state == w.GAP and "no whole answer" in found[0].message
        assert "within 1 s" in found[0].message


@pytest.mark.parametrize("status, kind, words", [
    (404, "text/plain", "HTTP 404"),
    (200, "text/html", "text/html"),
])
def test_an_address_that_is_not_vllm(status, kind, words):
    with PageServer() as server:
        server.page, server.status, server.content_type = "<html></html>", status, kind
        iv = w.Watch("prod", server.url, timeout_s=2.0).scrape()
        assert iv.state == w.NOT_VLLM and words in iv.message


def test_a_redirect_is_not_followed():
    with PageServer() as target, PageServer() as server:
        target.page = page(START)
        server.status = 302
        server.extra_headers = {"Location": target.url + "/metrics"}
        iv = w.Watch("prod", server.url, timeout_s=2.0).scrape()
        assert iv.state == w.NOT_VLLM and "not followed" in iv.message
        assert target.requests == 0


def test_a_huge_body_is_read_only_up_to_the_limit():
    with PageServer() as server:
        server.page = b"#" * (w.MAX_METRICS_BYTES + 100_000)
        iv = w.Watch("prod", server.url, timeout_s=5.0).scrape()
        assert iv.state == w.UNREADABLE and "more than 4 MB" in iv.message


def test_the_batch_mix_is_the_share_of_time_at_each_batch():
    intervals = [
        {"state": "moving", "batch": 1, "started": 0, "ended": 10, "drafts": 5},
        {"state": "moving", "batch": 4, "started": 10, "ended": 40, "drafts": 5},
        {"state": "flat", "batch": None, "started": 40, "ended": 50, "generated": 0},
        {"state": "gap", "ended": 60},
    ]
    mix = w.batch_mix(intervals)
    assert mix == {1: 0.25, 4: 0.75}
    assert w.batch_mix_text(mix) == "1=0.25,4=0.75"


def test_a_page_missing_the_per_position_series_gives_no_counted_alpha():
    text = "\n".join(line for line in page(START).splitlines() if "per_pos" not in line) + "\n"
    later = "\n".join(line for line in page(START + [2] * 10).splitlines()
                      if "per_pos" not in line) + "\n"
    wt = watch()
    wt.observe(text, 0.0)
    iv = wt.observe(later, 10.0)
    assert iv.state == w.MOVING and iv.alpha is None and not iv.full_k
    assert iv.draft_acceptance_rate == pytest.approx(20 / 40)


def test_a_page_missing_the_draft_tokens_is_not_a_measurement():
    def without_tokens(c: Counts) -> str:
        return "\n".join(line for line in page(c).splitlines()
                         if "num_draft_tokens" not in line) + "\n"

    wt = watch()
    wt.observe(without_tokens(START), 0.0)
    iv = wt.observe(without_tokens(START + [1] * 10), 10.0)
    assert iv.state == w.UNREADABLE and iv.alpha is None
    assert "lacks vllm:spec_decode_num_draft_tokens_total" in iv.message


def test_acceptance_by_position_names_the_best_k_where_it_differs_from_the_plans():
    """cycle(1, k) = (2k + 11) / 10: with every draft accepting the first token and rarely
    more, k = 1 pays best; the plan's k = 4 is named against it."""
    base = Counts(drafts=0, accepted_per_position=(0, 0, 0, 0), generated=0, running=1)
    steep = base + [1] * 90 + [2] * 10  # survival 1.0, 0.1, 0, 0
    _, iv = observed(watch(plan_at(4), COSTS), base, steep)
    assert iv.per_position_acceptance == pytest.approx([1.0, 0.1, 0.0, 0.0])
    best = w.best_k_by_position(COSTS, 1, [1.0, 0.1, 0.0, 0.0])
    assert best[0] == 1 and best[1] == pytest.approx(2 / 1.3)
    line = next(line for line in iv.lines if line.startswith("By position"))
    assert "best k at batch 1 on these costs is 1" in line and "plan says k = 4" in line


def test_by_position_says_nothing_where_it_agrees_with_the_plan():
    base = Counts(drafts=0, accepted_per_position=(0, 0, 0, 0), generated=0, running=1)
    _, iv = observed(watch(plan_at(1), COSTS), base, base + [1] * 90 + [2] * 10)
    assert not any(line.startswith("By position") for line in iv.lines)
