"""A saved record read back as the engine's events, and the replay's frames: the page after
each cycle."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.decoder.events import Acceptance, CycleEvent, SummaryEvent, Token
from engine.decoder.stats import acceptance


def cycle_events(record: dict[str, Any]) -> list[CycleEvent]:
    return [CycleEvent(**{**c, "tokens": [Token(**t) for t in c["tokens"]]})
            for c in record["cycles"]]


def summary_event(record: dict[str, Any]) -> SummaryEvent:
    return SummaryEvent(**record["summary"])


@dataclass(frozen=True)
class Frame:
    """The page after one more cycle of the replay."""

    event: CycleEvent
    delay_ms: float  # how long the cycle took when it ran
    tokens: int  # tokens generated up to and including this cycle
    running: Acceptance


def replay_frames(cycles: list[CycleEvent]) -> list[Frame]:
    frames, tokens = [], 0
    for i, event in enumerate(cycles):
        tokens += event.n_emitted
        frames.append(Frame(event, event.cycle_ms, tokens, acceptance(cycles[: i + 1])))
    return frames
