"""Slider latency and page weight of the slider page, measured in headless Chromium.

Starts the server on a free localhost port, opens the page, then moves the alpha slider many
times and records, inside the page, the time from the input event to the updated figures in the
DOM (htmx's afterSettle). Each move starts from an idle page (painted, 50 ms quiet), as a
person's would. Prints p50/p95/max and the total bytes the page transferred.

    .venv/bin/python benchmarks/page_latency.py [--moves 200] [--back-to-back]
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import time
import urllib.request

from playwright.sync_api import sync_playwright

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--no-first-run"]

MEASURE = """async ([moves, idle]) => {
  const slider = document.getElementById('alpha');
  const times = [];
  for (let i = 0; i < moves; i++) {
    const value = (0.05 + (i * 37 % 90) / 100).toFixed(2);
    const settled = new Promise(resolve =>
      document.body.addEventListener('htmx:afterSettle', resolve, {once: true}));
    const start = performance.now();
    slider.value = value;
    slider.dispatchEvent(new Event('input', {bubbles: true}));
    await settled;
    const shown = document.querySelector('[data-figure="headline"]').textContent;
    if (!shown.includes('α = ' + value)) throw new Error('stale figures for ' + value);
    times.push(performance.now() - start);
    if (!idle) continue;
    // Let the page paint and go idle, so each move starts as a person's would.
    await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
    await new Promise(r => setTimeout(r, 50));
  }
  return times;
}"""


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--moves", type=int, default=200)
    parser.add_argument("--back-to-back", action="store_true",
                        help="start each move as soon as the last one settled (a fast drag)")
    args = parser.parse_args()

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = os.environ | {"SPECSCOPE_PORT": str(port), "SPECSCOPE_LOAD_MODELS": "false"}
    server = subprocess.Popen([sys.executable, "-m", "app.main"], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/"
    try:
        for _ in range(200):
            try:
                urllib.request.urlopen(url, timeout=1)
                break
            except OSError:
                time.sleep(0.1)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=FLAGS)
            page = browser.new_page()
            page.goto(url, wait_until="networkidle")
            weight = page.evaluate("""() => performance.getEntriesByType('navigation')
                .concat(performance.getEntriesByType('resource'))
                .reduce((sum, e) => sum + e.transferSize, 0)""")
            decoded = page.evaluate("""() => performance.getEntriesByType('navigation')
                .concat(performance.getEntriesByType('resource'))
                .reduce((sum, e) => sum + e.decodedBodySize, 0)""")
            times = page.evaluate(MEASURE, [args.moves, not args.back_to_back])
            browser.close()
    finally:
        server.terminate()
        server.wait()

    mode = "back to back" if args.back_to_back else "each from an idle page"
    print(f"slider input -> updated figures, {len(times)} moves ({mode}): "
          f"p50 {statistics.median(times):.1f} ms, p95 {percentile(times, 0.95):.1f} ms, "
          f"max {max(times):.1f} ms")
    print(f"page weight: {weight / 1024:.1f} KB transferred ({decoded / 1024:.1f} KB uncompressed)")


if __name__ == "__main__":
    main()
