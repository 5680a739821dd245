"""The SQLite stores' base: how it opens a file, how writes commit, what errors become, how
threads and processes take turns, and closing."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import threading
from collections.abc import Callable

import pytest

from engine.settings import REPO_ROOT
from engine.storage import BUSY_TIMEOUT_S, SQLiteStore


class NotesError(Exception):
    pass


class Notes(SQLiteStore):
    """The smallest store: lines of text, written several at a time."""

    error_type = NotesError
    name = "the notes"

    def __init__(self, path: str) -> None:
        super().__init__(path)
        with self._errors("open"):
            self.conn.execute("CREATE TABLE IF NOT EXISTS notes (text TEXT NOT NULL)")

    def add(self, *texts: str | None) -> None:
        with self._errors("save the notes"), self._writing():
            for text in texts:
                self.conn.execute("INSERT INTO notes VALUES (?)", (text,))

    def texts(self) -> list[str]:
        with self._errors("read the notes"), self._lock:
            return [r[0] for r in self.conn.execute("SELECT text FROM notes ORDER BY rowid")]


def in_thread(work: Callable[[], object]
              ) -> tuple[threading.Thread, threading.Event, list[BaseException]]:
    """``work`` started in a thread; the event is set once it has returned."""
    done, errors = threading.Event(), []

    def run() -> None:
        try:
            work()
        except BaseException as error:  # the test reads it
            errors.append(error)
        done.set()

    thread = threading.Thread(target=run)
    thread.start()
    return thread, done, errors


@pytest.fixture
def holding():
    """Starts a write transaction on a store in another thread and holds it (inserting
    ``text`` first) until the test lets go."""
    started, release, threads = threading.Event(), threading.Event(), []

    def hold(store: Notes, text: str = "first") -> None:
        def work() -> None:
            with store._writing():
                store.conn.execute("INSERT INTO notes VALUES (?)", (text,))
                started.set()
                release.wait(10)

        threads.append(in_thread(work)[0])
        assert started.wait(10)

    yield hold, release
    release.set()
    for thread in threads:
        thread.join(10)


# ---- opening ------------------------------------------------------------------------------


def test_a_file_is_opened_in_its_new_folder_in_wal_with_the_busy_timeout(tmp_path):
    path = tmp_path / "not" / "yet" / "notes.db"
    store = Notes(str(path))
    assert path.is_file()
    assert store.conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    assert store.conn.execute("PRAGMA busy_timeout").fetchone() == (BUSY_TIMEOUT_S * 1000,)
    assert Notes(":memory:").conn.execute("PRAGMA journal_mode").fetchone() == ("memory",)


def test_nothing_opens_a_transaction_behind_the_stores_back():
    """Autocommit: a statement outside ``_writing`` is committed at once, and nothing is
    left open for a later ``BEGIN IMMEDIATE`` to trip over."""
    store = Notes(":memory:")
    store.conn.execute("INSERT INTO notes VALUES ('loose')")
    assert not store.conn.in_transaction
    store.add("next")
    assert store.texts() == ["loose", "next"]


def test_a_file_that_is_not_a_database_is_the_stores_error(tmp_path):
    path = tmp_path / "notes.db"
    path.write_bytes(b"\x00garbage" * 1000)
    with pytest.raises(NotesError, match="^the notes could not open: file is not a database$"):
        Notes(str(path))


def test_a_folder_that_cannot_be_made_is_the_stores_error(tmp_path):
    (tmp_path / "a file").write_text("")
    with pytest.raises(NotesError, match="^the notes could not open: ") as raised:
        Notes(str(tmp_path / "a file" / "notes.db"))
    assert isinstance(raised.value.__cause__, OSError)


# ---- errors -------------------------------------------------------------------------------


def test_sqlites_errors_become_the_stores_exception_saying_what_failed():
    store = Notes(":memory:")
    with pytest.raises(NotesError, match="^the notes could not count: no such table: nowhere$"
                       ) as raised, store._errors("count"):
        store.conn.execute("SELECT count(*) FROM nowhere")
    assert isinstance(raised.value.__cause__, sqlite3.OperationalError)


def test_other_exceptions_pass_through_as_they_are():
    store = Notes(":memory:")
    with pytest.raises(ValueError, match="^not the database's$"), store._errors("count"):
        raise ValueError("not the database's")


def test_a_store_may_word_its_messages_itself():
    class Worded(Notes):
        def _message(self, action: str, error: Exception) -> str:
            return f"{action} failed ({error})"

    store = Worded(":memory:")
    with pytest.raises(NotesError, match=r"^count failed \(no such table: nowhere\)$"), \
            store._errors("count"):
        store.conn.execute("SELECT count(*) FROM nowhere")


# ---- writing ------------------------------------------------------------------------------


def test_a_write_commits_as_a_whole_or_not_at_all():
    store = Notes(":memory:")
    store.add("a", "b")
    with pytest.raises(NotesError, match="^the notes could not save the notes: NOT NULL"):
        store.add("c", None)  # "c" is inserted, then the second statement fails
    assert store.texts() == ["a", "b"]
    assert not store.conn.in_transaction
    store.add("d")
    assert store.texts() == ["a", "b", "d"]


def test_any_exception_inside_a_write_rolls_it_back_and_goes_on_unchanged():
    store = Notes(":memory:")
    with pytest.raises(KeyboardInterrupt), store._writing():
        store.conn.execute("INSERT INTO notes VALUES ('half')")
        raise KeyboardInterrupt
    assert store.texts() == [] and not store.conn.in_transaction


KILLED_WRITER = """
import sys, time
from engine.storage import SQLiteStore
store = SQLiteStore(sys.argv[1])
store.conn.execute("CREATE TABLE notes (text TEXT NOT NULL)")
with store._writing():
    store.conn.execute("INSERT INTO notes VALUES ('committed')")
with store._writing():
    store.conn.execute("INSERT INTO notes VALUES ('half')")
    print("inside the write", flush=True)
    time.sleep(120)
    store.conn.execute("INSERT INTO notes VALUES ('never')")
"""


def test_a_writer_killed_between_two_statements_leaves_nothing_of_that_write(tmp_path):
    path = tmp_path / "notes.db"
    process = subprocess.Popen([sys.executable, "-c", KILLED_WRITER, str(path)], cwd=REPO_ROOT,
                               stdout=subprocess.PIPE, text=True)
    assert process.stdout.readline().strip() == "inside the write"
    process.kill()  # SIGKILL: no rollback, no cleanup
    process.wait(timeout=30)
    store = Notes(str(path))
    assert store.texts() == ["committed"]
    assert store.conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)


def test_writers_of_one_store_take_turns(holding):
    hold, release = holding
    store = Notes(":memory:")
    hold(store, "first")
    thread, done, errors = in_thread(lambda: store.add("second"))
    assert not done.wait(0.3)  # waits for the lock, no "transaction within a transaction"
    release.set()
    thread.join(10)
    assert errors == [] and store.texts() == ["first", "second"]


def test_a_writer_on_another_connection_waits_for_the_first_instead_of_failing(tmp_path,
                                                                              holding):
    """As a second process would: its own connection to the file, SQLite's lock between."""
    hold, release = holding
    first, second, reader = (Notes(str(tmp_path / "notes.db")) for _ in range(3))
    hold(first, "first")
    thread, done, errors = in_thread(lambda: second.add("second"))
    assert not done.wait(0.3)  # "database is locked" at once without the busy timeout
    assert reader.texts() == []  # readers go on meanwhile (WAL), seeing what is committed
    release.set()
    thread.join(10)
    assert errors == [] and first.texts() == ["first", "second"]


# ---- closing ------------------------------------------------------------------------------


def test_close_waits_for_a_write_under_way(tmp_path, holding):
    hold, release = holding
    store = Notes(str(tmp_path / "notes.db"))
    hold(store, "first")
    thread, done, errors = in_thread(store.close)
    assert not done.wait(0.3)
    release.set()
    thread.join(10)
    assert errors == [] and Notes(str(tmp_path / "notes.db")).texts() == ["first"]


def test_close_is_idempotent_and_a_closed_store_says_so():
    store = Notes(":memory:")
    store.close()
    store.close()
    with pytest.raises(NotesError, match="^the notes could not read the notes: Cannot operate "
                                         "on a closed database"):
        store.texts()
    with pytest.raises(NotesError, match="could not save the notes: Cannot operate"):
        store.add("late")
