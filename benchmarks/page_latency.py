"""Slider latency and page weight of the slider page, measured in headless Chromium.

Starts the server on a free localhost port, opens the page, then moves the alpha slider many
times and records, inside the page, the time from the input event to the updated figures in the
DOM (the headline naming the new alpha, seen by a MutationObserver, so any way of updating the
page is timed alike). Each move starts from an idle page (painted, 50 ms quiet), as a person's
would. Prints p50/p95/max and the total bytes the page transferred, then the floor under
any move: the same number of requests from the page for /healthz (a few bytes through the same
server and middleware) and for the results fragment alone (no DOM work), each from idle.

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
    // The results' headline, not the batch-size section (it follows alpha once it rests).
    const settled = new Promise(resolve => {
      const observer = new MutationObserver(() => {
        const shown = document.querySelector('[data-figure="headline"]').textContent;
        if (!shown.includes('α = ' + value)) return;
        observer.disconnect();
        resolve();
      });
      observer.observe(document.body, {childList: true, subtree: true, characterData: true});
    });
    const start = performance.now();
    slider.value = value;
    slider.dispatchEvent(new Event('input', {bubbles: true}));
    await settled;
    const end = performance.now();
    // Where the time went: the results request's own timing entry, sent after this input.
    const request = performance.getEntriesByType('resource').filter(
      e => e.startTime >= start && e.name.includes('alpha=' + value)).pop();
    times.push({total: end - start,
                before: request ? request.startTime - start : NaN,
                request: request ? request.responseEnd - request.startTime : NaN,
                server: request && request.serverTiming.length
                  ? request.serverTiming[0].duration : NaN,
                after: request ? end - request.responseEnd : NaN});
    performance.clearResourceTimings();
    if (!idle) continue;
    // Let the page paint and go idle, so each move starts as a person's would.
    await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
    await new Promise(r => setTimeout(r, 50));
  }
  return times;
}"""


FLOOR = """async ([moves, url]) => {
  const times = [];
  for (let i = 0; i < moves; i++) {
    const start = performance.now();
    await (await fetch(url, {headers: {"HX-Request": "true", "HX-Target": "results"}})).text();
    times.push(performance.now() - start);
    await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
    await new Promise(r => setTimeout(r, 50));
  }
  return times;
}"""


TRANSFERRED = """(field) => performance.getEntriesByType('navigation')
  .concat(performance.getEntriesByType('resource')).reduce((sum, e) => sum + e[field], 0)"""


PHASES = {
    "before": "input -> request sent (the page's script)",
    "request": "request sent -> answer in (network and server)",
    "server": "  of which the server's handler (Server-Timing)",
    "after": "answer in -> figures in the DOM (parse and swap)",
}


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
        results = page.evaluate("document.getElementById('results').dataset.canonical")
        floors = {"/healthz": page.evaluate(FLOOR, [args.moves, "/healthz"]),
                  "the results fragment": page.evaluate(FLOOR, [args.moves, results])}

    mode = "back to back" if args.back_to_back else "each from an idle page"
    total = [t["total"] for t in times]
    print(f"slider input -> updated figures, {len(times)} moves ({mode}): "
          f"p50 {statistics.median(total):.1f} ms, p95 {percentile(total, 0.95):.1f} ms, "
          f"max {max(total):.1f} ms")
    for phase, meaning in PHASES.items():
        values = [t[phase] for t in times if t[phase] == t[phase]]  # NaN: not measured
        if values:
            print(f"  {meaning}: p50 {statistics.median(values):.1f} ms, "
                  f"p95 {percentile(values, 0.95):.1f} ms")
    for name, values in floors.items():
        print(f"the floor: fetch {name} from the page, {len(values)} times: "
              f"p50 {statistics.median(values):.1f} ms, p95 {percentile(values, 0.95):.1f} ms")
    print(f"page weight: {weight / 1024:.1f} KB transferred ({decoded / 1024:.1f} KB uncompressed)")


if __name__ == "__main__":
    main()
