"""Saved runs: the permalink page with its replay, the JSON and CSV exports, the API entry,
the link-preview image and the chart downloads."""

from __future__ import annotations

from typing import Annotated, Any, Literal
from urllib.parse import urlencode

from fastapi import APIRouter, Path, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response
from pydantic import BaseModel

from app.charts import BarChart
from app.errors import Problem, error_responses
from app.params import Slider, parse_controls
from app.preview import chart_svg, export, png_response
from app.render import summary_context
from app.saved.cards import run_preview_svg
from app.saved.csv_export import token_rows
from app.saved.loading import SavedKind, load_record
from app.saved.replay import cycle_events, replay_frames, replay_scale_ms, summary_event
from app.saved.titles import CHARTS, run_title, short_prompt
from app.store import RunStore
from app.templating import templates

router = APIRouter(tags=["saved runs"])

SPEEDS = ("1", "0.25", "0.1")  # real time, and the two slow motions
RunId = Annotated[str, Path(description="the run's id, as in its /runs/{id} link")]


class TokenOut(BaseModel):
    id: int
    text: str
    kind: Literal["accepted", "rejected", "discarded", "target"]


class CycleOut(BaseModel):
    index: int
    tokens: list[TokenOut]
    draft_ms: float
    verify_ms: float
    cycle_ms: float
    k: int
    n_accepted: int
    rejected: bool
    draft_step_ms: list[float]
    overlap: list[float]
    n_emitted: int


class SavedRunOut(BaseModel):
    """A saved live run: what was asked, where it ran, every cycle, and what was measured."""

    id: str
    created: str
    kind: str
    pair: dict[str, Any]
    settings: dict[str, Any]
    machine: dict[str, Any]
    cycles: list[CycleOut]
    summary: dict[str, Any]
    baseline: dict[str, Any]


RUNS = SavedKind("run", RunStore.get, lambda r: (cycle_events(r), summary_event(r)),
                 "live runs still work; new runs are not saved")


def _load(request: Request, run_id: str, html: bool) -> dict[str, Any] | Response:
    return load_record(request, run_id, RUNS, html)


@router.get("/api/runs/{run_id}", response_model=SavedRunOut,
            summary="A saved run: settings, pair, machine, every cycle and the summary",
            responses={**error_responses(400),
                       404: {"model": Problem, "description": "no run with this id"},
                       503: {"model": Problem, "description": "the database cannot be read"}})
def api_run(request: Request, run_id: RunId):
    """Every finished live run is saved; its `saved` stream event gives the id. Cycles carry
    their tokens (`id`, `text`, `kind`) and timings in milliseconds."""
    return _load(request, run_id, html=False)


@router.get("/runs/{run_id}.json", include_in_schema=False)
def run_json(request: Request, run_id: str):
    record = _load(request, run_id, html=False)
    if isinstance(record, Response):
        return record
    return JSONResponse(SavedRunOut(**record).model_dump(), headers={
        "Content-Disposition": f'inline; filename="specscope-run-{run_id}.json"'})


@router.get("/runs/{run_id}.csv", include_in_schema=False)
def run_csv(request: Request, run_id: str):
    record = _load(request, run_id, html=False)
    if isinstance(record, Response):
        return record
    return Response(token_rows(record), media_type="text/csv; charset=utf-8", headers={
        "Content-Disposition": f'attachment; filename="specscope-run-{run_id}.csv"'})


@router.get("/runs/{run_id}/preview.png", include_in_schema=False)
def run_preview(request: Request, run_id: str):
    record = _load(request, run_id, html=False)
    if isinstance(record, Response):
        return record
    return png_response(request.app.state.renderer, run_preview_svg(record))


@router.get("/runs/{run_id}/{chart}.{fmt}", include_in_schema=False)
def run_chart(request: Request, run_id: str, chart: str, fmt: str):
    record = _load(request, run_id, html=False)
    if isinstance(record, Response):
        return record
    if chart not in CHARTS or fmt not in ("svg", "png"):
        return JSONResponse(status_code=404, content={
            "message": "a run's charts are positions and lengths, as .svg or .png"})
    context = summary_context(summary_event(record))
    bars: BarChart = context[chart]
    labels = CHARTS[chart]
    if chart == "lengths":  # a share of its base, cycles or proposals, as the page says
        labels = labels | {"y_label": f"share of {context['base_short']}"}
    svg = chart_svg(bars, "_bar_chart.html", **labels)
    return export(request.app.state.renderer, svg, fmt, f"specscope-run-{run_id}-{chart}")


def _replay_state(query: list[tuple[str, str]], total: int) -> tuple[int, str, list[str]]:
    """The replay's place (cycles shown) and speed from the link, with notices for what was
    changed."""
    values, notices = parse_controls(
        query, {"cycle": Slider("cycle", "cycle", 0, total, 1, total, integer=True)})
    speed = next((raw for key, raw in query if key == "speed"), "1")
    if speed not in SPEEDS:
        notices.append(f"speed={speed[:12]!r} is not one of 1, 0.25 or 0.1; using 1.")
        speed = "1"
    return int(values["cycle"]), speed, notices


@router.get("/runs/{run_id}", response_class=HTMLResponse, include_in_schema=False)
def run_page(request: Request, run_id: str):
    record = _load(request, run_id, html=True)
    if isinstance(record, Response):
        return record
    cycles = cycle_events(record)
    frames = replay_frames(cycles, record.get("baseline", {}).get("step_ms"))
    summary = summary_event(record)
    charts = summary_context(summary)
    query = list(request.query_params.multi_items())
    shown, speed, notices = _replay_state(query, len(cycles))
    embed = request.query_params.get("embed") == "1"
    page_url = str(request.url_for("run_page", run_id=run_id))
    context = {
        "record": record,
        "run_id": run_id,
        "frames": frames,
        "scale_ms": replay_scale_ms(frames),
        "shown": shown,
        "speed": speed,
        "notices": notices,
        "s": summary,
        "page_title": f"{run_title(record)} · specscope",
        "meta": {
            "title": run_title(record),
            "description": f"A live speculative-decoding run on "
                           f"{record['pair'].get('label') or record['pair'].get('name')}: "
                           f"“{short_prompt(record['settings']['prompt'])}”",
            "url": page_url,
            "image": str(request.url_for("run_preview", run_id=run_id)),
        },
        **charts,
        "sliders_link": urlencode(charts["use"]),
    }
    return templates.TemplateResponse(request, "run_embed.html" if embed else "run.html",
                                      context)
