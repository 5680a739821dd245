"""The indexes of saved runs and probes: GET /runs and GET /probes list what is saved, newest
first, a page at a time, each row a record's title, key figures and permalink; and GET
/calibrate opens the calibrate box."""

from __future__ import annotations

import re

import httpx
import pytest
from fastapi.testclient import TestClient
from support.probes import probe

from app.main import create_app
from app.routes.indexes import PAGE_SIZE
from engine.settings import Settings

STORED = ("id", "created", "bytes", "kind")  # what the store sets itself


@pytest.fixture(scope="module")
def real_run(live_server) -> dict:
    """A finished live run on the tiny pair, as it was saved."""
    body = {"prompt": "the quick brown fox", "k": 3, "temperature": 0, "max_new_tokens": 12,
            "seed": 1, "pair": "tiny", "repeats": 1}
    with httpx.stream("POST", live_server.url + "/api/runs", json=body, timeout=60) as r:
        run_id = re.search(r'"id": "([^"]+)"', r.read().decode()).group(1)
    return httpx.get(f"{live_server.url}/api/runs/{run_id}", timeout=30).json()


@pytest.fixture(scope="module")
def real_probe(live_server) -> dict:
    saved = probe(live_server)[-1][1]
    return httpx.get(f"{live_server.url}/api/probes/{saved['id']}", timeout=30).json()


@pytest.fixture
def server(tmp_path):
    """A server with its own database file, empty at first."""
    settings = Settings(load_models=False, db=str(tmp_path / "saved.db"))
    with TestClient(create_app(settings), base_url="http://127.0.0.1") as client:
        yield client


def save_runs(server: TestClient, run: dict, count: int) -> list[str]:
    """``count`` copies of ``run`` saved one after another, prompts "run 0", "run 1", ...;
    their ids, oldest first."""
    record = {name: value for name, value in run.items() if name not in STORED}
    return [server.app.state.store.save(
        record | {"settings": record["settings"] | {"prompt": f"run {i}"}})
        for i in range(count)]


def permalinks(page: str, table: str) -> list[str]:
    return re.findall(rf'<th scope="row"><a href="/{table}/([A-Za-z0-9_-]{{22}})">', page)


def test_before_anything_is_saved_the_runs_index_says_so(server):
    page = server.get("/runs")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "No runs are saved yet" in page.text and 'href="/#live"' in page.text


def test_the_runs_index_lists_saved_runs_newest_first_a_page_at_a_time(server, real_run):
    ids = save_runs(server, real_run, 2 * PAGE_SIZE + 3)
    newest_first = ids[::-1]
    first = server.get("/runs").text
    assert permalinks(first, "runs") == newest_first[:PAGE_SIZE]
    assert f"Runs 1–{PAGE_SIZE} of {len(ids)} · page 1 of 3" in first
    assert 'rel="next" id="older" href="?page=2"' in first and 'rel="prev"' not in first
    second = server.get("/runs?page=2").text
    assert permalinks(second, "runs") == newest_first[PAGE_SIZE:2 * PAGE_SIZE]
    assert 'href="?page=1"' in second and 'href="?page=3"' in second
    last = server.get("/runs?page=3").text
    assert permalinks(last, "runs") == newest_first[2 * PAGE_SIZE:]
    assert 'id="older"' not in last


def test_a_run_row_names_its_prompt_and_key_figures_and_links_its_permalink(server, real_run):
    (run_id,) = save_runs(server, real_run, 1)
    page = server.get("/runs").text
    summary, settings = real_run["summary"], real_run["settings"]
    row = re.search(r"<tr><td>.*?</tr>", page, re.S).group(0)
    assert f'<a href="/runs/{run_id}">“run 0”</a>' in row
    assert "tiny test pair" in row and "draft model" in row
    assert f"<td>{settings['k']}</td>" in row
    assert f"{summary['tokens']} of {settings['max_new_tokens']}" in row
    assert f"{summary['speedup_measured']:.2f}×" in row
    assert f"{summary['alpha_counted']:.2f}" in row
    assert server.get(f"/runs/{run_id}").status_code == 200


def test_a_page_number_a_link_cannot_have_is_read_as_far_as_it_goes(server, real_run):
    ids = save_runs(server, real_run, 3)
    past = server.get("/runs?page=9")
    assert past.status_code == 200 and "page=9 is outside 1–1; using the maximum 1." in past.text
    assert permalinks(past.text, "runs") == ids[::-1]
    for bad, notice in (("0", "page=0 is outside 1–1; using the minimum 1."),
                        ("x", "page=&#39;x&#39; is not a number; using the default 1."),
                        ("1e400", "using the maximum 1")):
        page = server.get(f"/runs?page={bad}")
        assert page.status_code == 200 and notice in page.text, bad


def test_the_index_reads_only_its_page_of_the_database(server, real_run):
    save_runs(server, real_run, PAGE_SIZE + 5)
    statements: list[str] = []
    server.app.state.store.conn.set_trace_callback(statements.append)
    try:
        assert server.get("/runs?page=2").status_code == 200
    finally:
        server.app.state.store.conn.set_trace_callback(None)
    reads = [s for s in statements if s.lstrip().upper().startswith("SELECT") and "runs" in s]
    assert reads and all("LIMIT" in s or "count(" in s.lower() for s in reads), reads
    assert not any("cycles" in s for s in reads)  # the largest column is never read


def test_the_probes_index_lists_each_probe_with_what_it_found(server, real_probe):
    record = {name: value for name, value in real_probe.items() if name not in STORED}
    ids = [server.app.state.store.save_probe(record) for _ in range(3)]
    page = server.get("/probes")
    assert page.status_code == 200
    assert permalinks(page.text, "probes") == ids[::-1]
    alphas = [row["alpha_counted"] for row in real_probe["result"]["rows"]]
    assert f"α from {min(alphas):.2f} to {max(alphas):.2f}" in page.text
    assert "python, jargon (4)" in page.text and "<td>0, 1</td>" in page.text
    assert server.get(f"/probes/{ids[0]}").status_code == 200
    assert 'href="/runs">saved runs</a>' in page.text


def test_the_saved_records_and_the_page_link_to_the_indexes(client):
    page = client.get("/").text
    assert 'href="/runs" id="runs-index-link"' in page
    assert 'href="/probes" id="probes-index-link"' in page


def test_an_unreadable_database_is_a_page_that_says_so(tmp_path):
    (tmp_path / "blocked").mkdir()
    settings = Settings(load_models=False, db=str(tmp_path / "blocked"))  # a folder, not a file
    with TestClient(create_app(settings), base_url="http://127.0.0.1") as client:
        for path in ("/runs", "/probes"):
            page = client.get(path)
            assert page.status_code == 503 and "cannot read its database" in page.text


def test_get_calibrate_opens_the_calibrate_box_with_its_first_box_focused(client):
    page = client.get("/calibrate")
    assert page.status_code == 200 and "<html" in page.text
    assert re.search(r'<form id="calibrate-form"[^>]*action="/calibrate"', page.text)
    assert '<textarea id="metrics-before" name="before" autofocus' in page.text
    assert 'href="/calibrate/example"' in page.text
