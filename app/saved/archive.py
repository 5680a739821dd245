"""A finished live run (or probe) as a saved record, and the archiver that keeps it."""

from __future__ import annotations

import logging
from concurrent.futures import Future
from dataclasses import asdict
from typing import Any

from app.preview import Renderer
from app.run_messages import RunMessage
from app.run_queue import FinishedRun
from app.saved.cards import run_preview_svg
from app.saved.machine import describe_machine
from app.store import RunStore, RunTooLarge, StoreUnavailable, Unsavable
from engine.decoder.drafter_spec import DrafterSpec
from engine.decoder.loading import ModelPair
from engine.settings import Settings

log = logging.getLogger("specscope.saved")


def run_record(finished: FinishedRun, settings: Settings) -> dict[str, Any]:
    return {
        "kind": "live",
        "pair": pair_record(finished.pair_name, finished.pair, settings),
        "settings": asdict(finished.config) | drafter_record(finished.drafter),
        "machine": describe_machine(finished.pair),
        "cycles": [asdict(c) for c in finished.cycles],
        "summary": asdict(finished.summary),
        "baseline": {"tokens": len(finished.baseline_step_ms),
                     "step_ms": finished.baseline_step_ms,
                     "tok_s": finished.summary.baseline_tok_s},
    }


class Archiver:
    """Saves every finished run and tells the stream where it went (or why it could not).

    The run's preview card is drawn right after, off the engine's thread, so the first chat
    app to fetch it for a pasted link finds it in the cache."""

    def __init__(self, store: RunStore | None, settings: Settings, renderer: Renderer,
                 unavailable: str = "") -> None:
        self.store = store
        self.renderer = renderer
        self.settings = settings
        self.unavailable = unavailable  # why there is no store
        self.last_preview: Future[bytes] | None = None

    def __call__(self, finished: FinishedRun) -> RunMessage:
        try:
            if self.store is None:
                raise StoreUnavailable(self.unavailable)
            record = run_record(finished, self.settings)
            run_id = self.store.save(record)
        except (RunTooLarge, StoreUnavailable, Unsavable) as error:
            log.warning("run not saved: %s", error)
            return RunMessage.not_saved(f"the run was not saved: {error}")
        self.last_preview = self.renderer.draw_soon(run_preview_svg(record))
        return RunMessage.saved(run_id)

    def probe(self, record: dict[str, Any]) -> RunMessage:
        """Save a finished probe's record (``probe_record``); the message says where, or why
        it was not saved."""
        try:
            if self.store is None:
                raise StoreUnavailable(self.unavailable)
            probe_id = self.store.save_probe(record)
        except (RunTooLarge, StoreUnavailable, Unsavable) as error:
            log.warning("probe not saved: %s", error)
            return RunMessage.not_saved(f"the probe was not saved: {error}")
        return RunMessage.saved(probe_id, f"/probes/{probe_id}")


def drafter_record(drafter: DrafterSpec) -> dict[str, Any]:
    """The drafter of a run, as its saved settings keep it (older records have none: the
    draft model)."""
    if drafter.kind == "ngram":
        return {"drafter": "ngram", **asdict(drafter.lookup)}
    if drafter.tree:
        return {"drafter": drafter.kind, "tree": drafter.tree_text}
    return {"drafter": drafter.kind}


def pair_record(pair_name: str, pair: ModelPair, settings: Settings) -> dict[str, str]:
    spec = settings.pairs.get(pair_name)
    return {"name": pair_name, "label": spec.label if spec else "",
            "target": pair.target_name, "draft": pair.draft_name}
