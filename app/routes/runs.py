"""Live runs as Server-Sent Events: JSON for the API, HTML fragments for the page.

Both streams come from the same ``RunMessage``s; only the rendering differs.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import asdict
from typing import Any

from fastapi import APIRouter, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, StreamingResponse

from app.live import RunRequest
from app.render import render_page_message
from app.runs import QueueFull, Run, RunManager, RunMessage
from app.settings import Settings
from engine.decoder.events import GenerationConfig

router = APIRouter(tags=["runs"])

KEEPALIVE_S = 15.0
RETRY_AFTER_S = 30
STREAM_HEADERS = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}


def _reject(field: str, message: str, given: Any) -> RequestValidationError:
    return RequestValidationError([{"loc": ("body", field), "msg": message, "input": given}])


def _config(request: Request, body: RunRequest) -> GenerationConfig:
    """The engine's settings for this body, or a 422 naming what the server will not run."""
    settings: Settings = request.app.state.settings
    if not body.prompt.strip():
        raise _reject("prompt", "the prompt is empty: give some text to continue", body.prompt)
    if len(body.prompt) > settings.max_prompt_chars:
        raise _reject("prompt", f"at most {settings.max_prompt_chars} characters allowed",
                      f"{len(body.prompt)} characters")
    if body.max_new_tokens > settings.max_new_tokens_limit:
        raise _reject("max_new_tokens", f"at most {settings.max_new_tokens_limit} allowed here",
                      body.max_new_tokens)
    if body.pair not in settings.pairs:
        raise _reject("pair", f"choose one of {', '.join(sorted(settings.pairs))}", body.pair)
    return GenerationConfig(prompt=body.prompt, k=body.k, temperature=body.temperature,
                            top_p=body.top_p, max_new_tokens=body.max_new_tokens, seed=body.seed)


def _manager(request: Request) -> RunManager | None:
    return getattr(request.app.state, "runs", None)


def _sse(kind: str, data: Any) -> str:
    return f"event: {kind}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n"


def _api_data(message: RunMessage) -> Any:
    if message.kind == "cycle":
        e = message.event
        return {"index": e.index, "tokens": [asdict(t) for t in e.tokens],
                "draft_ms": e.draft_ms, "verify_ms": e.verify_ms, "running": message.data}
    if message.kind == "summary":
        return asdict(message.event)
    if message.kind == "saved":
        return message.data
    if message.kind == "error":
        return {"message": message.data}
    if message.kind == "queued":
        return {"position": message.data}
    return {}


async def _stream(
    request: Request, body: RunRequest, render: Callable[[RunMessage], Any]
) -> StreamingResponse | JSONResponse:
    config = _config(request, body)
    manager = _manager(request)
    if manager is None or body.pair not in manager.pairs:
        reason = getattr(request.app.state, "load_error", None) or "models are not loaded"
        return JSONResponse(status_code=503, content={
            "message": f"live runs are unavailable on this server: {reason}"})
    try:
        run = manager.submit(body.pair, config)
    except QueueFull:
        return JSONResponse(
            status_code=429,
            headers={"Retry-After": str(RETRY_AFTER_S)},
            content={"message": f"The engine is busy and {manager.queue_size} runs are already "
                                f"waiting. Please try again in about {RETRY_AFTER_S} s."},
        )
    return StreamingResponse(_events(manager, run, render), media_type="text/event-stream",
                             headers=STREAM_HEADERS)


async def _events(
    manager: RunManager, run: Run, render: Callable[[RunMessage], Any]
) -> AsyncIterator[str]:
    # When the client goes away the server cancels this generator; `finally` frees the engine.
    try:
        while True:
            try:
                message = await asyncio.wait_for(run.messages.get(), KEEPALIVE_S)
            except TimeoutError:
                yield ": keep-alive\n\n"
                continue
            if message.kind == "end":
                return
            yield _sse(message.kind, render(message))
    finally:
        manager.cancel(run)


@router.post(
    "/api/runs",
    summary="Run speculative decoding live and stream its cycles",
    response_class=StreamingResponse,
    responses={
        200: {"content": {"text/event-stream": {}},
              "description": "events `queued`, `cycle`, `baseline`, `summary`, `saved`, "
                             "`error`"},
        422: {"description": "invalid body"},
        429: {"description": "queue full; see Retry-After"},
    },
)
async def create_run(request: Request, body: RunRequest):
    """Streams `cycle` events (index, tokens with id/text/kind, draft_ms, verify_ms), then,
    after a target-only run of the same prompt and settings, one `summary` event with
    `alpha_counted, alpha_expected, draft_acceptance_rate, mean_acceptance_length, c, v,
    baseline_tok_s, spec_tok_s, speedup_measured, speedup_predicted` and more, and one
    `saved` event: the run's `id` and `url` (see `GET /api/runs/{run_id}`), or an `error`
    saying why it was not saved. An `error` event (with `message`) ends a run that failed."""
    return await _stream(request, body, _api_data)


@router.post("/runs", include_in_schema=False)
async def create_page_run(request: Request, body: RunRequest):
    """The page's stream: the same events, rendered as HTML fragments."""
    return await _stream(request, body, render_page_message)


@router.get("/api/runs/status", summary="Whether the engine is busy and how many runs wait")
def run_status(request: Request) -> dict[str, Any]:
    manager = _manager(request)
    if manager is None:
        return {"available": False, "running": False, "waiting": 0, "completed": 0}
    return {"available": True, **manager.status()}
