"""Memory and time of parsing a vLLM /metrics text, per MB of input.

Pads a real vLLM page (tests/support/vllm_metrics_after.txt) with other metric families to
each size, then reads it as the calibration does (engine.serving.calibrate) and as the watch
does (engine.serving.watch.intervals.read_snapshot), measuring the peak of Python's allocations
(tracemalloc) above the text itself and the CPU time.

    .venv/bin/python benchmarks/metrics_parse_memory.py [--sizes 0.5,1,2,4]
"""

from __future__ import annotations

import argparse
import time
import tracemalloc
from pathlib import Path

from engine.serving.calibrate import calibrate
from engine.serving.watch.intervals import read_snapshot

ROOT = Path(__file__).resolve().parent.parent
PAGE = (ROOT / "tests/support/vllm_metrics_after.txt").read_text()


def padded(megabytes: float) -> str:
    limit = int(megabytes * 1024 * 1024)
    lines, size, i = [PAGE, "# TYPE padding gauge\n"], len(PAGE) + 22, 0
    while True:
        line = f'padding{{series="{i:08d}"}} {i}\n'
        if size + len(line) > limit:
            return "".join(lines)
        lines.append(line)
        size, i = size + len(line), i + 1


def measure(read, text: str) -> tuple[float, float]:
    """Peak MB allocated while reading, and CPU seconds."""
    tracemalloc.start()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    started = time.process_time()
    read(text)
    seconds = time.process_time() - started
    peak = tracemalloc.get_traced_memory()[1] - base
    tracemalloc.stop()
    return peak / 1e6, seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="0.5,1,2,4", help="MB of text, comma-separated")
    args = parser.parse_args()
    print("| text | reader | peak memory | per MB of text | CPU time |")
    print("| ---: | --- | ---: | ---: | ---: |")
    for size in (float(x) for x in args.sizes.split(",")):
        text = padded(size)
        mb = len(text.encode()) / 1e6
        for name, read in (("calibrate", calibrate), ("watch", read_snapshot)):
            peak, seconds = measure(read, text)
            print(f"| {mb:.2f} MB | {name} | {peak:.0f} MB | {peak / mb:.0f} MB "
                  f"| {seconds:.2f} s |")


if __name__ == "__main__":
    main()
