"""Live runs: one engine, one run at a time, a bounded queue, cancellation between cycles.

A single worker thread owns the models, so torch never runs two generations at once. Each run
gets an asyncio queue of :class:`app.run_messages.RunMessage`; the thread posts to it through
the event loop, and the web layer turns the messages into a stream. A run stops at the next
cycle boundary when its client goes away, when it runs past the wall-time limit, or when the
engine raises.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from app.run_messages import MessageKind, RunMessage, timeline_scale_ms
from engine.decoder.common import encode_prompt
from engine.decoder.drafter_spec import DRAFT_MODEL, DrafterSpec
from engine.decoder.events import (
    CycleEvent,
    DoneEvent,
    GenerationConfig,
    StepEvent,
    SummaryEvent,
)
from engine.decoder.loading import ModelPair
from engine.decoder.stats import acceptance
from engine.measure.interleaved import interleaved, measured_summary, pair_up

log = logging.getLogger("specscope.runs")
# Before a timed pass: how long to wait for the stream to send what came before, and then
# for the page to draw it (a browser draws a cycle in a few ms; this leaves it room).
QUIET_WAIT_S, SETTLE_S = 2.0, 0.05


class QueueFull(Exception):
    """More runs are waiting than the server allows."""


class RunStopped(Exception):
    """The run was cancelled, ran past its time limit, or the server is shutting down."""


class Stopping(Exception):
    """The server is shutting down and takes no more runs."""


@dataclass
class LiveRun:
    """One run in the queue or on the engine, and the messages for its client."""

    id: int
    pair_name: str
    config: GenerationConfig
    loop: asyncio.AbstractEventLoop
    messages: asyncio.Queue[RunMessage] = field(default_factory=asyncio.Queue)
    cancelled: threading.Event = field(default_factory=threading.Event)
    repeats: int = 1  # quiet passes timed after the streamed one
    scale_ms: float | None = None  # what the page's per-cycle timeline bars are drawn against
    cycles: int = 0  # cycles computed so far
    cycles_after_cancel: int = 0
    # Other work on the same engine (a probe): job(run, pair, guard) posts its own messages
    # and passes the engine's events through guard(events), which stops it like a live run.
    job: Callable[[LiveRun, ModelPair, Callable], None] | None = None
    timeout_s: float | None = None  # None: the server's run timeout
    stop_message: str = ""  # why the run was stopped, for its client ("": it went away)
    drafter: DrafterSpec = DRAFT_MODEL

    def post(self, message: RunMessage) -> None:
        try:
            self.loop.call_soon_threadsafe(self.messages.put_nowait, message)
        except RuntimeError:  # the event loop is gone: the server is shutting down
            self.cancelled.set()

    def cancel(self) -> None:
        self.cancelled.set()

    def stop(self, message: str) -> None:
        """End the run at its next cycle with an ``error`` event saying ``message``."""
        self.stop_message = message
        self.cancelled.set()


@dataclass
class FinishedRun:
    """Everything a finished run measured, for whoever keeps it."""

    pair_name: str
    pair: ModelPair
    config: GenerationConfig
    cycles: list[CycleEvent]
    baseline_step_ms: list[float]
    summary: SummaryEvent
    drafter: DrafterSpec = DRAFT_MODEL


class RunManager:
    def __init__(
        self, pairs: dict[str, ModelPair], queue_size: int, run_timeout_s: float,
        on_finished: Callable[[FinishedRun], RunMessage] | None = None,
        heads: dict | None = None,
    ):
        """``heads``: each pair's trained heads by drafter ("eagle", "medusa")."""
        self.pairs = pairs
        self.heads = heads or {}
        self.on_finished = on_finished  # its message follows the summary on the stream
        self.queue_size = queue_size
        self.run_timeout_s = run_timeout_s
        self.waiting: deque[LiveRun] = deque()
        self.active: LiveRun | None = None
        self.completed = 0
        self._ids = itertools.count(1)
        self._wake = threading.Condition()
        self._closing = False
        self._thread = threading.Thread(target=self._work, name="specscope-engine", daemon=True)
        self._thread.start()

    # ---- called from the web layer --------------------------------------------------

    def submit(
        self, pair_name: str, config: GenerationConfig | None, repeats: int = 1, job=None,
        timeout_s=None, drafter: DrafterSpec = DRAFT_MODEL,
    ) -> LiveRun:
        """Queue a run (or a ``job``, see :class:`LiveRun`); raise ``QueueFull`` when the
        queue is at its bound, ``Stopping`` when the server is shutting down."""
        with self._wake:
            if self._closing:
                raise Stopping
            # An idle engine takes the first waiting run at once: that run does not wait.
            # So queue_size runs may wait behind the one on the engine, and 0 means none.
            if len(self.waiting) - (self.active is None) >= self.queue_size:
                raise QueueFull
            run = LiveRun(next(self._ids), pair_name, config, asyncio.get_running_loop(),
                          repeats=repeats, job=job, timeout_s=timeout_s, drafter=drafter)
            self.waiting.append(run)
            position = len(self.waiting) if self.active else 0
            self._wake.notify()
        if position:
            run.post(RunMessage.queued(position))
        return run

    def check(
        self, pair_name: str, config: GenerationConfig, drafter: DrafterSpec = DRAFT_MODEL,
    ) -> None:
        """Raise ``ValueError`` (a message for a person) for a run the engine would refuse,
        before it is queued: bad settings, a prompt that does not fit in the context, a
        draft-model run on a pair without a draft."""
        pair = self.pairs[pair_name]
        drafter.check(pair, config.k)
        encode_prompt(pair, config.validate(), lookahead=drafter.lookahead(config.k))

    def cancel(self, run: LiveRun) -> None:
        with self._wake:
            run.cancel()
            if run in self.waiting:
                self.waiting.remove(run)
                self._announce_positions()

    def status(self) -> dict[str, Any]:
        with self._wake:
            return {"running": self.active is not None, "waiting": len(self.waiting),
                    "completed": self.completed}

    def stop_all(self, message: str) -> None:
        """Take no more runs; end the waiting ones now and the one on the engine at its next
        cycle, each with an ``error`` event saying ``message``."""
        with self._wake:
            self._closing = True
            for run in self.waiting:
                run.stop(message)
                run.post(RunMessage.failed(message))
                run.post(RunMessage(MessageKind.END))
            self.waiting.clear()
            if self.active is not None:
                self.active.stop(message)
            self._wake.notify()

    def close(self, timeout_s: float = 30.0) -> None:
        """Stop every run and wait (at most ``timeout_s``) for the worker to finish."""
        self.stop_all("the server is shutting down")
        self._thread.join(timeout=timeout_s)

    # ---- the worker thread ------------------------------------------------------------

    def _announce_positions(self) -> None:
        for position, run in enumerate(self.waiting, start=1):
            run.post(RunMessage.queued(position))

    def _work(self) -> None:
        while True:
            with self._wake:
                while not self.waiting and not self._closing:
                    self._wake.wait()
                if self._closing:
                    return
                self.active = self.waiting.popleft()
                self._announce_positions()
            run = self.active
            try:
                self._execute(run)
            except RunStopped as stop:
                if str(stop):
                    run.post(RunMessage.failed(str(stop)))
            except ValueError as error:  # bad settings the engine caught: the user's to fix
                run.post(RunMessage.failed(str(error)))
            except Exception as error:  # noqa: BLE001 - any engine fault ends only this run
                log.exception("run %d failed", run.id)
                run.post(RunMessage.failed(_describe_fault(error, run.id)))
            finally:
                run.post(RunMessage(MessageKind.END))
                with self._wake:
                    self.active = None
                    self.completed += 1

    def _execute(self, run: LiveRun) -> None:
        """Measure the run: one streamed pass, whose cycles the client sees as they come,
        then ``run.repeats`` quiet passes that the speedup, its interval, ``c`` and ``v`` are
        taken from (docs/design.md, "The data flow of a live run"). Every pass interleaves
        the target-only baseline with the speculative cycles. Then one summary."""
        pair = self.pairs[run.pair_name]
        deadline = time.monotonic() + (run.timeout_s or self.run_timeout_s)
        if run.job is not None:
            run.job(run, pair, lambda events: self._guarded(run, events, deadline))
            return
        streamed: list[CycleEvent | StepEvent] = []
        cycles: list[CycleEvent] = []
        step_ms: list[float] = []
        pending, pending_ms, pending_steps = None, 0.0, 0  # the newest cycle, until its steps
        def one_pass():
            events = interleaved(pair, run.config, run.drafter)
            return self._guarded(run, events, deadline)

        for event in one_pass():
            streamed.append(event)
            if isinstance(event, CycleEvent):
                pending, pending_ms, pending_steps = event, 0.0, 0
                cycles.append(event)
                continue
            step_ms.append(event.step_ms)
            pending_ms += event.step_ms
            pending_steps += 1
            if pending_steps == pending.n_emitted:
                if run.scale_ms is None:
                    run.scale_ms = timeline_scale_ms(pending.cycle_ms, pending_ms)
                run.cycles = len(cycles)
                run.post(RunMessage.cycle(pending, acceptance(cycles), pending_ms, run.scale_ms))
        repeats: list[list[CycleEvent | StepEvent]] = []
        for repeat in range(1, run.repeats + 1):
            message = RunMessage.measuring_again(repeat, run.repeats)
            run.post(message)
            self._quiet(run, message, deadline)
            repeats.append(list(one_pass()))
        summary = measured_summary(cycles, step_ms, repeats, run.config.seed, pair_up(streamed))
        run.post(RunMessage.summary(summary))
        if self.on_finished is not None:
            finished = FinishedRun(run.pair_name, pair, run.config, cycles, step_ms, summary,
                                   run.drafter)
            run.post(self.on_finished(finished))

    def _quiet(self, run: LiveRun, message: RunMessage, deadline: float) -> None:
        """Wait until the stream has sent ``message`` (and so everything before it) and the
        client has had a moment to draw it, so that rendering the stream (the server's event
        loop, a browser on the same cores) is not timed as part of the next pass. A client
        that does not read is not waited for beyond ``QUIET_WAIT_S``."""
        until = min(time.monotonic() + QUIET_WAIT_S, deadline)
        while not run.cancelled.is_set() and time.monotonic() < until:
            if message.delivered.wait(0.05):
                time.sleep(SETTLE_S)
                return

    def _guarded(self, run: LiveRun, events, deadline: float):
        """Pass the engine's events on, stopping between two of them when the run must end."""
        try:
            for event in events:
                if run.cancelled.is_set():
                    run.cycles_after_cancel += isinstance(event, CycleEvent)
                    raise RunStopped(run.stop_message)
                if time.monotonic() > deadline:
                    raise RunStopped(
                        "the run was stopped at the time limit of "
                        f"{run.timeout_s or self.run_timeout_s:g} s"
                    )
                if not isinstance(event, DoneEvent):
                    yield event
        finally:
            events.close()


def _describe_fault(error: Exception, run_id: int) -> str:
    """A message for the client: what to do, never the engine's internals (the server's log
    has the traceback, under the run's number)."""
    if "out of memory" in str(error).lower():
        _free_accelerator_memory()
        return "the engine ran out of memory on this run; try fewer new tokens or a smaller k"
    return (f"the engine failed on this run (run {run_id} in the server's log); "
            "other settings may work")


def _free_accelerator_memory() -> None:
    import torch

    if torch.cuda.is_available():
        torch.cuda.empty_cache()
