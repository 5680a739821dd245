"""Reading the Dockerfile and .dockerignore the way Docker does, enough to rebuild the image's
steps outside a container engine: the stages and their instructions, and the build context
(the files ``COPY . .`` sends)."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Instruction:
    keyword: str  # upper case: FROM, RUN, ENV, CMD, ...
    arguments: str  # the rest of the (joined) line


@dataclass
class Stage:
    name: str
    base: str
    instructions: list[Instruction] = field(default_factory=list)

    def all(self, keyword: str) -> list[Instruction]:
        return [i for i in self.instructions if i.keyword == keyword]

    def env(self) -> dict[str, str]:
        """The stage's ENV settings, ``KEY=value`` pairs (quotes removed)."""
        env: dict[str, str] = {}
        for instruction in self.all("ENV"):
            for pair in shlex.split(instruction.arguments):
                key, _, value = pair.partition("=")
                env[key] = value
        return env


def instructions(text: str) -> list[Instruction]:
    """Joined continuation lines, comments and parser directives dropped."""
    logical, current = [], ""
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("#") or (not stripped and not current):
            continue
        if stripped.endswith("\\"):
            current += stripped[:-1] + " "
            continue
        logical.append(current + stripped)
        current = ""
    result = []
    for line in logical:
        keyword, _, rest = line.partition(" ")
        result.append(Instruction(keyword.upper(), rest.strip()))
    return result


def stages(text: str) -> list[Stage]:
    found: list[Stage] = []
    for instruction in instructions(text):
        if instruction.keyword == "FROM":
            words = instruction.arguments.split()
            name = words[2] if len(words) == 3 and words[1].upper() == "AS" else str(len(found))
            found.append(Stage(name=name, base=words[0]))
        elif found:
            found[-1].instructions.append(instruction)
    return found


def exec_form(arguments: str) -> list[str]:
    """``["make", "run"]``, the exec form of CMD and HEALTHCHECK CMD, as a list."""
    return json.loads(arguments)


def run_command(arguments: str) -> str:
    """A RUN instruction's shell command, without its ``--mount=...`` style flags."""
    words = arguments.split(" ")
    while words and words[0].startswith("--"):
        words.pop(0)
    return " ".join(words)


def healthcheck_command(arguments: str) -> list[str]:
    """The command of ``HEALTHCHECK [--options] CMD [...]``."""
    _, _, command = arguments.partition("CMD ")
    return exec_form(command)


# ---- .dockerignore ------------------------------------------------------------------------


def _pattern_regex(pattern: str) -> re.Pattern[str]:
    """Docker's patterns: ``*`` and ``?`` stop at ``/``, ``**`` crosses directories."""
    out, i = "", 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out, i = out + "(?:.*/)?", i + 3
        elif pattern.startswith("**", i):
            out, i = out + ".*", i + 2
        elif pattern[i] == "*":
            out, i = out + "[^/]*", i + 1
        elif pattern[i] == "?":
            out, i = out + "[^/]", i + 1
        else:
            out, i = out + re.escape(pattern[i]), i + 1
    return re.compile(out + r"\Z")


@dataclass
class DockerIgnore:
    rules: list[tuple[bool, re.Pattern[str]]]  # (excludes, pattern) in file order

    @classmethod
    def read(cls, path: Path) -> DockerIgnore:
        rules = []
        for line in path.read_text(encoding="utf-8").splitlines():
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            negated = line.startswith("!")
            pattern = line.lstrip("!").strip().strip("/")
            rules.append((not negated, _pattern_regex(pattern)))
        return cls(rules)

    def excludes(self, relative: str) -> bool:
        """Whether the path (``a/b/c``, relative to the context) stays out: the last rule that
        matches the path or one of its parent directories decides."""
        parts = relative.split("/")
        prefixes = ["/".join(parts[: n + 1]) for n in range(len(parts))]
        excluded = False
        for excludes, pattern in self.rules:
            if any(pattern.match(p) for p in prefixes):
                excluded = excludes
        return excluded


def copy_context(root: Path, destination: Path) -> list[str]:
    """Copy the build context of ``root`` (what .dockerignore lets through) to
    ``destination``; the relative paths copied, sorted."""
    ignore = DockerIgnore.read(root / ".dockerignore")
    can_prune = all(excludes for excludes, _ in ignore.rules)  # no "!" rule re-includes
    copied = []
    for directory, subdirectories, files in os.walk(root):
        base = Path(directory).relative_to(root)
        if can_prune:  # an excluded directory (.venv, .git) is not walked at all
            subdirectories[:] = [d for d in subdirectories
                                 if not ignore.excludes((base / d).as_posix())]
        for name in files:
            relative = (base / name).as_posix()
            if ignore.excludes(relative):
                continue
            target = destination / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(Path(directory) / name, target)
            copied.append(relative)
    return sorted(copied)
