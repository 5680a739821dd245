"""``GET /healthz``: a cheap liveness and readiness answer for container health checks.

It touches no model and renders nothing: whether the model pairs are loaded, and the run
queue's length. 200 while the server can do what it was configured to do; 503 when it was
asked to load models and could not (the slider page still works, live runs do not).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from engine.settings import Settings

router = APIRouter(tags=["health"])


@router.get(
    "/healthz",
    summary="Whether the server is up, its models are loaded, and how many runs wait",
    responses={503: {"description": "the models were to be loaded and could not be"}},
)
def healthz(request: Request) -> JSONResponse:
    settings: Settings = request.app.state.settings
    manager = getattr(request.app.state, "runs", None)
    error = getattr(request.app.state, "load_error", None)
    body: dict[str, Any] = {
        "status": "degraded" if error else "ok",
        "models": {
            "requested": settings.load_models,
            "loaded": manager is not None,
            "pairs": sorted(manager.pairs) if manager else [],
            "error": error,
        },
        "queue": {
            "capacity": settings.queue_size,
            **(manager.status() if manager else {"running": False, "waiting": 0, "completed": 0}),
        },
    }
    return JSONResponse(body, status_code=503 if error else 200,
                        headers={"Cache-Control": "no-store"})
