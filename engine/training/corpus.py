"""Public-domain English text for training the shipped draft/target pair.

Two domains, both from Debian packages, both public domain:

- ``kjv``: the King James Bible (``bible-kjv-text``, read through the ``bible`` program of
  ``bible-kjv``). The translation dates from 1611; its copyright has long expired.
  Formulaic and repetitive ("And it came to pass ..."), so a small draft guesses the target
  well: high alpha.
- ``jargon``: the Jargon File 4.4.7 (``jargon-text``), placed in the public domain by its editors.
  Hacker slang, pronunciations, cross-references, and quotations: far less predictable, so
  alpha is lower. Mixing the two lets the page show that alpha depends on the text.

A corpus is split into documents (a Bible chapter, a Jargon entry). Every ``HELDOUT_EVERY``-th
document is held out of training, so evaluation prompts come from text neither model has seen,
spread over the whole corpus instead of one contiguous tail (the end of the Bible is Revelation,
which would be a biased sample).
"""

from __future__ import annotations

import gzip
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

HELDOUT_EVERY = 20
PROMPT_CHARS = 160  # a prompt made from a document: its first 160 characters at most
JARGON_PATH = Path("/usr/share/doc/jargon-text/jargon.txt.gz")
DOMAINS = ("kjv", "jargon")


class CorpusMissing(RuntimeError):
    """A Debian package holding a corpus is not installed."""


@dataclass(frozen=True)
class Corpus:
    """Documents of one domain, split into training and held-out documents."""

    domain: str
    train: list[str]
    heldout: list[str]


def _missing(package: str) -> CorpusMissing:
    return CorpusMissing(
        f"the {package!r} Debian package is not installed; install it with\n"
        f"    sudo apt-get install -y {package}\n"
        "or pass --corpus-file PATH to train on a plain text file instead."
    )


def kjv_documents() -> list[str]:
    """The King James Bible, one document per chapter ("Genesis 1", then numbered verses)."""
    if shutil.which("bible") is None:
        raise _missing("bible-kjv")  # the reader; it pulls in bible-kjv-text, the text
    # -l with a huge width keeps each verse on one line instead of wrapping at 80 columns.
    text = subprocess.run(
        ["bible", "-l100000", "gen1:1-rev22:21"], capture_output=True, text=True, check=True
    ).stdout
    docs = []
    for block in re.split(r"\n\s*\n(?=\S)", text.strip()):
        lines = [line.strip() for line in block.splitlines() if line.strip()]
        if len(lines) >= 2:  # a heading plus at least one verse
            docs.append(lines[0] + "\n\n" + "\n".join(lines[1:]))
    return docs


def jargon_documents(path: Path = JARGON_PATH) -> list[str]:
    """The Jargon File's glossary and appendices, one document per entry or section.

    The front matter is skipped: it is mostly tables of contents (lists of headwords) that
    would teach the models to emit word lists.
    """
    if not path.exists():
        raise _missing("jargon-text")
    with gzip.open(path, "rt", encoding="utf-8") as f:
        lines = f.read().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("   :0:"))
    end = next(i for i, line in enumerate(lines) if line.startswith("Bibliography"))
    docs: list[str] = []
    current: list[str] = []
    for raw in lines[start:end]:
        line = raw.strip()
        # A new entry starts at ":headword:"; an appendix at "Appendix X."; both end the previous.
        if (line.startswith(":") and line.count(":") >= 2) or raw.startswith("Appendix "):
            if current:
                docs.append(_paragraphs(current))
            current = []
        current.append(line)
    if current:
        docs.append(_paragraphs(current))
    return [d for d in docs if d]


def _paragraphs(lines: list[str]) -> str:
    """Join wrapped lines into paragraphs separated by one blank line."""
    paras: list[str] = []
    current: list[str] = []
    for line in [*lines, ""]:
        if line:
            current.append(line)
        elif current:
            paras.append(" ".join(current))
            current = []
    return "\n\n".join(paras)


def split(domain: str, docs: list[str]) -> Corpus:
    heldout = docs[HELDOUT_EVERY - 1 :: HELDOUT_EVERY]
    train = [d for i, d in enumerate(docs) if (i + 1) % HELDOUT_EVERY]
    return Corpus(domain, train, heldout)


def load_domains(domains: tuple[str, ...] = DOMAINS) -> list[Corpus]:
    readers = {"kjv": kjv_documents, "jargon": jargon_documents}
    return [split(d, readers[d]()) for d in domains]


def load_file(path: Path) -> list[Corpus]:
    """A plain text file as one domain; documents are separated by blank lines."""
    docs = [d.strip() for d in path.read_text(encoding="utf-8").split("\n\n") if d.strip()]
    if len(docs) < 2:
        raise ValueError(f"{path}: need at least two blank-line separated documents")
    every = min(HELDOUT_EVERY, len(docs))
    heldout = docs[every - 1 :: every]
    train = [d for i, d in enumerate(docs) if (i + 1) % every]
    return [Corpus(path.stem, train, heldout)]


def prompt_of(doc: str, chars: int = PROMPT_CHARS) -> str:
    """The start of a document, cut at a space so no word is split."""
    return doc if len(doc) <= chars else doc[: doc.rfind(" ", 0, chars)]
