"""How often a speculative cycle waits for the device, and whether its times hold.

The engine times a cycle with clock marks (``engine.decoder.common.Clock``): on CUDA a mark is
an event recorded on the stream, so the k draft steps are queued without waiting and the
cycle's times are read after one wait, for its last mark. This script runs a greedy speculative
generation, counts every wait (``torch.cuda.synchronize`` and ``torch.cuda.Event.synchronize``,
wrapped to count and then call through) between one cycle and the next, and compares the
cycles' event times with the host's wall clock. It prints the figures and exits 1 unless:

- every cycle after the first (which also holds the prefill) waits exactly once on CUDA, by an
  event, never by ``torch.cuda.synchronize`` (on the CPU: never);
- each cycle's parts add up (draft steps <= draft time, draft + verification <= cycle) and
  the cycles' total is no more than the wall time between the first and the last cycle.

    python benchmarks/cuda_clock.py [--device cuda] [--target models/target --draft models/draft]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine.decoder.events import CycleEvent, GenerationConfig  # noqa: E402
from engine.decoder.loading import load_pair  # noqa: E402
from engine.decoder.speculative import speculate  # noqa: E402

PROMPT = "The history of the printing press begins"


class WaitCounter:
    """Counts calls of the two ways to wait for a CUDA device, and lets them through."""

    def __init__(self):
        self.device_waits = 0
        self.event_waits = 0
        self._restore = []

    def __enter__(self) -> WaitCounter:
        sync, event_sync = torch.cuda.synchronize, torch.cuda.Event.synchronize

        def device_wait(*args, **kwargs):
            self.device_waits += 1
            return sync(*args, **kwargs)

        def event_wait(event):
            self.event_waits += 1
            return event_sync(event)

        torch.cuda.synchronize, torch.cuda.Event.synchronize = device_wait, event_wait
        self._restore = [sync, event_sync]
        return self

    def __exit__(self, *exc) -> None:
        torch.cuda.synchronize, torch.cuda.Event.synchronize = self._restore


def measure(target: str, draft: str, device: str, k: int, tokens: int) -> dict:
    pair = load_pair(target, draft, device=device)
    config = GenerationConfig(PROMPT, k=k, temperature=0.0, max_new_tokens=tokens)
    cycles, waits, wall = [], [], []
    with WaitCounter() as counter:
        for event in speculate(pair, config):
            if isinstance(event, CycleEvent):
                cycles.append(event)
                waits.append((counter.device_waits, counter.event_waits))
                wall.append(time.perf_counter() * 1000.0)
    per_cycle = [(d1 - d0, e1 - e0) for (d0, e0), (d1, e1) in zip(waits, waits[1:], strict=False)]
    return {"device": str(pair.device), "k": k, "cycles": cycles, "per_cycle_waits": per_cycle,
            "wall_ms": wall[-1] - wall[0] if len(wall) > 1 else None}


def check(result: dict) -> list[str]:
    """The claims that do not hold (none: all is well)."""
    cuda = result["device"].startswith("cuda")
    expected = (0, 1) if cuda else (0, 0)
    failures = [f"cycle {i + 2} waited {d} time(s) by torch.cuda.synchronize and {e} by an "
                f"event; expected {expected[0]} and {expected[1]}"
                for i, (d, e) in enumerate(result["per_cycle_waits"]) if (d, e) != expected]
    cycles = result["cycles"]
    for c in cycles:
        if not (sum(c.draft_step_ms) <= c.draft_ms + 1e-6
                and c.draft_ms + c.verify_ms <= c.cycle_ms + 1e-6):
            failures.append(f"cycle {c.index}: its times do not add up ({c.draft_step_ms}, "
                            f"draft {c.draft_ms}, verify {c.verify_ms}, cycle {c.cycle_ms})")
    timed = sum(c.cycle_ms for c in cycles[1:])
    if result["wall_ms"] is not None and timed > result["wall_ms"] * 1.02:
        failures.append(f"the cycles' times ({timed:.2f} ms) exceed the wall time between "
                        f"them ({result['wall_ms']:.2f} ms)")
    return failures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--target", default="models/target")
    parser.add_argument("--draft", default="models/draft")
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--tokens", type=int, default=64)
    args = parser.parse_args(argv)
    result = measure(args.target, args.draft, args.device, args.k, args.tokens)
    cycles = result["cycles"]
    waits = result["per_cycle_waits"]
    print(f"device {result['device']}, k = {args.k}, {len(cycles)} cycles")
    if waits:
        print(f"waits per cycle (after the first): torch.cuda.synchronize "
              f"{statistics.fmean(d for d, _ in waits):.2f}, event "
              f"{statistics.fmean(e for _, e in waits):.2f}")
    steps = [ms for c in cycles for ms in c.draft_step_ms]
    print(f"median draft step {statistics.median(steps):.3f} ms, median verification "
          f"{statistics.median(c.verify_ms for c in cycles):.3f} ms, median cycle "
          f"{statistics.median(c.cycle_ms for c in cycles):.3f} ms")
    if result["wall_ms"] is not None:
        timed = sum(c.cycle_ms for c in cycles[1:])
        print(f"cycles 2..{len(cycles)}: {timed:.2f} ms timed by the clock, "
              f"{result['wall_ms']:.2f} ms of wall time ({timed / result['wall_ms']:.1%})")
    failures = check(result)
    for line in failures:
        print("FAILED:", line)
    print("ok" if not failures else f"{len(failures)} claim(s) do not hold")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
