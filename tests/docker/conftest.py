"""The Dockerfile and its build context, read as Docker reads them."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.dockerfile import Stage, copy_context, stages

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def dockerfile() -> dict[str, Stage]:
    return {s.name: s for s in stages((ROOT / "Dockerfile").read_text(encoding="utf-8"))}


@pytest.fixture(scope="session")
def build_context(tmp_path_factory) -> tuple[Path, list[str]]:
    """A copy of what ``docker build .`` sends (``COPY . .`` puts it in /app)."""
    destination = tmp_path_factory.mktemp("context")
    return destination, copy_context(ROOT, destination)
