"""The server in a subprocess on a free localhost port, and a page of headless Chromium on it."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager

from playwright.sync_api import Page, sync_playwright

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--no-first-run"]


@contextmanager
def server(env: dict[str, str] | None = None) -> Iterator[str]:
    """A fresh server (``env``: extra SPECSCOPE_ settings); its base URL once it answers."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    process = subprocess.Popen(
        [sys.executable, "-m", "app.main"], env=os.environ | (env or {}) | {
            "SPECSCOPE_PORT": str(port)},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(600):  # the lifespan loads the models before the server answers
            try:
                urllib.request.urlopen(url, timeout=1)
                break
            except OSError:
                time.sleep(0.1)
        yield url
    finally:
        process.terminate()
        process.wait()


@contextmanager
def page_on_server(path: str, env: dict[str, str] | None = None) -> Iterator[Page]:
    """A page opened at ``path`` on a fresh server (``env``: extra SPECSCOPE_ settings)."""
    with server(env) as url, sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=FLAGS)
        page = browser.new_page()
        page.goto(url + path, wait_until="networkidle")
        yield page
        browser.close()
