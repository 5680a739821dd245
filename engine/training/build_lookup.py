"""Rebuild ``lookup.jsonl``: traffic where prompt lookup should shine.

    python -m engine.training.build_lookup

Prompt lookup pays when the output repeats the input. The shipped pair is a small base model
with no instruction following, so "repeat this passage with small changes" is written the way
its training text would say it: the passage, then its start again, so that the models go on
to restate it (as a quoting answer or an edit restates its source). Three domains:

- ``lookup-scripture``: the first verses of a held-out King James chapter, then its heading and
  the first words of verse 1 again
- ``lookup-jargon``: a held-out Jargon File entry (of ``MIN_PASSAGE_CHARS`` or more), then its
  headword line again
- ``lookup-python``: a snippet of the ``python`` set, then a comment asking for the same code with
  one name changed, and the changed first line: the prompt holds the code being edited

Scripture and jargon come from the documents :mod:`engine.training.corpus` holds out of the
shipped pair's training (every ``HELDOUT_EVERY``-th); the Python snippets were written for
specscope, and the pair never trained on Python. Needs the Debian packages ``bible-kjv`` and
``jargon-text``.
"""

from __future__ import annotations

import json
import re

from engine.training.build_heldout import SETS_DIR, spread
from engine.training.corpus import load_domains

HERE = SETS_DIR  # where the built-in sets live
PER_DOMAIN = 16
PASSAGE_CHARS = 600  # the passage to restate: a few verses, most of an entry
RESTART_CHARS = 40  # how much of its start the prompt gives again
MIN_PASSAGE_CHARS = 300  # shorter entries ("Syn. {x}.") have nothing to restate
DOMAINS = {"kjv": "lookup-scripture", "jargon": "lookup-jargon"}


def passage(doc: str, chars: int = PASSAGE_CHARS) -> str:
    """The start of a document, cut at the end of a line (a verse), else of a sentence or a
    word, so that it ends where a restatement could end."""
    if len(doc) <= chars:
        return doc
    head = doc[:chars]
    for mark in ("\n", ". ", " "):
        cut = head.rfind(mark)
        if cut > chars // 2:
            return head[: cut + (1 if mark == ". " else 0)].rstrip()
    return head


def restart(text: str, chars: int = RESTART_CHARS) -> str:
    """The first line (a heading) and the first words after it, cut at a space."""
    first, _, rest = text.partition("\n")
    rest = rest.lstrip("\n")
    if len(rest) > chars:
        rest = rest[: rest.rfind(" ", 0, chars)]
    return f"{first}\n\n{rest}" if rest else first


def repeat_prompt(doc: str) -> str:
    text = passage(doc)
    return f"{text}\n\n{restart(text)}"


def edit_prompt(code: str) -> str:
    """The code, then the same code asked for with its first defined name changed, and the
    changed first line; with no name to change, the code asked for again unchanged."""
    code = code.rstrip("\n")
    match = re.search(r"\b(?:def|class)\s+([A-Za-z_]\w*)", code) or re.search(
        r"^([A-Za-z_]\w*)\s*=", code, re.M)
    if match is None:
        return f"# before\n{code}\n\n# after: the same code, tidied\n{code.splitlines()[0]}\n"
    old = match.group(1)
    new = f"{old}_v2"
    edited = re.sub(rf"\b{re.escape(old)}\b", new, code)
    return (f"# before\n{code}\n\n# after: the same code with {old} renamed to {new}\n"
            f"{edited.splitlines()[0]}\n")


def pick(items: list[str], n: int) -> list[str]:
    """``n`` items evenly spaced over ``items``; all of them when there are no more."""
    return list(items) if len(items) <= n else spread(items, n)


def python_snippets() -> list[str]:
    lines = (HERE / "python.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line)["text"] for line in lines if line.strip()]


def build(corpora, snippets: list[str]) -> list[dict]:
    items = []
    for corpus in corpora:
        domain = DOMAINS[corpus.domain]
        long_enough = [d for d in corpus.heldout if len(d) >= MIN_PASSAGE_CHARS]
        items += [{"text": repeat_prompt(d), "domain": domain}
                  for d in pick(long_enough, PER_DOMAIN)]
    items += [{"text": edit_prompt(s), "domain": "lookup-python"}
              for s in pick(snippets, PER_DOMAIN)]
    return items


def main() -> None:
    items = build(load_domains(), python_snippets())
    lines = [json.dumps(item, ensure_ascii=False) for item in items]
    (HERE / "lookup.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"lookup.jsonl: {len(lines)} prompts")


if __name__ == "__main__":
    main()
