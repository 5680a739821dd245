"""Saved runs and probes in SQLite, through sqlite-utils: its migrations own the schema.

The connection, its lock and its write transactions are those of
:class:`engine.storage.SQLiteStore`: threads of one server take turns, separate processes meet
at SQLite's own file locks. A run is written in one transaction with the pruning of the oldest
runs, so a crash or a kill leaves either the whole run or none of it. Probes are kept the same
way in their own table, under the same limits (how many are kept, how large one may be).
"""

from __future__ import annotations

import datetime
import json
import math
import re
import secrets
from typing import Any

from sqlite_utils import Database, Migrations

from engine.storage import SQLiteStore

# 16 random bytes, URL-safe base64 without padding: 22 characters nobody can guess.
RUN_ID = re.compile(r"^[A-Za-z0-9_-]{22}$")

migrations = Migrations("specscope")


@migrations()
def create_runs(db: Database) -> None:
    db["runs"].create(
        {
            "id": str,
            "created": str,  # ISO 8601, UTC
            "kind": str,  # "live"
            "pair": str,  # JSON: name, label, target, draft
            "settings": str,  # JSON: prompt, k, temperature, top_p, top_k, max_new_tokens, seed
            "machine": str,  # JSON: where it ran
            "cycles": str,  # JSON: every cycle's tokens, kinds and timings
            "summary": str,  # JSON: the measured figures against the theory
            "baseline": str,  # JSON: the target-only run's step times
            "bytes": int,  # size of the JSON above, checked against the limit
        },
        pk="id",
        not_null={"created", "kind", "settings", "cycles", "summary"},
    )
    db["runs"].create_index(["created"])


@migrations()
def create_probes(db: Database) -> None:
    db["probes"].create(
        {
            "id": str,
            "created": str,  # ISO 8601, UTC
            "pair": str,  # JSON: name, label, target, draft
            "settings": str,  # JSON: sets, temperatures, k, max_new_tokens, prompts_per_set, ...
            "machine": str,  # JSON: where it ran
            "result": str,  # JSON: the probe's rows, notices and chart data (report_json)
            "bytes": int,
        },
        pk="id",
        not_null={"created", "settings", "result"},
    )
    db["probes"].create_index(["created"])


JSON_FIELDS = ("pair", "settings", "machine", "cycles", "summary", "baseline")
# Each table's JSON columns, and what one of its records is called in messages.
TABLES = {"runs": (JSON_FIELDS, "run"), "probes": (("pair", "settings", "machine", "result"),
                                                    "probe")}


class StoreUnavailable(Exception):
    """The database cannot be read or written; the message says why, for a person."""


class RunTooLarge(Exception):
    """A run over the size limit: it is not saved."""


class Unsavable(Exception):
    """A record that no page or JSON answer could send back (a lone surrogate, a NaN): it is
    not saved. The message names the field."""


def _unservable(value: Any, where: str) -> str | None:
    """Why ``value`` could not be sent as UTF-8 JSON, naming where in it, or None."""
    if isinstance(value, str):
        lone = next((c for c in value if "\ud800" <= c <= "\udfff"), None)
        return None if lone is None else (
            f"{where} holds text that is not UTF-8 (\\u{ord(lone):04x}, half of a surrogate "
            "pair)")
    if isinstance(value, float) and not math.isfinite(value):
        return f"{where} is {value}, which JSON cannot hold"
    items = (value.items() if isinstance(value, dict)
             else enumerate(value) if isinstance(value, list | tuple) else ())
    for key, item in items:
        if isinstance(key, str) and (why := _unservable(key, where)):
            return why
        if why := _unservable(item, f"{where}.{key}" if isinstance(key, str) else where):
            return why
    return None


def _servable(value: Any) -> Any:
    """``value`` with what an older server stored and no answer can send made sendable: a
    lone surrogate becomes U+FFFD (whole pairs stay one character), NaN and infinities null."""
    if isinstance(value, str):
        return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {_servable(k): _servable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_servable(v) for v in value]
    return value


def new_run_id() -> str:
    return secrets.token_urlsafe(16)


def is_run_id(text: str) -> bool:
    return bool(RUN_ID.match(text))


class RunStore(SQLiteStore):
    error_type = StoreUnavailable
    name = "the database of saved runs"

    def __init__(self, path: str, runs_kept: int, max_run_bytes: int) -> None:
        self.runs_kept = runs_kept
        self.max_run_bytes = max_run_bytes
        super().__init__(path)
        with self._errors("open"):
            self.db = Database(self.conn)  # sqlite-utils over the store's one connection
            with self._writing():
                migrations.apply(self.db)

    # ---- writing ----------------------------------------------------------------------

    def save(self, run: dict[str, Any]) -> str:
        """Store ``run`` (the fields of ``create_runs`` but id, created and bytes) under a new
        id and prune the oldest runs beyond the limit, in one transaction. Returns the id."""
        return self._save("runs", run, {"kind": run.get("kind", "live")})

    def save_probe(self, probe: dict[str, Any]) -> str:
        """Store a finished probe (the fields of ``create_probes`` but id, created and bytes)
        like a run: a new id, the oldest probes beyond the limit pruned. Returns the id."""
        return self._save("probes", probe)

    def _save(self, table: str, record: dict[str, Any], extra: dict[str, Any] | None = None
              ) -> str:
        fields, noun = TABLES[table]
        for name in fields:
            if why := _unservable(record.get(name), name):
                raise Unsavable(f"this {noun} cannot be kept: {why}")
        row = {name: json.dumps(record.get(name), allow_nan=False) for name in fields}
        size = sum(len(text.encode()) for text in row.values())
        if size > self.max_run_bytes:
            raise RunTooLarge(
                f"this {noun} is {size / 1000:.0f} kB, over the server's limit of "
                f"{self.max_run_bytes / 1000:.0f} kB for a saved {noun}"
            )
        row |= {
            "id": new_run_id(),
            "created": datetime.datetime.now(datetime.UTC).isoformat(timespec="milliseconds"),
            **(extra or {}),
            "bytes": size,
        }
        with self._errors(f"save the {noun}"), self._writing():
            self.db[table].insert(row)
            self.db[table].delete_where(
                f"rowid <= (SELECT rowid FROM {table} ORDER BY rowid DESC LIMIT 1 OFFSET ?)",
                [self.runs_kept],
            )
        return row["id"]

    # ---- reading ----------------------------------------------------------------------

    def get(self, run_id: str) -> dict[str, Any] | None:
        """The saved run, its JSON fields decoded; None for an unknown or malformed id."""
        return self._get("runs", run_id)

    def get_probe(self, probe_id: str) -> dict[str, Any] | None:
        """The saved probe, its JSON fields decoded; None for an unknown or malformed id."""
        return self._get("probes", probe_id)

    def _get(self, table: str, record_id: str) -> dict[str, Any] | None:
        fields, noun = TABLES[table]
        if not is_run_id(record_id):
            return None
        with self._errors(f"read the {noun}"), self._lock:
            rows = list(self.db[table].rows_where("id = ?", [record_id]))
        if not rows:
            return None
        row = rows[0]
        try:
            return {**row, **{name: _servable(json.loads(row[name])) for name in fields}}
        except (TypeError, ValueError) as error:
            raise StoreUnavailable(f"the saved {noun} {record_id} is damaged ({error})") \
                from error

    def ids(self, table: str = "runs") -> list[str]:
        """Every saved id of ``table`` (runs or probes), oldest first."""
        with self._errors(f"list the {table}"), self._lock:
            return [row["id"] for row in self.db[table].rows_where(
                select="id", order_by="rowid")]

    def count(self, table: str = "runs") -> int:
        """How many records ``table`` (runs or probes) holds."""
        with self._errors(f"count the {table}"), self._lock:
            return self.db[table].count

    def newest(self, table: str, limit: int, offset: int = 0) -> list[dict[str, Any]]:
        """One page of ``table``'s records, newest first, with only what an index row shows:
        the id, when, the pair and the settings, and a run's summary or a probe's rows and
        k (not the cycles nor the charts' data). A field that cannot be read is None."""
        wanted = INDEX_COLUMNS[table]
        columns = ", ".join(f"{sql} AS {name}" for name, sql in wanted.items())
        with self._errors(f"list the {table}"), self._lock:
            rows = self.db.execute(
                f"SELECT {columns} FROM {table} ORDER BY rowid DESC LIMIT ? OFFSET ?",
                [limit, offset]).fetchall()
        return [{name: (value if name in ("id", "created") else _decoded(value))
                 for name, value in zip(wanted, row, strict=True)} for row in rows]


# What an index row reads of each table: the summary is small; a probe's result also holds its
# charts' data, of which only the rows and k are read.
INDEX_COLUMNS = {
    "runs": {"id": "id", "created": "created", "pair": "pair", "settings": "settings",
             "summary": "summary"},
    "probes": {"id": "id", "created": "created", "pair": "pair", "settings": "settings",
               "rows": "CASE WHEN json_valid(result) THEN json_extract(result, '$.rows') END",
               "k": "CASE WHEN json_valid(result) THEN json_extract(result, '$.k') END"},
}


def _decoded(text: Any) -> Any:
    """A JSON column decoded and made sendable; None for what cannot be read."""
    if not isinstance(text, str):
        return text
    try:
        return _servable(json.loads(text))
    except ValueError:
        return None
