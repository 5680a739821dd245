"""The embed view in real Chromium: a design document on another origin frames it when that
origin is listed in the settings, and the browser refuses the frame otherwise."""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from playwright.sync_api import Browser, expect
from support.live_server import LiveServer, free_port

from app.main import create_app
from engine.settings import Settings

pytestmark = pytest.mark.browser



class DesignDoc(BaseHTTPRequestHandler):
    """A document on another origin that frames the page given in its query string."""

    def do_GET(self) -> None:  # noqa: N802 - the standard library's name
        src = self.path.split("?src=", 1)[1]
        body = f'<h1>Design review</h1><iframe src="{src}" width="900" height="600"></iframe>'
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, *args) -> None:
        pass


@pytest.fixture(scope="module")
def doc_origin() -> str:
    server = ThreadingHTTPServer(("127.0.0.1", free_port()), DesignDoc)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    # "localhost" and the app's "127.0.0.1" are different origins in the browser.
    yield f"http://localhost:{server.server_address[1]}"
    server.shutdown()


@pytest.fixture(scope="module")
def embed_server(doc_origin) -> LiveServer:
    settings = Settings(load_models=False, frame_ancestors=[doc_origin])
    with LiveServer(create_app(settings)) as server:
        yield server


def open_design_doc(browser: Browser, doc_origin: str, src: str):
    context = browser.new_context()
    page = context.new_page()
    refusals: list[str] = []
    page.on("console", lambda m: "frame-ancestors" in m.text and refusals.append(m.text))
    page.goto(f"{doc_origin}/review?src={src}", wait_until="load")  # the frame too
    return context, page, refusals


def test_a_listed_origin_frames_the_results_only(browser, doc_origin, embed_server):
    context, page, refusals = open_design_doc(browser, doc_origin,
                                              f"{embed_server.url}/?embed=1&alpha=0.8&k=5")
    frame = page.frame_locator("iframe")
    expect(frame.locator(".headline")).to_contain_text("α = 0.80 and k = 5")
    expect(frame.locator("svg.chart")).to_be_visible()
    expect(frame.locator("#controls")).to_have_count(0)
    expect(frame.locator("#live")).to_have_count(0)
    assert refusals == []
    context.close()


@pytest.mark.parametrize("listed, path", [(False, "/?embed=1"), (True, "/?alpha=0.8")])
def test_framing_is_refused_unless_listed_and_embedded(browser, doc_origin, slider_server,
                                                       embed_server, listed, path):
    server = embed_server if listed else slider_server
    context, page, refusals = open_design_doc(browser, doc_origin, server.url + path)
    # The browser's refusal is a console message that may come after the load event.
    deadline = time.monotonic() + 10
    while not refusals and time.monotonic() < deadline:
        page.wait_for_timeout(50)  # lets Playwright deliver the page's events
    assert refusals and "frame-ancestors 'none'" in refusals[0]
    assert page.frame_locator("iframe").locator(".headline").count() == 0
    context.close()
