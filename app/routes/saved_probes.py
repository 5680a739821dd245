"""Saved probes: the permalink page (the result as the traffic panel showed it), the JSON
export and the API entry. Every finished probe is saved; its `saved` stream event gives the id.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response
from pydantic import BaseModel, Field

from app.errors import Problem, error_responses
from app.plan import mix_hrefs, row_hrefs
from app.saved.loading import SavedKind, load_record
from app.store import RunStore
from app.templating import templates
from app.traffic.render import render_probe
from app.traffic.state import TrafficState
from engine.measure.probe import ProbeResult, ProbeRow

router = APIRouter(tags=["saved probes"])

ProbeId = Annotated[str, Path(description="the probe's id, as in its /probes/{id} link")]


class SavedProbeOut(BaseModel):
    """A saved probe: what was asked, the pair, where it ran, and the result with its charts'
    data (the `probe` stream event's body)."""

    id: str
    created: str
    pair: dict[str, Any]
    settings: dict[str, Any]
    machine: dict[str, Any]
    result: dict[str, Any] = Field(description="the draft model's result (or prompt lookup's, "
                                   "settings.drafter = ngram); with both drafters "
                                   "(settings.drafter = both) prompt lookup's is its `ngram`")


def probe_result(stored: dict[str, Any]) -> ProbeResult:
    """A stored result (a record's ``result``, or its ``ngram`` when both drafters were
    probed) as the engine's :class:`ProbeResult` again, for the page's template."""
    fields = {name: value for name, value in stored.items() if name not in ("charts", "ngram")}
    return ProbeResult(**{**fields, "rows": [ProbeRow(**row) for row in fields["rows"]]})


def panel_query(settings: dict[str, Any]) -> str:
    """The traffic panel's link state for a stored probe's settings (an uploaded file cannot
    travel in a link: its prompts are not stored)."""
    return TrafficState(tuple(settings["sets"]), tuple(settings["temperatures"]),
                        settings["k"], settings["max_new_tokens"],
                        settings["prompts_per_set"],
                        settings.get("engine", "specscope"),
                        settings.get("drafter", "model")).query()


PROBES = SavedKind("probe", RunStore.get_probe,
                   lambda r: (probe_result(r["result"]), panel_query(r["settings"]),
                              probed(r["settings"])),
                   "new probes still work; they are not saved")


def _load(request: Request, probe_id: str, html: bool) -> dict[str, Any] | Response:
    return load_record(request, probe_id, PROBES, html)


@router.get("/api/probes/{probe_id}", response_model=SavedProbeOut,
            summary="A saved probe: settings, pair, machine and the result with chart data",
            responses={**error_responses(400, 404),
                       503: {"model": Problem, "description": "the database cannot be read"}})
def api_probe(request: Request, probe_id: ProbeId):
    """Every finished probe is saved; the `saved` event of `POST /api/probes` gives the id.
    `result` is the `probe` event's body: the rows, the notices and the charts' data."""
    return _load(request, probe_id, html=False)


@router.get("/probes/{probe_id}.json", include_in_schema=False)
def probe_json(request: Request, probe_id: str):
    record = _load(request, probe_id, html=False)
    if isinstance(record, Response):
        return record
    return JSONResponse(SavedProbeOut(**record).model_dump(), headers={
        "Content-Disposition": f'inline; filename="specscope-probe-{probe_id}.json"'})


def probed(settings: dict[str, Any]) -> str:
    """Which prompts were probed, in words."""
    parts = []
    if settings["sets"]:
        parts.append(f"built-in sets {', '.join(settings['sets'])} "
                     f"(first {settings['prompts_per_set']} prompts each)")
    if settings.get("file_name"):
        parts.append(f"prompts from {settings['file_name']}")
    count = settings["prompts"]
    return f"{' and '.join(parts)}, {count} prompt{'s' if count != 1 else ''}"


def probe_title(record: dict[str, Any]) -> str:
    """What the probe found, in one sentence: "α 0.72 on python text at temperature 0, 4
    drafts a cycle", or "α from 0.41 to 0.83 across 3 kinds of text at 2 temperatures, 4
    drafts a cycle"."""
    rows = record["result"]["rows"]
    k = record["result"]["k"]
    drafts = f"{k} draft{'s' if k != 1 else ''} a cycle"
    alphas = [row["alpha_counted"] for row in rows if row["alpha_counted"] is not None]
    if not alphas:  # no rows, or none with a proposal to count alpha from
        return f"A probe with no alpha to show, {drafts}"
    if len(rows) == 1:
        row = rows[0]
        return (f"α {alphas[0]:.2f} on {row['domain']} text at temperature "
                f"{row['temperature']:g}, {drafts}")
    domains = len({row["domain"] for row in rows})
    temperatures = len({row["temperature"] for row in rows})
    texts = f"{domains} kinds of text" if domains > 1 else f"{rows[0]['domain']} text"
    temps = (f"{temperatures} temperatures" if temperatures > 1
             else f"temperature {rows[0]['temperature']:g}")
    return f"α from {min(alphas):.2f} to {max(alphas):.2f} across {texts} at {temps}, {drafts}"


@router.get("/probes/{probe_id}", response_class=HTMLResponse, include_in_schema=False)
def probe_page(request: Request, probe_id: str):
    record = _load(request, probe_id, html=True)
    if isinstance(record, Response):
        return record
    return templates.TemplateResponse(request, "probe.html", {
        "record": record,
        "probe_id": probe_id,
        "page_url": str(request.url_for("probe_page", probe_id=probe_id)),
        "page_title": f"{probe_title(record)} · specscope",
        "title": probe_title(record),
        "probed": probed(record["settings"]),
        "result_html": render_probe(probe_result(record["result"]),
                                    probe_result(record["result"]["ngram"])
                                    if "ngram" in record["result"] else None),
        "panel_link": f"/?{panel_query(record['settings'])}#traffic",
        "plan_mixes": mix_hrefs(record["result"]["rows"],
                                record["result"].get("draft_sample"), probe_id),
        "plan_rows": row_hrefs(record["result"]["rows"], record["result"].get("draft_sample"),
                               probe_id),
    })
