"""Link-preview PNG (1200 x 630): time to produce one through the app, cold, warm and cached.

Cold: the first image of a fresh app (templates load; its drawing process started with it).
Warm: a state not seen before (SVG drawn by resvg in the app's worker process). Cached: a state
seen before. Wall time and the server process's CPU time are both printed (the drawing is in
the worker, so its CPU is not in the second figure): on a shared machine the wall time also
counts the time other processes held the cores.

Pasted: a link as a chat app fetches it, the page first (which draws its card in the
background) and then the card, at once or after a pause; wall time of the card's request.

Then where a warm render's time goes, resvg alone on the card's SVG: the card as it is, the
same card without its text, a blank card of the same size (filling and PNG encoding), and what
loading the fonts costs (a one-word SVG with and without the font files).
"""

from __future__ import annotations

import argparse
import re
import statistics
import time
from collections.abc import Callable
from urllib.parse import parse_qsl

import resvg_py
from fastapi.testclient import TestClient

from app import preview
from app.main import create_app
from app.params import page_figures, parse_page_state
from app.saved.cards import slider_preview_svg
from engine.settings import Settings

RESVG = resvg_py.svg_to_bytes


def timed(client: TestClient, url: str) -> tuple[float, float]:
    """Wall and CPU milliseconds of one request."""
    wall, cpu = time.perf_counter(), time.process_time()
    response = client.get(url)
    wall, cpu = (time.perf_counter() - wall) * 1000, (time.process_time() - cpu) * 1000
    assert response.status_code == 200 and response.content[:4] == b"\x89PNG"
    return wall, cpu


def stats(ms: list[float]) -> str:
    ms = sorted(ms)
    p95 = ms[min(len(ms) - 1, round(0.95 * (len(ms) - 1)))]
    return f"p50 {statistics.median(ms):6.1f} ms, p95 {p95:6.1f} ms"


def summary(name: str, runs: list[tuple[float, float]]) -> str:
    return (f"{name:>7}: wall {stats([w for w, _ in runs])}; "
            f"CPU {stats([c for _, c in runs])}")


def cpu_ms(render: Callable[[], bytes], repeats: int) -> list[float]:
    times = []
    for _ in range(repeats):
        cpu = time.process_time()
        render()
        times.append((time.process_time() - cpu) * 1000)
    return times


def breakdown(svg: str, repeats: int) -> None:
    """resvg alone, uncached, on parts of one card (CPU time)."""
    fonts = {"skip_system_fonts": True, "font_files": preview.FONT_FILES,
             "font_family": preview.FONT_FAMILY} if preview.FONT_FILES else {}

    def render(source: str, **options: object) -> Callable[[], bytes]:
        return lambda: RESVG(svg_string=source, zoom=1.0, background="#ffffff",
                             **(fonts | options))

    size = f'width="{preview.PREVIEW_WIDTH}" height="{preview.PREVIEW_HEIGHT}"'
    blank = f'<svg xmlns="http://www.w3.org/2000/svg" {size}><rect {size} fill="#f7f8fa"/></svg>'
    word = ('<svg xmlns="http://www.w3.org/2000/svg" width="60" height="30">'
            '<text y="20">x</text></svg>')
    rows = {
        "the card": render(svg),
        "the card, no text": render(re.sub(r"<text\b.*?</text>", "", svg, flags=re.S)),
        "a blank card": render(blank),
        "one word, font files": render(word),
        "one word, no fonts": render(word, font_files=[]),
    }
    for name, call in rows.items():
        print(f"{name:>21}: CPU {stats(cpu_ms(call, repeats))} (resvg alone, {repeats} renders)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--states", type=int, default=30)
    parser.add_argument("--repeats", type=int, default=10, help="renders per breakdown row")
    args = parser.parse_args()
    app = create_app(Settings(load_models=False, db=":memory:"))
    with TestClient(app, base_url="http://localhost") as client:
        cold = timed(client, "/preview.png?alpha=0.5&k=2")
        urls = [f"/preview.png?alpha={0.20 + i * 0.02:.2f}&k={1 + i % 8}"
                for i in range(args.states)]
        warm = [timed(client, url) for url in urls]
        cached = [timed(client, url) for url in urls]
        pasted = {pause: [] for pause in (0.0, 0.3)}
        for i in range(args.states):
            for pause, runs in pasted.items():
                query = f"alpha={0.21 + i * 0.02:.2f}&k={1 + i % 8}&c={0.1 + pause:.2f}"
                assert client.get(f"/?{query}").status_code == 200
                time.sleep(pause)
                runs.append(timed(client, f"/preview.png?{query}"))
    print(f"   cold: wall {cold[0]:6.1f} ms; CPU {cold[1]:6.1f} ms (first image of the process)")
    print(summary("warm", warm), f"({args.states} states never seen before)")
    print(summary("cached", cached), "(the same states again)")
    for pause, runs in pasted.items():
        print(f"pasted, card fetched {pause * 1000:.0f} ms after the page: wall "
              f"{stats([w for w, _ in runs])} ({args.states} states)")
    state, _ = parse_page_state(list(parse_qsl(urls[-1].split("?", 1)[1])))
    breakdown(slider_preview_svg(page_figures(state)), args.repeats)


if __name__ == "__main__":
    main()
