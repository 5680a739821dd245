"""Speaking to a vLLM server over HTTP: ``/health``, OpenAI-compatible completions with token
ids, and the speculative-decoding counters on ``/metrics``.

The standard library speaks HTTP, and the counters are read as the calibration reads them
(:func:`engine.serving.metrics.read_counts`): the client runs in specscope's environment,
the server in its own.
Every failure (nothing listening, an HTTP error, a body that is not what vLLM sends, a
server that stops mid-request) is a :class:`VllmError` whose message names the server and
what went wrong; every request has a timeout, so nothing waits forever.
"""

from __future__ import annotations

import http.client
import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field

from engine.serving.metrics import MetricsError, SpecCounters, read_counts

MAX_BODY_BYTES = 16 * 1024 * 1024  # a completion or a /metrics page is far smaller


class VllmError(RuntimeError):
    """The vLLM server is missing, not answering, or answering something unusable."""


@dataclass
class Completion:
    token_ids: list[int]
    text: str
    finish_reason: str | None


@dataclass
class StreamedCompletion:
    """A streamed completion: ``sent``, when the request left; ``chunks``, each chunk's
    arrival time and its number of tokens (a speculative step may bring several at once);
    ``token_ids``, every token in order; ``done``, whether the stream ended with [DONE]."""

    sent: float
    chunks: list[tuple[float, int]] = field(default_factory=list)
    token_ids: list[int] = field(default_factory=list)
    done: bool = False


class VllmClient:
    """One vLLM server at ``url`` (``http://host:port``)."""

    def __init__(self, url: str, timeout_s: float = 300.0):
        self.url = url.rstrip("/")
        self.timeout_s = timeout_s
        self._model: str | None = None

    def healthy(self, timeout: float = 5.0) -> bool:
        """Whether ``/health`` answers 200 now (never raises)."""
        try:
            with urllib.request.urlopen(f"{self.url}/health", timeout=timeout) as response:
                return response.status == 200
        except (OSError, ValueError):
            return False

    def model(self) -> str:
        """The served model's name (from ``/v1/models``), which completions must name."""
        if self._model is None:
            body = self._json("GET", "/v1/models")
            try:
                self._model = str(body["data"][0]["id"])
            except (KeyError, IndexError, TypeError):
                raise VllmError(
                    f"{self.url}/v1/models did not list a model: {_excerpt(body)}"
                ) from None
        return self._model

    def complete(
        self,
        prompt_ids: list[int],
        max_tokens: int,
        temperature: float = 0.0,
        *,
        top_p: float = 1.0,
        top_k: int = 0,
        seed: int | None = None,
        ignore_eos: bool = True,
    ) -> Completion:
        """Continue ``prompt_ids`` (token ids, used as given) by ``max_tokens`` tokens."""
        return self._complete(prompt_ids, max_tokens, temperature, top_p=top_p, top_k=top_k,
                              seed=seed, ignore_eos=ignore_eos)[0]

    def complete_n(
        self, prompt_ids: list[int], max_tokens: int, temperature: float, n: int
    ) -> list[list[int]]:
        """``n`` independent continuations of ``prompt_ids`` in one request: their token ids."""
        return [c.token_ids for c in self._complete(prompt_ids, max_tokens, temperature, n=n)]

    def _complete(self, prompt_ids, max_tokens, temperature, *, top_p=1.0, top_k=0, seed=None,
                  ignore_eos=True, n=1) -> list[Completion]:
        request = {
            "model": self.model(),
            "prompt": list(prompt_ids),
            "max_tokens": max_tokens,
            "temperature": temperature,
            "top_p": top_p,
            "top_k": top_k if top_k > 0 else -1,
            "ignore_eos": ignore_eos,
            "return_token_ids": True,
            "skip_special_tokens": False,
            "n": n,
        }
        if seed is not None:
            request["seed"] = seed
        body = self._json("POST", "/v1/completions", request)
        try:
            completions = []
            for choice in body["choices"]:
                ids = choice["token_ids"]
                if not isinstance(ids, list) or not all(isinstance(t, int) for t in ids):
                    raise TypeError
                completions.append(Completion(list(ids), str(choice.get("text", "")),
                                              choice.get("finish_reason")))
            if len(completions) != n:
                raise TypeError
            return completions
        except (KeyError, IndexError, TypeError):
            raise VllmError(
                f"{self.url}/v1/completions answered without generated token ids: "
                f"{_excerpt(body)}"
            ) from None

    def stream(self, prompt_ids: list[int], max_tokens: int, temperature: float = 0.0,
               *, ignore_eos: bool = True,
               clock: Callable[[], float] = time.perf_counter) -> StreamedCompletion:
        """Continue ``prompt_ids`` by ``max_tokens`` tokens as a stream (server-sent events),
        noting when each chunk of tokens arrived (``clock()``, taken as its line is read)."""
        request = {
            "model": self.model(),
            "prompt": list(prompt_ids),
            "max_tokens": max_tokens,
            "temperature": temperature,
            "ignore_eos": ignore_eos,
            "return_token_ids": True,
            "skip_special_tokens": False,
            "stream": True,
        }
        http_request = urllib.request.Request(
            f"{self.url}/v1/completions", data=json.dumps(request).encode(), method="POST",
            headers={"Content-Type": "application/json"})
        where = f"{self.url}/v1/completions"
        result = StreamedCompletion(sent=clock())
        try:
            with urllib.request.urlopen(http_request, timeout=self.timeout_s) as response:
                for raw in response:
                    line = raw.strip()
                    if not line.startswith(b"data:"):
                        continue  # blank separators, comments
                    payload = line[5:].strip()
                    if payload == b"[DONE]":
                        result.done = True
                        break
                    arrived = clock()
                    try:
                        chunk = json.loads(payload)
                    except ValueError:
                        raise VllmError(f"{where} streamed something that is not JSON: "
                                        f"{_excerpt(payload)}") from None
                    if isinstance(chunk, dict) and "error" in chunk:
                        raise VllmError(f"{where} streamed an error: {_excerpt(chunk)}")
                    ids = _chunk_token_ids(chunk, where)
                    if ids:
                        result.token_ids += ids
                        result.chunks.append((arrived, len(ids)))
        except urllib.error.HTTPError as error:
            detail = error.read(2000).decode("utf-8", "replace")
            raise VllmError(f"{where} answered HTTP {error.code}: {_excerpt(detail)}") from None
        except TimeoutError:
            raise VllmError(f"the vLLM server at {self.url} stopped streaming for "
                            f"{self.timeout_s:.0f} s") from None
        except (urllib.error.URLError, http.client.HTTPException, OSError) as error:
            reason = getattr(error, "reason", error)
            raise VllmError(f"the vLLM server at {self.url} stopped answering a stream "
                            f"({reason})") from None
        if not result.done:
            raise VllmError(f"the vLLM server at {self.url} ended a stream without [DONE] "
                            f"after {len(result.token_ids)} tokens")
        return result

    def metrics_text(self) -> str:
        return self._request("GET", "/metrics").decode("utf-8", "replace")

    def counters(self) -> SpecCounters:
        return parse_counters(self.metrics_text(), f"{self.url}/metrics")

    def _json(self, method: str, path: str, payload: dict | None = None):
        raw = self._request(method, path, payload)
        try:
            return json.loads(raw)
        except ValueError:
            raise VllmError(
                f"{self.url}{path} answered something that is not JSON: {_excerpt(raw)}"
            ) from None

    def _request(self, method: str, path: str, payload: dict | None = None) -> bytes:
        data = None if payload is None else json.dumps(payload).encode()
        request = urllib.request.Request(
            f"{self.url}{path}", data=data, method=method,
            headers={"Content-Type": "application/json"} if data else {},
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                body = response.read(MAX_BODY_BYTES + 1)
                declared = response.headers.get("Content-Length", "")
            if declared.isdigit() and len(body) < int(declared) <= MAX_BODY_BYTES:
                raise http.client.IncompleteRead(body, int(declared) - len(body))
        except urllib.error.HTTPError as error:
            detail = error.read(2000).decode("utf-8", "replace")
            raise VllmError(
                f"{self.url}{path} answered HTTP {error.code}: {_excerpt(detail)}"
            ) from None
        except TimeoutError:
            raise VllmError(
                f"the vLLM server at {self.url} did not answer {path} within "
                f"{self.timeout_s:.0f} s"
            ) from None
        except http.client.IncompleteRead as error:
            raise VllmError(
                f"the vLLM server at {self.url} stopped answering in the middle of {path} "
                f"({len(error.partial)} bytes came)"
            ) from None
        except (urllib.error.URLError, http.client.HTTPException, OSError) as error:
            reason = getattr(error, "reason", error)
            raise VllmError(
                f"the vLLM server at {self.url} is not answering ({reason}); "
                "is it running, and is the address right?"
            ) from None
        except ValueError as error:  # a malformed URL, or http.client's parse errors
            raise VllmError(f"could not talk to {self.url}: {error}") from None
        if len(body) > MAX_BODY_BYTES:
            raise VllmError(f"{self.url}{path} answered more than {MAX_BODY_BYTES} bytes")
        return body


def parse_counters(text: str, where: str = "the metrics") -> SpecCounters:
    """The ``vllm:spec_decode_*_total`` counters of a Prometheus text page, summed over label
    sets (one engine per server here), as whole counts. Raises :class:`VllmError` for text
    that is not Prometheus format or has no speculative-decoding counters."""
    try:
        total = sum(read_counts(text, where).values(), SpecCounters())
    except MetricsError as error:
        raise VllmError(str(error)) from None
    return SpecCounters(int(total.drafts), int(total.draft_tokens), int(total.accepted),
                        [int(n) for n in total.per_position])


def _chunk_token_ids(chunk, where: str) -> list[int]:
    """The new token ids of one streamed completion chunk (none in a usage-only chunk)."""
    try:
        choices = chunk["choices"]
        if not choices:
            return []
        ids = choices[0].get("token_ids") or []
        if not isinstance(ids, list) or not all(isinstance(t, int) for t in ids):
            raise TypeError
        return list(ids)
    except (KeyError, IndexError, TypeError, AttributeError):
        raise VllmError(f"{where} streamed a chunk without token ids: {_excerpt(chunk)}") from None


def _excerpt(value, limit: int = 200) -> str:
    text = value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + "..."
