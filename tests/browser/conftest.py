"""Real Chromium driven by Playwright, against real servers on localhost."""

from __future__ import annotations

import pytest
from playwright.sync_api import Browser, sync_playwright
from support.live_server import LiveServer

from app.main import create_app
from engine.settings import Settings

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--no-first-run",
]


@pytest.fixture(scope="session")
def browser() -> Browser:
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        yield b
        b.close()


@pytest.fixture(scope="module")
def slider_server() -> LiveServer:
    with LiveServer(create_app(Settings(load_models=False))) as server:
        yield server
