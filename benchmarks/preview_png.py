"""Link-preview PNG (1200 x 630): time to produce one through the app, cold, warm and cached.

Cold: the first image of a fresh process (fonts and templates load). Warm: a state not seen
before, in a warm process (SVG rendered by resvg). Cached: a state seen before. Wall time and
the process's CPU time are both printed: on a shared machine the wall time also counts the time
other processes held the cores.
"""

from __future__ import annotations

import argparse
import statistics
import time

from fastapi.testclient import TestClient

from app.main import create_app
from engine.settings import Settings


def timed(client: TestClient, url: str) -> tuple[float, float]:
    """Wall and CPU milliseconds of one request."""
    wall, cpu = time.perf_counter(), time.process_time()
    response = client.get(url)
    wall, cpu = (time.perf_counter() - wall) * 1000, (time.process_time() - cpu) * 1000
    assert response.status_code == 200 and response.content[:4] == b"\x89PNG"
    return wall, cpu


def summary(name: str, runs: list[tuple[float, float]]) -> str:
    def stats(ms: list[float]) -> str:
        ms = sorted(ms)
        p95 = ms[min(len(ms) - 1, round(0.95 * (len(ms) - 1)))]
        return f"p50 {statistics.median(ms):6.1f} ms, p95 {p95:6.1f} ms"

    return (f"{name:>7}: wall {stats([w for w, _ in runs])}; "
            f"CPU {stats([c for _, c in runs])}")


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
    print(f"   cold: wall {cold[0]:6.1f} ms; CPU {cold[1]:6.1f} ms (first image of the process)")
    print(summary("warm", warm), f"({args.states} states never seen before)")
    print(summary("cached", cached), "(the same states again)")


if __name__ == "__main__":
    main()
