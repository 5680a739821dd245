"""A saved record (a run or a probe) loaded for a route, or the page or JSON that says why
it cannot be: 404 for an id with nothing under it, 503 when the database cannot be read or
the record is in a form this server cannot read."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse, Response

from app.store import RunStore, StoreUnavailable
from app.templating import templates


class NotSaved(Exception):
    """Nothing under this id (or the id is not one the server hands out)."""


@dataclass(frozen=True)
class SavedKind:
    noun: str  # "run", "probe"
    get: Callable[[RunStore, str], dict[str, Any] | None]  # None for a malformed id too
    # Reads the record as this server's code will (raises KeyError, TypeError or ValueError
    # for a record written by another version).
    check: Callable[[dict[str, Any]], object]
    meanwhile: str  # what still works while the database cannot be read


def load_record(request: Request, record_id: str, kind: SavedKind,
                html: bool) -> dict[str, Any] | Response:
    """The record, or the error page (``html``) or JSON answer saying why not."""
    try:
        return _record(request, record_id, kind)
    except (NotSaved, StoreUnavailable) as error:
        return _failure(request, error, kind, html)


def saved_record(request: Request, record_id: str, kind: SavedKind) -> dict[str, Any]:
    """The record; :class:`NotSaved` or :class:`StoreUnavailable` saying why not."""
    return _record(request, record_id, kind)


def _record(request: Request, record_id: str, kind: SavedKind) -> dict[str, Any]:
    store: RunStore | None = request.app.state.store
    if store is None:
        raise StoreUnavailable(request.app.state.store_error)
    record = kind.get(store, record_id)
    if record is None:
        raise NotSaved(record_id)
    try:  # a record from another version of the engine reads as a clear error
        kind.check(record)
    except (KeyError, TypeError, ValueError) as error:
        raise StoreUnavailable(f"{kind.noun} {record_id} is in a form this server cannot read "
                               f"({type(error).__name__}: {error})") from error
    return record


def _failure(request: Request, error: Exception, kind: SavedKind, html: bool) -> Response:
    if isinstance(error, NotSaved):
        status, heading = 404, f"No such {kind.noun}"
        message = (f"There is no saved {kind.noun} at this address. The link may be mistyped, "
                   f"or the {kind.noun} was removed to make room for newer ones.")
    else:
        status, heading = 503, f"Saved {kind.noun}s are unavailable"
        message = (f"The server cannot read its database of saved {kind.noun}s ({error}). The "
                   f"page and {kind.meanwhile} until the server's operator repairs or moves "
                   f"the database file.")
    if html:
        return templates.TemplateResponse(request, "error.html", {
            "heading": heading, "message": message}, status_code=status)
    return JSONResponse(status_code=status, content={"message": message})
