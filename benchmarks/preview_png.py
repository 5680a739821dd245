"""Link-preview PNG (1200 x 630): time to produce one through the app, cold, warm and cached.

Cold: the first image of a fresh process (fonts and templates load). Warm: a state not seen
before, in a warm process (SVG rendered by resvg). Cached: a state seen before.
"""

from __future__ import annotations

import argparse
import statistics
import time

from fastapi.testclient import TestClient

from app.main import create_app
from engine.settings import Settings


def timed(client: TestClient, url: str) -> float:
    start = time.perf_counter()
    response = client.get(url)
    elapsed = (time.perf_counter() - start) * 1000
    assert response.status_code == 200 and response.content[:4] == b"\x89PNG"
    return elapsed


def summary(name: str, ms: list[float]) -> str:
    ms = sorted(ms)
    p95 = ms[min(len(ms) - 1, round(0.95 * (len(ms) - 1)))]
    median = statistics.median(ms)
    return f"{name:>7}: p50 {median:6.1f} ms, p95 {p95:6.1f} ms, max {ms[-1]:6.1f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--states", type=int, default=30)
    args = parser.parse_args()
    with TestClient(create_app(Settings(load_models=False, db=":memory:"))) as client:
        cold = timed(client, "/preview.png?alpha=0.5&k=2")
        urls = [f"/preview.png?alpha={0.20 + i * 0.02:.2f}&k={1 + i % 8}"
                for i in range(args.states)]
        warm = [timed(client, url) for url in urls]
        cached = [timed(client, url) for url in urls]
    print(f"   cold: {cold:6.1f} ms (first image of the process)")
    print(summary("warm", warm), f"({args.states} states never seen before)")
    print(summary("cached", cached), "(the same states again)")


if __name__ == "__main__":
    main()
