"""The "Run live" panel's inputs: presets, ranges, and their state in the page's link."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Annotated, Literal
from urllib.parse import urlencode

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, create_model
from pydantic_core import PydanticCustomError

from app.params import MAX_SEED, Slider, fmt, parse_controls
from engine.analytic import trees
from engine.analytic.drafters import DRAFTER_WORDS, HEAD_DRAFTERS
from engine.analytic.lookup import PROMPT_LOOKUP_MAX, PROMPT_LOOKUP_MIN
from engine.analytic.theory import CURVE_MAX_K
from engine.analytic.trees import TreeShape
from engine.decoder.events import GenerationConfig
from engine.settings import Settings

# Prompts of different kinds: acceptance depends on how predictable the text is.
PRESETS: dict[str, str] = {
    "Scripture (KJV)": "And it came to pass, when the king heard these words, that",
    "Jargon File": "hack n. 1. Originally, a quick job that produces what is needed,",
    "Plain modern English": "The meeting about the new budget was moved to Thursday because",
    # Text that repeats itself, as code being edited does: prompt lookup finds its next tokens
    # earlier in the prompt (the shipped pair knows the verse; greedy, it copies it).
    "Quoted again": "In the beginning God created the heaven and the earth. And the earth was "
                    "without form, and void; and darkness was upon the face of the deep.\n\n"
                    "In the beginning God created the heaven and the earth. And the earth was",
}
DEFAULT_PROMPT = next(iter(PRESETS.values()))
# Three quiet measurements of a short run cost about a second on a CPU and show how much it
# moves; the streamed pass before them is shown, not counted.
DEFAULT_REPEATS, MAX_REPEATS = 3, 5


def run_controls(settings: Settings) -> dict[str, Slider]:
    """The live panel's numeric inputs, with the engine's generation defaults; the link names
    them ``run_k`` and ``run_seed`` so they never collide with the slider page's ``k`` and
    ``seed``."""
    g = GenerationConfig  # its field defaults are the generation defaults
    limit = settings.max_new_tokens_limit
    return {
        s.name: s
        for s in (
            Slider("run_k", "run's draft length k", 1, CURVE_MAX_K, 1, g.k, integer=True),
            Slider("temperature", "temperature", 0.0, 2.0, 0.05, g.temperature),
            Slider("top_p", "top-p", 0.01, 1.0, 0.01, g.top_p),
            Slider("max_new_tokens", "max new tokens", 1, limit, 1,
                   min(g.max_new_tokens, limit), integer=True),
            Slider("run_seed", "run seed", 0, MAX_SEED, 1, g.seed, integer=True),
            Slider("repeats", "repeats", 1, MAX_REPEATS, 1, DEFAULT_REPEATS, integer=True),
        )
    }


# The body's fields, and the live panel's control each one takes its range and default from.
BODY_CONTROLS = {"k": "run_k", "temperature": "temperature", "top_p": "top_p",
                 "max_new_tokens": "max_new_tokens", "seed": "run_seed", "repeats": "repeats"}
BODY_DESCRIPTIONS = {
    "k": "draft tokens per cycle",
    "temperature": "0 is greedy decoding (as is any temperature below 1e-4)",
    "top_p": "nucleus sampling; 1 is off",
    "max_new_tokens": "tokens to generate at most (the server's limit is the maximum)",
    "seed": "the random seed of the run",
    "repeats": "times the run is timed after the pass that streams its cycles (the "
               "speedup, its interval, c and v come from these quiet passes)",
}


TREE_CHARS = 400  # 64 nodes of a few ranks each
TREE_DESCRIPTION = (
    "a token tree. For the draft model or the Medusa heads (drafter \"model\" or "
    "\"medusa\"): paths of ranks separated by "
    "\";\", ranks within a path by \".\" (\"0;1;0.0\": the first head's top two and, under "
    "the top one, the second head's top one), the slider page's tree syntax; the default "
    f"tree: {trees.text(trees.MEDUSA_TREE)}. For the EAGLE head (drafter \"eagle\"): "
    "SGLang's STEPS,TOPK,DRAFT_TOKENS (\"5,4,8\"), an EAGLE-2 tree grown by the head's "
    "confidence. Every cycle verifies the whole tree in one target pass, and k is the tree's "
    "depth. Empty: a chain of k drafts.")


def parse_run_tree(text: str, drafter: str) -> tuple[tuple[int, ...], ...] | TreeShape | None:
    """A live run's tree from its text (None: empty, a chain): the draft model's or the
    Medusa heads' paths, or the EAGLE head's shape; ``ValueError`` says what is wrong, a tree
    for another drafter among it."""
    if not text.strip():
        return None
    if drafter in ("medusa", "model"):
        return tuple(trees.parse(text))
    if drafter == "eagle":
        shape, _ = TreeShape.parse(text.strip())
        return shape.fillable()
    raise ValueError("a token tree is drafted by the draft model or the Medusa heads (paths "
                     "such as 0;1;0.0) or the EAGLE head (SGLang's steps,topk,draft tokens "
                     f"such as 5,4,8), not by {DRAFTER_WORDS.get(drafter, drafter)}")


def offered_drafters(settings: Settings) -> dict[str, str]:
    """The drafters this server offers: a trained head only where some pair names one."""
    return {key: label for key, label in DRAFTER_WORDS.items()
            if key not in HEAD_DRAFTERS
            or any(getattr(spec, key) for spec in settings.pairs.values())}


def run_request_model(settings: Settings) -> type[BaseModel]:
    """The body of ``POST /api/runs`` for this server: strict types (``true`` is not a
    number, ``"3"`` is not an integer), the ranges of the live panel's controls, the prompt
    limit and the pairs offered, so the OpenAPI schema states exactly what is accepted."""
    controls = run_controls(settings)
    fields: dict = {
        "prompt": (str, Field(min_length=1, max_length=settings.max_prompt_chars,
                              pattern=r"\S", description="text for the models to continue")),
        "pair": (Literal[tuple(settings.pairs)], Field(  # type: ignore[valid-type]
            settings.default_pair, description="a pair name from the server's allowlist")),
        "drafter": (Literal[tuple(offered_drafters(settings))], Field(  # type: ignore[valid-type]
            "model", description="model: the pair's draft model; ngram: prompt lookup "
                                 f"(vLLM's rule, prompt_lookup_min {PROMPT_LOOKUP_MIN}, "
                                 f"prompt_lookup_max {PROMPT_LOOKUP_MAX}; no draft model); "
                                 "eagle: the pair's EAGLE head; medusa: the pair's Medusa "
                                 "heads (both draft from the target's hidden states; no "
                                 "draft model)")),
        "tree": (str, Field("", max_length=TREE_CHARS, pattern=r"^[0-9.;,\s]*$",
                            description=TREE_DESCRIPTION)),
    }
    for name, control in BODY_CONTROLS.items():
        s = controls[control]
        kind = JSONInteger if s.integer else float
        fields[name] = (Annotated[kind, BeforeValidator(_within(s))],
                        Field(_default(s), ge=s.minimum, le=s.maximum,
                              description=BODY_DESCRIPTIONS[name]))
    return create_model("RunRequest", __config__=ConfigDict(extra="forbid", strict=True),
                        __doc__="The settings of one live run.", **fields)


def _within(s: Slider) -> Callable[[object], object]:
    """A check of one body number that names what the control allows and what came, for
    every way a value can miss: NaN or an infinity (JSON's extensions), a string, a
    fraction where a whole number goes, or a number outside the range."""

    def check(value: object) -> object:
        number = not isinstance(value, bool) and isinstance(value, int | float)
        if not number or not math.isfinite(value) or not s.minimum <= value <= s.maximum \
                or (s.integer and value != int(value)):
            raise PydanticCustomError("out_of_range", "must be {allowed} (got {given})",
                                      {"allowed": s.allowed(), "given": _given(value)})
        return value

    return check


def _given(value: object) -> str:
    """A body value as its JSON wrote it (NaN, Infinity, 1e+20), or its repr."""
    if isinstance(value, float) and not isinstance(value, bool):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        return f"{value:g}"
    return repr(value)[:40]


def _json_number(value: object) -> object:
    """Only numbers count as numbers: not ``true``, not ``"3"``."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError("Input should be a number")
    return value


# JSON Schema's integer: a number with no fraction (8 or 8.0, not 8.5, true or "8").
JSONInteger = Annotated[int, BeforeValidator(_json_number), Field(strict=False)]


def _default(s: Slider) -> float | int:
    return int(s.default) if s.integer else s.default


@dataclass(frozen=True)
class LiveState:
    prompt: str
    pair: str
    run_k: int
    temperature: float
    top_p: float
    max_new_tokens: int
    run_seed: int
    repeats: int
    slow: bool  # show the cycles in slow motion (the page's pace; the run is not slowed)
    drafter: str = "model"  # a name of engine.analytic.drafters.DRAFTER_NAMES
    run_tree: str = ""  # a token tree (TREE_DESCRIPTION); "": a chain

    def query(self) -> str:
        """This state as the link's query string, in the order the panel shows it."""
        values = asdict(self)
        values["slow"] = "1" if self.slow else None
        values["drafter"] = None if self.drafter == "model" else self.drafter
        values["run_tree"] = self.run_tree or None
        return urlencode({name: value if isinstance(value, str) else fmt(value)
                          for name, value in values.items() if value is not None})


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
    slow = any(key == "slow" and raw not in ("", "0") for key, raw in query)
    drafter = next((raw for key, raw in query if key == "drafter"), "model")
    if drafter not in offered_drafters(settings):
        notices.append(f"drafter {drafter[:40]!r} is not offered; using the draft model.")
        drafter = "model"
    if drafter in HEAD_DRAFTERS and not getattr(settings.pairs[pair], drafter):
        notices.append(f"pair {pair!r} has no {DRAFTER_WORDS[drafter]}; using the draft model.")
        drafter = "model"
    if settings.pairs[pair].draft is None and drafter == "model":
        drafter = "ngram"  # a pair without a draft model can only look up
    run_tree = next((raw for key, raw in query if key == "run_tree"), "")
    try:
        tree = parse_run_tree(run_tree[:TREE_CHARS], drafter)
    except ValueError as error:
        notices.append(f"run_tree={run_tree[:40]!r} was ignored: {error}.")
        tree = None
    return LiveState(prompt=prompt, pair=pair, slow=slow, drafter=drafter,
                     run_tree=trees.text(tree) if tree else "", **values), notices


def live_context(live: LiveState, settings: Settings, available: bool,
                 load_error: str | None) -> dict:
    """The live panel's template context: its state, drafters, controls, presets and pairs,
    and whether runs are offered (``available``) or why not."""
    return {
        "live": live,
        "live_drafters": offered_drafters(settings),
        "medusa_tree": trees.text(trees.MEDUSA_TREE),
        "run_controls": run_controls(settings),
        "presets": PRESETS,
        "pairs": settings.pairs,
        "max_prompt_chars": settings.max_prompt_chars,
        "live_available": available,
        "live_unavailable_reason": load_error or "models are not loaded (SPECSCOPE_LOAD_MODELS "
                                                 "is off)",
    }
