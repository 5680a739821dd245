"""Saved runs over HTTP: every finished live run gets a permalink, a JSON and CSV export,
an API entry and a preview image; bad ids get 404 and a broken database a clear page."""

from __future__ import annotations

import csv
import io
import re
import struct

import httpx
import pytest
from fastapi.testclient import TestClient
from support.sse import read_events

from app.charts import measured_vs_model
from app.main import create_app
from app.saved.cards import run_preview_svg
from app.store import new_run_id
from engine.settings import Settings

BODY = {"prompt": "the quick brown fox", "k": 3, "temperature": 1.0, "top_p": 1.0,
        "max_new_tokens": 30, "seed": 7, "pair": "tiny"}
BAD_IDS = ["nope", new_run_id(), "A" * 21, "A" * 23, "..%2F..%2Fsettings", "%00" * 8,
           "x" * 5000]


def stream(server, body=None) -> list[tuple[str, dict]]:
    with httpx.stream("POST", server.url + "/api/runs", json=body or BODY, timeout=60) as r:
        assert r.status_code == 200
        return read_events(r)


@pytest.fixture(scope="module")
def saved(live_server) -> tuple[str, list[tuple[str, dict]]]:
    events = stream(live_server)
    assert events[-1][0] == "saved", events[-1]
    return events[-1][1]["id"], events


def get(server, path: str) -> httpx.Response:
    return httpx.get(server.url + path, timeout=30)


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def test_the_api_entry_holds_the_whole_run(live_server, saved):
    run_id, events = saved
    record = get(live_server, f"/api/runs/{run_id}").json()
    cycles = [data for kind, data in events if kind == "cycle"]
    summary = next(data for kind, data in events if kind == "summary")
    assert record["id"] == run_id and record["kind"] == "live"
    assert record["settings"]["prompt"] == BODY["prompt"] and record["settings"]["k"] == 3
    assert record["pair"]["name"] == "tiny" and record["pair"]["label"] == "tiny test pair"
    assert record["machine"]["device"] == "cpu" and record["machine"]["torch"]
    assert [c["tokens"] for c in record["cycles"]] == [c["tokens"] for c in cycles]
    assert [c["draft_ms"] for c in record["cycles"]] == [c["draft_ms"] for c in cycles]
    assert record["summary"] == summary
    assert record["baseline"]["tokens"] == summary["baseline_tokens"]
    assert len(record["baseline"]["step_ms"]) == summary["baseline_tokens"]
    assert re.match(r"\d{4}-\d\d-\d\dT", record["created"])
    assert get(live_server, f"/runs/{run_id}.json").json() == record


def test_the_api_entry_is_in_the_openapi_docs(live_server):
    schema = get(live_server, "/openapi.json").json()
    entry = schema["paths"]["/api/runs/{run_id}"]["get"]
    assert set(entry["responses"]) >= {"200", "404"}
    assert "SavedRunOut" in str(entry["responses"]["200"])


def test_csv_has_one_row_per_token(live_server, saved):
    run_id, events = saved
    response = get(live_server, f"/runs/{run_id}.csv")
    assert response.headers["content-type"].startswith("text/csv")
    assert "attachment" in response.headers["content-disposition"]
    rows = list(csv.DictReader(io.StringIO(response.text)))
    cycles = [data for kind, data in events if kind == "cycle"]
    assert len(rows) == sum(len(c["tokens"]) for c in cycles)
    assert list(rows[0]) == ["cycle", "position", "kind", "token_id", "text", "step_ms",
                             "cycle_start_ms", "cycle_ms", "drafter", "match_n",
                             "match_start", "match_text"]
    assert {(r["drafter"], r["match_n"], r["match_text"]) for r in rows} == {("model", "", "")}
    first = cycles[0]["tokens"]
    assert [(r["kind"], int(r["token_id"]), r["text"]) for r in rows[: len(first)]] == [
        (t["kind"], t["id"], t["text"]) for t in first]
    output = "".join(r["text"] for r in rows if r["kind"] in ("accepted", "target"))
    assert output == "".join(t["text"] for c in cycles for t in c["tokens"]
                             if t["kind"] in ("accepted", "target"))
    starts = sorted({float(r["cycle_start_ms"]) for r in rows})
    assert starts[0] == 0 and len(starts) == len(cycles)


def test_csv_neutralises_token_texts_a_spreadsheet_would_evaluate(live_server, app_state,
                                                                  saved):
    run_id, _ = saved
    record = get(live_server, f"/api/runs/{run_id}").json()
    hostile = ['=HYPERLINK("http://evil.example","click")', "+1+2", "-3", "@SUM(A1)",
               "\tx", "\rx"]
    ordinary = [" the", "fox", "a=b", "'quoted", ""]
    texts = hostile + ordinary
    tokens = [dict(record["cycles"][0]["tokens"][0], text=text) for text in texts]
    record["cycles"] = [dict(record["cycles"][0], tokens=tokens)]
    copy_id = app_state.store.save(record)
    rows = list(csv.DictReader(io.StringIO(get(live_server, f"/runs/{copy_id}.csv").text)))
    assert [row["text"] for row in rows] == ["'" + text for text in hostile] + ordinary
    assert get(live_server, f"/api/runs/{copy_id}").json()["cycles"][0]["tokens"][0]["text"] \
        == hostile[0]  # only the spreadsheet export is quoted, the record is as measured


def test_the_run_page_shows_every_cycle_the_summary_and_card_tags(live_server, saved):
    run_id, events = saved
    html = get(live_server, f"/runs/{run_id}").text
    cycles = [data for kind, data in events if kind == "cycle"]
    assert html.count('<li class="cycle"') == len(cycles)
    assert ' hidden>' not in html.split('id="replay-cycles"')[1].split("</ol>")[0]
    assert 'class="live-summary"' in html and 'id="use-numbers-link"' in html
    summary = next(data for kind, data in events if kind == "summary")
    title = (f"k 3: measured {summary['speedup_measured']:.2f}x, predicted "
             f"{summary['speedup_predicted']:.2f}x, alpha {summary['alpha_counted']:.2f}")
    assert f"<title>{title} · specscope</title>" in html
    assert f'<meta property="og:title" content="{title}">' in html
    assert f'<meta property="og:image" content="{live_server.url}/runs/{run_id}/preview.png">' \
        in html
    assert '<meta name="twitter:card" content="summary_large_image">' in html
    for speed in ("1", "0.25", "0.1"):
        assert f'data-speed="{speed}"' in html
    assert html.count('<template class="replay-frame"') == len(cycles)


def test_the_saved_output_marks_who_produced_each_token_as_the_live_panel_did(live_server,
                                                                             saved):
    run_id, events = saved
    html = get(live_server, f"/runs/{run_id}").text
    output = html.split('id="replay-text"')[1].split("</p>")[0]
    tokens = [t for kind, data in events if kind == "cycle" for t in data["tokens"]
              if t["kind"] in ("accepted", "target") and t["text"]]
    assert output.count('class="by-draft"') == sum(t["kind"] == "accepted" for t in tokens) > 0
    assert output.count('class="by-target"') == sum(t["kind"] == "target" for t in tokens) > 0
    legend = html.split("<h3>Output</h3>")[1].split('id="replay-text"')[0]
    assert '<span class="by-draft">drafted and accepted</span>' in legend
    assert '<span class="by-target">from the target</span>' in legend


def test_each_saved_cycle_has_the_timeline_the_live_panel_drew(live_server, saved):
    run_id, events = saved
    html = get(live_server, f"/runs/{run_id}").text
    cycles = [data for kind, data in events if kind == "cycle"]
    assert html.count('<svg class="timeline"') == len(cycles)
    # The "target alone" tick of each row is the target-only time streamed with that cycle.
    ticks = re.findall(r'class="alone-time"[^>]*x1="([\d.]+)"', html)
    assert [float(x) for x in ticks] == pytest.approx([c["baseline_ms"] for c in cycles],
                                                      abs=1e-3)


def test_the_replay_position_is_in_the_link_and_bad_values_are_clamped(live_server, saved):
    run_id, events = saved
    n = sum(kind == "cycle" for kind, _ in events)
    html = get(live_server, f"/runs/{run_id}?cycle=2&speed=0.1").text
    listing = html.split('id="replay-cycles"')[1].split("</ol>")[0]
    assert listing.count('<li class="cycle"') - listing.count(" hidden>") == 2
    assert f"Cycle 2 of {n}." in html and 'href="?cycle=3&amp;speed=0.1"' in html
    assert 'id="replay-summary" hidden' in html
    clamped = get(live_server, f"/runs/{run_id}?cycle=9999&speed=7").text
    assert "is outside 0–" in clamped and "speed=&#39;7&#39; is not one of" in clamped
    assert f"All {n} cycles." in clamped
    assert "is not a number" in get(live_server, f"/runs/{run_id}?cycle=abc").text


@pytest.mark.parametrize("bad", BAD_IDS)
def test_missing_or_malformed_ids_get_404_everywhere(live_server, bad):
    for path in (f"/runs/{bad}", f"/runs/{bad}.json", f"/runs/{bad}.csv", f"/api/runs/{bad}",
                 f"/runs/{bad}/preview.png", f"/runs/{bad}/positions.svg"):
        response = get(live_server, path)
        assert response.status_code == 404, path
    if "%2F" in bad:
        return  # decoded to more path segments: no route at all, the server's plain 404
    page = get(live_server, f"/runs/{bad}")
    assert "There is no saved run at this address" in page.text
    assert "no saved run" in get(live_server, f"/api/runs/{bad}").json()["message"]


def test_unknown_chart_of_a_run_is_404(live_server, saved):
    run_id, _ = saved
    assert get(live_server, f"/runs/{run_id}/secrets.svg").status_code == 404
    assert get(live_server, f"/runs/{run_id}/positions.gif").status_code == 404


def test_run_preview_and_chart_downloads_are_real_images(live_server, saved):
    run_id, _ = saved
    preview = get(live_server, f"/runs/{run_id}/preview.png")
    assert preview.headers["content-type"] == "image/png"
    assert png_size(preview.content) == (1200, 630)
    for chart in ("positions", "lengths"):
        svg = get(live_server, f"/runs/{run_id}/{chart}.svg")
        assert svg.headers["content-type"].startswith("image/svg+xml")
        assert svg.text.startswith('<svg xmlns="http://www.w3.org/2000/svg"')
        assert 'class="bar"' in svg.text
        image = get(live_server, f"/runs/{run_id}/{chart}.png")
        frame = measured_vs_model(["1"], [0.5], [0.5])
        assert png_size(image.content) == (2 * frame.width, 2 * frame.height)  # twice its size
        assert "attachment" in image.headers["content-disposition"]


def axis_titles(svg: str) -> set[str]:
    return set(re.findall(r'class="axis-title"[^>]*>([^<]*)</text>', svg))


def test_the_preview_and_the_chart_files_name_their_axes_as_the_run_page_does(live_server,
                                                                               saved, app_state):
    run_id, _ = saved
    page = axis_titles(get(live_server, f"/runs/{run_id}").text)
    preview = axis_titles(run_preview_svg(app_state.store.get(run_id)))
    assert preview and preview <= page
    for chart in ("positions", "lengths"):
        drawn = axis_titles(get(live_server, f"/runs/{run_id}/{chart}.svg").text)
        assert drawn and drawn <= page
    assert "share accepting i" in preview  # the per-position chart: of the cycles that got to i


def test_a_corrupted_database_gets_a_clear_page_not_a_500(tmp_path):
    broken = tmp_path / "runs.db"
    broken.write_bytes(b"this is not a database " * 400)
    with TestClient(create_app(Settings(load_models=False, db=str(broken))),
                    base_url="http://127.0.0.1") as client:
        page = client.get(f"/runs/{new_run_id()}")
        assert page.status_code == 503
        assert "Saved runs are unavailable" in page.text
        assert "file is not a database" in page.text
        api = client.get(f"/api/runs/{new_run_id()}")
        assert api.status_code == 503 and "cannot read" in api.json()["message"]
        assert client.get("/").status_code == 200  # the rest of the page still works


def test_a_record_the_server_cannot_read_gets_a_clear_page(live_server, app_state):
    run_id = app_state.store.save({"settings": {"prompt": "x"}, "cycles": [{"index": 0}],
                                   "summary": {"k": 4}})
    page = get(live_server, f"/runs/{run_id}")
    assert page.status_code == 503 and "in a form this server cannot read" in page.text
    assert get(live_server, f"/api/runs/{run_id}").status_code == 503


def test_a_saved_runs_preview_is_drawn_before_anyone_asks(live_server, app_state):
    run_id = stream(live_server, BODY | {"seed": 11})[-1][1]["id"]
    app_state.runs.on_finished.last_preview.result(timeout=60)
    renderer = app_state.renderer
    hits, drawn = renderer.hits, renderer.drawn
    assert png_size(get(live_server, f"/runs/{run_id}/preview.png").content) == (1200, 630)
    assert (renderer.hits, renderer.drawn) == (hits + 1, drawn)  # not drawn on request
