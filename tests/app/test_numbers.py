""""Use these numbers" carries a measured acceptance by position to the slider: a probe's row
and a calibration's, where every position was measured; prompt lookup's pi instead."""

from __future__ import annotations

from dataclasses import replace

from app.traffic.numbers import by_position, calibration_numbers, row_numbers
from engine.measure.probe import ProbeRow
from engine.serving.calibrate import calibrate


def probe_row(**changes) -> ProbeRow:
    row = ProbeRow("code", 0.0, 3, 4, 100, 30, 50, 90, 70, 0.7, [0.6, 0.8], None, None, None,
                   None, [0.8, 0.5, 0.3], [0.7, 0.49, 0.34], 0.55, 2.6, 0.1, 1.2, 20.0, 1.4,
                   3, 1.5)
    return replace(row, **changes)


def test_a_probe_row_brings_its_curve_and_its_drafter():
    numbers = row_numbers(probe_row(drafter="medusa"))
    assert numbers["positions"] == "0.8,0.5,0.3" and numbers["preset"] == "medusa"
    lookup = row_numbers(probe_row(drafter="ngram", proposal_share=0.3))
    assert "positions" not in lookup and lookup["pi"] == "0.30"
    assert by_position([0.8, None]) == {}


PAGE = """\
vllm:spec_decode_num_drafts_total{engine="0"} 100
vllm:spec_decode_num_draft_tokens_total{engine="0"} 300
vllm:spec_decode_num_accepted_tokens_total{engine="0"} 120
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",position="0"} 60
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",position="1"} 40
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",position="2"} 20
"""


def test_a_calibration_brings_the_counters_curve():
    rows = calibration_numbers(calibrate(PAGE))
    assert rows[0]["positions"] == "0.6,0.4,0.2"
