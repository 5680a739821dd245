"""A finished live run (or probe) as a saved record, and the views of a record: its title,
the page's replay frames and the CSV export."""

from __future__ import annotations

import csv
import io
import logging
import os
import platform
from concurrent.futures import Future
from dataclasses import asdict, dataclass
from functools import cache
from typing import Any

from app.charts import speedup_chart
from app.preview import draw_soon, preview_svg
from app.render import summary_context
from app.run_messages import RunMessage, timeline_scale_ms
from app.run_queue import FinishedRun
from app.store import RunStore, RunTooLarge, StoreUnavailable
from engine.analytic.theory import Figures
from engine.decoder.events import Acceptance, CycleEvent, SummaryEvent, Token
from engine.decoder.loading import ModelPair
from engine.decoder.stats import acceptance
from engine.settings import Settings

log = logging.getLogger("specscope.saved")

# A run's charts as files: their title and axis labels.
CHARTS = {
    "positions": {"title": "Acceptance at each draft position", "x_label": "draft position i",
                  "y_label": "share of cycles"},
    "lengths": {"title": "Acceptance lengths", "x_label": "drafts accepted in a cycle",
                "y_label": "share of cycles"},
}
CSV_COLUMNS = ("cycle", "position", "kind", "token_id", "text", "step_ms", "cycle_start_ms",
               "cycle_ms")


@cache
def _processor() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def describe_machine(pair: ModelPair) -> dict[str, Any]:
    import torch

    device = pair.device
    return {
        "device": str(device),
        "accelerator": torch.cuda.get_device_name(device) if device.type == "cuda" else None,
        "processor": _processor(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "dtype": str(pair.dtype).removeprefix("torch."),
        "torch": torch.__version__,
        "platform": platform.platform(terse=True),
    }


def run_record(finished: FinishedRun, settings: Settings) -> dict[str, Any]:
    return {
        "kind": "live",
        "pair": pair_record(finished.pair_name, finished.pair, settings),
        "settings": asdict(finished.config),
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

    def __init__(self, store: RunStore | None, settings: Settings, unavailable: str = "") -> None:
        self.store = store
        self.settings = settings
        self.unavailable = unavailable  # why there is no store
        self.last_preview: Future[bytes] | None = None

    def __call__(self, finished: FinishedRun) -> RunMessage:
        try:
            if self.store is None:
                raise StoreUnavailable(self.unavailable)
            record = run_record(finished, self.settings)
            run_id = self.store.save(record)
        except (RunTooLarge, StoreUnavailable) as error:
            log.warning("run not saved: %s", error)
            return RunMessage.not_saved(f"the run was not saved: {error}")
        self.last_preview = draw_soon(run_preview_svg(record))
        return RunMessage.saved(run_id)

    def probe(self, record: dict[str, Any]) -> RunMessage:
        """Save a finished probe's record (``probe_record``); the message says where, or why
        it was not saved."""
        try:
            if self.store is None:
                raise StoreUnavailable(self.unavailable)
            probe_id = self.store.save_probe(record)
        except (RunTooLarge, StoreUnavailable) as error:
            log.warning("probe not saved: %s", error)
            return RunMessage.not_saved(f"the probe was not saved: {error}")
        return RunMessage.saved(probe_id, f"/probes/{probe_id}")


def pair_record(pair_name: str, pair: ModelPair, settings: Settings) -> dict[str, str]:
    spec = settings.pairs.get(pair_name)
    return {"name": pair_name, "label": spec.label if spec else "",
            "target": pair.target_name, "draft": pair.draft_name}


# ---- views of a saved record -------------------------------------------------------------


def cycle_events(record: dict[str, Any]) -> list[CycleEvent]:
    return [CycleEvent(**{**c, "tokens": [Token(**t) for t in c["tokens"]]})
            for c in record["cycles"]]


def summary_event(record: dict[str, Any]) -> SummaryEvent:
    return SummaryEvent(**record["summary"])


def short_prompt(prompt: str, limit: int = 48) -> str:
    flat = " ".join(prompt.split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def run_preview_svg(record: dict[str, Any]) -> str:
    """The run's link-preview card: its prompt, its figures and its per-position chart."""
    positions = summary_context(summary_event(record))["positions"]
    return preview_svg(f"“{short_prompt(record['settings']['prompt'], 60)}”", run_title(record),
                       positions, "_bar_chart.html", **CHARTS["positions"])


def slider_preview_svg(fig: Figures) -> str:
    """A slider state's link-preview card: its title, its headline and its speedup chart."""
    return preview_svg(slider_title(fig), slider_headline(fig), speedup_chart(fig), "_chart.html",
                       fig=fig)


def run_title(record: dict[str, Any]) -> str:
    """What the run shows, in one line: "k 4: measured 1.31x, predicted 1.34x, alpha 0.70"."""
    s = record["summary"]
    return (f"k {s['k']}: measured {s['speedup_measured']:.2f}x, predicted "
            f"{s['speedup_predicted']:.2f}x, alpha {s['alpha_counted']:.2f}")


def slider_title(fig: Figures) -> str:
    """The slider state in one line: "alpha 0.70, k 4: 1.61x, best k 3"."""
    best = f"best k {fig.best_k}" if fig.worth_speculating else "do not speculate"
    return f"alpha {fig.alpha:.2f}, k {fig.k}: {fig.speedup:.2f}x, {best}"


def slider_headline(fig: Figures) -> str:
    """The page's headline as one sentence, for the preview card."""
    verdict = (f"Best k = {fig.best_k}, worth {fig.best_speedup:.2f}×." if fig.worth_speculating
               else f"Do not speculate: even the best k ({fig.best_k}) gives "
                    f"{fig.best_speedup:.2f}×.")
    return (f"At α = {fig.alpha:.2f} and k = {fig.k}, a cycle yields {fig.expected_tokens:.2f} "
            f"tokens for {fig.cycle_cost:.2f} target steps: {fig.speedup:.2f}× plain decoding. "
            + verdict)


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


# A cell starting with one of these is a formula to a spreadsheet (OWASP, "CSV Injection").
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def spreadsheet_safe(text: str) -> str:
    """``text`` as a CSV cell no spreadsheet evaluates: one that would start a formula gets a
    leading single quote (OWASP's advice); any other text is unchanged."""
    return "'" + text if text.startswith(FORMULA_START) else text


def token_rows(record: dict[str, Any]) -> str:
    """The CSV export: one row per token, with its cycle, position in the cycle and times.

    A draft token's ``step_ms`` is the draft step that proposed it; the target's token comes
    from the verification pass, so its ``step_ms`` is that pass's time. A token's text that
    a spreadsheet would take for a formula is quoted (``spreadsheet_safe``)."""
    out = io.StringIO()
    # RFC 4180's CRLF rows: the writer then quotes any text holding a CR or an LF, so a token
    # that is a carriage return cannot end a row early.
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(CSV_COLUMNS)
    start = 0.0
    for cycle in record["cycles"]:
        for position, token in enumerate(cycle["tokens"]):
            is_draft = token["kind"] != "target" and position < len(cycle["draft_step_ms"])
            step = cycle["draft_step_ms"][position] if is_draft else cycle["verify_ms"]
            writer.writerow([cycle["index"], position, token["kind"], token["id"],
                             spreadsheet_safe(token["text"]),
                             f"{step:.3f}", f"{start:.3f}", f"{cycle['cycle_ms']:.3f}"])
        start += cycle["cycle_ms"]
    return out.getvalue()
