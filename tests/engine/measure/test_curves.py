"""The measured-curve file format: parsing, the errors it names, loading a folder."""

from __future__ import annotations

import json
import logging

import pytest

from engine.measure.curves import CurveError, Fit, load_curves, parse_curve

GOOD = {
    "label": "shipped pair on a laptop", "hardware": "laptop CPU", "target": "models/target",
    "draft": "models/draft", "k": 4, "alpha": 0.7,
    "points": [{"batch": 4, "speedup": 1.1, "tok_s_spec": 880.0, "tok_s_base": 800.0},
               {"batch": 1, "speedup": 1.3, "tok_s_spec": None, "tok_s_base": None}],
}


def test_a_good_curve_parses_with_points_in_batch_order_and_round_trips():
    curve = parse_curve(GOOD, "laptop.json")
    assert [p.batch for p in curve.points] == [1, 4]
    assert curve.points[1].tok_s_spec == 880.0 and curve.points[0].tok_s_base is None
    assert (curve.method, curve.pair, curve.fit, curve.source) == ("end-to-end", None, None,
                                                                  "laptop.json")
    assert parse_curve(json.loads(json.dumps(curve.to_json()))) == parse_curve(GOOD)


def test_optional_fields_are_read():
    curve = parse_curve(GOOD | {"pair": "shipped", "method": "predicted", "context": 256,
                                "fit": {"bandwidth_gb_s": 2.5, "gflops": 40}, "passes": [],
                                "policy": "schedule"})
    assert curve.fit == Fit(2.5e9, 40e9)
    assert (curve.pair, curve.method, curve.context) == ("shipped", "predicted", 256)
    assert curve.policy == "schedule" and parse_curve(GOOD).policy is None
    assert parse_curve(curve.to_json()).policy == "schedule"


def test_a_schedule_says_which_k_ran_at_each_batch():
    curve = parse_curve(GOOD | {"policy": "schedule", "schedule": [[1, 2, 3], [3, 64, 1]]})
    assert [curve.k_at(b) for b in (1, 2, 3, 64, 65)] == [3, 3, 1, 1, None]
    assert parse_curve(curve.to_json()) == curve
    assert parse_curve(GOOD).k_at(64) == 4  # one fixed k: the same at every batch


@pytest.mark.parametrize(("change", "named"), [
    ({"alpha": 1.5}, '"alpha" must be from 0 to 1'),
    ({"alpha": "high"}, '"alpha" must be a number'),
    ({"k": 2.5}, '"k" must be a whole number'),
    ({"label": ""}, '"label" must be a non-empty string'),
    ({"points": []}, '"points" must be a non-empty list'),
    ({"points": [{"batch": 1}]}, '"points"[0]."speedup" must be a number'),
    ({"points": [{"batch": 0, "speedup": 1}]}, '"points"[0]."batch" must be above 0'),
    ({"points": [{"batch": 1, "speedup": 1, "tok_s_spec": "fast"}]}, '"tok_s_spec"'),
    ({"method": "guessed"}, '"method" must be one of'),
    ({"fit": {"bandwidth_gb_s": 1}}, '"fit"."gflops"'),
    ({"policy": 2}, '"policy" must be a non-empty string'),
    ({"policy": " "}, '"policy" must be a non-empty string'),
    ({"schedule": {"1": 2}}, '"schedule" must be a list'),
    ({"schedule": [[4, 2, 1]]}, '"schedule"[0] must be [lo, hi, k]'),
    ({"schedule": [[1, 2, -1]]}, '"schedule"[0] must be [lo, hi, k]'),
])
def test_malformed_curves_name_what_is_wrong(change, named):
    with pytest.raises(CurveError, match=None) as caught:
        parse_curve(GOOD | change)
    assert named in str(caught.value)


def test_not_an_object_is_refused():
    with pytest.raises(CurveError, match="one JSON object"):
        parse_curve([GOOD])


def test_loading_a_folder_skips_bad_files_with_a_warning(tmp_path, caplog):
    (tmp_path / "a-good.json").write_text(json.dumps(GOOD))
    (tmp_path / "b-broken.json").write_text("{not json")
    (tmp_path / "c-wrong.json").write_text(json.dumps(GOOD | {"k": "four"}))
    (tmp_path / "notes.txt").write_text("ignored")
    with caplog.at_level(logging.WARNING, logger="specscope"):
        curves, problems = load_curves(tmp_path)
    assert [c.source for c in curves] == ["a-good.json"]
    assert [p.split(" ")[0] for p in problems] == ["b-broken.json", "c-wrong.json"]
    assert "k" in problems[1]
    assert len([r for r in caplog.records if "was skipped" in r.getMessage()]) == 2


def test_a_missing_folder_holds_no_curves(tmp_path):
    assert load_curves(tmp_path / "absent") == ([], [])
