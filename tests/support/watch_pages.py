"""vLLM ``/metrics`` pages for the watch's tests, and a tiny HTTP server that serves them.

:func:`page` writes what vLLM 0.32 writes for a speculating server: the four
``vllm:spec_decode_*`` counters (split over two engines, as a data-parallel server does, so
the watch must sum them), the generated-tokens counter, the running-requests gauge, the
process start time and, when ``steps`` is given, the iteration-tokens histogram whose count is
the engine steps. :class:`PageServer` answers ``/metrics`` with whatever its ``page``,
``status``, ``delay_s``, ``trickle_s`` and ``content_type`` are at the moment of the request.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Counts:
    drafts: int = 0
    accepted_per_position: tuple[int, ...] = (0, 0, 0, 0)  # drafts that accepted position i
    draft_tokens: int | None = None  # default: drafts x k
    generated: int = 0
    running: int = 0
    start: float = 1.7e9
    steps: int | None = None  # engine steps (vllm:iteration_tokens_total_count); None: absent

    def __add__(self, cycles: list[int]) -> Counts:
        """These counts after more drafts, each accepting ``a`` of k tokens."""
        k = len(self.accepted_per_position)
        per_pos = list(self.accepted_per_position)
        for a in cycles:
            for i in range(a):
                per_pos[i] += 1
        return Counts(self.drafts + len(cycles), tuple(per_pos),
                      None if self.draft_tokens is None else self.draft_tokens + k * len(cycles),
                      self.generated + sum(a + 1 for a in cycles), self.running, self.start,
                      self.steps)


def page(c: Counts, engines: int = 2) -> str:
    """The page of ``c``, its counts split over ``engines`` engines (engine 0 gets the rest)."""
    k = len(c.accepted_per_position)
    tokens = c.drafts * k if c.draft_tokens is None else c.draft_tokens

    def split(value: float) -> list[float]:
        share = value // engines
        return [value - share * (engines - 1)] + [share] * (engines - 1)

    lines = [f"process_start_time_seconds {c.start}"]
    for name, value in (("drafts", c.drafts), ("draft_tokens", tokens),
                        ("accepted_tokens", sum(c.accepted_per_position))):
        lines.append(f"# TYPE vllm:spec_decode_num_{name}_total counter")
        lines += [f'vllm:spec_decode_num_{name}_total{{engine="{e}",model_name="m"}} {v}'
                  for e, v in enumerate(split(value))]
    lines.append("# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_total counter")
    for i, n in enumerate(c.accepted_per_position):
        lines += [f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine="{e}",'
                  f'model_name="m",position="{i}"}} {v}' for e, v in enumerate(split(n))]
    lines += ["# TYPE vllm:generation_tokens_total counter"]
    lines += [f'vllm:generation_tokens_total{{engine="{e}",model_name="m"}} {v}'
              for e, v in enumerate(split(c.generated))]
    lines += ["# TYPE vllm:num_requests_running gauge"]
    lines += [f'vllm:num_requests_running{{engine="{e}",model_name="m"}} {v}'
              for e, v in enumerate(split(c.running))]
    if c.steps is not None:
        lines += ["# TYPE vllm:iteration_tokens_total histogram"]
        for e, v in enumerate(split(c.steps)):
            lines += [f'vllm:iteration_tokens_total_bucket{{engine="{e}",le="+Inf",'
                      f'model_name="m"}} {v}',
                      f'vllm:iteration_tokens_total_count{{engine="{e}",model_name="m"}} {v}',
                      f'vllm:iteration_tokens_total_sum{{engine="{e}",model_name="m"}} {v * 4}']
    return "\n".join(lines) + "\n"


class PageServer:
    """``with PageServer() as s: s.page = ...; Watch(..., s.url, ...)``."""

    def __init__(self) -> None:
        self.page = ""
        self.status = 200
        self.delay_s = 0.0
        self.trickle_s = 0.0  # above 0: the body is sent one byte every trickle_s seconds
        self.content_type = "text/plain; version=0.0.4"
        self.extra_headers: dict[str, str] = {}
        self.requests = 0
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - the standard library's name
                owner.requests += 1
                time.sleep(owner.delay_s)
                body = owner.page.encode() if isinstance(owner.page, str) else owner.page
                try:
                    self.send_response(owner.status)
                    self.send_header("Content-Type", owner.content_type)
                    self.send_header("Content-Length", str(len(body)))
                    for name, value in owner.extra_headers.items():
                        self.send_header(name, value)
                    self.end_headers()
                    if owner.trickle_s > 0:
                        for i in range(len(body)):
                            self.wfile.write(body[i:i + 1])
                            self.wfile.flush()
                            time.sleep(owner.trickle_s)
                    else:
                        self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the watch gave up waiting: that is what some tests check

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> PageServer:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
