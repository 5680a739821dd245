"""Reading vLLM's speculative-decoding counters from a /metrics page, the one parser every
reader uses: by label set, positions apart, the watch's gauges beside them, other metrics and
``_created`` timestamps ignored, unusable text refused in words. (What the calibration makes of
the counts: test_calibrate.py; the watch: test_watch.py.)"""

from __future__ import annotations

import pytest

from engine.serving.metrics import (
    MAX_METRICS_BYTES,
    MetricsError,
    SpecCounters,
    read_counts,
    read_page,
)

PAGE = """\
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 3.0
# TYPE vllm:spec_decode_num_drafts_total counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="m"} 5.0
vllm:spec_decode_num_drafts_created{engine="0",model_name="m"} 1.7e9
vllm:spec_decode_num_drafts_total{engine="1",model_name="m"} 2.0
# TYPE vllm:spec_decode_num_draft_tokens_total counter
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="m"} 15.0
# TYPE vllm:spec_decode_num_accepted_tokens_total counter
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="m"} 7.0
# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_total counter
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="0"} 4.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="1"} 3.0
"""


def test_counts_by_label_set_with_positions_apart():
    counts = read_counts(PAGE)
    assert counts == {
        (("engine", "0"), ("model_name", "m")): SpecCounters(5.0, 15.0, 7.0, [4.0, 3.0]),
        (("engine", "1"), ("model_name", "m")): SpecCounters(drafts=2.0),
    }


def test_one_read_gives_the_counters_summed_and_the_gauges():
    page = read_page(PAGE + "process_start_time_seconds 1.7e9\n")
    assert page.total() == SpecCounters(7.0, 15.0, 7.0, [4.0, 3.0])
    assert (page.running, page.generated, page.process_start) == (3.0, None, 1.7e9)
    assert page.vllm and page.present == {"num_drafts", "num_draft_tokens",
                                           "num_accepted_tokens",
                                           "num_accepted_tokens_per_pos"}


@pytest.mark.parametrize("text,message", [
    ("", "hold no vllm:spec_decode_* counters"),
    ("vllm:num_requests_running 1\n", "hold no vllm:spec_decode_* counters"),
    ("<html>502 Bad Gateway</html>", "not Prometheus text format"),
    (PAGE.replace("} 5.0", "} NaN"), "is nan: a counter must be a finite number"),
    (PAGE.replace("} 5.0", "} -5.0"), "cannot be negative"),
    (PAGE.replace('position="1"', 'position="one"'), "position must be a number"),
    (PAGE.replace('position="1"', 'position="64"'), "position must be a number 0..63"),
    (PAGE.replace('position="1"', 'position="3"'), r"positions \[0, 3\] are not 0..k-1"),
])
def test_unusable_text_is_refused_in_words(text, message):
    with pytest.raises(MetricsError, match=message.replace("*", r"\*")):
        read_counts(text, "the page")


def test_a_page_over_the_limit_is_refused_before_parsing():
    with pytest.raises(MetricsError, match="over 4 MB"):
        read_counts("#" * (MAX_METRICS_BYTES + 1))
