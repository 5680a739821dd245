"""``specscope``, the installed command: every command described by ``--help``, and
``specscope serve`` starting the page as ``make run`` does, from the same settings."""

from __future__ import annotations

import argparse
import importlib
import os
import re
import signal
import subprocess
import sys
import tomllib
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from support.live_server import free_port

from app.cli import add_serve, address
from engine import cli as engine_cli

REPO = Path(__file__).resolve().parents[2]
COMMANDS = ["serve", "generate", "bench", "roofline", "probe", "calibrate", "costs", "vllm",
            "sweep", "plan", "validate", "watch"]


def entry_point():
    """The function pyproject.toml installs as ``specscope``."""
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    module, _, name = scripts["specscope"].partition(":")
    return getattr(importlib.import_module(module), name)


def test_help_describes_every_command(capsys):
    with pytest.raises(SystemExit) as exit_:
        entry_point()(["--help"])
    assert exit_.value.code == 0
    text = capsys.readouterr().out
    assert "specscope generate" not in text.split("positional arguments")[0]
    parser = engine_cli.build_parser(engine_cli.defaults(), add_serve)
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    helps = {action.dest: action.help for action in sub._choices_actions}
    assert list(helps) == COMMANDS
    for command, help_ in helps.items():
        assert help_ and command in text and help_.split()[0] in text, command


def every_command(parser: argparse.ArgumentParser):
    """The parser and every subcommand's, depth first."""
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                yield from every_command(child)


def option_help(help_text: str, option: str) -> str:
    """An option's entry in --help: its line and the lines its help wraps onto."""
    match = re.search(rf"^  {re.escape(option)}\b.*?(?=^  -|^\S|\Z)", help_text,
                      re.MULTILINE | re.DOTALL)
    assert match, f"{option} not in the help"
    return " ".join(match.group(0).split())


def test_every_option_that_has_a_default_shows_it_in_its_help():
    parser = engine_cli.build_parser(engine_cli.defaults(), add_serve)
    shown = 0
    for command in every_command(parser):
        text = command.format_help()
        for action in command._actions:
            if (action.option_strings and action.default is not None
                    and not isinstance(action.default, bool)
                    and action.default not in (argparse.SUPPRESS, [])):
                assert "default" in option_help(text, action.option_strings[-1]), (
                    command.prog, action.option_strings)
                shown += 1
    assert shown > 100  # every command's options, walked
    generate = next(c for c in every_command(parser) if c.prog == "specscope generate")
    assert "--top-p TOP_P default: 1.0" in option_help(generate.format_help(), "--top-p")
    assert option_help(generate.format_help(), "--k").endswith("(default: 4)")
    vllm_serve = next(c for c in every_command(parser) if c.prog == "specscope vllm serve")
    assert "--port PORT default: 8100" in option_help(vllm_serve.format_help(), "--port")


def test_the_dependencies_are_listed_once():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    names = [d.split(">")[0].split("=")[0].split("<")[0].strip().lower()
             for d in project["dependencies"]]
    assert len(names) == len(set(names)), names


@contextmanager
def specscope(*argv: str, port_setting: int):
    """``specscope ARGV`` (as installed) with no models and SPECSCOPE_PORT set."""
    env = os.environ | {"SPECSCOPE_PORT": str(port_setting), "SPECSCOPE_LOAD_MODELS": "false",
                        "SPECSCOPE_SHUTDOWN_TIMEOUT_S": "2", "PYTHONPATH": str(REPO)}
    code = "import sys; from app.cli import main; sys.exit(main(sys.argv[1:]))"
    process = subprocess.Popen([sys.executable, "-c", code, *argv], cwd=REPO, env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               start_new_session=True)  # --reload's worker stops with it
    try:
        yield process
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        process.stderr.close()


def serves_health(port: int, process: subprocess.Popen, timeout: float = 60.0) -> bool:
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert process.poll() is None, process.stderr.read().decode()
        try:
            return httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1.0).status_code == 200
        except httpx.TransportError:
            time.sleep(0.1)
    return False


def test_serve_reads_the_port_setting_and_stops_at_sigterm():
    port = free_port()
    with specscope("serve", port_setting=port) as process:
        assert serves_health(port, process)
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=15) in (0, -signal.SIGTERM)


def test_serve_options_default_to_the_settings_and_override_them(monkeypatch):
    monkeypatch.setenv("SPECSCOPE_HOST", "0.0.0.0")
    monkeypatch.setenv("SPECSCOPE_PORT", "8123")
    parser = engine_cli.build_parser(engine_cli.defaults(), add_serve)
    args = parser.parse_args(["serve"])
    assert (*address(args), args.reload) == ("0.0.0.0", 8123, False)
    args = parser.parse_args(["serve", "--host", "127.0.0.1", "--port", "9000", "--reload"])
    assert (*address(args), args.reload) == ("127.0.0.1", 9000, True)


@pytest.mark.parametrize("argv", [["--help"], ["plan", "--alpha", "0.7", "--models",
                                               "llama-70b-1b", "--gpus", "8"]])
def test_help_and_the_plan_start_without_torch(argv):
    """The top-level help and the plan (arithmetic) import neither torch nor transformers,
    nor pydantic and FastAPI: they start in a fraction of a second."""
    code = ("import sys; from app.cli import main\n"
            "try:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
            "heavy = sorted(m for m in ('torch', 'transformers', 'numpy', 'pydantic', "
            "'fastapi') if m in sys.modules)\n"
            "print(heavy, file=sys.stderr)")
    done = subprocess.run([sys.executable, "-c", code, *argv], cwd=REPO, capture_output=True,
                          text=True, timeout=120, env=os.environ | {"PYTHONPATH": str(REPO)})
    heavy = done.stderr.strip().splitlines()[-1]
    assert heavy == "[]", done.stderr[-2000:]
    assert done.stdout.strip()


def test_serve_with_reload_serves_the_page():
    port = free_port()
    with specscope("serve", "--reload", "--port", str(port), port_setting=port) as process:
        assert serves_health(port, process)
