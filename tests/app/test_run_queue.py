"""The engine's queue: how many runs may wait, and what an idle engine takes."""

from __future__ import annotations

import asyncio

import pytest

from app.run_messages import MessageKind
from app.run_queue import QueueFull, RunManager
from engine.decoder.events import GenerationConfig
from engine.decoder.loading import load_pair

CONFIG = GenerationConfig(prompt="the quick brown fox", k=2, max_new_tokens=4, seed=1)


@pytest.fixture(scope="module")
def pairs(tiny_pair_dirs):
    return {"tiny": load_pair(*tiny_pair_dirs, device="cpu")}


async def _kinds(run) -> list[MessageKind]:
    kinds = []
    while (message := await asyncio.wait_for(run.messages.get(), 60)).kind is not MessageKind.END:
        kinds.append(message.kind)
    return kinds


def test_a_queue_size_of_zero_means_no_waiting_list_not_no_runs(pairs):
    """SPECSCOPE_QUEUE_SIZE=0: an idle engine takes a run; a second one, sent while the
    first is on the engine or about to be, is refused: nothing waits."""
    manager = RunManager(pairs, queue_size=0, run_timeout_s=60)

    async def main() -> tuple[list[MessageKind], bool]:
        first = manager.submit("tiny", CONFIG)
        try:
            manager.submit("tiny", CONFIG)
            refused = False
        except QueueFull:
            refused = True
        return await _kinds(first), refused

    try:
        kinds, second_refused = asyncio.run(main())
    finally:
        manager.close()
    assert MessageKind.SUMMARY in kinds and MessageKind.QUEUED not in kinds
    assert second_refused


def test_a_queue_of_one_holds_one_run_behind_the_engine(pairs):
    manager = RunManager(pairs, queue_size=1, run_timeout_s=60)

    async def main() -> list[list[MessageKind]]:
        runs = [manager.submit("tiny", CONFIG), manager.submit("tiny", CONFIG)]
        with pytest.raises(QueueFull):
            manager.submit("tiny", CONFIG)
        return [await _kinds(run) for run in runs]

    try:
        first, second = asyncio.run(main())
    finally:
        manager.close()
    assert MessageKind.SUMMARY in first and MessageKind.SUMMARY in second
