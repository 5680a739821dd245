"""Saved probes over HTTP: every finished probe gets a permalink that shows the result as the
panel did, a JSON export and an API entry; bad ids get 404, unreadable records a clear page."""

from __future__ import annotations

import html
import json
import re

import httpx
import pytest
from support.probes import FAST, probe, result_of

from app.store import new_run_id

BAD_IDS = ["nope", new_run_id(), "A" * 21, "A" * 23, "..%2F..%2Fsettings", "%00" * 8,
           "x" * 5000]


@pytest.fixture(scope="module")
def saved(live_server) -> tuple[str, list[tuple[str, dict]]]:
    stream = probe(live_server)
    kind, data = stream[-1]
    assert kind == "saved", stream[-1]
    return data["id"], stream


def get(server, path: str) -> httpx.Response:
    return httpx.get(server.url + path, timeout=30)


def test_the_last_event_says_where_the_probe_is_kept(saved):
    probe_id, _ = saved
    _, data = saved[1][-1]
    assert data == {"id": probe_id, "url": f"/probes/{probe_id}"}
    assert len(probe_id) == 22


def test_the_api_entry_holds_the_settings_and_the_whole_result(live_server, saved):
    probe_id, stream = saved
    record = get(live_server, f"/api/probes/{probe_id}").json()
    assert record["id"] == probe_id and record["created"][:2] == "20"
    assert record["result"] == result_of(stream)  # rows, notices and chart data
    assert record["settings"] == {"sets": ["python", "jargon"], "temperatures": [0.0, 1.0],
                                  "k": 3, "max_new_tokens": 5, "prompts_per_set": 2,
                                  "seed": 1, "file_name": None, "prompts": 4,
                                  "engine": "specscope", "drafter": "model"}
    assert record["pair"]["name"] == "tiny" and record["pair"]["label"] == "tiny test pair"
    assert record["machine"]["device"] == "cpu"
    download = get(live_server, f"/probes/{probe_id}.json")
    assert download.json() == record
    assert f'filename="specscope-probe-{probe_id}.json"' in download.headers[
        "content-disposition"]


def test_the_api_entry_is_in_the_openapi_docs_with_its_404(live_server):
    schema = get(live_server, "/openapi.json").json()
    entry = schema["paths"]["/api/probes/{probe_id}"]["get"]
    assert set(entry["responses"]) >= {"200", "404", "503"}
    assert "SavedProbeOut" in str(entry["responses"]["200"])
    assert "Problem" in str(entry["responses"]["404"])


def test_the_probe_page_shows_the_result_as_the_panel_did(live_server, saved):
    probe_id, _ = saved
    html = get(live_server, f"/probes/{probe_id}").text
    assert html.count("Use these numbers") == 4 and html.count('class="chart') >= 2
    assert 'class="probe-summary"' in html and 'data-rows="4"' in html
    # FAST: two sets at temperatures 0 and 1, k = 3.
    assert re.search(r"<title>α from \d\.\d\d to \d\.\d\d across 2 kinds of text at 2 "
                     r"temperatures, 3 drafts a cycle · specscope</title>", html), html[:400]
    link = ('/?probe_set=&amp;probe_set=python&amp;probe_set=jargon&amp;probe_t=0&amp;'
            'probe_t=1&amp;probe_k=3&amp;probe_tokens=5&amp;probe_prompts=2#traffic')
    assert f'href="{link}"' in html
    assert "built-in sets python, jargon (first 2 prompts each), 4 prompts" in html
    assert "temperatures 0, 1" in html
    # the same settings' page, restored from that link, has the panel in that state
    page = get(live_server, link.replace("&amp;", "&").split("#")[0]).text
    assert 'value="jargon" checked' in page and 'value="scripture">' in page


def test_the_page_stream_ends_with_the_share_link(live_server):
    stream = probe(live_server, path="/probes")
    kind, data = stream[-1]
    assert kind == "saved"
    assert f'id="share-probe" href="{data["url"]}"' in data["html"]
    assert "Share this probe" in data["html"] and f'{data["url"]}.json' in data["html"]
    page = get(live_server, data["url"])
    assert page.status_code == 200
    assert result_of(stream)["html"] in page.text  # the very fragment the panel showed


def test_an_uploaded_file_probe_says_the_file_is_not_in_the_link(live_server):
    body = b'{"text": "the quick brown fox", "domain": "foxes"}\n'
    stream = probe(live_server, FAST | {"sets": [], "file_name": "mine.jsonl",
                                        "temperatures": "0"}, body)
    record = get(live_server, f"/api/probes/{stream[-1][1]['id']}").json()
    assert record["settings"]["file_name"] == "mine.jsonl" and record["settings"]["sets"] == []
    html = get(live_server, stream[-1][1]["url"]).text
    assert "prompts from mine.jsonl" in html and "the uploaded file is not stored" in html


@pytest.mark.parametrize("bad", BAD_IDS)
def test_missing_or_malformed_ids_get_404_everywhere(live_server, bad):
    for path in (f"/probes/{bad}", f"/probes/{bad}.json", f"/api/probes/{bad}"):
        response = get(live_server, path)
        assert response.status_code == 404, path
        if "%2F" in bad:
            continue  # decoded to more path segments: no route at all, the server's plain 404
        if path.startswith("/api/") or path.endswith(".json"):
            assert "no saved probe at this address" in response.json()["message"]
        else:
            assert "No such probe" in response.text


def test_a_probe_record_the_server_cannot_read_gets_a_clear_page(live_server, app_state):
    probe_id = app_state.store.save_probe({"settings": {"sets": []}, "result": {"rows": 3}})
    response = get(live_server, f"/probes/{probe_id}")
    assert response.status_code == 503
    assert "Saved probes are unavailable" in response.text and "cannot read" in response.text
    assert get(live_server, f"/api/probes/{probe_id}").status_code == 503


def test_a_probe_saved_with_a_lone_surrogate_by_an_older_server_is_served(live_server,
                                                                          app_state, saved):
    """Such a record can no longer be saved; one kept from before reads back with the
    replacement character on the page, the download and the API."""
    record = get(live_server, f"/api/probes/{saved[0]}").json()
    domain = record["result"]["rows"][0]["domain"]
    probe_id = app_state.store.save_probe({name: record[name] for name in
                                           ("pair", "settings", "machine", "result")})
    app_state.store.db.execute(
        "UPDATE probes SET result = replace(result, ?, ?) WHERE id = ?",
        [f'"{domain}"', '"bad \\ud800 domain"', probe_id])
    for path in (f"/probes/{probe_id}", f"/probes/{probe_id}.json", f"/api/probes/{probe_id}"):
        response = get(live_server, path)
        assert response.status_code == 200, path
        assert "bad \ufffd domain" in response.text, path


def test_the_page_offers_a_plan_at_each_rows_alpha_and_its_json_plans_a_mix(live_server, saved,
                                                                          tmp_path, capsys):
    from engine.cli import main

    probe_id, _ = saved
    record = get(live_server, f"/api/probes/{probe_id}").json()
    page = get(live_server, f"/probes/{probe_id}").text
    for row in record["result"]["rows"]:
        link = re.search(rf'href="([^"]*)">{row["domain"]} at temperature '
                         rf'{row["temperature"]:g} \(α', page)
        query = html.unescape(link.group(1))
        assert f"alpha_from=probe%3A{probe_id}%3A{row['temperature']:g}" in query
        assert f"mix={row['domain']}%3A" in query
    # The whole mix at one temperature: the page plans for those domains, weighted by prompts,
    # and says where alpha came from: the probe's pair, temperature and drafting, with the
    # warning that the tiny pair's alpha plans another pair (the page plans Llama 3.1 8B).
    mix_link = re.search(r'href="([^"]*)">the mix of its domains at temperature 1<', page)
    planned = get(live_server, html.unescape(mix_link.group(1))).text
    for row in (r for r in record["result"]["rows"] if r["temperature"] == 1):
        assert f'<tr data-domain="{row["domain"]}">' in planned
        assert f'value="{row["domain"]}:{row["prompts"]}:' in planned
    source = re.search(r'data-figure="plan-alpha-source">(.*?)</p>', planned, re.S).group(1)
    source = html.unescape(source)
    assert f"Alpha measured by a probe (saved probe {probe_id})" in source
    assert "temperature 1" in source and "alpha given by hand" not in source
    assert "differ" in source and "what-if" in source  # the mismatch warning
    # kept in the link and in the form that re-plans it
    assert f"alpha_from=probe%3A{probe_id}%3A1" in html.unescape(planned)
    assert f'<input type="hidden" name="alpha_from" form="controls" value="probe:{probe_id}:1">' \
        in planned
    gone = get(live_server, html.unescape(mix_link.group(1)).replace(probe_id, "A" * 22)).text
    assert "which cannot be read (it is not saved here)" in html.unescape(gone)
    # The download is what `specscope plan --from-probe` reads: a mix over its domains.
    path = tmp_path / "probe.json"
    path.write_text(get(live_server, f"/probes/{probe_id}.json").text)
    assert main(["plan", "--from-probe", str(path), "--temperature", "0", "--mix",
                 "python=3,jargon=1", "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)["plan"]
    alphas = {r["domain"]: r["alpha_counted"] for r in record["result"]["rows"]
              if r["temperature"] == 0}
    assert {d["name"]: (d["weight"], d["alpha"]) for d in plan["domains"]} == {
        "python": (3, alphas["python"]), "jargon": (1, alphas["jargon"])}
