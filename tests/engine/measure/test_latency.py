"""Latency at a request rate: the Poisson arrival schedule, each request's TTFT and TPOT,
percentiles, and a rate's summary."""

from __future__ import annotations

import math
import statistics

import pytest

from engine.measure.latency import (
    RequestTiming,
    median_summary,
    parse_rates,
    peak_in_flight,
    percentile,
    poisson_arrivals,
    summarize,
    table,
)


def gaps(times: list[float]) -> list[float]:
    return [b - a for a, b in zip(times, times[1:], strict=False)]


def test_the_schedule_is_seeded_starts_at_zero_and_rises():
    times = poisson_arrivals(2.0, 50, seed=7)
    assert len(times) == 50 and times[0] == 0.0
    assert all(g > 0 for g in gaps(times))
    assert poisson_arrivals(2.0, 50, seed=7) == times  # the same for every policy
    assert poisson_arrivals(2.0, 50, seed=8) != times


def test_gaps_are_exponential_with_mean_one_over_the_rate():
    rate, n = 4.0, 20_000
    g = gaps(poisson_arrivals(rate, n + 1, seed=1))
    mean = statistics.fmean(g)
    # the mean within 4 standard errors (an exponential's sd equals its mean)
    assert abs(mean - 1 / rate) < 4 * (1 / rate) / math.sqrt(n)
    # exponential, not merely the right mean: P(gap > t) = exp(-rate t) at several t
    for t in (0.1, 0.25, 0.5, 1.0):
        expected = math.exp(-rate * t)
        share = sum(x > t for x in g) / n
        assert abs(share - expected) < 4 * math.sqrt(expected * (1 - expected) / n), t
    # and no more regular than that: the coefficient of variation is 1 (0 for a fixed gap)
    assert statistics.stdev(g) / mean == pytest.approx(1.0, abs=0.05)


def test_rates_scale_the_same_draws():
    slow, fast = poisson_arrivals(1.0, 30, seed=3), poisson_arrivals(4.0, 30, seed=3)
    assert fast == pytest.approx([t / 4 for t in slow])


def test_a_duration_keeps_only_the_arrivals_before_it():
    full = poisson_arrivals(2.0, 1000, seed=0)
    cut = poisson_arrivals(2.0, 1000, seed=0, duration=10.0)
    assert cut == [t for t in full if t < 10.0]
    assert 5 < len(cut) < 40  # about 20 expected


@pytest.mark.parametrize(("rate", "count", "duration"), [(0, 5, None), (-1, 5, None),
                                                         (math.inf, 5, None), (1, 0, None),
                                                         (1, 5, 0)])
def test_a_schedule_refuses_nonsense(rate, count, duration):
    with pytest.raises(ValueError, match="must be"):
        poisson_arrivals(rate, count, 0, duration)


def test_rates_parse_sorted_and_unique():
    assert parse_rates("4, 0.5,1,2,1") == [0.5, 1.0, 2.0, 4.0]


@pytest.mark.parametrize(("text", "message"), [
    ("", "at least one request rate"), (" , ", "at least one request rate"),
    ("1,fast", "must be a number of requests per second, got 'fast'"),
    ("0,1", "more than 0 .* got '0'"), ("-2", "more than 0"), ("nan", "more than 0"),
    ("inf", "more than 0"), ("5000", "at most 1000"),
])
def test_bad_rates_get_a_clear_message(text, message):
    with pytest.raises(ValueError, match=message):
        parse_rates(text)


def test_percentiles_interpolate_between_ranks():
    values = [15.0, 20.0, 35.0, 40.0, 50.0]
    assert percentile(values, 0) == 15.0
    assert percentile(values, 100) == 50.0
    assert percentile(values, 50) == 35.0
    assert percentile(values, 40) == pytest.approx(29.0)  # rank 1.6: 20 + 0.6 * 15
    assert percentile([3.0, 1.0, 2.0], 50) == 2.0  # sorted first
    assert percentile([7.0], 99) == 7.0
    # p99 of 1..100: rank 98.01, between 99 and 100
    assert percentile([float(x) for x in range(1, 101)], 99) == pytest.approx(99.01)
    with pytest.raises(ValueError, match="no values"):
        percentile([], 50)


# Three requests as a stream client times them (perf_counter seconds, less the run's start):
# 5 tokens each, chunks of 1 then 2 tokens as speculative steps bring them.
REAL = [
    RequestTiming(0, scheduled=0.0, sent=0.000214, first=0.061377, last=0.172960, tokens=5),
    RequestTiming(1, scheduled=0.412, sent=0.412380, first=0.498871, last=0.641203, tokens=5),
    RequestTiming(2, scheduled=0.530, sent=0.530117, first=0.690554, last=0.901118, tokens=5),
]


def test_ttft_and_tpot_of_one_request():
    r = REAL[1]
    assert r.ttft == pytest.approx(0.498871 - 0.412380)
    # four gaps between five tokens, whatever chunks carried them
    assert r.tpot == pytest.approx((0.641203 - 0.498871) / 4)
    assert RequestTiming(0, 0, 0.1, first=0.3, last=0.3, tokens=1).tpot is None
    failed = RequestTiming(0, 0, 0.1, error="the server went away")
    assert not failed.completed and failed.ttft is None and failed.tpot is None


def test_a_rates_summary_from_its_requests():
    lost = RequestTiming(3, scheduled=0.8, sent=0.8001, error="HTTP 500")
    s = summarize(2.0, [*REAL, lost])
    assert (s.requests, s.completed) == (4, 3)
    tpots = sorted((t.last - t.first) / 4 for t in REAL)
    assert s.tpot_p50_ms == pytest.approx(1000 * tpots[1])
    assert s.tpot_p99_ms == pytest.approx(1000 * (tpots[1] + 0.98 * (tpots[2] - tpots[1])))
    assert s.ttft_p50_ms == pytest.approx(1000 * sorted(t.ttft for t in REAL)[1])
    # from the first send to the last answer
    assert s.seconds == pytest.approx(0.901118 - 0.000214)
    assert s.tok_s == pytest.approx(15 / s.seconds)
    assert s.achieved_rate == pytest.approx(3 / s.seconds)
    assert s.peak_in_flight == 2  # requests 1 and 2 overlap; 0 ended before 1 was sent
    assert s.drawn_rate == pytest.approx(3 / 0.8)  # 4 arrivals over 0.8 s
    assert s.send_lag_max_ms == pytest.approx(1000 * 0.000380)  # request 1's


def test_nothing_completed_leaves_the_latencies_empty():
    s = summarize(1.0, [RequestTiming(0, 0, 0.0, error="refused")])
    assert s.completed == 0 and s.tpot_p50_ms is None and s.tok_s == 0
    assert s.drawn_rate is None  # one request: no gap to measure a rate by
    assert "| 1 | - | off | - | - | - | 0.0 | 0/1 |" in table({"off": [s]})


def test_peak_in_flight_counts_overlaps():
    def r(sent, last):
        return RequestTiming(0, sent, sent, first=sent, last=last, tokens=2)
    assert peak_in_flight([r(0, 1), r(0.5, 2), r(0.6, 0.7), r(3, 4)]) == 3
    assert peak_in_flight([r(0, 1), r(1, 2)]) == 1  # one leaves as the next arrives


def test_the_table_has_a_row_per_rate_and_policy():
    rows = {"off": [summarize(1.0, REAL), summarize(4.0, REAL)],
            "k = 2": [summarize(1.0, REAL[:2]), summarize(4.0, REAL[:2])]}
    text = table(rows).splitlines()
    assert text[0].startswith("| rate (req/s) | drawn | policy | TPOT p50 (ms) | TPOT p99")
    assert [line.split("|")[1:4:2] for line in text[2:]] == [
        [" 1 ", " off "], [" 1 ", " k = 2 "], [" 4 ", " off "], [" 4 ", " k = 2 "]]
    assert "| 3/3 |" in text[2] and "| 2/2 |" in text[3]


def test_passes_combine_by_the_median_of_each_figure():
    quick = summarize(2.0, REAL)
    stalled = summarize(2.0, [RequestTiming(i, t.scheduled, t.sent, t.first, t.last + 3.0,
                                            t.tokens) for i, t in enumerate(REAL)])
    lost = summarize(2.0, [RequestTiming(0, 0.0, 0.0, error="gone")])
    combined = median_summary([quick, stalled, quick])
    assert combined.tpot_p50_ms == quick.tpot_p50_ms  # the stalled pass is out
    assert combined.tok_s == quick.tok_s
    assert (combined.requests, combined.completed) == (9, 9)
    assert combined.peak_in_flight == max(quick.peak_in_flight, stalled.peak_in_flight)
    # a pass with no completed request has no TPOT: the median of the others
    assert median_summary([quick, lost]).tpot_p50_ms == quick.tpot_p50_ms
    with pytest.raises(ValueError, match="different rates"):
        median_summary([quick, summarize(4.0, REAL)])
