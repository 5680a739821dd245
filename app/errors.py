"""Errors a person can read, in one documented shape: ``{"message": ...}``, plus ``detail``
(which field, what is wrong) when a request is invalid."""

from __future__ import annotations

import logging
import sys
from typing import Any

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException

from app.params import LOOKUP_SLIDERS, SHAPE_SLIDERS, SLIDERS
from app.plan import PLAN_NUMBERS
from app.roofline import NUMBERS
from app.setting_query import QUERY_NUMBERS

log = logging.getLogger("specscope")


class Problem(BaseModel):
    """Why the request was refused, in words."""

    message: str


class FieldProblem(BaseModel):
    loc: list[str | int] = Field(description='where: ["query", "k"], ["body", "prompt"], ...')
    msg: str


class ValidationProblem(Problem):
    """Every invalid value, with a message naming the field and what it allows."""

    detail: list[FieldProblem]


ERRORS: dict[int, tuple[type[BaseModel], str]] = {
    400: (Problem, "the Host header is not one this server answers to"),
    403: (Problem, "a cross-origin POST (another site's page) is refused"),
    404: (Problem, "nothing is saved under this id (unknown, malformed, or pruned)"),
    422: (ValidationProblem, "invalid parameters or body (the message names each field)"),
    429: (Problem, "the queue is full; see Retry-After"),
    503: (Problem, "live runs are unavailable: models not loaded, or the server is stopping"),
}


def error_responses(*codes: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` for these error codes, with the bodies the server sends."""
    return {code: {"model": ERRORS[code][0], "description": ERRORS[code][1]} for code in codes}


# What a pattern means, in words: a regular expression is not a message.
PATTERN_MESSAGES = {
    "prompt": "the prompt is blank: give some text to continue",
    "temperatures": "give up to 5 temperatures from 0 to 2, separated by commas",
    "before": "paste the text of a vLLM server's /metrics page into the first box",

    "positions": "survival rates by position: 1 to 16 numbers from 0 to 1 separated by "
                 "commas, e.g. 0.84,0.6,0.39",
    "mix": "each domain is NAME:WEIGHT:ALPHA (a name without colons, a weight of at least 0, "
           "an alpha from 0 to 1), e.g. code:3:0.85",
}


def _message(error: dict) -> str:
    where, *path = [str(part) for part in error.get("loc", ())] or ["request"]
    name = ".".join(p for p in path if not p.isdigit()) or where  # ("body", 0): the body
    given = str(error.get("input"))[:40]
    # The theory API's query parameters are the sliders: state their range in full.
    # The roofline's gpus, context and batch too, and prompt lookup's pi.
    ranged = SLIDERS | LOOKUP_SLIDERS | SHAPE_SLIDERS | NUMBERS | PLAN_NUMBERS | QUERY_NUMBERS
    if where == "query" and name in ranged:
        return f"{name} must be {ranged[name].allowed()} (got {given!r})"
    if error.get("type") == "json_invalid":
        position = error["loc"][-1] if isinstance(error["loc"][-1], int) else None
        at = f" at character {position}" if position is not None else ""
        return f"body: the JSON is not valid{at}: {error.get('ctx', {}).get('error', '')}"
    blank = error.get("type") in ("string_pattern_mismatch", "string_too_short")
    if blank and name in PATTERN_MESSAGES:
        return f"{name}: {PATTERN_MESSAGES[name]} (got {given!r})"
    return f"{name}: {error.get('msg', 'is invalid')}"


async def validation_error_handler(request: Request, exc: RequestValidationError) -> JSONResponse:
    errors = list(exc.errors())
    messages = [_message(e) for e in errors]
    detail = [FieldProblem(loc=list(e.get("loc", ())), msg=m)
              for e, m in zip(errors, messages, strict=True)]
    problem = ValidationProblem(message="; ".join(messages), detail=detail)
    return JSONResponse(status_code=422, content=problem.model_dump())


def _unreadable_json(cause: BaseException | None) -> str | None:
    """Why Python's JSON reader gave up on a body, for the JSON that is not malformed but
    that it still cannot read (FastAPI answers those with a bare 400), or None."""
    if isinstance(cause, UnicodeDecodeError):
        return "body: the JSON is not UTF-8 text"
    if isinstance(cause, RecursionError):
        return ("body: the JSON nests deeper than the server reads (a request is one object "
                "of strings and numbers)")
    if isinstance(cause, ValueError) and "digits" in str(cause):
        return (f"body: the JSON has a number of more than {sys.get_int_max_str_digits()} "
                "digits")
    if cause is not None:
        return f"body: the JSON cannot be read ({type(cause).__name__})"
    return None


async def http_error_handler(request: Request, exc: HTTPException) -> JSONResponse:
    """404, 405 and the like in the same shape as every other error."""
    message = _unreadable_json(exc.__cause__) if exc.status_code == 400 else None
    if message is not None:
        # Every other invalid body is a 422 naming the body, and so are these.
        problem = ValidationProblem(message=message, detail=[FieldProblem(loc=["body"],
                                                                          msg=message)])
        return JSONResponse(status_code=422, content=problem.model_dump())
    return JSONResponse(status_code=exc.status_code, content={"message": str(exc.detail)},
                        headers=getattr(exc, "headers", None))


async def client_gone_handler(request: Request, exc: Exception) -> Response:
    """A client that went away while sending its body (an abandoned upload, or a connection
    closed at shutdown): nobody is left to answer, and it is no fault of the server's."""
    log.info("%s %s: the client went away before sending the whole body",
             request.method, request.url.path)
    return Response(status_code=400)
