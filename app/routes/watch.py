"""/watch: the watched deployments' acceptance over time, live through an event stream and
whole without JavaScript; their exports; and our own /metrics for a team's alerts.

A deployment is named, never addressed: the names are the settings' (``SPECSCOPE_WATCH_URLS``)
and an unknown name is a 404, so no request can make the server fetch anything else.
"""

from __future__ import annotations

import asyncio
import csv
import datetime
import io

from fastapi import APIRouter, Request
from fastapi.responses import (
    HTMLResponse,
    JSONResponse,
    PlainTextResponse,
    Response,
    StreamingResponse,
)
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.exceptions import HTTPException

from app.errors import Problem
from app.streams import KEEPALIVE_S, STREAM_HEADERS
from app.templating import templates
from app.watch.charts import WIDE, time_chart
from app.watch.deployments import Deployment, WatchService
from engine.serving.watch.intervals import CSV_COLUMNS, batch_mix, batch_mix_k, batch_mix_text

router = APIRouter(tags=["watch"])
UNKNOWN = {404: {"model": Problem, "description": "no deployment of that name is watched here "
                                                  "(SPECSCOPE_WATCH_URLS names them)"}}
SHOWN = 240  # intervals drawn (40 min at 10 s)
TABLE_ROWS = 12
SHUTDOWN_TEXT = ("The specscope server is shutting down: live updates stop until it is back, "
                 "and this page reconnects by itself then.")


def _service(request: Request) -> WatchService:
    return request.app.state.watch


def _deployment(request: Request, name: str) -> Deployment:
    found = _service(request).deployments.get(name)
    if found is None:
        raise HTTPException(404, f"no deployment named {name[:64]!r} is watched here (the "
                                 "server's SPECSCOPE_WATCH_URLS names them)")
    return found


def deployment_context(service: WatchService, d: Deployment) -> dict:
    history = service.history(d.name, SHOWN)
    latest = history[-1] if history else None
    measured = [iv for iv in history if iv["state"] == "moving"]
    last_measured = measured[-1] if measured else None
    assumed = d.watch.plan.assumed_alpha if d.watch.plan else None
    alpha_chart = time_chart(history, "Acceptance over time", "alpha", [
        ("counted α", "alpha", lambda iv: iv.get("alpha")),
        ("pooled upper bound", "window-high", lambda iv: iv.get("window_high")),
        ("draft acceptance rate", "rate", lambda iv: iv.get("draft_acceptance_rate")),
        ("break-even α", "break-even-line", lambda iv: iv.get("break_even")),
        ("plan's α", "assumed", lambda iv: assumed if iv.get("state") == "moving" else None),
    ], y_ceiling=1.0, width=WIDE, height=260)
    length_chart = time_chart(history, "Mean acceptance length", "tokens per draft", [
        ("mean acceptance length", "length", lambda iv: iv.get("mean_acceptance_length"))],
        y_floor=1.0)
    batch_chart = time_chart(history, "Batch over time", "requests a step", [
        ("batch", "batch",
         lambda iv: iv.get("batch_mean") if iv.get("batch_mean") is not None
         else iv.get("batch"))])
    return {
        "d": d,
        "latest": latest,
        "last_measured": last_measured,
        "assumed": assumed,
        "charts": [alpha_chart, length_chart, batch_chart],
        "rows": list(reversed(history[-TABLE_ROWS:])),
        "mix": batch_mix_text(batch_mix(history)),
        "mix_k": batch_mix_k(history),
        "positions": (last_measured or {}).get("per_position_acceptance") or [],
    }


@router.get("/watch", response_class=HTMLResponse, include_in_schema=False)
def watch_page(request: Request, deployment: str | None = None) -> HTMLResponse:
    service = _service(request)
    shown = ([_deployment(request, deployment)] if deployment
             else list(service.deployments.values()))
    context = {
        "deployments": [deployment_context(service, d) for d in shown],
        "names": list(service.deployments),
        "selected": deployment,
        "interval_s": service.interval_s,
        "store_error": service.store_error,
        "page_title": "Watch a deployment · specscope",
    }
    return templates.TemplateResponse(request, "watch.html", context)


@router.get("/watch/events", include_in_schema=False)
async def watch_events(request: Request, deployment: str | None = None) -> Response:
    """``update`` events: a deployment's section, rendered again after each scrape; a last
    ``shutdown`` event, saying so, when the server shuts down."""
    service = _service(request)
    names = {_deployment(request, deployment).name} if deployment else set(service.deployments)
    async def events():
        with service.subscription() as queue:
            yield "retry: 5000\n\n"
            while True:
                try:
                    name = await asyncio.wait_for(queue.get(), KEEPALIVE_S)
                except TimeoutError:
                    yield ": keep-alive\n\n"
                    continue
                if name is None:  # the server is shutting down: say so, then end
                    yield f"event: shutdown\ndata: {SHUTDOWN_TEXT}\n\n"
                    return
                if name not in names:
                    continue
                html = templates.get_template("_watch_deployment.html").render(
                    deployment_context(service, service.deployments[name]))
                data = "".join(f"data: {line}\n" for line in html.splitlines())
                yield f"event: update\nid: {name}\n{data}\n"

    return StreamingResponse(events(), media_type="text/event-stream", headers=STREAM_HEADERS)


@router.get("/watch/{name}.json", summary="A watched deployment's intervals (JSON)",
            responses=UNKNOWN)
def watch_json(request: Request, name: str) -> JSONResponse:
    """Every stored interval of the deployment, oldest first, and its batch mix (the share
    of measured time at each batch, for ``specscope plan --batch-mix``)."""
    d = _deployment(request, name)
    history = _service(request).history(d.name)
    mix = batch_mix(history)
    return JSONResponse({"deployment": d.name, "url": d.url, "notices": d.notices,
                         "batch_mix": {str(b): w for b, w in mix.items()},
                         "batch_mix_text": batch_mix_text(mix),
                         "batch_mix_k": batch_mix_k(history), "intervals": history},
                        headers={"Content-Disposition": f'inline; filename="{d.name}.json"'})


@router.get("/watch/{name}.csv", summary="A watched deployment's intervals (CSV)",
            responses={200: {"content": {"text/csv": {"schema": {"type": "string"}}},
                             "description": "one row per interval"}, **UNKNOWN},
            response_class=Response)
def watch_csv(request: Request, name: str) -> Response:
    """One row per interval, oldest first; per-position acceptance as ``pos_1 .. pos_k``."""
    d = _deployment(request, name)
    history = _service(request).history(d.name)
    k = max((len(iv.get("per_position_acceptance") or []) for iv in history), default=0)
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow([*CSV_COLUMNS, *(f"pos_{i + 1}" for i in range(k))])
    for iv in history:
        positions = iv.get("per_position_acceptance") or []
        writer.writerow([_time(iv.get(c)) if c in ("started", "ended") else _cell(iv.get(c))
                         for c in CSV_COLUMNS]
                        + [_cell(x) for x in positions] + [""] * (k - len(positions)))
    return Response(out.getvalue(), media_type="text/csv; charset=utf-8",
                             headers={"Content-Disposition":
                                      f'attachment; filename="{d.name}.csv"'})


def _time(unix_s: float | None) -> str:
    if unix_s is None:
        return ""
    return datetime.datetime.fromtimestamp(unix_s, datetime.UTC).isoformat(
        timespec="milliseconds")


def _cell(value) -> str:
    if value is None:
        return ""
    return f"{value:.6g}" if isinstance(value, float) else str(value)


@router.get("/metrics", summary="The watch's figures as Prometheus gauges",
            response_class=PlainTextResponse)
def metrics(request: Request) -> Response:
    """``specscope_watch_*`` gauges labelled by deployment (docs/api.md has an alert rule)."""
    return Response(generate_latest(_service(request).gauges.registry),
                    media_type=CONTENT_TYPE_LATEST)
