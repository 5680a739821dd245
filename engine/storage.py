"""What the SQLite stores share: one connection, a lock, write transactions and errors a
person can read.

The connection is in autocommit mode, so no transaction is ever opened behind the store's
back: every write goes through :meth:`SQLiteStore._writing`, one ``BEGIN IMMEDIATE``
transaction that commits as a whole or not at all (a kill midway leaves nothing of it). The
lock lets the threads of one process take turns on the connection; separate processes meet
at SQLite's own file locks (WAL journal, and a busy timeout rather than an error when another
writer holds the file).
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import ClassVar

BUSY_TIMEOUT_S = 30.0
MEMORY = ":memory:"


class SQLiteStore:
    """A store's connection to its SQLite file. A subclass names its exception
    (``error_type``) and what a person calls the store (``name``), or words its messages
    itself (``_message``)."""

    error_type: ClassVar[type[Exception]] = Exception
    name: str = "the database"

    def __init__(self, path: str) -> None:
        self.path = path
        self._lock = threading.Lock()
        with self._errors("open"):
            if path != MEMORY:
                Path(path).parent.mkdir(parents=True, exist_ok=True)
            self.conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, check_same_thread=False,
                                        isolation_level=None)
            if path != MEMORY:  # readers go on while one process writes
                self.conn.execute("PRAGMA journal_mode=WAL")

    @contextmanager
    def _writing(self) -> Iterator[None]:
        """One write transaction that holds SQLite's write lock from its first statement,
        so a second writer waits (up to the busy timeout) instead of failing half-way; an
        error anywhere inside, the commit included, rolls all of it back."""
        with self._lock:
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                yield
                self.conn.execute("COMMIT")
            except BaseException:
                if self.conn.in_transaction:  # some errors end the transaction themselves
                    self.conn.execute("ROLLBACK")
                raise

    @contextmanager
    def _errors(self, action: str) -> Iterator[None]:
        """SQLite's errors (and the file system's, met when opening) as the store's own
        exception, saying what could not be done."""
        try:
            yield
        except (sqlite3.Error, OSError) as error:
            raise self.error_type(self._message(action, error)) from error

    def _message(self, action: str, error: Exception) -> str:
        return f"{self.name} could not {action}: {error}"

    def close(self) -> None:
        """Close the connection, once a write under way has finished; closing again does
        nothing, and using the store afterwards raises its exception."""
        with self._lock:
            self.conn.close()
