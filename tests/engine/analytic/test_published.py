"""The published measurements: every file follows the schema and cites its source; the loader
refuses a file that does not, naming what is wrong."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from engine.analytic import engines, own_sweeps, published
from engine.analytic.published import PublishedError, load_all, load_source

FILES = sorted(p for p in published.FOLDER.glob("*.json") if p != published.SPLIT_FILE)


def test_the_folder_holds_the_sources_of_issue_28():
    ids = {source.id for source in load_all()}
    assert {"gpt-fast-readme", "magicdec", "eagle3-sglang", "vllm-issue-49548"} <= ids


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_every_file_cites_its_source(path: Path):
    source = load_source(path)
    assert source.url.startswith("https://"), "a source is cited by its address"
    # a version pins what was read: a commit, an arXiv version, a dated comment
    assert re.search(r"[0-9a-f]{40}|v\d|\d{4}-\d{2}-\d{2}|undated", source.version)
    assert len(source.quote) > 40, "the quote is a sentence of the source, not a stub"
    assert source.hardware and source.software


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_every_point_says_how_it_was_read_and_what_it_measures(path: Path):
    for series in load_source(path).series:
        assert series.unit == published.QUANTITIES[series.quantity]
        for point in series.points:
            assert point.reading in published.READINGS
            assert point.value > 0
        if series.split in ("fit", "held_out"):
            # a compared series says where it ran (hardware, engine) and a context per point
            assert series.fields.get("hardware"), series.id
            assert series.fields.get("engine") in engines.ENGINES, series.id
            assert all(series.setting(point, "context") for point in series.points), series.id
            assert all(series.setting(point, "batch") for point in series.points), series.id


def test_a_source_missing_from_the_store_is_said_so():
    magicdec = next(s for s in load_all() if s.id == "magicdec")
    assert any("Table 3" in missing["what"] for missing in magicdec.not_found)


def test_fit_points_are_the_ones_fixed_in_advance():
    """gpt-fast's bf16 steps (one GPU and tensor parallel 2-8) fit the launch and the
    all-reduces' depth; vLLM's plain steps from two reports and issue 20780's EAGLE-3 chains
    fit vLLM's own times: 3 sources, 23 points. MagicDec's one quoted step time is held out,
    since one number never decides a term, and so are every other report's."""
    series = published.all_series(load_all())
    fitted = sorted(s.id for s in series.values() if s.split == "fit")
    assert fitted == ["gpt-fast-1gpu-bf16", "gpt-fast-tp-llama-2-70b", "gpt-fast-tp-llama-2-7b",
                      "gpt-fast-tp-llama-3.1-70b", "gpt-fast-tp-llama-3.1-8b",
                      "vllm-issue20780-llama31-8b-eagle3", "vllm-issue20780-llama31-8b-plain",
                      "vllm-pr17202-llama31-8b-plain"]
    assert {series[f].source_id for f in fitted} == {"gpt-fast-readme", "vllm-issue-20780",
                                                    "vllm-pr-17202"}
    assert sum(len(series[f].points) for f in fitted) == 14 + 1 + 6 + 1
    t_ar = series["magicdec-t-ar-llama-3.1-8b-a100"]
    assert t_ar.split == "held_out"
    assert [(p.batch, p.context) for p in t_ar.points] == [(32, 4000)]


def test_the_quoted_step_time_says_it_was_quoted_and_by_whom():
    t_ar = published.all_series(load_all())["magicdec-t-ar-llama-3.1-8b-a100"]
    (point,) = t_ar.points
    assert point.reading == published.QUOTED
    assert "issue 28" in point.get("quoted_by")


def _broken(tmp_path: Path, change) -> Path:
    source = published.FOLDER / "gpt-fast-readme.json"
    raw = json.loads(source.read_text())
    change(raw)
    path = tmp_path / "broken.json"
    path.write_text(json.dumps(raw))
    return path


@pytest.mark.parametrize("change, message", [
    (lambda r: r["source"].pop("url"), "'url' is missing"),
    (lambda r: r["series"][0]["points"][0].update(reading="guessed"), "'reading' must be"),
    (lambda r: r["series"][0]["points"][0].update(value=-1), "positive number"),
    (lambda r: r["series"][0].update(unit="ms"), "is in 'tokens/s'"),
    (lambda r: r["series"][0].update(split="fit"), "given in split.json, not here"),
    (lambda r: r["series"][0].update(id="new-series"), "no role for gpt-fast-readme/new-series"),
    (lambda r: r.update(schema="other"), "'schema' must be"),
    (lambda r: r["series"][0]["points"][0].update(reading=published.QUOTED), "'quoted_by'"),
])
def test_the_loader_names_what_is_wrong(tmp_path, change, message):
    with pytest.raises(PublishedError, match=message):
        load_source(_broken(tmp_path, change))


def test_the_split_is_one_file_with_a_role_for_every_series_and_no_other():
    split = published.load_split()
    loaded = {(s.source_id, s.id) for source in load_all() + own_sweeps.sources()
              for s in source.series}
    listed = {(source, series) for source, roles in split.items() for series in roles}
    assert loaded == listed


def test_a_role_the_split_does_not_know_is_refused(tmp_path):
    raw = json.loads(published.SPLIT_FILE.read_text())
    raw["sources"]["magicdec"]["magicdec-t-ar-llama-3.1-8b-a100"] = "tuned"
    (tmp_path / "split.json").write_text(json.dumps(raw))
    with pytest.raises(PublishedError, match="role must be one of"):
        published.load_split(tmp_path / "split.json")


def test_a_series_id_used_twice_is_refused(tmp_path):
    shutil.copy(published.SPLIT_FILE, tmp_path / "split.json")
    shutil.copy(published.FOLDER / "gpt-fast-readme.json", tmp_path / "a.json")
    shutil.copy(published.FOLDER / "gpt-fast-readme.json", tmp_path / "b.json")
    with pytest.raises(PublishedError, match="is in both a.json and b.json"):
        load_all(tmp_path)


def test_eagle3s_batch_64_figure_is_reference_only_with_the_abstracts_words():
    """SGLang drafts a tree there: reference only until trees are priced."""
    (source,) = [s for s in load_all() if s.id == "eagle3-paper"]
    assert "arxiv.org/abs/2503.01840" in source.url and "v3" in source.version
    assert "1.38x throughput improvement at a batch size of 64" in source.quote
    (series,) = source.series
    (point,) = series.points
    assert (series.split, series.quantity, point.batch, point.value) == (
        "reference", "speedup", 64, 1.38)
    assert point.reading == "exact (text)"
    # what the abstract does not say is marked as assumed, and the draft is priced as a chain
    assert "assumed" in source.hardware and "assumed" in series.label
    assert "not of its absolute speed" in series.fields["notes"]
    every = published.all_series(load_all())
    calibration = series.fields["calibration"]
    assert every[calibration["plain"]].split == "held_out"
    assert every[calibration["speculative"]].split == "reference"
