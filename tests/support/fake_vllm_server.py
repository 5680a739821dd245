"""Start the stand-in vLLM server (``fake_vllm.py``) the way specscope starts the real one."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from engine.serving.server import ServerSpec, VllmServer

FAKE = Path(__file__).resolve().parent / "fake_vllm.py"


def start_fake_vllm(mode: str, folder: Path) -> VllmServer:
    """A started stand-in in ``mode`` (see fake_vllm.py); the caller stops it."""
    python = folder / "python"
    python.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKE}" "$@"\n')
    python.chmod(0o755)
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
