"""A stand-in for vLLM's server, for the tests of what specscope does when vLLM misbehaves.

Started the way specscope starts vLLM (``python -m vllm.entrypoints.openai.api_server
--port N ...``: only ``--port`` is read); ``FAKE_VLLM_MODE`` says how to misbehave:

- ``serve``: a well-behaved server (health, models, completions, /metrics)
- ``exit``: prints an error and exits with status 3 before listening
- ``silent``: runs but never listens
- ``garbage``: listens and answers every path with HTML
- ``hang``: listens, answers /health, and never answers anything else
- ``die-after-N``: serves N completions, then the whole process exits
- ``ignore-term``: serves, and ignores SIGTERM (only SIGKILL stops it)
- ``short``: serves, but stops every completion at half its ``max_tokens``
- ``truncate``: answers /v1/models with 10 of the 1000 bytes it announces, then hangs up
- ``stream-error``: serves, but a streamed completion sends an error event after its first
  token (a streamed completion, ``"stream": true``, otherwise comes as server-sent events:
  the first token alone, then two tokens a chunk, :data:`STREAM_GAP_S` apart)
- ``no-drafts``: serves, but its counters stay at 0 (no request ever drafted: a server just
  started, or one whose drafter never proposed)

``FAKE_VLLM_CHILD=1`` also starts a child process in the same process group (vLLM's engine
core is one), which must be stopped with the server. At start it prints the switch of
specscope's vLLM plugin it was given (``SPECSCOPE_VLLM_FIX=...``), as the plugin would log it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

STREAM_GAP_S = 0.05  # between streamed chunks
# Each completion adds one cycle that accepted 2 of 4 drafts, on top of 10 earlier cycles.
METRICS = """\
# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts_total counter
vllm:spec_decode_num_drafts_total{{engine="0",model_name="fake"}} {drafts}.0
# TYPE vllm:spec_decode_num_draft_tokens_total counter
vllm:spec_decode_num_draft_tokens_total{{engine="0",model_name="fake"}} {draft_tokens}.0
# TYPE vllm:spec_decode_num_accepted_tokens_total counter
vllm:spec_decode_num_accepted_tokens_total{{engine="0",model_name="fake"}} {accepted}.0
# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_total counter
vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine="0",position="0"}} {p0}.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine="0",position="1"}} {p1}.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine="0",position="2"}} {p2}.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine="0",position="3"}} {p3}.0
"""


def main() -> None:
    mode = os.environ.get("FAKE_VLLM_MODE", "serve")
    port = int(sys.argv[sys.argv.index("--port") + 1])
    print(f"SPECSCOPE_VLLM_FIX={os.environ.get('SPECSCOPE_VLLM_FIX', '(unset)')}", flush=True)
    if os.environ.get("FAKE_VLLM_CHILD"):
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    if mode == "exit":
        print("ValueError: this fake vLLM refuses to start", flush=True)
        sys.exit(3)
    if mode == "silent":
        time.sleep(600)
    if mode == "ignore-term":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    served = {"completions": 0}
    limit = int(mode.rsplit("-", 1)[1]) if mode.startswith("die-after-") else None

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

        def _send(self, status: int, body: str, kind: str = "application/json") -> None:
            data = body.encode()
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if mode == "garbage":
                return self._send(200, "<html>welcome to nginx</html>", "text/html")
            if self.path == "/health":
                return self._send(200, "")
            if mode == "hang":
                time.sleep(600)
            if self.path == "/v1/models" and mode == "truncate":
                self.send_response(200)
                self.send_header("Content-Length", "1000")
                self.end_headers()
                self.wfile.write(b'{"data": [')
                self.close_connection = True
                return None
            if self.path == "/v1/models":
                return self._send(200, json.dumps({"data": [{"id": "fake"}]}))
            if self.path == "/metrics":
                n = served["completions"]
                counts = dict(drafts=10 + n, draft_tokens=40 + 4 * n, accepted=25 + 2 * n,
                              p0=9 + n, p1=7 + n, p2=5, p3=4)
                if mode == "no-drafts":
                    counts = dict.fromkeys(counts, 0)
                return self._send(200, METRICS.format(**counts), "text/plain")
            self._send(404, '{"detail": "Not Found"}')

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", 0))
            request = json.loads(self.rfile.read(length))
            if mode == "garbage":
                return self._send(200, "<html>welcome to nginx</html>", "text/html")
            if mode == "hang":
                time.sleep(600)
            served["completions"] += 1
            if limit is not None and served["completions"] > limit:
                os._exit(1)  # a crash: no answer, the connection just drops
            ids = [7] * (request["max_tokens"] // (2 if mode == "short" else 1))
            if request.get("stream"):
                return self._stream(ids)
            body = {"choices": [{"text": "x" * len(ids), "token_ids": ids,
                                 "finish_reason": "length"}]}
            self._send(200, json.dumps(body))

        def _stream(self, ids: list[int]) -> None:
            """Server-sent events: the first token alone, then two a chunk (as a speculative
            step that accepted one draft), STREAM_GAP_S apart; ``stream-error`` sends an
            error event after the first token instead."""
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            chunks = [ids[:1]] + [ids[i:i + 2] for i in range(1, len(ids), 2)]
            for n, chunk in enumerate(chunks):
                if n:
                    time.sleep(STREAM_GAP_S)
                if n and mode == "stream-error":
                    event = {"error": {"message": "the engine died", "code": 500}}
                else:
                    event = {"choices": [{"index": 0, "text": "x" * len(chunk),
                                          "token_ids": chunk, "finish_reason": None}]}
                self.wfile.write(f"data: {json.dumps(event)}\n\n".encode())
                self.wfile.flush()
            self.wfile.write(b"data: [DONE]\n\n")

    ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()


if __name__ == "__main__":
    main()
