from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from engine.settings import Settings


@pytest.fixture(scope="module")
def client() -> TestClient:
    # The name a local browser uses: the server answers only to its allowed hosts.
    with TestClient(create_app(Settings(load_models=False)), base_url="http://127.0.0.1") as c:
        yield c
