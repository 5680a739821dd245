from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from engine.settings import Settings


@pytest.fixture(scope="module")
def client() -> TestClient:
    with TestClient(create_app(Settings(load_models=False))) as c:
        yield c
