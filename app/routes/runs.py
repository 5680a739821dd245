"""Live runs as Server-Sent Events: JSON for the API, the same JSON with HTML fragments for
the page. Both streams come from the same :class:`app.run_messages.RunMessage`s."""


import dataclasses
from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, Field

from app.body_limits import body_limits, too_large
from app.errors import error_responses
from app.live import parse_run_tree, run_request_model
from app.render import render_page_message
from app.run_messages import MessageKind, RunMessage, message_json
from app.run_queue import QueueFull, RunManager, Stopping
from app.streams import engine_busy, event_stream
from engine.analytic.drafters import DRAFTER_WORDS, HEAD_DRAFTERS
from engine.decoder.drafter_spec import DrafterSpec
from engine.decoder.events import GenerationConfig
from engine.settings import Settings


def _reject(field: str, message: str, given: Any) -> RequestValidationError:
    return RequestValidationError([{"loc": ("body", field), "msg": message, "input": given}])


def _config(body: BaseModel) -> GenerationConfig:
    """The engine's settings for a body the schema has accepted."""
    return GenerationConfig(prompt=body.prompt, k=body.k, temperature=body.temperature,
                            top_p=body.top_p, max_new_tokens=body.max_new_tokens, seed=body.seed)


def _manager(request: Request) -> RunManager | None:
    return getattr(request.app.state, "runs", None)


async def _stream(
    request: Request, body: BaseModel, render: Callable[[RunMessage], Any]
) -> StreamingResponse | JSONResponse:
    config = _config(body)
    manager = _manager(request)
    if manager is None or body.pair not in manager.pairs:
        reason = getattr(request.app.state, "load_error", None) or "models are not loaded"
        return JSONResponse(status_code=503, content={
            "message": f"live runs are unavailable on this server: {reason}"})
    head = manager.heads.get(body.pair, {}).get(body.drafter)
    if body.drafter in HEAD_DRAFTERS and head is None:
        raise _reject("drafter", f"pair {body.pair!r} has no {DRAFTER_WORDS[body.drafter]}: "
                                 "choose the draft model (\"model\") or prompt lookup "
                                 "(\"ngram\")", body.drafter)
    if body.drafter == "model" and manager.pairs[body.pair].draft is None:
        raise _reject("drafter", f"pair {body.pair!r} has no draft model: choose prompt lookup "
                                 "(\"ngram\")", body.drafter)
    try:
        tree = parse_run_tree(body.tree, body.drafter)
        drafter = DrafterSpec(body.drafter, head=head, tree=tree)
        if tree:
            drafter.check(manager.pairs[body.pair], body.k)
    except ValueError as error:
        raise _reject("tree", str(error), body.tree[:40]) from None
    if tree:  # the tree's depth is the positions a cycle can accept
        config = dataclasses.replace(config, k=drafter.depth)
    try:
        # tokenizes: a prompt too long is refused here
        manager.check(body.pair, config, drafter)
    except ValueError as error:
        raise _reject("prompt", str(error), f"{len(body.prompt)} characters") from None
    try:
        run = manager.submit(body.pair, config, body.repeats, drafter=drafter)
    except Stopping:
        return JSONResponse(status_code=503, content={
            "message": "the server is shutting down; please try again in a moment"})
    except QueueFull:
        return engine_busy(manager)
    return event_stream(manager, run, render)


STREAM_DESCRIPTION = (
    "Server-Sent Events, each named by its kind: `queued` (`position`), `cycle` (`index`, "
    "`tokens` as `{id, text, kind}`, `draft_ms`, `verify_ms`, `baseline_ms`: the target-only "
    "time for the same tokens, `running` figures, `drafter`, `n_proposed`: the draft tokens of "
    "the cycle, 0..k for prompt lookup, and for it `match_n` and `match_start`: the n-gram that "
    "matched and where it starts in the prompt and output's token ids; `tree`, for a run "
    "with a token tree: its `nodes` ({id, text, kind}), `parents` (0: the root), `shape` "
    "(the tree as the body wrote it), and for the Medusa heads' static trees `paths` of "
    "ranks and `ranks`: the rank of the target's token at each depth reached; the first "
    "repeat's cycles), `repeat` "
    "(`repeat`, `repeats`: a further measurement started), `summary` (the run against the "
    "target-only run, interleaved with it, over all repeats), `saved` "
    "(`id` and `url` of the saved run, see `GET /api/runs/{run_id}`, or `error`: why it was "
    "not saved), `error` (`message`; the run ended early)."
)


# One event of the stream as schemathesis and OpenAPI 3.2 read it; ``data`` is JSON.
SSE_EVENT = {
    "type": "object",
    "required": ["event", "data"],
    "properties": {
        "event": {"type": "string",
                  "enum": [k.value for k in MessageKind if k is not MessageKind.END]},
        "data": {"type": "string", "contentMediaType": "application/json"},
    },
}


def router(settings: Settings) -> APIRouter:
    """The run endpoints for this server: the body's schema carries its limits and pairs."""
    RunRequest = run_request_model(settings)  # noqa: N806 - a class
    api = APIRouter(tags=["runs"])

    @api.post(
        "/api/runs",
        summary="Run speculative decoding live and stream its cycles",
        response_class=StreamingResponse,
        responses={
            200: {"content": {"text/event-stream": {"schema": SSE_EVENT}},
                  "description": STREAM_DESCRIPTION},
            413: too_large(body_limits(settings)["/api/runs"]),
            **error_responses(400, 403, 422, 429, 503),
        },
    )
    async def create_run(request: Request, body: RunRequest):  # type: ignore[valid-type]
        """Streams `cycle` events (a target-only run of the same prompt and settings is
        interleaved with them), then, after `repeats` measurements, one `summary` event with
        `alpha_counted, alpha_expected, draft_acceptance_rate, mean_acceptance_length, c, v,
        baseline_tok_s, spec_tok_s, speedup_measured, speedup_low, speedup_high,
        speedup_median_costs, speedup_per_repeat, speedup_predicted` and more. An `error`
        event (with `message`) ends a run that failed. A prompt that does not fit in the
        models' context is refused with 422 before the stream starts."""
        return await _stream(request, body, message_json)

    @api.post("/runs", include_in_schema=False)
    async def create_page_run(request: Request, body: RunRequest):  # type: ignore[valid-type]
        """The page's stream: the same events, with HTML fragments added."""
        return await _stream(request, body, render_page_message)

    @api.get("/api/runs/status", summary="Whether the engine is busy and how many runs wait",
             responses=error_responses(400))
    def run_status(request: Request) -> RunStatus:
        manager = _manager(request)
        if manager is None:
            return RunStatus(available=False, running=False, waiting=0, completed=0)
        return RunStatus(available=True, **manager.status())

    return api


class RunStatus(BaseModel):
    available: bool = Field(description="whether live runs are offered (models loaded)")
    running: bool = Field(description="whether a run is on the engine now")
    waiting: int = Field(ge=0, description="runs waiting in the queue")
    completed: int = Field(ge=0, description="runs finished since the server started")
