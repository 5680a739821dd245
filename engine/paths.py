"""Where the repository is: a module of its own, so that finding it imports nothing (the
settings, which need pydantic, re-export it)."""

from __future__ import annotations

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
