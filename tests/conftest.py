"""Fixtures shared across the suite: the tiny real pair and a live server running it."""

from __future__ import annotations

import os

import pytest
import torch
from support.live_server import LiveServer
from support.tiny_models import tiny_pair
from transformers import AutoTokenizer

from app.main import create_app
from engine.settings import PairSpec, Settings

# Tests keep saved runs in memory unless they say otherwise: never in the repository's data/.
os.environ["SPECSCOPE_DB"] = ":memory:"


@pytest.fixture(scope="session", autouse=True)
def one_thread():
    """Tiny models run fastest on one thread, and a busy machine makes torch's thread pool
    wait on descheduled workers (a 5-token pass took 250 ms instead of 2)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def tiny_pair_dirs(tmp_path_factory) -> tuple[str, str]:
    return tiny_pair(tmp_path_factory.mktemp("tiny_pair"))


@pytest.fixture(scope="session")
def tiny_tokenizer(tiny_pair_dirs):
    return AutoTokenizer.from_pretrained(tiny_pair_dirs[0])


@pytest.fixture(scope="session")
def live_settings(tiny_pair_dirs) -> Settings:
    target, draft = tiny_pair_dirs
    return Settings(
        pairs={"tiny": PairSpec(target=target, draft=draft, label="tiny test pair")},
        default_pair="tiny", device="cpu", queue_size=1, max_new_tokens_limit=256,
        max_prompt_chars=2000, run_timeout_s=60.0,
    )


@pytest.fixture(scope="session")
def live_server(live_settings) -> LiveServer:
    with LiveServer(create_app(live_settings)) as server:
        yield server


@pytest.fixture(scope="session")
def app_state(live_server):
    return live_server.app.state
