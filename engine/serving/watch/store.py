"""The watch's history in SQLite: one row per interval, per deployment, the oldest pruned.

A row is written with the pruning of that deployment's rows beyond ``kept`` in one
transaction, so a crash leaves the history whole; a restart of specscope reads it back. The
interval itself is stored as JSON
(:meth:`engine.serving.watch.intervals.Interval.to_json`), beside the columns the queries
need. One connection behind a lock, WAL journal and a busy timeout: the
page's server and a ``specscope watch --db`` on the same file take turns.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from engine.serving.watch.intervals import Interval

BUSY_TIMEOUT_S = 30.0
SCHEMA = """
CREATE TABLE IF NOT EXISTS watch_intervals (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    deployment TEXT NOT NULL,
    ended REAL NOT NULL,
    state TEXT NOT NULL,
    record TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS watch_by_deployment ON watch_intervals (deployment, id);
"""


class WatchStoreError(Exception):
    """The history cannot be read or written; says why."""


class WatchStore:
    def __init__(self, path: str, kept: int) -> None:
        if kept < 1:
            raise WatchStoreError("the watch must keep at least one interval per deployment")
        self.path, self.kept = path, kept
        self._lock = threading.Lock()
        try:
            if path != ":memory:":
                Path(path).parent.mkdir(parents=True, exist_ok=True)
            self.db = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, check_same_thread=False,
                                      isolation_level=None)
            if path != ":memory:":
                self.db.execute("PRAGMA journal_mode=WAL")
            self.db.executescript(SCHEMA)
        except (sqlite3.Error, OSError) as error:
            raise WatchStoreError(f"the watch's history at {path} could not be opened: "
                                  f"{error}") from error

    def add(self, interval: Interval) -> None:
        record = json.dumps(interval.to_json(), allow_nan=False)
        with self._errors("save an interval"), self._lock:
            self.db.execute("BEGIN IMMEDIATE")
            try:
                self.db.execute(
                    "INSERT INTO watch_intervals (deployment, ended, state, record) "
                    "VALUES (?, ?, ?, ?)",
                    (interval.deployment, interval.ended, interval.state, record))
                self.db.execute(
                    "DELETE FROM watch_intervals WHERE deployment = ? AND id <= (SELECT id "
                    "FROM watch_intervals WHERE deployment = ? ORDER BY id DESC LIMIT 1 "
                    "OFFSET ?)", (interval.deployment, interval.deployment, self.kept))
            except BaseException:
                self.db.execute("ROLLBACK")
                raise
            self.db.execute("COMMIT")

    def intervals(self, deployment: str, last: int | None = None) -> list[dict]:
        """The deployment's intervals, oldest first (the ``last`` ones only, if given)."""
        limit = -1 if last is None else max(0, last)
        with self._errors("read the intervals"), self._lock:
            rows = self.db.execute(
                "SELECT record FROM (SELECT id, record FROM watch_intervals WHERE deployment = ? "
                "ORDER BY id DESC LIMIT ?) ORDER BY id", (deployment, limit)).fetchall()
        return [json.loads(r[0]) for r in rows]

    def deployments(self) -> list[str]:
        with self._errors("list the deployments"), self._lock:
            return [r[0] for r in self.db.execute(
                "SELECT DISTINCT deployment FROM watch_intervals ORDER BY deployment")]

    def close(self) -> None:
        with self._lock:
            self.db.close()

    @contextmanager
    def _errors(self, action: str) -> Iterator[None]:
        try:
            yield
        except sqlite3.Error as error:
            raise WatchStoreError(f"the watch's history ({self.path}) could not {action}: "
                                  f"{error}") from error
