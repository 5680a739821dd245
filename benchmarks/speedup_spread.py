"""How much the live run's measured speedup moves between identical runs.

Starts the server with the shipped pair and makes the same live run (same prompt, settings
and seed, so the same tokens) several times, either through the HTTP API with no browser
running, or by pressing "Run live" on the page in headless Chromium, which then renders the
stream on the same CPUs. Prints every run's measured speedup, the median, the interquartile
range and the range.

    .venv/bin/python benchmarks/speedup_spread.py [--runs 10] [--browser] [--repeats N]
"""

from __future__ import annotations

import argparse
import json
import statistics
import urllib.request
from urllib.parse import urlencode

from browser_session import FLAGS, server
from playwright.sync_api import sync_playwright

SETTINGS = {"prompt": "And it came to pass, when the king heard these words, that", "k": 4,
            "temperature": 0.8, "top_p": 1.0, "max_new_tokens": 64, "seed": 1}


def api_run(url: str, body: dict) -> float:
    request = urllib.request.Request(url + "/api/runs", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    kind = None
    with urllib.request.urlopen(request, timeout=300) as response:
        for raw in response:
            line = raw.decode().rstrip("\n")
            if line.startswith("event: "):
                kind = line[7:]
            elif line.startswith("data: ") and kind == "summary":
                return json.loads(line[6:])["speedup_measured"]
            elif line.startswith("data: ") and kind == "error":
                raise RuntimeError(line)
    raise RuntimeError("the stream ended without a summary")


def browser_runs(url: str, runs: int, repeats: int | None) -> list[float]:
    query = {"prompt": SETTINGS["prompt"], "run_k": SETTINGS["k"],
             "temperature": SETTINGS["temperature"], "max_new_tokens": SETTINGS["max_new_tokens"],
             "run_seed": SETTINGS["seed"]}
    if repeats is not None:
        query["repeats"] = repeats
    speedups = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=FLAGS)
        page = browser.new_page()
        page.goto(f"{url}/?{urlencode(query)}", wait_until="networkidle")
        for _ in range(runs):
            page.locator("#run-live").click()
            summary = page.locator("#live-summary .live-summary")
            summary.wait_for(timeout=300_000)
            speedups.append(float(summary.get_attribute("data-speedup-measured")))
            page.locator("#run-live:enabled").wait_for()
        browser.close()
    return speedups


def quartiles(values: list[float]) -> tuple[float, float]:
    q = statistics.quantiles(values, n=4, method="inclusive")
    return q[0], q[2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--browser", action="store_true",
                        help="press Run live on the page in headless Chromium")
    parser.add_argument("--repeats", type=int, default=None,
                        help="repeats per run (default: the server's default)")
    args = parser.parse_args()

    with server() as url:
        if args.browser:
            speedups = browser_runs(url, args.runs, args.repeats)
        else:
            body = SETTINGS | ({"repeats": args.repeats} if args.repeats is not None else {})
            speedups = [api_run(url, body) for _ in range(args.runs)]
    low, high = quartiles(speedups)
    median = statistics.median(speedups)
    mode = "page in Chromium" if args.browser else "API, no browser"
    print(f"measured speedup, {len(speedups)} identical runs ({mode}): "
          + " ".join(f"{s:.2f}" for s in speedups))
    print(f"median {median:.3f}x, IQR {low:.3f}-{high:.3f} ({(high - low) / median:.1%} of the "
          f"median), range {min(speedups):.3f}-{max(speedups):.3f}")


if __name__ == "__main__":
    main()
