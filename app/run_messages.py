"""The run-message protocol: what the engine's worker tells the web layer about a live run,
and its one JSON form.

The API streams :func:`message_json` as it is; the page's renderer
(:func:`app.render.render_page_message`) adds HTML fragments to the same JSON. A stream is a
sequence of Server-Sent Events whose event name is the message's kind.
"""

from __future__ import annotations

import json
import threading
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

from engine.decoder.events import Acceptance, CycleEvent, SummaryEvent
from engine.measure.probe import ProbeResult, report_json
from engine.measure.probe_compare import comparison_json


class MessageKind(StrEnum):
    QUEUED = "queued"  # waiting for the engine: ``position`` in the queue (1 = next)
    CYCLE = "cycle"  # one speculative cycle: ``event`` and the ``running`` figures so far
    REPEAT = "repeat"  # the run is measured again: ``repeat`` of ``repeats``
    SUMMARY = "summary"  # ``event``: the run measured against the target-only run
    SAVED = "saved"  # where the finished run or probe was saved (``run_id``, ``url``), or
    # ``error``: why not
    ERROR = "error"  # the run ended early: ``error``, a message for a person
    PROGRESS = "progress"  # a probe measured one more prompt run: ``progress``
    PROBE = "probe"  # ``probe``: a probe's result (engine.measure.probe.ProbeResult)
    END = "end"  # nothing follows; never sent to a client


def timeline_scale_ms(first_cycle_ms: float, first_baseline_ms: float) -> float:
    """What every timeline bar of a run is drawn against: the first cycle (or the target
    alone on its tokens, if slower) fixes it, with room for slower cycles. The live stream and
    a saved run's page both use it, so a saved run's bars are the ones the live panel drew."""
    return 2.0 * max(first_cycle_ms, first_baseline_ms)


@dataclass(frozen=True)
class RunMessage:
    kind: MessageKind
    event: CycleEvent | SummaryEvent | None = None
    running: Acceptance | None = None
    position: int | None = None
    error: str | None = None
    progress: dict[str, Any] | None = None  # done, total, domain, temperature
    probe: ProbeResult | None = None
    # Both drafters probed: prompt lookup's result beside the draft model's ``probe``.
    probe_ngram: ProbeResult | None = None
    baseline_ms: float | None = None  # target-only time for the cycle's tokens, taken after it
    scale_ms: float | None = None  # the time the page's timeline bars are drawn against
    repeat: int | None = None
    repeats: int | None = None
    run_id: str | None = None
    url: str | None = None  # the saved record's page: /runs/{id} or /probes/{id}
    # Set once the stream has handed the message to the client (see RunManager._execute).
    delivered: threading.Event = field(default_factory=threading.Event, compare=False)

    @classmethod
    def queued(cls, position: int) -> RunMessage:
        return cls(MessageKind.QUEUED, position=position)

    @classmethod
    def cycle(cls, event: CycleEvent, running: Acceptance, baseline_ms: float,
              scale_ms: float) -> RunMessage:
        return cls(MessageKind.CYCLE, event=event, running=running, baseline_ms=baseline_ms,
                   scale_ms=scale_ms)

    @classmethod
    def measuring_again(cls, repeat: int, repeats: int) -> RunMessage:
        return cls(MessageKind.REPEAT, repeat=repeat, repeats=repeats)

    @classmethod
    def summary(cls, event: SummaryEvent) -> RunMessage:
        return cls(MessageKind.SUMMARY, event=event)

    @classmethod
    def saved(cls, run_id: str, url: str | None = None) -> RunMessage:
        return cls(MessageKind.SAVED, run_id=run_id, url=url or f"/runs/{run_id}")

    @classmethod
    def not_saved(cls, error: str) -> RunMessage:
        return cls(MessageKind.SAVED, error=error)

    @classmethod
    def failed(cls, error: str) -> RunMessage:
        return cls(MessageKind.ERROR, error=error)


def message_json(message: RunMessage) -> dict[str, Any]:
    """The message's data as the API streams it (the page's fragments build on it)."""
    if message.kind is MessageKind.CYCLE:
        e = message.event
        return {"index": e.index, "tokens": [asdict(t) for t in e.tokens],
                "draft_ms": e.draft_ms, "verify_ms": e.verify_ms,
                "baseline_ms": message.baseline_ms, "running": asdict(message.running),
                "drafter": e.drafter, "n_proposed": e.proposed, "match_n": e.match_n,
                "match_start": e.match_start, "match_text": e.match_text,
                "match_before": e.match_before,
                "tree": None if e.tree is None else asdict(e.tree)}
    if message.kind is MessageKind.SUMMARY:
        return asdict(message.event)
    if message.kind is MessageKind.SAVED:
        if message.run_id is None:
            return {"error": message.error}
        return {"id": message.run_id, "url": message.url or f"/runs/{message.run_id}"}
    if message.kind is MessageKind.ERROR:
        return {"message": message.error}
    if message.kind is MessageKind.QUEUED:
        return {"position": message.position}
    if message.kind is MessageKind.PROGRESS:
        return message.progress
    if message.kind is MessageKind.PROBE:
        if message.probe_ngram is not None:
            return comparison_json(message.probe, message.probe_ngram)
        return report_json(message.probe)
    if message.kind is MessageKind.REPEAT:
        return {"repeat": message.repeat, "repeats": message.repeats}
    return {}


def sse(kind: str, data: Any) -> str:
    """One Server-Sent Event."""
    return f"event: {kind}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n"
