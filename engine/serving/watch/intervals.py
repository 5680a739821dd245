"""Watching a running vLLM server: acceptance per interval against the plan's assumption.

Every interval the watch reads the server's ``/metrics`` (Prometheus text, summed over the
``engine`` label; the whole read bounded by a wall-clock deadline shorter than the interval)
and compares it with the previous reading. One :class:`Interval` comes out of each scrape, in
one of these states:

- ``moving``: drafts were counted. The draft acceptance rate (accepted / draft tokens), the
  mean acceptance length (1 + accepted / drafts), drafts and generated tokens a second, and
  the batch: the mean over the interval's engine steps, (generated - accepted tokens) /
  steps from vLLM's ``generation_tokens`` counter and the count of its
  ``iteration_tokens_total`` histogram (one sample per step that gave a request a token; a
  step gives each running request one token plus the drafts it accepted), so requests that
  start and finish between two scrapes are seen; on a page without that histogram, vLLM's
  ``num_requests_running`` gauge at either scrape, and the interval says so. Counted alpha
  (accepted / trials, with a Wilson 95% interval on the trials, approximate because the
  acceptances within one draft are correlated) and the per-position acceptance only when
  every draft of the interval had the server's full k (draft tokens = drafts x k): under a
  schedule, vLLM counts accepted tokens per position but not drafts per position, so both
  would be biased; the interval then says so and keeps the draft acceptance rate.
- ``flat``: the counters did not move: k = 0 at this batch (tokens generated, no drafts) or
  an idle server (no tokens either).
- ``reset``: a counter went backwards: the server restarted. Counting starts again from this
  reading; the interval has no figures (a reset, not a spike).
- ``gap``: the server did not answer, or did not finish its answer before the deadline.
  Nothing is measured (a gap, never zeros); the next reading is compared with the last good
  one.
- ``no-speculation``: a vLLM ``/metrics`` page without ``vllm:spec_decode_*`` counters.
- ``not-vllm``: the address answers, but not with vLLM's ``/metrics``.
- ``unreadable``: a page that is not Prometheus text, too large, or whose counters contradict
  each other; nothing is stored from it.
- ``started``: the first reading, from which the next interval counts.

Against a plan (the JSON ``specscope plan --json`` prints) and vLLM's own step costs
(``specscope sweep --engine vllm --costs-out``), each moving interval carries the planned k
at its batch, the break-even alpha of that k there (:mod:`engine.analytic.break_even_alpha`) and
the alpha the plan assumed. Over the last ``window`` intervals with a counted alpha the
trials are pooled: a *warning* when the pooled interval lies wholly below the break-even
(speculation no longer pays), a *notice* when it excludes the plan's assumption (plan again
from these counters: ``specscope plan --from-metrics``).
"""

from __future__ import annotations

import contextlib
import http.client
import math
import socket
import threading
import time
import urllib.parse
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field

from engine.analytic import acceptance as estimators
from engine.analytic import positions
from engine.analytic.break_even_alpha import CostsError, break_even, planned_k, step_costs
from engine.analytic.timed_costs import TimedCosts
from engine.planner.deployed import deployed_ranges
from engine.serving.metrics import (
    ACCEPTED,
    DRAFT_TOKENS,
    DRAFTS,
    MAX_METRICS_BYTES,
    PREFIX,
    MetricsError,
    SpecCounters,
    read_page,
)

DEFAULT_INTERVAL_S = 10.0
DEFAULT_WINDOW = 3  # intervals pooled for the verdict
Z_95 = 1.959963984540054

STARTED, MOVING, FLAT, RESET, GAP = "started", "moving", "flat", "reset", "gap"
NO_SPECULATION, NOT_VLLM, UNREADABLE = "no-speculation", "not-vllm", "unreadable"
STATES = (STARTED, MOVING, FLAT, RESET, GAP, NO_SPECULATION, NOT_VLLM, UNREADABLE)
WARNING, DRIFT, HOLDS = "warning", "drift", "holds"


class WatchError(ValueError):
    """A plan or costs file the watch cannot use; says why."""


# ---- one reading -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Snapshot:
    """One ``/metrics`` page: its counters summed over label sets (``per_position``'s length
    is the server's k) and the gauges the watch reads."""

    counters: SpecCounters
    generated: float | None  # vllm:generation_tokens_total
    running: float | None  # vllm:num_requests_running
    process_start: float | None = None  # process_start_time_seconds: a restart changes it
    steps: float | None = None  # vllm:iteration_tokens_total_count: engine steps with output


class Unusable(Exception):
    """A page that gives no snapshot: ``state`` is one of the states above, ``message``
    the line to show."""

    def __init__(self, state: str, message: str):
        super().__init__(message)
        self.state, self.message = state, message


def read_snapshot(text: str) -> Snapshot:
    """The counters of one page (:func:`engine.serving.metrics.read_page`, the one parser);
    :class:`Unusable` (not vLLM, no speculation, unreadable)."""
    try:
        page = read_page(text, "the /metrics page")
    except MetricsError as error:
        raise Unusable(UNREADABLE, f"{error}; nothing stored") from None
    if not page.vllm:
        raise Unusable(NOT_VLLM, "this page has no vllm:* metrics: is the address a vLLM "
                                 "server's?")
    if not page.present:
        raise Unusable(NO_SPECULATION, "this server does not speculate: its /metrics has no "
                                       f"{PREFIX}* counters")
    missing = [f"{PREFIX}{c}_total" for c in (DRAFTS, DRAFT_TOKENS, ACCEPTED)
               if c not in page.present]
    if missing:
        raise Unusable(UNREADABLE, f"the page lacks {', '.join(missing)}: the counters cannot "
                                   "be read without it; nothing stored")
    return Snapshot(page.total(), page.generated, page.running, page.process_start, page.steps)


READ_CHUNK = 64 * 1024


def fetch_metrics(url: str, timeout_s: float) -> str:
    """GET ``url/metrics``, the whole answer (connection, headers and body) within
    ``timeout_s`` of wall-clock time, reading at most the size limit; redirects are not
    followed.

    A per-read timeout would not do: a server that sends its body a byte at a time answers
    every read in time and holds the scrape for as long as it likes. A timer cuts the socket
    at the deadline instead, whatever the read is waiting for.

    :class:`Unusable` with ``gap`` when nothing (or too little, too late) came, or a server
    error; ``not-vllm`` for another HTTP error (a redirect included) or a page that is not
    text; ``unreadable`` for one over the limit."""
    address = url.rstrip("/") + "/metrics"
    late = Unusable(GAP, f"no whole answer from {address} within {timeout_s:g} s (a gap: "
                         "nothing measured)")
    try:
        parts = urllib.parse.urlsplit(address)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("not an http:// or https:// address")
        kind_of = (http.client.HTTPSConnection if parts.scheme == "https"
                   else http.client.HTTPConnection)
        conn = kind_of(parts.hostname, parts.port, timeout=timeout_s)
    except ValueError as error:
        raise Unusable(GAP, f"{address} cannot be fetched ({error}): a gap, nothing "
                            "measured") from None
    deadline = time.monotonic() + timeout_s
    expired = threading.Event()

    def cut() -> None:
        expired.set()
        sock = conn.sock
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)  # wakes a read blocked on it

    timer = threading.Timer(timeout_s, cut)
    timer.daemon = True
    timer.start()
    try:
        conn.connect()
        if expired.is_set():
            raise late
        conn.request("GET", parts.path, headers={"Accept": "text/plain"})
        response = conn.getresponse()
        status, kind = response.status, response.headers.get_content_type()
        location = response.headers.get("Location")
        body = bytearray()
        if status == 200:
            while len(body) <= MAX_METRICS_BYTES:
                chunk = response.read1(READ_CHUNK)  # returns what one read of the socket gave
                if not chunk or expired.is_set() or time.monotonic() > deadline:
                    break
                body += chunk
    except Unusable:
        raise
    except (TimeoutError, OSError, http.client.HTTPException, ValueError) as error:
        if expired.is_set() or isinstance(error, TimeoutError):
            raise late from None
        reason = getattr(error, "reason", None) or error or type(error).__name__
        raise Unusable(GAP, f"{address} is not answering ({reason}): a gap, nothing "
                            "measured") from None
    finally:
        timer.cancel()
        conn.close()
    if expired.is_set() or time.monotonic() > deadline:
        raise late
    if status >= 500:
        raise Unusable(GAP, f"{address} answered HTTP {status}, a server error: a gap, "
                            "nothing measured")
    if status != 200:
        where = location if 300 <= status < 400 else None
        raise Unusable(NOT_VLLM, f"{address} answered HTTP {status}"
                                 + (f" (a redirect to {where[:80]}, not followed)" if where
                                    else "") + ": not a vLLM server's /metrics")
    if len(body) > MAX_METRICS_BYTES:
        raise Unusable(UNREADABLE, f"{address} sent more than "
                                   f"{MAX_METRICS_BYTES // (1024 * 1024)} MB: not read")
    if kind not in ("text/plain", "application/openmetrics-text"):
        raise Unusable(NOT_VLLM, f"{address} answered {kind}, not Prometheus text: is this "
                                 "a vLLM server?")
    return body.decode("utf-8", "replace")


# ---- the plan and the costs --------------------------------------------------------------


@dataclass(frozen=True)
class PlanView:
    """What the watch reads of a plan: vLLM's ranges ``[[lo, hi, k], ...]``, the cap on k
    (``num_speculative_tokens``), the alpha it assumed (the weighted mean of its domains')
    and what was assumed in reading it."""

    ranges: tuple[tuple[int, int, int], ...]
    k_cap: int | None
    assumed_alpha: float | None
    notices: tuple[str, ...] = ()

    def k_at(self, batch: int) -> int:
        return planned_k(self.ranges, batch, self.k_cap)


def read_plan(data: object) -> PlanView:
    """A plan from ``specscope plan --json`` (the k its ``speculative_config`` deploys at each
    batch, :func:`engine.planner.deployed.deployed_ranges`; an object with ``plan.ranges``
    alone, those), or a bare ``[[lo, hi, k], ...]`` list; :class:`WatchError` for anything
    else."""
    notices: list[str] = []
    if isinstance(data, list):
        return PlanView(_ranges(data, "the schedule"), None, None,
                        ("The plan is a bare schedule: it names no assumed alpha.",))
    if not isinstance(data, dict):
        raise WatchError("the plan must be the JSON object specscope plan --json prints")
    plan = data.get("plan") if isinstance(data.get("plan"), dict) else {}
    config = data.get("speculative_config")
    config = config if isinstance(config, dict) else {}
    ranges: tuple[tuple[int, int, int], ...] | None = None
    deployed = deployed_ranges(data)
    if deployed is not None:
        ranges = _ranges(deployed, "the deployed config")
        if deployed[0][2] == 0 and len(deployed) == 1:
            notices.append("The plan does not speculate at any batch.")
        elif len(deployed) == 1:
            notices.append("The plan has one k for every batch (num_speculative_tokens).")
    elif isinstance(plan.get("ranges"), list) and plan["ranges"]:
        ranges = _ranges([[r.get("lo"), r.get("hi"), r.get("k")] if isinstance(r, dict) else r
                          for r in plan["ranges"]], "plan.ranges")
    elif isinstance(config.get("num_speculative_tokens_per_batch_size"), list):
        ranges = _ranges(config["num_speculative_tokens_per_batch_size"],
                         "num_speculative_tokens_per_batch_size")
    if ranges is None:
        raise WatchError("the plan names no k: it has neither plan.ranges nor a "
                         "speculative_config (save one with specscope plan --json)")
    cap = config.get("num_speculative_tokens")
    k_cap = cap if isinstance(cap, int) and cap >= 0 else None
    return PlanView(ranges, k_cap, _assumed_alpha(plan.get("domains"), notices),
                    tuple(notices))


def _ranges(rows: Sequence, where: str) -> tuple[tuple[int, int, int], ...]:
    out = []
    for row in rows:
        if (not isinstance(row, list | tuple) or len(row) != 3
                or not all(isinstance(x, int) and not isinstance(x, bool) for x in row)
                or row[0] < 1 or row[1] < row[0] or row[2] < 0):
            raise WatchError(f"{where}: every range is [lo, hi, k] with 1 <= lo <= hi and "
                             f"k >= 0 (got {str(row)[:60]})")
        out.append((row[0], row[1], row[2]))
    if not out:
        raise WatchError(f"{where} holds no range")
    return tuple(sorted(out))


def _assumed_alpha(domains: object, notices: list[str]) -> float | None:
    if not isinstance(domains, list) or not domains:
        notices.append("The plan names no domains: its assumed alpha is unknown.")
        return None
    try:
        pairs = [(float(d.get("weight", 1.0)), float(d["alpha"])) for d in domains]
    except (AttributeError, KeyError, TypeError, ValueError):
        notices.append("The plan's domains have no readable alpha: its assumption is unknown.")
        return None
    total = sum(w for w, _ in pairs)
    if not total > 0 or not all(0 <= a <= 1 for _, a in pairs):
        notices.append("The plan's domains have no usable weights or alphas.")
        return None
    if len(pairs) > 1:
        notices.append("The plan assumed a mix of domains: its alpha here is their weighted "
                       "mean.")
    return sum(w * a for w, a in pairs) / total


def read_costs(data: object) -> TimedCosts:
    """vLLM's step costs (``specscope sweep --engine vllm --costs-out``)."""
    try:
        return step_costs(data)
    except CostsError as error:
        raise WatchError(str(error)) from None


# ---- one interval ----------------------------------------------------------------------------


def wilson(successes: float, trials: float, z: float = Z_95) -> tuple[float, float] | None:
    """The Wilson score interval of ``successes / trials``; None without trials."""
    if trials <= 0:
        return None
    p = successes / trials
    denominator = 1 + z * z / trials
    centre = (p + z * z / (2 * trials)) / denominator
    half = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


@dataclass
class Interval:
    """What one scrape says, against the previous good one. Times are Unix seconds."""

    deployment: str
    ended: float
    state: str
    message: str
    started: float | None = None
    batch: int | None = None  # the mean batch over the interval's steps, rounded (see _batch)
    batch_mean: float | None = None  # that mean, unrounded; None when it came from the gauge
    batch_steps: float | None = None  # the engine steps it is the mean over
    batch_note: str | None = None  # where the batch came from, when not from the steps
    k: int | None = None  # the server's num_speculative_tokens (its per-position counters)
    drafts: float | None = None
    draft_tokens: float | None = None
    accepted: float | None = None
    per_position_counts: list[float] | None = None
    generated: float | None = None
    full_k: bool | None = None  # every draft had the server's k
    trials: float | None = None
    alpha: float | None = None
    alpha_low: float | None = None
    alpha_high: float | None = None
    draft_acceptance_rate: float | None = None
    mean_acceptance_length: float | None = None
    per_position_acceptance: list[float | None] | None = None
    drafts_per_s: float | None = None
    tokens_per_s: float | None = None
    planned_k: int | None = None
    break_even: float | None = None
    assumed_alpha: float | None = None
    # over the last `window` intervals with a counted alpha
    window_alpha: float | None = None
    window_low: float | None = None
    window_high: float | None = None
    verdict: str | None = None  # warning, drift, holds (None: nothing to judge)
    lines: list[str] = field(default_factory=list)  # why a figure is missing, the verdict

    @property
    def measured(self) -> bool:
        return self.state == MOVING

    def to_json(self) -> dict:
        return asdict(self)


class Watch:
    """One deployment: feed it ``/metrics`` readings with :meth:`observe` (or let
    :meth:`scrape` fetch them); each returns the :class:`Interval` since the last good one."""

    def __init__(self, name: str, url: str, plan: PlanView | None = None,
                 costs: TimedCosts | None = None, window: int = DEFAULT_WINDOW,
                 timeout_s: float = DEFAULT_INTERVAL_S / 2,
                 clock: Callable[[], float] = time.time):
        if window < 1:
            raise WatchError("the window must hold at least one interval")
        self.name, self.url, self.plan, self.costs = name, url, plan, costs
        self.window, self.timeout_s, self.clock = window, timeout_s, clock
        self.previous: Snapshot | None = None
        self.previous_at: float | None = None
        self.last_batch: int | None = None
        # (accepted, trials) of the latest intervals with a counted alpha
        self.recent: deque[tuple[float, float]] = deque(maxlen=window)

    def scrape(self) -> Interval:
        """Fetch the page now and :meth:`observe` it (a failed fetch is an interval too)."""
        at, got = self.fetch()
        return got if isinstance(got, Interval) else self.observe(got, at)

    def fetch(self) -> tuple[float, str | Interval]:
        """The page's text and when it was asked for, or the interval a failed fetch is
        (changes nothing here: the server's scrapes fetch apart from parsing)."""
        at = self.clock()
        try:
            return at, fetch_metrics(self.url, self.timeout_s)
        except Unusable as problem:
            return at, self._event(at, problem.state, problem.message)

    def observe(self, text: str, at: float) -> Interval:
        try:
            snap = read_snapshot(text)
        except Unusable as problem:
            if problem.state in (NO_SPECULATION, NOT_VLLM):
                self.previous = None  # a different server may answer next time
            return self._event(at, problem.state, problem.message)
        before, before_at = self.previous, self.previous_at
        if before is None:
            self._keep(snap, at)
            return self._event(at, STARTED, "first reading: the next interval counts from "
                                            "here", snap)
        if _went_back(before, snap):
            self._keep(snap, at)
            self.recent.clear()
            return self._event(at, RESET, "the counters went back: the server restarted. "
                                          "Counting again from here (a reset, not a spike)",
                               snap)
        interval = self._derive(before, before_at, snap, at)
        if interval.state != UNREADABLE:
            self._keep(snap, at)
        return interval

    def _keep(self, snap: Snapshot, at: float) -> None:
        self.previous, self.previous_at = snap, at

    def _event(self, at: float, state: str, message: str,
               snap: Snapshot | None = None) -> Interval:
        k = len(snap.counters.per_position) if snap is not None else None
        return Interval(self.name, at, state, message, k=k or None,
                        assumed_alpha=self.plan.assumed_alpha if self.plan else None)

    def _derive(self, a: Snapshot, a_at: float, b: Snapshot, b_at: float) -> Interval:
        seconds = max(b_at - a_at, 1e-9)
        window = b.counters - a.counters
        drafts, draft_tokens, accepted = window.drafts, window.draft_tokens, window.accepted
        k = len(b.counters.per_position)
        per_pos = window.per_position[:k]
        generated = (b.generated - a.generated
                     if b.generated is not None and a.generated is not None else None)
        iv = Interval(self.name, b_at, MOVING, "", started=a_at, k=k or None, drafts=drafts,
                      draft_tokens=draft_tokens, accepted=accepted, per_position_counts=per_pos,
                      generated=generated,
                      assumed_alpha=self.plan.assumed_alpha if self.plan else None)
        iv.tokens_per_s = generated / seconds if generated is not None else None
        iv.drafts_per_s = drafts / seconds
        iv.batch = self._batch(a, b, drafts, iv)
        if drafts == 0:
            iv.state = FLAT
            iv.message = ("counters flat: tokens generated without drafts (k = 0 at this "
                          "batch)" if generated else "counters flat: the server is idle")
            return iv
        problem = _inconsistent(drafts, draft_tokens, accepted, per_pos)
        if problem:
            return Interval(self.name, b_at, UNREADABLE, f"{problem}; nothing stored",
                            started=a_at)
        iv.draft_acceptance_rate = estimators.draft_acceptance_rate(accepted, draft_tokens)
        iv.mean_acceptance_length = estimators.mean_acceptance_length(accepted, drafts)
        iv.full_k = k > 0 and draft_tokens == drafts * k
        iv.message = (f"speculating: {drafts:g} drafts, {accepted:g} of {draft_tokens:g} draft "
                      "tokens accepted")
        if iv.full_k:
            iv.trials = estimators.trials_vllm(accepted, drafts, per_pos)
            iv.alpha = estimators.counted_alpha(accepted, iv.trials)
            iv.alpha_low, iv.alpha_high = wilson(accepted, iv.trials) or (None, None)
            iv.per_position_acceptance = estimators.per_position_vllm(per_pos, drafts)
            self.recent.append((accepted, iv.trials))
        else:
            iv.lines.append(
                f"Drafts shorter than the server's k = {k} in this interval "
                f"({draft_tokens:g} draft tokens in {drafts:g} drafts): vLLM counts accepted "
                "tokens per position but not drafts per position, so counted alpha and "
                "per-position acceptance would be biased; the draft acceptance rate is shown.")
        self._judge(iv)
        return iv

    def _batch(self, a: Snapshot, b: Snapshot, drafts: float, iv: Interval) -> int | None:
        """The batch the interval ran at: the mean over its engine steps from vLLM's
        counters, which sees requests that started and finished between two scrapes; else
        the running gauge at either scrape; else the last batch seen, or 1, saying so."""
        steps = b.steps - a.steps if b.steps is not None and a.steps is not None else None
        if steps and steps > 0 and iv.generated is not None:
            # A step gives each running request 1 token plus the drafts it accepted.
            rows = iv.generated - (iv.accepted or 0)
            if rows > 0:
                iv.batch_mean, iv.batch_steps = rows / steps, steps
                self.last_batch = max(1, round(iv.batch_mean))
                return self.last_batch
        missing = ("vLLM's /metrics has no vllm:iteration_tokens_total histogram, which would "
                   "give the mean batch over the interval" if b.steps is None else
                   "no engine step between the readings")
        for gauge in (b.running, a.running):
            if gauge:
                self.last_batch = max(1, round(gauge))
                iv.batch_note = (f"{missing}: the batch is the requests running at a scrape "
                                 "(vllm:num_requests_running)")
                return self.last_batch
        if drafts and self.last_batch is not None:
            iv.batch_note = (f"{missing}, and no requests were running at either scrape: the "
                             f"batch is the last one seen, {self.last_batch}")
            return self.last_batch
        if drafts:
            iv.batch_note = (f"{missing}, and no requests were running at either scrape "
                             "(they started and finished between them): batch 1 assumed")
            return 1
        return None

    def _by_position(self, iv: Interval) -> str | None:
        """Where the interval's acceptance by position puts the best k at its batch, on the
        costs, against the plan's k (only up to the positions the server measured)."""
        survival = positions.measured(iv.per_position_acceptance)
        if survival is None or self.costs is None or not iv.planned_k:
            return None
        try:
            best = best_k_by_position(self.costs, iv.batch or 1, survival)
        except ValueError:  # costs that do not reach this batch or k
            return None
        if best is None or best[0] == iv.planned_k:
            return None
        rates = ", ".join(f"{s:.2f}" for s in survival)
        return (f"By position (survival {rates}) the best k at batch {iv.batch} on these costs "
                f"is {best[0]}, {best[1]:.2f} tokens a plain step's time; the plan says "
                f"k = {iv.planned_k}.")

    def _judge(self, iv: Interval) -> None:
        if self.recent and iv.full_k:
            taken = sum(x for x, _ in self.recent)
            tried = sum(n for _, n in self.recent)
            iv.window_alpha = taken / tried if tried else None
            iv.window_low, iv.window_high = wilson(taken, tried) or (None, None)
        if self.plan is None:
            iv.lines.append("No plan given: no break-even or assumption to compare with.")
            return
        iv.planned_k = self.plan.k_at(iv.batch or 1)
        never_pays = False
        if iv.planned_k == 0:
            iv.lines.append(f"The plan does not speculate at batch {iv.batch}: no break-even "
                            "there.")
        elif self.costs is None:
            iv.lines.append("No costs file given: no break-even (vLLM's costs come from "
                            "specscope sweep --engine vllm --costs-out).")
        else:
            try:
                iv.break_even = break_even(self.costs, iv.batch or 1, iv.planned_k)
                never_pays = iv.break_even is None
            except CostsError as error:
                iv.lines.append(f"No break-even: {error}.")
            if never_pays:
                iv.lines.append(f"k = {iv.planned_k} loses to speculation off at batch "
                                f"{iv.batch} at any alpha, on these costs.")
        if iv.k and iv.planned_k and iv.full_k and iv.k != iv.planned_k:
            iv.lines.append(f"The server drafts k = {iv.k}; the plan says k = {iv.planned_k} "
                            f"at batch {iv.batch}.")
        by_position = self._by_position(iv)
        if by_position:
            iv.lines.append(by_position)
        if iv.window_high is None:
            return
        span = f"{iv.window_alpha:.3f} [{iv.window_low:.3f}, {iv.window_high:.3f}]"
        over = f"over the last {len(self.recent)} interval{'s' * (len(self.recent) > 1)}"
        if never_pays or (iv.break_even is not None and iv.window_high < iv.break_even):
            iv.verdict = WARNING
            iv.lines.insert(0, f"Speculation stops paying: alpha {span} {over} is below the "
                               f"break-even {_num(iv.break_even)} of k = {iv.planned_k} at batch "
                               f"{iv.batch}.")
        elif (iv.assumed_alpha is not None
              and not iv.window_low <= iv.assumed_alpha <= iv.window_high):
            iv.verdict = DRIFT
            iv.lines.insert(0, f"Alpha {span} {over} has drifted from the plan's "
                               f"{iv.assumed_alpha:.3f}: plan again from these counters "
                               "(two snapshots of the server's /metrics, then specscope plan "
                               "--from-metrics BEFORE AFTER).")
        elif iv.break_even is not None or iv.assumed_alpha is not None:
            iv.verdict = HOLDS


def best_k_by_position(costs: TimedCosts, batch: int, survival: Sequence[float]
                       ) -> tuple[int, float] | None:
    """The k (1 .. the positions measured, within the costs' k) with the most tokens a plain
    step at ``batch``: ``(1 + s_1 + ... + s_k) / cycle(batch, k)``; None when no k is timed."""
    curve = positions.Curve(tuple(survival))
    best: tuple[int, float] | None = None
    for k in range(1, min(curve.measured, costs.k_limit) + 1):
        gain = positions.tokens_per_cycle(curve, k) / costs.cycle(batch, k)
        if best is None or gain > best[1] + 1e-12:
            best = (k, gain)
    return best


def _went_back(a: Snapshot, b: Snapshot) -> bool:
    x, y = a.counters, b.counters
    pairs = [(x.drafts, y.drafts), (x.draft_tokens, y.draft_tokens), (x.accepted, y.accepted)]
    pairs += list(zip(x.per_position, y.per_position, strict=False))
    if a.generated is not None and b.generated is not None:
        pairs.append((a.generated, b.generated))
    if a.steps is not None and b.steps is not None:
        pairs.append((a.steps, b.steps))
    restarted = (a.process_start is not None and b.process_start is not None
                 and b.process_start != a.process_start)
    return (restarted or any(y < x for x, y in pairs)
            or len(y.per_position) < len(x.per_position))


def _inconsistent(drafts: float, draft_tokens: float, accepted: float,
                  per_pos: list[float]) -> str | None:
    if accepted > draft_tokens:
        return (f"more tokens accepted ({accepted:g}) than drafted ({draft_tokens:g}) in this "
                "interval: these counters contradict each other")
    if draft_tokens < drafts:
        return f"fewer draft tokens ({draft_tokens:g}) than drafts ({drafts:g})"
    if per_pos and (any(y > x for x, y in zip(per_pos, per_pos[1:], strict=False))
                    or per_pos[0] > drafts or sum(per_pos) != accepted):
        return ("the per-position counts do not fall from position 0 on, exceed the drafts, "
                "or do not add up to the accepted tokens")
    return None


def _num(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.3f}"


# ---- exports ---------------------------------------------------------------------------------

CSV_COLUMNS = ("deployment", "started", "ended", "state", "batch", "batch_mean", "k", "drafts",
               "draft_tokens", "accepted", "trials", "alpha", "alpha_low", "alpha_high",
               "draft_acceptance_rate", "mean_acceptance_length", "drafts_per_s",
               "tokens_per_s", "planned_k", "break_even", "assumed_alpha", "window_alpha",
               "window_low", "window_high", "verdict", "message")


def batch_mix(intervals: Sequence[dict]) -> dict[int, float]:
    """The share of measured time at each batch (``specscope plan --batch-mix``), from the
    intervals that generated tokens."""
    seconds: dict[int, float] = {}
    for iv in intervals:
        if (iv.get("state") in (MOVING, FLAT) and iv.get("batch")
                and iv.get("started") is not None
                and (iv.get("generated") or iv.get("drafts"))):
            seconds[iv["batch"]] = seconds.get(iv["batch"], 0.0) + iv["ended"] - iv["started"]
    total = sum(seconds.values())
    return {b: round(s / total, 4) for b, s in sorted(seconds.items())} if total else {}


def batch_mix_k(intervals: Sequence[dict]) -> int:
    """The k the server ran while :func:`batch_mix` was observed (its per-position counters':
    the last interval that drafted says it), 0 when it did not speculate: what ``specscope
    plan --batch-mix-k`` takes to convert the mix to the batches without speculation."""
    drafted = [iv for iv in intervals if iv.get("drafts") and iv.get("k")]
    return int(drafted[-1]["k"]) if drafted else 0


def batch_mix_text(mix: dict[int, float]) -> str:
    """``"1=0.25,4=0.75"``: the mix as ``--batch-mix`` takes it on the command line."""
    return ",".join(f"{b}={w:g}" for b, w in mix.items())
