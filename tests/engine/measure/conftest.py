"""The stand-in vLLM server (tests/support/fake_vllm.py) for the sweep and probe tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.measure.vllm_server import ServerSpec, VllmServer

FAKE = Path(__file__).resolve().parents[2] / "support" / "fake_vllm.py"


@pytest.fixture
def fake_server(tmp_path, monkeypatch):
    import sys

    def start(mode: str) -> VllmServer:
        monkeypatch.setenv("FAKE_VLLM_MODE", mode)
        python = tmp_path / "python"
        python.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKE}" "$@"\n')
        python.chmod(0o755)
        server = VllmServer(ServerSpec("models/target", "models/draft", python=python),
                            startup_timeout_s=30)
        server.start()
        started.append(server)
        return server

    started: list[VllmServer] = []
    yield start
    for server in started:
        server.stop()
