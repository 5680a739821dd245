"""A saved record read back as the engine's events, and the replay's frames: the page after
each cycle."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from app.run_messages import timeline_scale_ms
from engine.decoder.events import Acceptance, CycleEvent, SummaryEvent, Token, TreeDraft
from engine.decoder.stats import acceptance, histogram_speedup, predicted_speedup, summarize


def cycle_events(record: dict[str, Any]) -> list[CycleEvent]:
    return [CycleEvent(**{**c, "tokens": [Token(**t) for t in c["tokens"]],
                          "tree": _tree(c.get("tree"))})
            for c in record["cycles"]]


def _tree(saved: dict[str, Any] | None) -> TreeDraft | None:
    if saved is None:
        return None
    return TreeDraft(**{**saved, "nodes": [Token(**t) for t in saved["nodes"]]})


def summary_event(record: dict[str, Any]) -> SummaryEvent:
    """The saved summary, with what this server derives from the saved cycles derived again:
    the prediction by the drafter's own formula, the acceptance figures over one base and
    the departure from the geometric model (a run saved by an older server had the draft
    model's formula for every drafter and none of the rest). The timings are as measured."""
    saved = SummaryEvent(**record["summary"])
    cycles = cycle_events(record) if record.get("cycles") else []
    if not cycles:
        return saved
    counted = summarize(cycles, [saved.step_ms])  # its own timings are not used
    return replace(
        saved,
        speedup_predicted=predicted_speedup(cycles, saved.alpha_counted, saved.c, saved.v),
        speedup_from_histogram=histogram_speedup(cycles, saved.c, saved.v),
        **{name: getattr(counted, name) for name in (
            "acceptance_length_histogram", "per_position_acceptance", "proposal_lengths",
            "geometric_chi2", "geometric_df", "geometric_p", "geometric_smallest_expected")})


@dataclass(frozen=True)
class Frame:
    """The page after one more cycle of the replay."""

    event: CycleEvent
    delay_ms: float  # how long the cycle took when it ran
    tokens: int  # tokens generated up to and including this cycle
    running: Acceptance
    baseline_ms: float | None = None  # the target alone on this cycle's tokens, timed after it


def replay_frames(
    cycles: list[CycleEvent], baseline_step_ms: list[float] | None = None
) -> list[Frame]:
    """The replay, cycle by cycle; with the run's target-only steps (in the order they ran,
    each cycle followed by as many steps as it gave tokens) each frame gets its cycle's
    target-only time, for the timeline bar the live panel drew."""
    frames, tokens = [], 0
    steps = list(baseline_step_ms or [])
    paired = len(steps) >= sum(c.n_emitted for c in cycles)
    for i, event in enumerate(cycles):
        alone = sum(steps[tokens : tokens + event.n_emitted]) if paired else None
        tokens += event.n_emitted
        frames.append(Frame(event, event.cycle_ms, tokens, acceptance(cycles[: i + 1]), alone))
    return frames


def replay_scale_ms(frames: list[Frame]) -> float | None:
    """The timeline's scale as the live panel fixed it, or None when the record has no
    target-only times to draw."""
    if not frames or frames[0].baseline_ms is None:
        return None
    return timeline_scale_ms(frames[0].event.cycle_ms, frames[0].baseline_ms)
