"""The "Your traffic" panel's state: its choices, their ranges, and their place in the
page's link."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import urlencode

from app.params import Slider, parse_controls
from engine.analytic.drafters import DRAFTER_WORDS
from engine.analytic.theory import CURVE_MAX_K
from engine.measure.prompt_sets import BUILTIN_SETS
from engine.settings import Settings

SET_LABELS = {
    "scripture": "Scripture (held out)",
    "jargon": "Jargon File (held out)",
    "modern-english": "plain modern English",
    "python": "Python code",
    "lookup": "restating and editing (prompt lookup's traffic)",
}
TEMPERATURES = (0.0, 0.3, 0.7, 1.0, 1.5)
DEFAULT_SETS = tuple(s for s in BUILTIN_SETS if s != "lookup")  # that one on request
DEFAULT_TEMPERATURES = (0.0, 0.7, 1.0)


# The drafters a probe measures: "both" runs the draft model and prompt lookup on the same
# prompts and names the winner of each domain (engine.measure.probe_compare).
PROBE_DRAFTERS = {"model": DRAFTER_WORDS["model"], "ngram": DRAFTER_WORDS["ngram"],
                  "both": "both, side by side"}

ENGINES = {"specscope": "specscope's engine", "vllm": "vLLM (this server's SPECSCOPE_VLLM_URL)"}


def engines(settings: Settings) -> dict[str, str]:
    """The engines a probe can run on here: vLLM only when the server is configured with one."""
    return {name: label for name, label in ENGINES.items()
            if name == "specscope" or settings.vllm_url}


def probe_controls(settings: Settings) -> dict[str, Slider]:
    """The panel's numeric inputs (link names start with ``probe_``)."""
    return {
        s.name: s
        for s in (
            Slider("probe_k", "k", 1, CURVE_MAX_K, 1, 4, integer=True),
            Slider("probe_tokens", "new tokens per prompt", 1, settings.probe_max_new_tokens, 1,
                   min(32, settings.probe_max_new_tokens), integer=True),
            Slider("probe_prompts", "prompts per built-in set", 1, 32, 1, 8, integer=True),
        )
    }


@dataclass(frozen=True)
class TrafficState:
    sets: tuple[str, ...]
    temperatures: tuple[float, ...]
    probe_k: int
    probe_tokens: int
    probe_prompts: int
    engine: str = "specscope"
    drafter: str = "model"  # a key of PROBE_DRAFTERS

    def query(self) -> str:
        """This state as the link's query string (an empty ``probe_set`` first, so that no
        set chosen is a state too)."""
        pairs = [("probe_set", "")] + [("probe_set", s) for s in self.sets]
        pairs += [("probe_t", f"{t:g}") for t in self.temperatures]
        pairs += [(name, str(getattr(self, name)))
                  for name in ("probe_k", "probe_tokens", "probe_prompts")]
        if self.engine != "specscope":
            pairs.append(("probe_engine", self.engine))
        if self.drafter != "model":
            pairs.append(("probe_drafter", self.drafter))
        return urlencode(pairs)


def parse_traffic_state(
    query: Sequence[tuple[str, str]], settings: Settings
) -> tuple[TrafficState, list[str]]:
    """The panel's state from a link; never fails, says what it changed."""
    values, notices = parse_controls(query, probe_controls(settings))
    # The form always sends an empty probe_set, so that choosing no set is a state too.
    sets = tuple(dict.fromkeys(raw for key, raw in query if key == "probe_set" and raw))
    unknown = [s for s in sets if s not in BUILTIN_SETS]
    if unknown:
        notices.append(f"probe_set {unknown[0][:40]!r} is not a built-in set; "
                       f"choose from {', '.join(BUILTIN_SETS)}.")
    given = any(key == "probe_set" for key, _ in query)
    sets = tuple(s for s in sets if s in BUILTIN_SETS) if given else DEFAULT_SETS
    temps: list[float] = []
    for key, raw in query:
        if key != "probe_t" or not raw.strip():
            continue
        value = _number(raw)
        if value is None or value not in TEMPERATURES:
            notices.append(f"probe_t={raw[:24]!r} is not one of the offered temperatures "
                           f"({', '.join(f'{t:g}' for t in TEMPERATURES)}); left out.")
        elif value not in temps:
            temps.append(value)
    if not temps:
        temps = list(DEFAULT_TEMPERATURES)
    engine = next((raw for key, raw in query if key == "probe_engine"), "specscope")
    if engine not in engines(settings):
        notices.append(f"probe_engine={engine[:24]!r} is not available on this server; "
                       f"the probe uses {ENGINES['specscope']}.")
        engine = "specscope"
    drafter = next((raw for key, raw in query if key == "probe_drafter"), "model") or "model"
    if drafter not in PROBE_DRAFTERS:
        notices.append(f"probe_drafter={drafter[:24]!r} is not one of "
                       f"{', '.join(PROBE_DRAFTERS)}; the probe uses the draft model.")
        drafter = "model"
    return (TrafficState(sets, tuple(sorted(temps)), engine=engine, drafter=drafter, **values),
            notices)


def _number(raw: str) -> float | None:
    if "_" in raw:  # Python's float() reads "1_0" as 10
        return None
    try:
        value = float(raw)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def traffic_context(state: TrafficState, settings: Settings) -> dict:
    """What ``_traffic_panel.html`` needs."""
    return {
        "traffic": state,
        "traffic_controls": probe_controls(settings),
        "traffic_sets": SET_LABELS,
        "traffic_temperatures": TEMPERATURES,
        "traffic_engines": engines(settings),
        "traffic_drafters": PROBE_DRAFTERS,
        "probe_limits": {"prompts": settings.probe_max_prompts,
                         "kb": settings.probe_max_bytes // 1024,
                         "tokens": settings.probe_max_new_tokens},
    }
