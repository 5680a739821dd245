"""``specscope watch URL``: a vLLM server's acceptance, interval by interval, in a terminal.

    specscope watch http://10.0.0.5:8000 --interval 10 --plan plan.json --costs vllm-costs.json

One line per scrape (:mod:`engine.serving.watch.intervals`): the state, the batch, counted
alpha with its Wilson interval, the draft acceptance rate, the mean acceptance length, the
break-even alpha of the planned k there and the verdict, then the lines that explain a
missing figure or a warning. ``--json`` prints each interval as one JSON object instead;
``--db`` also stores them (the page's SQLite history, bounded by ``--kept``). Ctrl-C stops
it. Unlike the page's server, the command watches any URL its user gives.
"""

from __future__ import annotations

import datetime
import json
import sys
import time
from pathlib import Path

from engine.serving.watch.intervals import (
    DEFAULT_INTERVAL_S,
    DEFAULT_WINDOW,
    MOVING,
    Interval,
    Watch,
    WatchError,
    read_costs,
    read_plan,
)


def add_parser(sub, d: dict) -> None:
    watch = sub.add_parser(
        "watch", help="a vLLM server's acceptance over time, against the plan's assumption",
        description="Scrape a vLLM server's /metrics every interval and print, per interval, "
                    "the acceptance it counted, the break-even alpha of the planned k at the "
                    "running batch and a warning when speculation stops paying.")
    watch.add_argument("url", help="the vLLM server, http://HOST:PORT")
    watch.add_argument("--interval", type=float, default=DEFAULT_INTERVAL_S,
                       help=f"seconds between scrapes (default {DEFAULT_INTERVAL_S:g})")
    watch.add_argument("--plan", type=Path, help="the plan deployed (specscope plan --json)")
    watch.add_argument("--costs", type=Path,
                       help="vLLM's step costs, the file specscope sweep --engine vllm "
                            "--costs-out writes (\"method\": \"vllm-steps\"): needed for the "
                            "break-even. The file of specscope costs times this project's "
                            "loop, not vLLM, and is refused")
    watch.add_argument("--name", help="the deployment's name (default: the URL's host:port)")
    watch.add_argument("--window", type=int, default=DEFAULT_WINDOW,
                       help=f"intervals pooled for the verdict (default {DEFAULT_WINDOW})")
    watch.add_argument("--timeout", type=float,
                       help="seconds to wait for /metrics (default: half the interval, at "
                            "most 10); a later answer is a gap")
    watch.add_argument("--count", type=int, help="stop after this many scrapes")
    watch.add_argument("--db", help="also store the intervals in this SQLite file")
    watch.add_argument("--kept", type=int, default=8640,
                       help="with --db: intervals kept for this deployment (default 8640)")
    watch.add_argument("--json", action="store_true", help="one JSON object per interval")


def build(args) -> Watch:
    url = args.url.rstrip("/")
    if not url.startswith(("http://", "https://")):
        raise WatchError(f"{url!r} is not an http:// or https:// address")
    if not args.interval > 0 or (args.count is not None and args.count < 1):
        raise WatchError("--interval must be above 0 and --count at least 1")
    plan = read_plan(_json(args.plan)) if args.plan else None
    costs = read_costs(_json(args.costs)) if args.costs else None
    timeout = args.timeout or min(10.0, args.interval / 2)
    name = args.name or url.split("://", 1)[1]
    return Watch(name, url, plan, costs, args.window, timeout)


def _json(path: Path) -> object:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise WatchError(f"{path} could not be read as JSON ({error})") from None


def line(iv: Interval) -> str:
    """One interval as a table row (see :data:`HEADER`)."""
    at = datetime.datetime.fromtimestamp(iv.ended, datetime.UTC).strftime("%H:%M:%S")
    if iv.state != MOVING:
        return f"| {at} | {iv.state} | {iv.message} |"
    alpha = (f"{iv.alpha:.3f} [{iv.alpha_low:.3f}, {iv.alpha_high:.3f}]"
             if iv.alpha is not None else "not counted")
    batch = (f"B {iv.batch} (mean {iv.batch_mean:.2f} over {iv.batch_steps:g} steps)"
             if iv.batch_mean is not None else f"B {iv.batch}")
    return (f"| {at} | {iv.state} | {batch}, k {iv.k} (plan {_n(iv.planned_k)}) | "
            f"α {alpha} | rate {_n(iv.draft_acceptance_rate, 3)} | length "
            f"{_n(iv.mean_acceptance_length, 2)} | {_n(iv.drafts_per_s, 1)} drafts/s, "
            f"{_n(iv.tokens_per_s, 1)} tok/s | break-even {_n(iv.break_even, 3)} | "
            f"{iv.verdict or '-'} |")


def _n(x, digits: int = 0) -> str:
    if x is None:
        return "n/a"
    return f"{x:.{digits}f}" if digits else str(x)


def run(args) -> int:
    try:
        watch = build(args)
        store = None
        if args.db:
            from engine.serving.watch.store import WatchStore, WatchStoreError

            try:
                store = WatchStore(args.db, args.kept)
            except WatchStoreError as error:
                raise WatchError(str(error)) from None
    except WatchError as error:
        print(f"specscope watch: error: {error}", file=sys.stderr)
        return 2
    if not args.json:
        notes = list(watch.plan.notices) if watch.plan else []
        print(f"specscope watch: {watch.url} every {args.interval:g} s as {watch.name!r}"
              + ("" if watch.plan else ", no plan") + ("" if watch.costs else ", no costs")
              + " (Ctrl-C stops)", file=sys.stderr)
        for note in notes:
            print(f"note: {note}", file=sys.stderr)
    scrapes = 0
    next_at = time.monotonic()
    try:
        while args.count is None or scrapes < args.count:
            iv = watch.scrape()
            scrapes += 1
            if store is not None:
                store.add(iv)
            if args.json:
                print(json.dumps(iv.to_json()), flush=True)
            else:
                print(line(iv), flush=True)
                for text in iv.lines + ([iv.batch_note] if iv.batch_note else []):
                    print(f"  {text}", flush=True)
            if args.count is not None and scrapes >= args.count:
                break
            next_at += args.interval
            time.sleep(max(0.0, next_at - time.monotonic()))
    except KeyboardInterrupt:
        print("specscope watch: stopped", file=sys.stderr)
    finally:
        if store is not None:
            store.close()
    return 0
