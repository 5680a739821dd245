"""Validation errors a person can read: which parameter, what was given, what is allowed."""

from __future__ import annotations

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from app.params import SLIDERS
from app.roofline import NUMBERS


def _message(error: dict) -> str:
    where, *path = [str(part) for part in error.get("loc", ())] or ["request"]
    name = ".".join(p for p in path if not p.isdigit()) or where  # ("body", 0): the body
    given = str(error.get("input"))[:40]
    # The theory API's query parameters are the sliders: state their range in full.
    ranged = SLIDERS | NUMBERS  # the roofline's gpus, context and batch too
    if where == "query" and name in ranged:
        return f"{ranged[name].describe_range()} (got {given!r})"
    return f"{name}: {error.get('msg', 'is invalid')}"


async def validation_error_handler(request: Request, exc: RequestValidationError) -> JSONResponse:
    errors = list(exc.errors())
    messages = [_message(e) for e in errors]
    return JSONResponse(
        status_code=422,
        content={"message": "; ".join(messages), "detail": [
            {"loc": list(e.get("loc", ())), "msg": m} for e, m in zip(errors, messages, strict=True)
        ]},
    )
