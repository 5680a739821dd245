"""The watch inside the page's server: the deployments named in the settings, scraped on a
schedule, stored, exported as Prometheus gauges and pushed to the open /watch pages.

Only the URLs of ``SPECSCOPE_WATCH_URLS`` are ever fetched: a page names a deployment, never
an address. Each deployment is scraped on a schedule of its own, so a server that answers
slowly delays no other. The HTTP read runs in a worker thread, bounded as a whole by the
watch's deadline (a stuck read is a gap, and ``specscope_watch_up`` 0); only the parsing
then takes one of :class:`app.parsing.Parsers`' slots, so slow servers never hold the slots
that the calibration's requests need, and no ``/metrics`` stalls the event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Gauge

from app.parsing import Parsers
from engine.serving.watch.intervals import (
    GAP,
    WARNING,
    Interval,
    PlanView,
    Watch,
    WatchError,
    read_costs,
    read_plan,
)
from engine.serving.watch.store import WatchStore, WatchStoreError
from engine.settings import Settings

log = logging.getLogger("specscope.watch")
SUBSCRIBER_QUEUE = 16  # updates a slow page may fall behind by before it misses some


@dataclass
class Deployment:
    name: str
    url: str
    watch: Watch
    notices: list[str] = field(default_factory=list)  # the plan's and the costs' files
    latest: Interval | None = None


def _read_json(path) -> object:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise WatchError(f"{path} could not be read as JSON ({error})") from None


def deployment(name: str, url: str, settings: Settings) -> Deployment:
    """A watched deployment with the plan and costs the settings give it; a file that cannot
    be used becomes a notice on the page, not a failed start."""
    notices: list[str] = []
    plan: PlanView | None = None
    costs = None
    if name in settings.watch_plans:
        try:
            plan = read_plan(_read_json(settings.watch_plans[name]))
            notices += plan.notices
        except WatchError as error:
            notices.append(f"The plan is not used: {error}")
    if name in settings.watch_costs:
        try:
            costs = read_costs(_read_json(settings.watch_costs[name]))
        except WatchError as error:
            notices.append(f"The costs are not used: {error}")
    timeout = min(10.0, settings.watch_interval / 2)  # an answer later than this is a gap
    return Deployment(name, url, Watch(name, url, plan, costs, settings.watch_window,
                                       timeout), notices)


class Gauges:
    """Our own ``/metrics``: the latest figures per deployment, for a team's alerts."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        label = ["deployment"]

        def gauge(name: str, text: str) -> Gauge:
            return Gauge(name, text, label, registry=self.registry)

        self.alpha = gauge("specscope_watch_alpha", "Counted alpha of the latest interval "
                           "(absent where it could not be counted)")
        self.window_alpha = gauge("specscope_watch_window_alpha", "Alpha pooled over the last "
                                  "intervals, the figure the warning compares")
        self.window_high = gauge("specscope_watch_window_alpha_upper", "Upper end of the "
                                 "pooled alpha's Wilson 95% interval (approximate)")
        self.break_even = gauge("specscope_watch_break_even_alpha", "The alpha below which "
                                "the planned k loses to speculation off at the running batch")
        self.length = gauge("specscope_watch_acceptance_length", "Mean acceptance length of "
                            "the latest interval (tokens per draft)")
        self.rate = gauge("specscope_watch_draft_acceptance_rate", "Accepted / draft tokens "
                          "in the latest interval")
        self.batch = gauge("specscope_watch_batch", "The batch of the latest interval: the "
                           "mean over its engine steps, or the requests running at a scrape")
        self.warning = gauge("specscope_watch_warning", "1 when the latest measured interval "
                             "warns: the pooled alpha below the break-even beyond its "
                             "uncertainty, else 0")
        self.up = gauge("specscope_watch_up", "1 when the latest scrape was answered")

    def update(self, iv: Interval) -> None:
        name = iv.deployment
        self.up.labels(name).set(0 if iv.state == GAP else 1)
        if not iv.measured:
            return  # the last measured figures stay; `up` says whether they are fresh
        self.warning.labels(name).set(1 if iv.verdict == WARNING else 0)
        for gauge, value in ((self.alpha, iv.alpha), (self.window_alpha, iv.window_alpha),
                             (self.window_high, iv.window_high),
                             (self.break_even, iv.break_even),
                             (self.length, iv.mean_acceptance_length),
                             (self.rate, iv.draft_acceptance_rate), (self.batch, iv.batch)):
            if value is None:
                with contextlib.suppress(KeyError):
                    gauge.remove(name)
            else:
                gauge.labels(name).set(value)


class WatchService:
    def __init__(self, settings: Settings, store: WatchStore | None, parsers: Parsers,
                 store_error: str = "") -> None:
        self.interval_s = settings.watch_interval
        self.store, self.store_error, self.parsers = store, store_error, parsers
        self.deployments = {name: deployment(name, url, settings)
                            for name, url in settings.watch_deployments.items()}
        self.gauges = Gauges()
        self.subscribers: set[asyncio.Queue[str | None]] = set()
        self._tasks: list[asyncio.Task] = []

    def start(self) -> None:
        if not self._tasks:
            loop = asyncio.get_running_loop()
            self._tasks = [loop.create_task(self._run(d)) for d in self.deployments.values()]

    async def stop(self) -> None:
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _run(self, d: Deployment) -> None:
        """One deployment's schedule: its scrapes wait for no other deployment's."""
        next_at = time.monotonic()
        while True:
            try:
                await self.scrape(d)
            except Exception:  # a fault of ours: log it, keep watching
                log.exception("a watch scrape of %s failed", d.name)
            next_at += self.interval_s
            # A scrape that overran skips the missed ticks rather than bunching them up.
            while next_at < time.monotonic():
                next_at += self.interval_s
            await asyncio.sleep(next_at - time.monotonic())

    async def scrape(self, d: Deployment) -> Interval:
        at, got = await asyncio.to_thread(d.watch.fetch)
        iv = got if isinstance(got, Interval) else await self.parsers.queued(
            d.watch.observe, got, at)
        d.latest = iv
        if self.store is not None:
            try:
                await asyncio.to_thread(self.store.add, iv)
            except WatchStoreError as error:
                log.error("%s", error)
                self.store_error = str(error)
        self.gauges.update(iv)
        for queue in list(self.subscribers):
            if queue.qsize() < SUBSCRIBER_QUEUE:  # room is kept for the end of the stream
                queue.put_nowait(d.name)
        return iv

    def history(self, name: str, last: int | None = None) -> list[dict]:
        if self.store is None:
            latest = self.deployments[name].latest
            return [latest.to_json()] if latest else []
        return self.store.intervals(name, last)

    def end_streams(self) -> None:
        """Tell every open event stream to end (the server is shutting down)."""
        for queue in list(self.subscribers):
            with contextlib.suppress(asyncio.QueueFull):
                queue.put_nowait(None)

    @contextlib.contextmanager
    def subscription(self):
        """A queue of deployment names, one per scrape; None: the stream should end."""
        queue: asyncio.Queue[str | None] = asyncio.Queue(SUBSCRIBER_QUEUE + 1)
        self.subscribers.add(queue)
        try:
            yield queue
        finally:
            self.subscribers.discard(queue)
