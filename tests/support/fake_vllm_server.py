"""Start the stand-in vLLM server (``fake_vllm.py``) the way specscope starts the real one."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from engine.serving.server import ServerSpec, VllmServer

FAKE = Path(__file__).resolve().parent / "fake_vllm.py"


def fake_python(folder: Path) -> Path:
    """A "python" in ``folder`` that runs the stand-in whatever module it is asked for: give
    it as a ServerSpec's ``python`` (``FAKE_VLLM_MODE`` in the environment picks the mode)."""
    python = folder / "python"
    python.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKE}" "$@"\n')
    python.chmod(0o755)
    return python


def start_fake_vllm(mode: str, folder: Path) -> VllmServer:
    """A started stand-in in ``mode`` (see fake_vllm.py); the caller stops it."""
    python = fake_python(folder)
    server = VllmServer(ServerSpec("models/target", "models/draft", python=python),
                        startup_timeout_s=30)
    previous = os.environ.get("FAKE_VLLM_MODE")
    os.environ["FAKE_VLLM_MODE"] = mode  # the child process reads it at start
    try:
        server.start()
    finally:
        if previous is None:
            del os.environ["FAKE_VLLM_MODE"]
        else:
            os.environ["FAKE_VLLM_MODE"] = previous
    return server
