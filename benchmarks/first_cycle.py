"""Time from pressing "Run live" to the first coloured cycle on the page, in headless Chromium.

Starts the server with the configured pair (the shipped pair by default; models load once, in
the lifespan, before this clock starts), presses "Run live" several times and records, inside
the page, the time from the click to the first chip in the cycle strip.

    .venv/bin/python benchmarks/first_cycle.py [--runs 10]
"""

from __future__ import annotations

import argparse
import statistics

from browser_session import page_on_server

MEASURE = """() => new Promise(resolve => {
  const strip = document.getElementById('live-cycles');
  const start = performance.now();
  const seen = new MutationObserver(() => {
    if (strip.querySelector('.chip')) { seen.disconnect(); resolve(performance.now() - start); }
  });
  seen.observe(strip, {childList: true, subtree: true});
  document.getElementById('run-live').click();
})"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()

    with page_on_server("/?max_new_tokens=32") as page:
        times = []
        for _ in range(args.runs):
            times.append(page.evaluate(MEASURE))
            page.wait_for_selector("#live-status:text('Done.')", timeout=120_000)
    ordered = sorted(times)
    print(f"Run live -> first coloured cycle, {len(times)} runs: "
          f"median {statistics.median(times):.0f} ms, max {ordered[-1]:.0f} ms")


if __name__ == "__main__":
    main()
