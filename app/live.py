"""The "Run live" panel's inputs: presets, ranges, and their state in the page's link."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from urllib.parse import urlencode

from pydantic import BaseModel, ConfigDict, Field

from app.params import MAX_SEED, Slider, fmt, parse_controls
from app.settings import Settings
from engine.analytic.theory import K_MAX

# Prompts of different kinds: acceptance depends on how predictable the text is.
PRESETS: dict[str, str] = {
    "Scripture (KJV)": "And it came to pass, when the king heard these words, that",
    "Jargon File": "hack n. 1. Originally, a quick job that produces what is needed,",
    "Plain modern English": "The meeting about the new budget was moved to Thursday because",
}
DEFAULT_PROMPT = next(iter(PRESETS.values()))


class RunRequest(BaseModel):
    """The body of ``POST /api/runs``; the server's limits are checked on top of these."""

    model_config = ConfigDict(extra="forbid")

    prompt: str = Field(min_length=1, description="text for the models to continue")
    k: int = Field(4, ge=1, le=K_MAX, description="draft tokens per cycle")
    temperature: float = Field(0.8, ge=0, le=2, description="0 is greedy decoding")
    top_p: float = Field(1.0, gt=0, le=1, description="nucleus sampling; 1 is off")
    max_new_tokens: int = Field(64, ge=1, description="at most the server's limit")
    seed: int = Field(1, ge=0, le=MAX_SEED)
    pair: str = Field("shipped", description="a pair name from the server's allowlist")


def run_controls(settings: Settings) -> dict[str, Slider]:
    """The live panel's numeric inputs; the link names them ``run_k`` and ``run_seed`` so they
    never collide with the slider page's ``k`` and ``seed``."""
    return {
        s.name: s
        for s in (
            Slider("run_k", "run's draft length k", 1, K_MAX, 1, 4, integer=True),
            Slider("temperature", "temperature", 0.0, 2.0, 0.05, 0.8),
            Slider("top_p", "top-p", 0.01, 1.0, 0.01, 1.0),
            Slider("max_new_tokens", "max new tokens", 1, settings.max_new_tokens_limit, 1,
                   min(64, settings.max_new_tokens_limit), integer=True),
            Slider("run_seed", "run seed", 0, MAX_SEED, 1, 1, integer=True),
        )
    }


@dataclass(frozen=True)
class LiveState:
    prompt: str
    pair: str
    run_k: int
    temperature: float
    top_p: float
    max_new_tokens: int
    run_seed: int

    def query(self) -> str:
        """This state as the link's query string, in the order the panel shows it."""
        return urlencode({name: value if isinstance(value, str) else fmt(value)
                          for name, value in asdict(self).items()})


def parse_live_state(
    query: Sequence[tuple[str, str]], settings: Settings
) -> tuple[LiveState, list[str]]:
    values, notices = parse_controls(query, run_controls(settings))
    prompt = next((raw for key, raw in query if key == "prompt"), "") or DEFAULT_PROMPT
    if len(prompt) > settings.max_prompt_chars:
        notices.append(f"the prompt was cut to {settings.max_prompt_chars} characters, the limit.")
        prompt = prompt[: settings.max_prompt_chars]
    pair = next((raw for key, raw in query if key == "pair"), settings.default_pair)
    if pair not in settings.pairs:
        notices.append(f"pair {pair[:40]!r} is not offered here; using {settings.default_pair!r}.")
        pair = settings.default_pair
    return LiveState(prompt=prompt, pair=pair, **values), notices
