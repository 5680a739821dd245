"""The batch section's note where a measured curve on its chart and the model part by more
than 20 %: named at those batches, with both speedups, and absent where they agree."""

from __future__ import annotations

import json
import re

import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from app.model_vs_measured import LIMIT, disagreements, model_speedup
from app.roofline import parse_roofline_state, setting_of
from engine.analytic.break_even import BATCH_MAX
from engine.measure.curves import parse_curve
from engine.settings import Settings

QUERY = "models=shipped&hardware=this-machine&batch=64"
BATCHES = (1, 8, 64)


def curve(policy: str, k: int, alpha: float, speedups, schedule=None) -> dict:
    data = {"label": f"sweep {policy}", "hardware": "this machine", "target": "t", "draft": "d",
            "k": k, "alpha": alpha, "pair": "shipped", "method": "end-to-end", "policy": policy,
            "points": [{"batch": b, "speedup": s} for b, s in zip(BATCHES, speedups,
                                                                   strict=True)]}
    return data | ({"schedule": schedule} if schedule else {})


def setting():
    state, _ = parse_roofline_state([tuple(kv.split("=")) for kv in QUERY.split("&")])
    # as the page sets it: "this machine" with the overheads of its costs file
    return setting_of(state, [], Settings(load_models=False).machine_costs)


def model_at(data: dict, batch: int) -> float:
    return model_speedup(setting(), parse_curve(data), batch)[1]


def with_model_times(policy, k, alpha, factors, schedule=None) -> dict:
    """A curve whose measured speedup is the model's times ``factors`` at each batch."""
    base = curve(policy, k, alpha, [1.0] * len(BATCHES), schedule)
    return curve(policy, k, alpha, [model_at(base, b) * f for b, f in zip(BATCHES, factors,
                                                                          strict=True)],
                 schedule)


def page(tmp_path, *curves: dict) -> str:
    for i, data in enumerate(curves):
        (tmp_path / f"c{i}.json").write_text(json.dumps(data))
    settings = Settings(load_models=False, measurements_dir=tmp_path)
    with TestClient(create_app(settings), base_url="http://127.0.0.1") as c:
        response = c.get(f"/?{QUERY}")
    assert response.status_code == 200
    return response.text


def note(html: str) -> str | None:
    match = re.search(r'<div class="model-vs-measured"[^>]*>(.*?)</div>', html, re.S)
    return match and re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", match.group(1)))


def test_a_curve_off_by_more_than_20_percent_is_named_at_those_batches(tmp_path):
    data = with_model_times("k = 1", 1, 0.6, (1.0, 1.1, 1 / 0.6))  # at 64 the model is 0.6x
    text = note(page(tmp_path, data))
    assert text is not None, "a >20 % disagreement must be said beside the chart"
    measured_64, model_64 = data["points"][2]["speedup"], model_at(data, 64)
    assert f"measured {measured_64:.2f}× at batch 64, the model {model_64:.2f}×" in text
    assert "batch 1," not in text and "batch 8," not in text  # these agree within 20 %
    assert "k = 1 (α = 0.60)" in text


def test_no_note_where_every_drawn_curve_agrees_within_20_percent(tmp_path):
    html = page(tmp_path, with_model_times("k = 2", 2, 0.7, (1.0, 0.85, 1.18)))
    assert 'class="measured ' in html  # the curve is drawn
    assert note(html) is None


def test_only_the_curve_that_disagrees_is_named(tmp_path):
    text = note(page(tmp_path, with_model_times("k = 2", 2, 0.7, (1.0, 1.0, 1.0)),
                     with_model_times("k = 4", 4, 0.7, (1.0, 1.3, 1.0))))
    assert "k = 4" in text and "at batch 8" in text and "k = 2" not in text


def test_a_schedule_is_held_against_the_model_at_the_k_it_ran_at_each_batch(tmp_path):
    schedule = [[1, 4, 3], [5, 64, 1]]
    data = with_model_times("schedule", 3, 0.6, (1.0, 0.7, 1.0), schedule)
    text = note(page(tmp_path, data))
    assert f"at batch 8 (k = 1), the model {model_at(data, 8):.2f}×" in text
    # priced at k = 1 there, not at the file's largest k = 3
    assert model_at(data, 8) != pytest.approx(model_at(curve("x", 3, 0.6, [1] * 3), 8))


def test_the_limit_is_20_percent_of_the_measured_speedup_either_way():
    s = setting()
    for factor, named in ((1 / 1.19, False), (1 / 1.21, True), (1 / 0.79, True),
                          (1 / 0.81, False)):
        data = with_model_times("k = 1", 1, 0.6, (factor, 1.0, 1.0))
        found = disagreements(s, [parse_curve(data)], BATCH_MAX)
        assert bool(found) is named, factor
    assert LIMIT == 0.20


def test_batches_the_chart_does_not_draw_are_not_compared():
    data = with_model_times("k = 1", 1, 0.6, (1.0, 1.0, 2.0))
    assert disagreements(setting(), [parse_curve(data)], shown_up_to=8) == []
