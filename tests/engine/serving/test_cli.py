"""What ``specscope vllm status`` and ``specscope sweep`` report about a server's drafts: the
figures of engine.analytic.acceptance, and a plain sentence, never a crash, when there is
nothing to divide by."""

from __future__ import annotations

import pytest

from engine.serving.cli import acceptance_line
from engine.serving.metrics import SpecCounters


def test_the_figures_come_from_the_counters():
    # 4 drafts of k = 3 accepting 3, 2, 1, 0: 6 accepted of 12, 6 + 4 - 1 = 9 trials.
    counts = SpecCounters(drafts=4, draft_tokens=12, accepted=6, per_position=[3, 2, 1])
    assert counts.draft_acceptance_rate == 0.5
    assert counts.mean_acceptance_length == 2.5
    assert counts.alpha_counted == pytest.approx(6 / 9)
    assert counts.per_position_acceptance == [0.75, 0.5, 0.25]
    assert acceptance_line(counts, 3) == ("counted alpha 0.667, draft acceptance rate 0.500, "
                                          "mean acceptance length 2.50 (k = 3)")


def test_no_drafts_is_no_data_not_a_division_by_zero():
    counts = SpecCounters(drafts=0, draft_tokens=0, accepted=0, per_position=[0, 0, 0, 0])
    assert counts.draft_acceptance_rate is None
    assert counts.mean_acceptance_length is None
    assert counts.alpha_counted is None
    assert counts.per_position_acceptance == [None] * 4
    assert acceptance_line(counts, 4).startswith("no drafts counted")


def test_counters_without_positions_leave_alpha_unknown_and_the_rest_shown():
    counts = SpecCounters(drafts=3, draft_tokens=12, accepted=5, per_position=[])
    assert acceptance_line(counts) == ("counted alpha n/a, draft acceptance rate 0.417, "
                                       "mean acceptance length 2.67")


def test_status_of_a_server_with_no_drafts_says_so(fake_server, monkeypatch, capsys):
    from engine.cli import main

    server = fake_server("no-drafts")
    monkeypatch.setenv("SPECSCOPE_VLLM_URL", server.url)
    assert main(["vllm", "status"]) == 0
    out = capsys.readouterr().out
    assert "drafts 0, draft tokens 0, accepted 0" in out
    assert "no drafts counted" in out
    assert "per-position acceptance" not in out


def test_a_sweep_whose_server_drafts_nothing_reports_no_acceptance(fake_server, capsys):
    from engine.cli import main

    spec, base = fake_server("no-drafts"), fake_server("no-drafts")
    code = main(["sweep", "--url", spec.url, "--baseline-url", base.url, "--batch", "1",
                 "--new-tokens", "4"])
    assert code == 0
    out = capsys.readouterr().out
    assert "| 1 |" in out
    assert "no drafts counted" in out
