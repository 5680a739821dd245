"""Rebuild the built-in prompt sets ``scripture.jsonl`` and ``jargon.jsonl``
(:mod:`engine.measure.prompt_sets`) from documents held out of training.

    python -m engine.training.build_heldout

The shipped pair never saw these documents: :mod:`engine.training.corpus` holds out every
``HELDOUT_EVERY``-th document of each corpus. A prompt is the start of a held-out document
(``corpus.prompt_of``, the training script's cut), taken at evenly spaced documents so the
set spans the whole corpus. Needs the Debian packages ``bible-kjv`` and ``jargon-text``.
"""

from __future__ import annotations

import json
from pathlib import Path

from engine.measure import prompt_sets
from engine.training.corpus import load_domains, prompt_of

SETS_DIR = Path(prompt_sets.__file__).resolve().parent  # where the built-in sets live
PROMPTS_PER_SET = 32
SETS = {"kjv": ("scripture", "scripture.jsonl"), "jargon": ("jargon", "jargon.jsonl")}


def spread(items: list[str], n: int) -> list[str]:
    """``n`` items evenly spaced over ``items``."""
    return [items[i * len(items) // n] for i in range(min(n, len(items)))]


def main() -> None:
    for corpus in load_domains():
        domain, name = SETS[corpus.domain]
        lines = [json.dumps({"text": prompt_of(d), "domain": domain}, ensure_ascii=False)
                 for d in spread(corpus.heldout, PROMPTS_PER_SET)]
        (SETS_DIR / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
        print(f"{name}: {len(lines)} prompts from {len(corpus.heldout)} held-out documents")


if __name__ == "__main__":
    main()
