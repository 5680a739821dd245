"""specscope roofline on the tiny pair: the sweep's table, curve file and fit."""

from __future__ import annotations

import json

import pytest

from engine.cli import main
from engine.measure.curves import parse_curve


def test_roofline_command_writes_a_curve_the_page_can_load(model_dirs, tmp_path, capsys):
    out = tmp_path / "sweep.json"
    code = main(["roofline", "--target", model_dirs["target"], "--draft", model_dirs["good"],
                 "--batches", "1,2,4", "--k", "2", "--context", "8", "--repeats", "3",
                 "--warmup", "1", "--models", "shipped", "--out", str(out), "--quiet",
                 "--device", "cpu"])
    assert code == 0
    printed = capsys.readouterr().out
    assert "| B | t_p(B,1) ms | t_p(B,3) ms | t_q(B,1) ms |" in printed
    assert "Fitted roofline of this machine" in printed
    data = json.loads(out.read_text())
    curve = parse_curve(data)
    assert [p.batch for p in curve.points] == [1, 2, 4]
    assert (curve.k, curve.alpha, curve.pair, curve.method, curve.context) == (
        2, 0.7, "shipped", "predicted", 8)
    assert curve.fit is not None and curve.fit.bandwidth > 0 and curve.fit.flops > 0
    # 3 batches x (target at T = 1, 2, 3 and the draft's step), each with a positive spread
    assert len(data["passes"]) == 12
    for p in data["passes"]:
        assert 0 < p["q1_ms"] <= p["median_ms"] <= p["q3_ms"]
    for point in curve.points:
        target = next(p for p in data["passes"]
                      if (p["model"], p["batch"], p["tokens"]) == ("target", point.batch, 1))
        assert point.tok_s_base == pytest.approx(point.batch * 1000 / target["median_ms"])
        assert point.tok_s_spec == pytest.approx(point.tok_s_base * point.speedup)


def test_roofline_command_refuses_bad_arguments(capsys):
    assert main(["roofline", "--alpha", "2", "--quiet"]) == 2
    assert "--alpha must be in 0..1" in capsys.readouterr().err
