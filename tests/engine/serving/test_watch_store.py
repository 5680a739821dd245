"""The watch's history: kept across a restart, bounded per deployment."""

from __future__ import annotations

import pytest

from engine.serving.watch.intervals import GAP, MOVING, Interval
from engine.serving.watch.store import WatchStore, WatchStoreError


def interval(name: str, at: float, state: str = MOVING, alpha: float | None = 0.7) -> Interval:
    return Interval(name, at, state, "m", started=at - 10, alpha=alpha, per_position_acceptance=[
        0.7, 0.5] if alpha else None)


def test_intervals_outlive_the_store_and_come_back_in_order(tmp_path):
    path = str(tmp_path / "watch.db")
    store = WatchStore(path, kept=100)
    for i in range(5):
        store.add(interval("prod", 100.0 + i))
    store.add(interval("prod", 106.0, GAP, alpha=None))
    store.close()
    again = WatchStore(path, kept=100)
    rows = again.intervals("prod")
    assert [r["ended"] for r in rows] == [100, 101, 102, 103, 104, 106]
    assert rows[0]["per_position_acceptance"] == [0.7, 0.5]
    assert rows[-1]["state"] == GAP and rows[-1]["alpha"] is None
    assert [r["ended"] for r in again.intervals("prod", last=2)] == [104, 106]


def test_retention_is_per_deployment(tmp_path):
    store = WatchStore(str(tmp_path / "watch.db"), kept=3)
    for i in range(10):
        store.add(interval("a", float(i)))
    store.add(interval("b", 50.0))
    assert [r["ended"] for r in store.intervals("a")] == [7, 8, 9]
    assert len(store.intervals("b")) == 1
    assert store.deployments() == ["a", "b"]


def test_a_file_that_cannot_be_opened_says_so(tmp_path):
    (tmp_path / "dir.db").mkdir()
    with pytest.raises(WatchStoreError, match="could not be opened"):
        WatchStore(str(tmp_path / "dir.db"), kept=3)
