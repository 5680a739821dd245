"""The stand-in vLLM server (tests/support/fake_vllm.py) for the sweep and probe tests."""

from __future__ import annotations

import pytest
from support.fake_vllm_server import start_fake_vllm

from engine.serving.server import VllmServer


@pytest.fixture
def fake_server(tmp_path):
    started: list[VllmServer] = []

    def start(mode: str) -> VllmServer:
        folder = tmp_path / f"fake-{len(started)}"
        folder.mkdir()
        started.append(start_fake_vllm(mode, folder))
        return started[-1]

    yield start
    for server in started:
        server.stop()
