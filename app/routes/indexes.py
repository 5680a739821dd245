"""The indexes of saved runs and probes: ``GET /runs`` and ``GET /probes``, newest first, a
page at a time, each row a record's title, key figures and permalink. Only the page's rows are
read from the database."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from app.params import Slider, parse_controls
from app.routes.saved_probes import probe_title
from app.saved.titles import short_prompt
from app.store import RunStore, StoreUnavailable
from app.templating import templates
from engine.analytic.drafters import DRAFTER_WORDS

router = APIRouter(tags=["saved indexes"])

PAGE_SIZE = 20  # rows on one page of an index


@dataclass(frozen=True)
class Row:
    """One saved record as its index shows it."""

    id: str
    created: str
    title: str
    pair: str
    figures: dict[str, str]  # column heading -> the record's value, in words


def _fixed(value: Any, digits: int = 2, unit: str = "") -> str:
    """A figure to ``digits`` places, or "n/a" where nothing was measured."""
    if not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value):
        return "n/a"
    return f"{value:.{digits}f}{unit}"


def _pair(record: dict[str, Any]) -> str:
    pair = record.get("pair") if isinstance(record.get("pair"), dict) else {}
    return str(pair.get("label") or pair.get("name") or "unknown pair")


def run_row(record: dict[str, Any]) -> Row:
    """A saved run's row: its prompt as the title; the drafter, k, tokens, measured speedup
    and counted alpha as they were saved."""
    settings = record.get("settings") or {}
    summary = record.get("summary") or {}
    drafter = settings.get("drafter", "model")
    tree = summary.get("tree") or ""
    shape = f"{settings.get('k', summary.get('k', '?'))}" + (f" (tree {tree})" if tree else "")
    return Row(record["id"], record["created"],
               f"“{short_prompt(str(settings.get('prompt', '')), 60)}”", _pair(record), {
                   "drafter": DRAFTER_WORDS.get(drafter, str(drafter)),
                   "k": shape,
                   "tokens": f"{summary.get('tokens', '?')} of "
                             f"{settings.get('max_new_tokens', '?')}",
                   "speedup measured": _fixed(summary.get("speedup_measured"), unit="×"),
                   "α counted": _fixed(summary.get("alpha_counted")),
               })


def probe_row(record: dict[str, Any]) -> Row:
    """A saved probe's row: what it found as the title (its permalink's title); the prompts,
    temperatures, k and drafter it was run with."""
    settings = record.get("settings") or {}
    try:
        title = probe_title({"result": {"rows": record["rows"], "k": record["k"]}})
    except (KeyError, TypeError, ValueError):  # a record another version wrote
        title = "A probe this server cannot summarise"
    sets = ", ".join(settings.get("sets") or [])
    prompts = " and ".join(part for part in (sets, settings.get("file_name") or "") if part)
    temperatures = settings.get("temperatures") or []
    return Row(record["id"], record["created"], title, _pair(record), {
        "prompts": f"{prompts or 'none named'} ({settings.get('prompts', '?')})",
        "temperatures": ", ".join(f"{t:g}" for t in temperatures
                                  if isinstance(t, int | float)) or "?",
        "k": str(settings.get("k", record.get("k", "?"))),
        "drafter": {"both": "draft model and prompt lookup"}.get(
            settings.get("drafter", "model"),
            DRAFTER_WORDS.get(settings.get("drafter", "model"), "?")),
    })


@dataclass(frozen=True)
class Index:
    table: str  # "runs" or "probes"
    noun: str  # "run", "probe"
    row: Any  # the record's Row (run_row, probe_row)
    about: str  # how records come to be saved


INDEXES = {
    "runs": Index("runs", "run", run_row,
                  "Every finished live run (“Run live” on the page, or POST /api/runs) is "
                  "saved here."),
    "probes": Index("probes", "probe", probe_row,
                    "Every finished probe (“Your traffic” on the page, or POST /api/probes) "
                    "is saved here."),
}


def _index_page(request: Request, index: Index) -> HTMLResponse:
    store: RunStore | None = request.app.state.store
    try:
        if store is None:
            raise StoreUnavailable(request.app.state.store_error)
        total = store.count(index.table)
        pages = max(1, math.ceil(total / PAGE_SIZE))
        # A link is read as far as it goes: a page past the last shows the last, with a notice.
        values, notices = parse_controls(
            list(request.query_params.multi_items()),
            {"page": Slider("page", "page", 1, pages, 1, 1, integer=True)})
        page = int(values["page"])
        records = store.newest(index.table, PAGE_SIZE, (page - 1) * PAGE_SIZE)
    except StoreUnavailable as error:
        return templates.TemplateResponse(request, "error.html", {
            "heading": f"Saved {index.noun}s are unavailable",
            "message": f"The server cannot read its database of saved {index.noun}s "
                       f"({error}). The rest of the page still works."}, status_code=503)
    return templates.TemplateResponse(request, "saved_index.html", {
        "index": index, "rows": [index.row(r) for r in records], "page": page,
        "pages": pages, "total": total, "first": (page - 1) * PAGE_SIZE + 1,
        "notices": notices, "page_size": PAGE_SIZE,
        "page_title": f"Saved {index.noun}s · specscope",
    })


@router.get("/runs", response_class=HTMLResponse, include_in_schema=False)
def runs_index(request: Request) -> HTMLResponse:
    return _index_page(request, INDEXES["runs"])


@router.get("/probes", response_class=HTMLResponse, include_in_schema=False)
def probes_index(request: Request) -> HTMLResponse:
    return _index_page(request, INDEXES["probes"])
