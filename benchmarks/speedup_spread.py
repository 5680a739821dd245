"""How much the live run's measured speedup moves between identical runs, and whether it
agrees with the theory's prediction.

Starts the server with the shipped pair and makes the same live run (same prompt, settings
and seed, so the same tokens) several times, either through the HTTP API with no browser
running, or by pressing "Run live" on the page in headless Chromium, which then renders the
stream on the same CPUs. ``--busy`` starts a process that keeps one core busy for the whole
benchmark (and stops it at the end). Prints, for every run, the measured speedup with its 95%
interval, each repeat's figure and the predicted speedup; then the median and spread of the
measured speedups, the median of measured / predicted, how often the prediction falls inside
the measured interval, and how often the first (streamed) repeat was the slowest.

    .venv/bin/python benchmarks/speedup_spread.py [--runs 10] [--browser] [--repeats N] [--busy]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import urllib.request
from dataclasses import dataclass
from urllib.parse import urlencode

from browser_session import FLAGS, server
from playwright.sync_api import sync_playwright

SETTINGS = {"prompt": "And it came to pass, when the king heard these words, that", "k": 4,
            "temperature": 0.8, "top_p": 1.0, "max_new_tokens": 64, "seed": 1}


@dataclass
class Run:
    measured: float
    low: float
    high: float
    predicted: float
    per_repeat: list[float]  # the counted repeats
    streamed: float  # the streamed pass, shown but not counted (0: none)

    @property
    def inside(self) -> bool:
        return self.low <= self.predicted <= self.high

    @property
    def passes(self) -> list[float]:
        """Every timed pass in the order they ran: the streamed one first, when there is one."""
        return ([self.streamed] if self.streamed else []) + self.per_repeat

    @property
    def first_slowest(self) -> bool:
        return len(self.passes) > 1 and self.passes[0] == min(self.passes)

    @property
    def first_counted_slowest(self) -> bool:
        return len(self.per_repeat) > 1 and self.per_repeat[0] == min(self.per_repeat)


def api_run(url: str, body: dict) -> Run:
    request = urllib.request.Request(url + "/api/runs", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    kind = None
    with urllib.request.urlopen(request, timeout=300) as response:
        for raw in response:
            line = raw.decode().rstrip("\n")
            if line.startswith("event: "):
                kind = line[7:]
            elif line.startswith("data: ") and kind == "summary":
                s = json.loads(line[6:])
                return Run(s["speedup_measured"], s["speedup_low"], s["speedup_high"],
                           s["speedup_predicted"], s["speedup_per_repeat"],
                           s.get("speedup_streamed", 0.0))
            elif line.startswith("data: ") and kind == "error":
                raise RuntimeError(line)
    raise RuntimeError("the stream ended without a summary")


def browser_runs(url: str, runs: int, repeats: int | None) -> list[Run]:
    query = {"prompt": SETTINGS["prompt"], "run_k": SETTINGS["k"],
             "temperature": SETTINGS["temperature"], "max_new_tokens": SETTINGS["max_new_tokens"],
             "run_seed": SETTINGS["seed"]}
    if repeats is not None:
        query["repeats"] = repeats
    results = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=FLAGS)
        page = browser.new_page()
        page.goto(f"{url}/?{urlencode(query)}", wait_until="networkidle")
        for _ in range(runs):
            page.locator("#run-live").click()
            summary = page.locator("#live-summary .live-summary")
            summary.wait_for(timeout=300_000)
            attrs = summary.evaluate("e => Object.assign({}, e.dataset)")
            results.append(Run(float(attrs["speedupMeasured"]), float(attrs["speedupLow"]),
                               float(attrs["speedupHigh"]), float(attrs["speedupPredicted"]),
                               [float(r) for r in attrs["speedupPerRepeat"].split()],
                               float(attrs.get("speedupStreamed") or 0.0)))
            page.locator("#run-live:enabled").wait_for()
        browser.close()
    return results


def quartiles(values: list[float]) -> tuple[float, float]:
    q = statistics.quantiles(values, n=4, method="inclusive")
    return q[0], q[2]


def report(results: list[Run], mode: str) -> None:
    print("| run | measured | 95% interval | predicted | measured / predicted | inside | "
          "streamed pass | counted repeats | first pass slowest | first counted slowest |")
    print("| ---: | ---: | ---: | ---: | ---: | :---: | ---: | --- | :---: | :---: |")
    for i, r in enumerate(results, start=1):
        print(f"| {i} | {r.measured:.2f} | {r.low:.2f}-{r.high:.2f} | {r.predicted:.2f} | "
              f"{r.measured / r.predicted:.3f} | {'yes' if r.inside else 'no'} | "
              f"{f'{r.streamed:.2f}' if r.streamed else '-'} | "
              + ", ".join(f"{x:.2f}" for x in r.per_repeat)
              + f" | {'yes' if r.first_slowest else 'no'}"
              f" | {'yes' if r.first_counted_slowest else 'no'} |")
    speedups = [r.measured for r in results]
    low, high = quartiles(speedups) if len(speedups) > 1 else (speedups[0], speedups[0])
    median = statistics.median(speedups)
    n = len(results)
    print(f"\nmeasured speedup, {n} identical runs ({mode}): median {median:.3f}x, IQR "
          f"{low:.3f}-{high:.3f} ({(high - low) / median:.1%} of the median), range "
          f"{min(speedups):.3f}-{max(speedups):.3f}")
    ratio = statistics.median(r.measured / r.predicted for r in results)
    print(f"median measured / predicted {ratio:.3f}; prediction inside the interval in "
          f"{sum(r.inside for r in results)}/{n} runs; the first timed pass the slowest in "
          f"{sum(r.first_slowest for r in results)}/{n} runs, the first counted repeat in "
          f"{sum(r.first_counted_slowest for r in results)}/{n}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--browser", action="store_true",
                        help="press Run live on the page in headless Chromium")
    parser.add_argument("--repeats", type=int, default=None,
                        help="repeats per run (default: the server's default)")
    parser.add_argument("--busy", action="store_true",
                        help="keep one core busy with another process while measuring")
    args = parser.parse_args()

    busy = None
    if args.busy:
        busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        print(f"load average at the start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        with server() as url:
            if args.browser:
                results = browser_runs(url, args.runs, args.repeats)
            else:
                body = SETTINGS | ({"repeats": args.repeats} if args.repeats is not None else {})
                results = [api_run(url, body) for _ in range(args.runs)]
        print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}"
              + (" (one core kept busy by the benchmark)" if busy else ""))
    finally:
        if busy is not None:
            busy.terminate()
            busy.wait()
    report(results, ("page in Chromium" if args.browser else "API, no browser")
           + (", one core kept busy" if busy else ""))


if __name__ == "__main__":
    main()
