"""The image's steps, run outside a container engine: the build context in a fresh directory,
the build stage's RUN (``make install``, which makes a fresh virtual environment), then the
runtime stage's CMD (``make run``) with the runtime ENV, until ``/healthz`` answers and the
HEALTHCHECK command passes; then the stop signal a container gets.

pip's own cache is reused, so this costs an install from local files plus a server start."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
from support.dockerfile import exec_form, healthcheck_command, run_command
from support.live_server import free_port

pytestmark = pytest.mark.slow
START_TIMEOUT_S = 120


def _environment(runtime_env: dict[str, str], context: Path, port: int) -> dict[str, str]:
    """This machine's environment (pip's cache and indexes included) with the image's
    settings on top; PATH as the image sets it, with the context in place of /app."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SPECSCOPE_", "VIRTUAL_ENV"))}
    for key, value in runtime_env.items():
        env[key] = value.replace("/app", str(context)).replace("$PATH", os.environ["PATH"])
    env["SPECSCOPE_PORT"] = str(port)  # a free port instead of the image's 8000
    env["PIP_NO_COMPILE"] = "1"  # no .pyc for all of torch: most of an install's CPU time
    return env


def _get_health(port: int) -> tuple[int, dict]:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(f"http://127.0.0.1:{port}/healthz", timeout=5) as response:
        return response.status, json.loads(response.read())


def test_the_containers_command_serves_and_passes_its_health_check(dockerfile, build_context):
    context, _ = build_context
    runtime = dockerfile["runtime"]
    port = free_port()
    env = _environment(runtime.env(), context, port)
    assert env["SPECSCOPE_HOST"] == "0.0.0.0"

    start = time.monotonic()
    for instruction in dockerfile["build"].all("RUN"):
        subprocess.run(run_command(instruction.arguments), shell=True, cwd=context, env=env,
                       check=True, timeout=600)
    installed_s = time.monotonic() - start
    assert (context / ".venv" / "bin" / "python").exists()
    # `make run` will not install again: the install it depends on is up to date.
    assert subprocess.run(["make", "-q", "install"], cwd=context, env=env).returncode == 0

    log = (context / "server.log").open("w")
    server = subprocess.Popen(exec_form(runtime.all("CMD")[-1].arguments), cwd=context,
                              env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline, health = time.monotonic() + START_TIMEOUT_S, None
        while health is None:
            assert server.poll() is None, (context / "server.log").read_text()
            assert time.monotonic() < deadline, (context / "server.log").read_text()
            try:
                health = _get_health(port)
            except OSError:
                time.sleep(0.2)
        serving_s = time.monotonic() - start - installed_s
        status, body = health
        assert status == 200 and body["status"] == "ok"
        assert body["models"]["loaded"] and body["models"]["pairs"] == ["shipped"]
        assert body["queue"]["waiting"] == 0 and not body["queue"]["running"]
        assert (context / "data" / "specscope.db").is_file()  # where the image lets it write

        check = subprocess.run(
            healthcheck_command(runtime.all("HEALTHCHECK")[-1].arguments), cwd=context,
            env=env, capture_output=True, text=True, timeout=30)
        assert check.returncode == 0, check.stdout + check.stderr
        assert json.loads(check.stdout)["status"] == "ok"

        server.send_signal(signal.SIGTERM)  # `docker stop`: make passes it to the server
        assert server.wait(timeout=30) is not None
        print(f"\ninstall {installed_s:.1f} s, serving {serving_s:.1f} s later; "
              f"/healthz: {json.dumps(body)}\nHEALTHCHECK: {check.stdout.strip()}\n"
              f"server log:\n{(context / 'server.log').read_text()}")
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
        log.close()
