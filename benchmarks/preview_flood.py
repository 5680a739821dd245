"""`/api/theory` latency while 8 clients flood the server with link-preview PNGs.

Starts the page's server (``python -m app.main``, models not loaded) on a free localhost port,
times ``/api/theory`` alone for a few seconds, then again while ``--clients`` clients (in a
process of their own, so their work does not share this process's interpreter) each ask for
``/preview.png`` at a random alpha (4 decimals), one request after another, for
``--seconds``. A client that is answered 503 waits the Retry-After it is given, as a crawler
does; ``--ignore-retry-after`` asks again at once instead. Prints p50/p95/max of
``/api/theory`` quiet and under the flood, what the flood got (PNGs, 503s, their times) and the
load average before and after.

    .venv/bin/python benchmarks/preview_flood.py [--seconds 20] [--clients 8] [--repo PATH]

``--repo`` serves another checkout (the code before a change) with this script's load.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def server(repo: Path, env: dict[str, str]) -> Iterator[str]:
    """The page's server from ``repo`` in a process of its own, as `make run` serves it."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "app.main"], cwd=repo, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "SPECSCOPE_LOAD_MODELS": "false", "SPECSCOPE_DB": ":memory:",
             "SPECSCOPE_HOST": "127.0.0.1", "SPECSCOPE_PORT": str(port),
             "PYTHONPATH": str(repo), **env})
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                if httpx.get(url + "/healthz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the server did not start")
            time.sleep(0.2)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=60)


async def _flood(url: str, clients: int, seconds: float, obey: bool, seed: int) -> list:
    rng = random.Random(seed)
    until = time.monotonic() + seconds
    answers: list[tuple[int, float]] = []  # status, milliseconds

    async def client(http: httpx.AsyncClient) -> None:
        while time.monotonic() < until:
            started = time.perf_counter()
            try:
                r = await http.get(f"{url}/preview.png?alpha={rng.random():.4f}")
            except httpx.HTTPError:
                answers.append((0, (time.perf_counter() - started) * 1000))
                continue
            answers.append((r.status_code, (time.perf_counter() - started) * 1000))
            if r.status_code == 503 and obey:
                await asyncio.sleep(min(float(r.headers.get("Retry-After", "1")),
                                        max(0.0, until - time.monotonic())))

    async with httpx.AsyncClient(timeout=60, limits=httpx.Limits(max_connections=clients)) \
            as http:
        await asyncio.gather(*(client(http) for _ in range(clients)))
    return answers


def flood(url: str, clients: int, seconds: float, obey: bool, seed: int, out) -> None:
    out.send(asyncio.run(_flood(url, clients, seconds, obey, seed)))


def time_theory(url: str, seconds: float, pause: float = 0.05) -> list[float]:
    """Milliseconds of each ``/api/theory`` request, one after another with a short pause."""
    times = []
    until = time.monotonic() + seconds
    with httpx.Client(timeout=60) as http:
        while time.monotonic() < until:
            started = time.perf_counter()
            assert http.get(f"{url}/api/theory?alpha=0.7&k=4").status_code == 200
            times.append((time.perf_counter() - started) * 1000)
            time.sleep(pause)
    return times


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def line(values: list[float]) -> str:
    if not values:
        return "none"
    return (f"p50 {statistics.median(values):7.1f} ms, p95 {percentile(values, 0.95):7.1f} ms, "
            f"max {max(values):7.1f} ms ({len(values)} requests)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--quiet-seconds", type=float, default=5.0)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--ignore-retry-after", action="store_true")
    parser.add_argument("--repo", type=Path, default=REPO, help="the checkout to serve")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    load = os.getloadavg()
    with server(args.repo, {}) as url:
        httpx.get(f"{url}/preview.png?alpha=0.5", timeout=60)  # the first render: fonts load
        quiet = time_theory(url, args.quiet_seconds)
        ours, theirs = multiprocessing.Pipe()
        clients = multiprocessing.Process(target=flood, args=(
            url, args.clients, args.seconds, not args.ignore_retry_after, args.seed, theirs))
        clients.start()
        flooded = time_theory(url, args.seconds)
        answers = ours.recv()
        clients.join()
    after = os.getloadavg()

    on_503 = "asking again at once" if args.ignore_retry_after else "obeying Retry-After"
    print(f"served from {args.repo}; {args.clients} clients, {args.seconds:g} s, {on_503}")
    print(f"/api/theory alone:          {line(quiet)}")
    print(f"/api/theory under the flood: {line(flooded)}")
    for status in sorted({s for s, _ in answers}):
        label = {200: "PNGs", 503: "503s", 0: "failed"}.get(status, str(status))
        print(f"  flood {label:>6}: {line([ms for s, ms in answers if s == status])}")
    print(f"load average (1, 5, 15 min): before {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}, "
          f"after {after[0]:.2f} {after[1]:.2f} {after[2]:.2f}")


if __name__ == "__main__":
    main()
