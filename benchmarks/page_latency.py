"""Slider latency and page weight of the slider page, measured in headless Chromium.

Starts the server on a free localhost port, opens the page, then moves the alpha slider many
times and records, inside the page, the time from the input event to the updated figures in the
DOM (htmx's afterSettle). Each move starts from an idle page (painted, 50 ms quiet), as a
person's would. Prints p50/p95/max and the total bytes the page transferred.

    .venv/bin/python benchmarks/page_latency.py [--moves 200] [--back-to-back]
"""

from __future__ import annotations

import argparse
import statistics

from browser_session import page_on_server

MEASURE = """async ([moves, idle]) => {
  const slider = document.getElementById('alpha');
  const times = [];
  for (let i = 0; i < moves; i++) {
    const value = (0.05 + (i * 37 % 90) / 100).toFixed(2);
    // The results' own swap, not the batch-size section's (it follows alpha once it rests).
    const settled = new Promise(resolve => {
      const done = () => {
        const shown = document.querySelector('[data-figure="headline"]').textContent;
        if (!shown.includes('α = ' + value)) return;
        document.body.removeEventListener('htmx:afterSettle', done);
        resolve();
      };
      document.body.addEventListener('htmx:afterSettle', done);
    });
    const start = performance.now();
    slider.value = value;
    slider.dispatchEvent(new Event('input', {bubbles: true}));
    await settled;
    times.push(performance.now() - start);
    if (!idle) continue;
    // Let the page paint and go idle, so each move starts as a person's would.
    await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
    await new Promise(r => setTimeout(r, 50));
  }
  return times;
}"""


TRANSFERRED = """(field) => performance.getEntriesByType('navigation')
  .concat(performance.getEntriesByType('resource')).reduce((sum, e) => sum + e[field], 0)"""


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--moves", type=int, default=200)
    parser.add_argument("--back-to-back", action="store_true",
                        help="start each move as soon as the last one settled (a fast drag)")
    args = parser.parse_args()

    with page_on_server("/", {"SPECSCOPE_LOAD_MODELS": "false"}) as page:
        weight = page.evaluate(TRANSFERRED, "transferSize")
        decoded = page.evaluate(TRANSFERRED, "decodedBodySize")
        times = page.evaluate(MEASURE, [args.moves, not args.back_to_back])

    mode = "back to back" if args.back_to_back else "each from an idle page"
    print(f"slider input -> updated figures, {len(times)} moves ({mode}): "
          f"p50 {statistics.median(times):.1f} ms, p95 {percentile(times, 0.95):.1f} ms, "
          f"max {max(times):.1f} ms")
    print(f"page weight: {weight / 1024:.1f} KB transferred ({decoded / 1024:.1f} KB uncompressed)")


if __name__ == "__main__":
    main()
