"""The Dockerfile without a container engine: hadolint, one install-and-start recipe shared
with the Makefile, a user without privileges, both torch flavours, the build context."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from support.dockerfile import (
    DockerIgnore,
    exec_form,
    healthcheck_command,
    instructions,
    run_command,
)

from engine.settings import DATA_DIR, REPO_ROOT, Settings

ROOT = Path(__file__).resolve().parents[2]
HADOLINT = Path(sys.executable).parent / "hadolint"


def hadolint(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(HADOLINT), "--no-color", str(path)], capture_output=True,
                          text=True, timeout=60)


def test_hadolint_finds_nothing():
    result = hadolint(ROOT / "Dockerfile")
    assert (result.returncode, result.stdout + result.stderr) == (0, "")


def test_hadolint_does_catch_a_careless_dockerfile(tmp_path):
    careless = tmp_path / "Dockerfile"
    careless.write_text("FROM python:latest\nRUN cd /app && pip install flask\n")
    result = hadolint(careless)
    assert result.returncode != 0
    assert {"DL3007", "DL3003", "DL3013"} <= set(re.findall(r"DL\d{4}", result.stdout))


def test_the_image_installs_and_starts_with_the_makefiles_own_targets(dockerfile):
    build, runtime = dockerfile["build"], dockerfile["runtime"]
    assert [run_command(r.arguments) for r in build.all("RUN")] == ["make install"]
    assert exec_form(runtime.all("CMD")[-1].arguments) == ["make", "run"]
    # No second recipe: nothing in the Dockerfile installs Python packages itself.
    text = (ROOT / "Dockerfile").read_text(encoding="utf-8")
    assert not re.search(r"\bpip3? install|\bpython3? -m (pip|app\.main)|uvicorn", text)
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert re.search(r"^run: install$", makefile, re.M)  # `make run` is install, then serve
    assert "make run" in (ROOT / "README.md").read_text(encoding="utf-8")


def test_the_built_tree_is_copied_whole_so_make_run_finds_its_install_up_to_date(dockerfile):
    build, runtime = dockerfile["build"], dockerfile["runtime"]
    assert build.all("WORKDIR")[-1].arguments == runtime.all("WORKDIR")[-1].arguments == "/app"
    assert [c.arguments for c in build.all("COPY")] == [". ."]
    assert [c.arguments for c in runtime.all("COPY")] == ["--from=build /app /app"]
    assert build.base == runtime.base == "base-${TORCH}"  # the same Python in both


def test_the_server_runs_as_a_user_without_privileges_on_every_interface(dockerfile):
    runtime = dockerfile["runtime"]
    keywords = [i.keyword for i in runtime.instructions]
    uid = runtime.all("USER")[-1].arguments.split(":")[0]
    assert uid.isdigit() and uid != "0"  # numeric: resolvable without the image's passwd
    assert keywords.index("USER") < keywords.index("CMD")
    runs = " ".join(r.arguments for r in runtime.all("RUN"))
    assert f"useradd --create-home --uid {uid} --user-group specscope" in runs
    # the one directory the server writes to (the saved runs' database) is the user's
    data = Path("/app") / DATA_DIR.relative_to(REPO_ROOT)
    assert Path(Settings.model_fields["db"].default).parent == DATA_DIR  # the default place
    assert f"install -d -o specscope -g specscope {data.as_posix()}" in runs
    env = runtime.env()
    assert env["SPECSCOPE_HOST"] == "0.0.0.0"
    assert runtime.all("EXPOSE")[-1].arguments == env["SPECSCOPE_PORT"]
    assert env["PATH"].startswith("/app/.venv/bin:")


def test_the_health_check_asks_healthz_through_the_installed_python(dockerfile):
    check = dockerfile["runtime"].all("HEALTHCHECK")[-1].arguments
    assert "--start-period=" in check
    assert healthcheck_command(check) == ["python", "-m", "app.healthcheck"]


def test_cpu_is_the_default_flavour_and_cuda_matches_its_torch_build(dockerfile):
    args = {}
    for i in instructions((ROOT / "Dockerfile").read_text(encoding="utf-8")):
        if i.keyword == "FROM":
            break
        name, _, value = i.arguments.partition("=")
        args[name] = value
    assert args["TORCH"] == "cpu"
    assert dockerfile["base-cpu"].base == "${CPU_BASE}" and "python:3.11" in args["CPU_BASE"]
    assert args["CPU_TORCH_INDEX"].endswith("/whl/cpu")
    assert dockerfile["base-cuda"].base == "${CUDA_BASE}"
    cuda = re.fullmatch(r"nvidia/cuda:(\d+)\.(\d+)\.\d+-runtime-ubuntu[\d.]+", args["CUDA_BASE"])
    assert cuda, args["CUDA_BASE"]
    # torch's CUDA build for the same CUDA release as the runtime base: 13.0 -> cu130
    assert args["CUDA_TORCH_INDEX"].endswith(f"/whl/cu{cuda[1]}{cuda[2]}")
    for flavour in ("base-cpu", "base-cuda"):
        assert dockerfile[flavour].env()["PIP_EXTRA_INDEX_URL"].startswith("${")


def test_the_context_holds_what_the_server_needs_and_nothing_of_the_workspace(build_context):
    _, copied = build_context
    needed = {"Makefile", "pyproject.toml", "requirements-lock.txt", "README.md", "app/main.py",
              "engine/cli/__init__.py",
              "templates/index.html", "models/target/model.safetensors",
              "models/draft/model.safetensors", "models/target/tokenizer.json"}
    assert needed <= set(copied)
    assert any(p.startswith("static/vendor/htmx-") for p in copied)
    kept_out = (".venv", ".hypothesis", ".git/", "tests/", "benchmarks/", "__pycache__", ".pyc",
                ".pytest_cache", ".egg-info", "Dockerfile")
    assert not [p for p in copied if any(k in p for k in kept_out)]


@pytest.mark.parametrize(
    "path,excluded",
    [(".venv/bin/python", True), ("engine/__pycache__/cli.cpython-311.pyc", True),
     ("app/x.pyc", True), ("specscope.egg-info/PKG-INFO", True),
     ("app/specscope.egg-info/PKG-INFO", False),  # `*` stops at "/", as in Docker
     ("tests/app/test_api.py", False), ("models/README.md", False)],
)
def test_dockerignore_patterns_match_like_dockers(tmp_path, path, excluded):
    (tmp_path / ".dockerignore").write_text(
        "# comment\n.venv\n**/__pycache__\n**/*.pyc\n*.egg-info\n/tests\n!tests/app\n")
    assert DockerIgnore.read(tmp_path / ".dockerignore").excludes(path) is excluded
