"""The watch's history in SQLite: one row per interval, per deployment, the oldest pruned.

A row is written with the pruning of that deployment's rows beyond ``kept`` in one
transaction, so a crash leaves the history whole; a restart of specscope reads it back. The
interval itself is stored as JSON
(:meth:`engine.serving.watch.intervals.Interval.to_json`), beside the columns the queries
need. The connection, its lock, WAL journal and busy timeout are those of
:class:`engine.storage.SQLiteStore`: the page's server and a ``specscope watch --db`` on the
same file take turns.
"""

from __future__ import annotations

import json

from engine.serving.watch.intervals import Interval
from engine.storage import SQLiteStore

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


class WatchStore(SQLiteStore):
    error_type = WatchStoreError

    def __init__(self, path: str, kept: int) -> None:
        if kept < 1:
            raise WatchStoreError("the watch must keep at least one interval per deployment")
        self.kept = kept
        super().__init__(path)
        with self._errors("open"):
            self.conn.executescript(SCHEMA)

    def add(self, interval: Interval) -> None:
        record = json.dumps(interval.to_json(), allow_nan=False)
        with self._errors("save an interval"), self._writing():
            self.conn.execute(
                "INSERT INTO watch_intervals (deployment, ended, state, record) "
                "VALUES (?, ?, ?, ?)",
                (interval.deployment, interval.ended, interval.state, record))
            self.conn.execute(
                "DELETE FROM watch_intervals WHERE deployment = ? AND id <= (SELECT id "
                "FROM watch_intervals WHERE deployment = ? ORDER BY id DESC LIMIT 1 "
                "OFFSET ?)", (interval.deployment, interval.deployment, self.kept))

    def intervals(self, deployment: str, last: int | None = None) -> list[dict]:
        """The deployment's intervals, oldest first (the ``last`` ones only, if given)."""
        limit = -1 if last is None else max(0, last)
        with self._errors("read the intervals"), self._lock:
            rows = self.conn.execute(
                "SELECT record FROM (SELECT id, record FROM watch_intervals WHERE deployment = ? "
                "ORDER BY id DESC LIMIT ?) ORDER BY id", (deployment, limit)).fetchall()
        return [json.loads(r[0]) for r in rows]

    def deployments(self) -> list[str]:
        with self._errors("list the deployments"), self._lock:
            return [r[0] for r in self.conn.execute(
                "SELECT DISTINCT deployment FROM watch_intervals ORDER BY deployment")]

    def _message(self, action: str, error: Exception) -> str:
        if action == "open":  # the wording the page and `specscope watch` have always shown
            return f"the watch's history at {self.path} could not be opened: {error}"
        return f"the watch's history ({self.path}) could not {action}: {error}"
