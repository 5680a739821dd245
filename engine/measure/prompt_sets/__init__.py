"""Prompts to probe with: the built-in sets and prompt files (JSONL or plain text).

A prompt file is either JSONL, one object per line with a ``text`` and an optional
``domain`` (``{"text": "def f(x):", "domain": "code"}``), or plain text with one prompt per
line. A file whose first non-blank line starts with ``{`` is read as JSONL. Blank lines are
skipped in both. Multi-line prompts (code) need JSONL.

Built-in sets (``*.jsonl`` next to this file):

- ``scripture``: starts of King James Bible chapters held out of the shipped pair's training
- ``jargon``: starts of Jargon File entries held out of the shipped pair's training
  (both rebuilt by ``python -m engine.training.build_heldout``)
- ``modern-english``: plain modern English, written for specscope
- ``python``: Python snippets, written for specscope
- ``lookup``: traffic where prompt lookup should shine, in three domains (``lookup-scripture``,
  ``lookup-jargon``, ``lookup-python``): a held-out passage and its start again, and Python
  whose prompt holds the code being edited (rebuilt by
  ``python -m engine.training.build_lookup``)

A pair's own held-out prompts: the benchmark and the vLLM sweep take the prompts that the
pair's training left next to its models (``heldout_prompts.json``), else
``FALLBACK_PROMPTS`` (:func:`pair_prompts`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
BUILTIN_SETS = {
    "scripture": "scripture.jsonl",
    "jargon": "jargon.jsonl",
    "modern-english": "modern_english.jsonl",
    "python": "python.jsonl",
    "lookup": "lookup.jsonl",
}
MAX_DOMAIN_CHARS = 40
# Used when the pair ships no held-out prompts (heldout_prompts.json next to its models).
FALLBACK_PROMPTS = [
    "In the beginning God created the heaven and the earth. And the earth was",
    ":hacker: n.\n\n[originally, someone who makes furniture with an axe] 1. A person who",
    "And it came to pass, when the king heard the words of the law, that he",
    ":kluge: /klooj/\n\n[from the German `klug', clever] 1. n. A Rube Goldberg device in",
    "The quick brown fox jumps over the lazy dog, and then",
    "Speculative decoding drafts several tokens with a small model and",
]


class PromptFileError(ValueError):
    """A prompt file that cannot be read; the message says what is wrong and where."""


@dataclass(frozen=True)
class Prompt:
    text: str
    domain: str


def builtin(name: str) -> list[Prompt]:
    """One built-in set by name; ``ValueError`` naming the sets for an unknown name."""
    if name not in BUILTIN_SETS:
        raise ValueError(f"no built-in prompt set {name!r}; choose from {', '.join(BUILTIN_SETS)}")
    return parse_prompts((HERE / BUILTIN_SETS[name]).read_bytes(), default_domain=name)


def load_source(source: str, max_prompts: int | None = None) -> list[Prompt]:
    """A built-in set's name or a prompt file's path. The domain of a plain-text file (and of
    JSONL lines without one) is the file's name without its extension."""
    if source in BUILTIN_SETS:
        return builtin(source)
    path = Path(source)
    if not path.is_file():
        raise PromptFileError(
            f"{source}: no such file, and not a built-in set ({', '.join(BUILTIN_SETS)})"
        )
    return parse_prompts(path.read_bytes(), default_domain=path.stem[:MAX_DOMAIN_CHARS],
                         max_prompts=max_prompts, name=str(path))


def parse_prompts(
    data: bytes,
    default_domain: str,
    *,
    max_prompts: int | None = None,
    max_bytes: int | None = None,
    name: str = "the file",
) -> list[Prompt]:
    """The prompts in ``data``; :class:`PromptFileError` with a readable message when the
    bytes are too many, not UTF-8, hold no prompts or too many, or a JSONL line is bad."""
    if max_bytes is not None and len(data) > max_bytes:
        raise PromptFileError(
            f"{name} is {_size(len(data))}; the limit is {_size(max_bytes)}"
        )
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise PromptFileError(
            f"{name} is not UTF-8 text (byte 0x{data[error.start]:02x} at offset "
            f"{error.start}); save it as UTF-8"
        ) from None
    if "\x00" in text:
        raise PromptFileError(f"{name} holds NUL bytes: it looks like a binary file, not text")
    lines = [(number, line) for number, line in enumerate(text.splitlines(), start=1)
             if line.strip()]
    if not lines:
        raise PromptFileError(f"{name} holds no prompts (it is empty or blank)")
    if max_prompts is not None and len(lines) > max_prompts:
        raise PromptFileError(
            f"{name} holds {len(lines)} prompts; the limit is {max_prompts}"
        )
    if lines[0][1].lstrip().startswith("{"):
        return [_jsonl_prompt(number, line, default_domain, name) for number, line in lines]
    return [Prompt(line.strip(), default_domain) for _, line in lines]


def _jsonl_prompt(number: int, line: str, default_domain: str, name: str) -> Prompt:
    where = f"{name}, line {number}"
    try:
        item = json.loads(line)
    except json.JSONDecodeError as error:
        raise PromptFileError(
            f"{where} is not valid JSON ({error.msg}); a JSONL file needs one object per line, "
            'like {"text": "...", "domain": "..."}'
        ) from None
    if not isinstance(item, dict):
        raise PromptFileError(f'{where}: expected an object like {{"text": "..."}}')
    text = item.get("text")
    if not isinstance(text, str) or not text.strip():
        raise PromptFileError(f'{where}: "text" must be a non-empty string')
    domain = item.get("domain", default_domain)
    if not isinstance(domain, str) or not domain.strip() or len(domain) > MAX_DOMAIN_CHARS:
        raise PromptFileError(
            f'{where}: "domain" must be a non-empty string of at most {MAX_DOMAIN_CHARS} characters'
        )
    for field, value in (("text", text), ("domain", domain)):
        _refuse_lone_surrogate(where, field, value)
    return Prompt(text, domain.strip())


def _refuse_lone_surrogate(where: str, field: str, value: str) -> None:
    """JSON can escape half of a surrogate pair ("\\ud800"), which is no character: no
    tokenizer reads it and no UTF-8 page or record can hold it."""
    lone = next((c for c in value if "\ud800" <= c <= "\udfff"), None)
    if lone is not None:
        raise PromptFileError(
            f'{where}: "{field}" holds a lone surrogate (\\u{ord(lone):04x}), half of a '
            "UTF-16 pair that is no character; escape whole characters or write them as UTF-8"
        )


def _size(n: int) -> str:
    return f"{n} bytes" if n < 1024 else f"{n / 1024:.0f} KB"


# ---- a pair's own held-out prompts ----------------------------------------------------------


def heldout_prompts(target: str, per_domain: int = 2) -> list[str] | None:
    """Prompts the pair was not trained on, when its training left them next to the models
    (``heldout_prompts.json``: domain -> prompts); taken round-robin over the domains."""
    path = Path(target).parent / "heldout_prompts.json"
    if not path.is_file():
        return None
    domains = list(json.loads(path.read_text(encoding="utf-8")).values())
    prompts = [d[i] for i in range(per_domain) for d in domains if i < len(d)]
    return prompts or None


def pair_prompts(target: str, per_domain: int = 2) -> list[str]:
    """The prompts to measure a pair with: its held-out prompts, else the fallback ones."""
    return heldout_prompts(target, per_domain) or list(FALLBACK_PROMPTS)
