"""PNGs (link previews, chart downloads) are drawn in worker processes that start and stop with
the server, bounded (503 with Retry-After past the queue), and cached by what they show."""

from __future__ import annotations

import html
import os
import re
from pathlib import Path

import httpx
import pytest
from support.live_server import LiveServer

from app.main import create_app
from engine.settings import Settings

PNG_ROUTES = ["/preview.png?alpha=0.31", "/chart.png?alpha=0.31", "/preview-batch.png?batch=8"]


def settings(**png: int) -> Settings:
    return Settings(load_models=False, db=":memory:", **png)


def parent_of(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat.rsplit(")", 1)[1].split()[1])


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_pngs_are_drawn_by_worker_processes_that_start_and_stop_with_the_server():
    with LiveServer(create_app(settings(png_workers=2))) as server:
        workers = server.app.state.renderer.worker_pids()
        # Started in the lifespan, before any request: two children of the server's process.
        assert len(workers) == 2 and all(parent_of(pid) == os.getpid() for pid in workers)
        card = httpx.get(server.url + "/preview.png?alpha=0.64", timeout=60)
        assert card.status_code == 200 and card.content[:4] == b"\x89PNG"
    assert not any(alive(pid) for pid in workers)  # shut down with the server: no orphans


def hold(renderer, gates: list[Path]) -> list:
    """Keep one job per gate in the pool until the gate is opened: each worker blocks
    reading a FIFO, and jobs beyond the workers wait in the queue."""
    for gate in gates:
        os.mkfifo(gate)
    return [renderer.submit(gate.read_bytes) for gate in gates]


def release(gates: list[Path], held: list) -> None:
    for gate in gates:
        descriptor = os.open(gate, os.O_WRONLY)  # waits for the worker to start reading
        os.write(descriptor, b"go")
        os.close(descriptor)
    assert [job.result(timeout=60) for job in held] == [b"go"] * len(gates)


@pytest.mark.parametrize("queue", [0, 2])
def test_past_the_queue_a_png_is_refused_at_once_with_503_and_retry_after(tmp_path, queue):
    with LiveServer(create_app(settings(png_workers=1, png_queue=queue))) as server:
        renderer = server.app.state.renderer
        assert httpx.get(server.url + "/preview.png?alpha=0.5", timeout=60).status_code == 200
        gates = [tmp_path / f"gate{i}" for i in range(1 + queue)]
        held = hold(renderer, gates)  # the worker busy and the queue full
        try:
            for route in PNG_ROUTES:
                refused = httpx.get(server.url + route, timeout=60)
                assert refused.status_code == 503, route
                assert refused.headers["Retry-After"] == "1"
                assert "drawing as many images as it takes" in refused.json()["message"]
            # What needs no drawing is still served: a card drawn before, the page.
            assert httpx.get(server.url + "/preview.png?alpha=0.5").status_code == 200
            assert httpx.get(server.url + "/?alpha=0.31", timeout=60).status_code == 200
        finally:
            release(gates, held)
        for route in PNG_ROUTES:
            assert httpx.get(server.url + route, timeout=60).status_code == 200, route


def page_and_card(client, query: str) -> tuple[str, bytes]:
    """The figures a page shows in its link preview's title and description, and the card
    its og:image links to."""
    page = client.get(f"/?{query}").text
    meta = {name: html.unescape(value) for name, value in
            re.findall(r'<meta property="og:(\w+)" content="([^"]*)"', page)}
    card = client.get(meta["image"].removeprefix("http://127.0.0.1"))
    assert card.status_code == 200
    return meta["title"] + " | " + meta["description"], card.content


def test_links_that_show_the_same_card_share_one_drawing(client):
    """Digits of alpha the card does not show, and parameters it does not show at all (the
    seed, the output length, the step time), do not make another drawing."""
    renderer = client.app.state.renderer
    drawn, hits = renderer.drawn, renderer.hits
    first = client.get("/preview.png?alpha=0.5002")
    again = client.get("/preview.png?alpha=0.5004&seed=7&tokens=900&step_ms=30")
    assert first.status_code == again.status_code == 200
    assert again.content == first.content
    assert (renderer.drawn, renderer.hits) == (drawn + 1, hits + 1)


def test_a_shared_card_never_shows_a_figure_its_page_does_not(client):
    """Links a step of 0.0002 in alpha apart around 0.70, where the best k's speedup turns
    from 1.64x to 1.65x: links whose pages show other figures get cards of their own
    (rounding alpha to the 0.01 the card prints would have given alpha=0.7001 the card of
    0.70, which says 1.64x where its page says 1.65x), and some links do share a card."""
    renderer = client.app.state.renderer
    drawn = renderer.drawn
    queries = [f"alpha={0.6990 + i * 0.0002:.4f}" for i in range(11)] + ["alpha=0.7001"]
    shown = [page_and_card(client, query) for query in queries]
    figures_by_card: dict[bytes, set[str]] = {}
    for figures, card in shown:
        figures_by_card.setdefault(card, set()).add(figures)
    assert all(len(figures) == 1 for figures in figures_by_card.values())
    assert len({figures for figures, _ in shown}) > 1  # the figures did change in the range
    assert renderer.drawn - drawn < len(queries)  # and some links shared a drawing
    assert "1.64×" in shown[5][0] and "1.65×" in shown[-1][0]  # alpha=0.7000 and 0.7001
