"""Validation errors a person can read: which parameter, what was given, what is allowed."""

from __future__ import annotations

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from app.params import SLIDERS


def _message(error: dict) -> str:
    loc = [str(part) for part in error.get("loc", ()) if part not in ("query", "body")]
    name = ".".join(loc) or "request"
    given = error.get("input")
    slider = SLIDERS.get(name)
    allowed = slider.describe_range() if slider else error.get("msg", "is invalid")
    if slider is None:
        return f"{name}: {allowed}"
    return f"{allowed} (got {str(given)[:40]!r})"


async def validation_error_handler(request: Request, exc: RequestValidationError) -> JSONResponse:
    errors = list(exc.errors())
    messages = [_message(e) for e in errors]
    return JSONResponse(
        status_code=422,
        content={"message": "; ".join(messages), "detail": [
            {"loc": list(e.get("loc", ())), "msg": m} for e, m in zip(errors, messages, strict=True)
        ]},
    )
