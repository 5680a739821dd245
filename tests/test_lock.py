"""What .venv runs is the lock: every package pinned in requirements-dev-lock.txt is installed
at exactly its version, the runtime lock agrees with it, and torch (outside the lock) is the
version pyproject.toml pins."""

from __future__ import annotations

import re
import tomllib
from importlib import metadata
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PIN = re.compile(r"^([A-Za-z0-9_.-]+)==([^ \\]+)", re.M)


def pins(name: str) -> dict[str, str]:
    text = (REPO / name).read_text(encoding="utf-8")
    return {m[1].lower().replace("_", "-"): m[2] for m in PIN.finditer(text)}


def test_every_locked_package_is_installed_at_its_locked_version():
    wrong = {}
    for name, version in pins("requirements-dev-lock.txt").items():
        try:
            installed = metadata.version(name)
        except metadata.PackageNotFoundError:
            installed = None
        if installed != version:
            wrong[name] = (version, installed)
    assert not wrong, f"installed differs from the lock (locked, installed): {wrong}"


def test_the_runtime_lock_is_the_dev_lock_less_the_test_tools():
    runtime, dev = pins("requirements-lock.txt"), pins("requirements-dev-lock.txt")
    assert runtime and all(dev.get(name) == version for name, version in runtime.items())
    assert {"pytest", "playwright", "ruff", "pip-tools"} <= set(dev) - set(runtime)


def test_torch_is_outside_the_lock_and_installed_at_the_pinned_version():
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    (torch,) = [d for d in project["project"]["dependencies"] if d.startswith("torch")]
    assert torch.startswith("torch==")
    assert "torch" not in pins("requirements-dev-lock.txt")
    assert metadata.version("torch").split("+")[0] == torch.removeprefix("torch==")
