"""``specscope vllm serve`` and ``specscope vllm status``.

``serve`` starts a vLLM server for a target and its draft (speculative config with ``--k``),
waits for ``/health``, prints its address and keeps it up until Ctrl-C (or SIGTERM), then
stops it. ``status`` reports a running server: the one at ``--url``, else the one in the
``SPECSCOPE_VLLM_URL`` setting.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from pathlib import Path

from engine.measure.vllm_client import VllmClient, VllmError
from engine.measure.vllm_server import VLLM_PYTHON, ServerSpec, VllmServer


def add_parser(sub, d: dict) -> None:
    vllm = sub.add_parser("vllm", help="run or inspect a vLLM server (the serving engine)")
    actions = vllm.add_subparsers(dest="vllm_command", required=True)
    serve = actions.add_parser(
        "serve", help="start vLLM with a draft model, wait for /health, stop on Ctrl-C"
    )
    serve.add_argument("--target", default=d["target"], help="path or Hugging Face id")
    serve.add_argument("--draft", default=d["draft"], help="path or Hugging Face id")
    serve.add_argument("--k", type=int, default=4,
                       help="draft tokens per cycle (num_speculative_tokens); 0 = no draft")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8100)
    serve.add_argument("--python", type=Path, default=VLLM_PYTHON,
                       help="the Python of vLLM's virtualenv (default: .venv-vllm)")
    serve.add_argument("--max-model-len", type=int, default=512)
    serve.add_argument("--dtype", default="float32")
    serve.add_argument("--startup-timeout", type=float, default=600.0, help="seconds")
    serve.add_argument("vllm_args", nargs=argparse.REMAINDER,
                       help="after --: more arguments for vLLM's server "
                            "(e.g. -- --tensor-parallel-size 2)")
    status = actions.add_parser("status", help="health and speculative counters of a server")
    status.add_argument("--url", default=d.get("vllm_url"),
                        help="default: the SPECSCOPE_VLLM_URL setting")


def run(args) -> int:
    try:
        if args.vllm_command == "serve":
            return _serve(args)
        return _status(args)
    except VllmError as error:
        print(f"specscope: error: {error}", file=sys.stderr)
        return 2


def _serve(args) -> int:
    if args.k < 0:
        raise VllmError("--k must be 0 (no draft) or more")
    extra = [a for a in args.vllm_args if a != "--"]
    spec = ServerSpec(
        target=args.target,
        draft=args.draft if args.k else None,
        k=args.k,
        host=args.host,
        port=args.port,
        python=args.python,
        dtype=args.dtype,
        max_model_len=args.max_model_len,
        extra_args=extra,
    )
    # SIGTERM ends the wait below like Ctrl-C does, so the server is stopped either way.
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    server = VllmServer(spec, startup_timeout_s=args.startup_timeout)
    what = f"k = {spec.k}, draft {spec.draft}" if spec.speculative else "no speculation"
    print(f"specscope vllm: starting vLLM for {spec.target} ({what}) ...", file=sys.stderr)
    try:
        with server:
            print(f"specscope vllm: serving at {server.url} (Ctrl-C stops it)", flush=True)
            print(f"specscope vllm: SPECSCOPE_VLLM_URL={server.url}", file=sys.stderr)
            while server.running():
                time.sleep(0.5)
            raise VllmError(f"the vLLM server exited on its own; its last output:\n"
                            f"{server.log_tail()}")
    except KeyboardInterrupt:
        print("specscope vllm: stopped", file=sys.stderr)
        return 0
    finally:
        signal.signal(signal.SIGTERM, previous)


def _raise_interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


def _status(args) -> int:
    if not args.url:
        raise VllmError("no server given: pass --url or set SPECSCOPE_VLLM_URL")
    client = VllmClient(args.url, timeout_s=30.0)
    if not client.healthy():
        raise VllmError(f"the vLLM server at {client.url} does not answer /health")
    print(f"{client.url}: healthy, serving {client.model()}")
    c = client.counters()
    print(f"  drafts {c.drafts}, draft tokens {c.draft_tokens}, accepted {c.accepted}")
    if c.drafts and c.draft_tokens:
        rates = " ".join(f"{n / c.drafts:.3f}" for n in c.per_position)
        print(f"  draft acceptance rate {c.accepted / c.draft_tokens:.3f}, "
              f"mean acceptance length {1 + c.accepted / c.drafts:.2f}")
        print(f"  per-position acceptance {rates}")
    return 0
