"""The saved-runs database: limits, pruning, parallel writers, and a writer killed mid-write."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import threading

import httpx
import pytest

from app.store import RunStore, RunTooLarge, StoreUnavailable, Unsavable, is_run_id
from engine.settings import REPO_ROOT


def a_run(i: int, padding: int = 0) -> dict:
    return {"settings": {"prompt": f"run {i}", "k": 4}, "pair": {"name": "tiny"},
            "cycles": [{"index": 0,
                        "tokens": [{"id": i, "text": "x" * padding, "kind": "target"}]}],
            "summary": {"speedup_measured": 1.0}, "machine": {}, "baseline": {}}


# A writer in its own process: saves runs, printing each id once its save has returned.
WRITER = """
import sys, time
import sqlite_utils.db
from app.store import RunStore
path, count, stall = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "stall"
store = RunStore(path, runs_kept=100_000, max_run_bytes=10_000_000)
for i in range(count):
    print(store.save({"settings": {"i": i}, "cycles": [], "summary": {}}), flush=True)
if stall:
    # The next save stops inside its transaction, its row written and not yet committed.
    def stall_here(self, *args, **kwargs):
        print("inside the write", flush=True)
        time.sleep(120)
    sqlite_utils.db.Table.delete_where = stall_here
    store.save({"settings": {"i": "never committed"}, "cycles": [], "summary": {}})
"""


def writer(path, count: int, stall: bool = False) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", WRITER, str(path), str(count),
                             "stall" if stall else "go"], cwd=REPO_ROOT,
                            stdout=subprocess.PIPE, text=True)


def test_ids_are_unguessable_and_the_run_comes_back_whole():
    store = RunStore(":memory:", runs_kept=10, max_run_bytes=100_000)
    run_id = store.save(a_run(1))
    assert is_run_id(run_id) and len(run_id) == 22
    assert store.save(a_run(1)) != run_id
    record = store.get(run_id)
    assert record["settings"] == a_run(1)["settings"]
    assert record["cycles"] == a_run(1)["cycles"]
    assert store.get("not-an-id") is None


def test_the_oldest_runs_beyond_the_limit_are_pruned():
    store = RunStore(":memory:", runs_kept=3, max_run_bytes=100_000)
    ids = [store.save(a_run(i)) for i in range(5)]
    assert store.ids() == ids[2:]
    assert store.get(ids[0]) is None and store.get(ids[4]) is not None


def test_a_run_over_the_size_limit_is_refused_with_its_size():
    store = RunStore(":memory:", runs_kept=3, max_run_bytes=5_000)
    with pytest.raises(RunTooLarge, match=r"this run is 1\d kB, over the server's limit of 5 kB"):
        store.save(a_run(1, padding=12_000))
    assert store.ids() == []


def test_the_schema_comes_from_migrations_and_reopening_keeps_the_runs(tmp_path):
    path = tmp_path / "runs.db"
    run_id = RunStore(str(path), 10, 100_000).save(a_run(1))
    reopened = RunStore(str(path), 10, 100_000)
    assert reopened.get(run_id) is not None
    applied = sqlite3.connect(path).execute(
        "select migration_set, name from _sqlite_migrations").fetchall()
    assert sorted(applied) == [("specscope", "create_probes"), ("specscope", "create_runs")]


def test_a_file_that_is_not_a_database_is_reported():
    import tempfile

    with tempfile.NamedTemporaryFile(suffix=".db") as broken:
        broken.write(b"\x00garbage" * 1000)
        broken.flush()
        with pytest.raises(StoreUnavailable, match="file is not a database"):
            RunStore(broken.name, 10, 100_000)


def test_parallel_writers_in_threads_and_processes_lose_no_run(tmp_path):
    path = tmp_path / "runs.db"
    processes = [writer(path, 15) for _ in range(3)]
    store = RunStore(str(path), runs_kept=100_000, max_run_bytes=100_000)
    saved: list[str] = []

    def save_some() -> None:
        for i in range(15):
            saved.append(store.save(a_run(i)))

    threads = [threading.Thread(target=save_some) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for p in processes:
        out, _ = p.communicate(timeout=120)
        assert p.returncode == 0
        saved += out.split()
    assert len(saved) == 90 == len(set(saved))
    assert sorted(RunStore(str(path), 100_000, 100_000).ids()) == sorted(saved)


def test_a_writer_killed_inside_a_write_leaves_every_committed_run(tmp_path):
    path = tmp_path / "runs.db"
    process = writer(path, 5, stall=True)
    committed = []
    for line in process.stdout:
        if line.strip() == "inside the write":
            break
        committed.append(line.strip())
    process.kill()  # SIGKILL: no cleanup, the transaction is left open in the journal
    process.wait(timeout=30)
    assert len(committed) == 5
    store = RunStore(str(path), 100_000, 100_000)
    assert store.ids() == committed  # all of them, and not the half-written one
    assert store.db.execute("pragma integrity_check").fetchone() == ("ok",)
    after = store.save(a_run(6))
    assert store.ids() == [*committed, after]


def test_a_save_that_fails_between_its_statements_leaves_no_half_written_run(monkeypatch):
    store = RunStore(":memory:", runs_kept=1, max_run_bytes=100_000)
    kept = store.save(a_run(1))

    def fail(self, *args, **kwargs):  # the run is inserted, the pruning not yet done
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr("sqlite_utils.db.Table.delete_where", fail)
    with pytest.raises(StoreUnavailable,
                       match="^the database of saved runs could not save the run: disk I/O"):
        store.save(a_run(2))
    monkeypatch.undo()
    assert store.ids() == [kept]  # neither the new run nor the pruning of the old one
    assert store.get(store.save(a_run(3))) is not None and len(store.ids()) == 1


def test_a_run_too_large_to_keep_says_so_on_the_stream(live_server, app_state):
    app_state.store.max_run_bytes = 1_000
    try:
        import json

        with httpx.stream("POST", live_server.url + "/runs", timeout=60, json={
                "prompt": "the quick", "k": 2, "max_new_tokens": 12, "pair": "tiny"}) as r:
            lines = [line for line in r.iter_lines() if line.startswith("data: ")]
    finally:
        app_state.store.max_run_bytes = 2_000_000
    html = json.loads(lines[-1][6:])["html"]
    assert 'id="share-error"' in html and "over the server&#39;s limit of 1 kB" in html


def a_probe(i: int, padding: int = 0) -> dict:
    return {"settings": {"k": 4, "seed": i}, "pair": {"name": "tiny"}, "machine": {},
            "result": {"rows": [], "notices": ["x" * padding]}}


def test_probes_are_kept_like_runs_under_the_same_limits():
    store = RunStore(":memory:", runs_kept=3, max_run_bytes=5_000)
    ids = [store.save_probe(a_probe(i)) for i in range(5)]
    assert all(is_run_id(i) for i in ids) and store.ids("probes") == ids[2:]
    assert store.get_probe(ids[0]) is None
    assert store.get_probe(ids[4])["settings"] == {"k": 4, "seed": 4}
    assert store.get_probe("not-an-id") is None and store.get(ids[4]) is None  # own table
    with pytest.raises(RunTooLarge, match=r"this probe is 1\d kB, over the server's limit"):
        store.save_probe(a_probe(9, padding=12_000))
    assert store.ids() == []  # no run was touched


@pytest.mark.parametrize(("value", "reason"), [
    ("a lone surrogate \ud800",
     r"settings\.domain holds text that is not UTF-8 \(\\ud800, half of a surrogate"),
    (float("nan"), r"settings\.domain is nan, which JSON cannot hold"),
    (float("inf"), r"settings\.domain is inf, which JSON cannot hold"),
])
def test_a_record_that_cannot_be_served_as_json_is_never_saved(value, reason):
    store = RunStore(":memory:", runs_kept=10, max_run_bytes=100_000)
    with pytest.raises(Unsavable, match=reason):
        store.save_probe(a_probe(1) | {"settings": {"domain": value}})
    with pytest.raises(Unsavable, match=reason):
        store.save(a_run(1) | {"settings": {"domain": value}})
    assert store.ids("probes") == [] and store.ids() == []


def test_a_record_saved_before_that_rule_is_read_back_servable():
    """Older servers stored lone surrogates and NaN as JSON escapes: they come back as the
    replacement character and null, which every page and JSON answer can send."""
    store = RunStore(":memory:", runs_kept=10, max_run_bytes=100_000)
    probe_id = store.save_probe(a_probe(1))
    store.db.execute("UPDATE probes SET settings = ? WHERE id = ?",
                     ['{"domain": "a\\ud800b \\ud83d\\ude80", "x": NaN, "y": [Infinity]}',
                      probe_id])
    settings = store.get_probe(probe_id)["settings"]
    assert settings == {"domain": "a\ufffdb \U0001f680", "x": None, "y": [None]}
    json.dumps(settings, ensure_ascii=False, allow_nan=False).encode()  # servable
