"""Settings, read from the environment with the ``SPECSCOPE_`` prefix.

They sit at the bottom of the import graph: the engine, its command line and the web app all
read them from here, and this module imports nothing of the project's but the repository's
location (:mod:`engine.paths`).
"""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import BaseModel, Field, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from engine.paths import REPO_ROOT

SHIPPED_MODELS = REPO_ROOT / "models"
SHIPPED_MEASUREMENTS = REPO_ROOT / "measurements"
DATA_DIR = REPO_ROOT / "data"  # `make run` creates it
# An origin as a browser sends it: scheme, host, optional port; nothing a policy could break on.
ORIGIN = re.compile(r"^https?://[A-Za-z0-9.-]+(:[0-9]{1,5})?$")


WATCH_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$")


def parse_watch_urls(text: str) -> dict[str, str]:
    """``"prod=http://h:8000,http://g:8000"`` as ``{"prod": "http://h:8000", "g:8000":
    "http://g:8000"}``; ValueError for an address that is not http(s) or a bad name."""
    found: dict[str, str] = {}
    for entry in filter(None, (e.strip() for e in text.split(","))):
        name, sep, url = entry.partition("=")
        if not sep:
            name, url = "", entry
        url = url.strip().rstrip("/")
        match = re.match(r"^https?://([^/?#\s]+)$", url)
        if not match:
            raise ValueError(f"watch_urls: {url[:60]!r} is not an http:// or https:// address "
                             "of a server (no path)")
        name = name.strip() or match[1]
        if not WATCH_NAME.match(name):
            raise ValueError(f"watch_urls: {name[:60]!r} is not a name (letters, digits, "
                             "_ . : -; 64 at most)")
        if name in found:
            raise ValueError(f"watch_urls: {name!r} is named twice")
        found[name] = url
    return found


class PairSpec(BaseModel):
    """A draft/target pair the server may load: local paths or Hugging Face ids. ``draft``
    may be left out: such a pair speculates with prompt lookup only (it needs no draft)."""

    target: str
    draft: str | None = None
    label: str = ""
    eagle: str | None = None  # an EAGLE head trained for this target (a folder): drafter "eagle"
    medusa: str | None = None  # Medusa heads trained for this target (a folder): "medusa"


def _shipped_pairs() -> dict[str, PairSpec]:
    return {
        "shipped": PairSpec(
            target=str(SHIPPED_MODELS / "target"),
            draft=str(SHIPPED_MODELS / "draft"),
            label="shipped pair (trained by specscope)",
            eagle=str(SHIPPED_MODELS / "eagle"),
            medusa=str(SHIPPED_MODELS / "medusa"),
        )
    }


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="SPECSCOPE_")

    host: str = "127.0.0.1"
    port: int = 8000
    # The allowlist of pairs "Run live" may use; users pick a name, never a path.
    # Example: SPECSCOPE_PAIRS='{"qwen": {"target": "Qwen/Qwen2.5-7B",
    #                                     "draft": "Qwen/Qwen2.5-0.5B"}}'
    pairs: dict[str, PairSpec] = _shipped_pairs()
    default_pair: str = "shipped"
    device: str | None = None  # "cuda", "cpu"; None picks CUDA when present
    torch_threads: int | None = Field(None, ge=1)  # None: 1 on a CPU, torch's choice on CUDA
    load_models: bool = True  # False serves the slider page only
    max_new_tokens_limit: int = Field(256, ge=1)
    max_prompt_chars: int = Field(2000, ge=1)
    run_timeout_s: float = Field(120.0, gt=0)
    queue_size: int = Field(4, ge=0)  # runs that may wait while one runs
    # PNGs (link previews, chart downloads) are drawn in png_workers processes; past
    # png_queue drawings waiting for one, a PNG request is answered 503 with Retry-After.
    png_workers: int = Field(1, ge=1)
    png_queue: int = Field(4, ge=0)
    # Serving (app/limits.py, app/server.py): a request's head must arrive within
    # head_timeout_s (at most request_timeout_s), its body within request_timeout_s of the
    # head, else 408; at SIGTERM open responses get shutdown_timeout_s to finish; past
    # max_connections open connections, or max_connections_per_client from one address, a
    # request is answered 503.
    request_timeout_s: float = Field(10.0, gt=0)
    head_timeout_s: float = Field(5.0, gt=0)
    shutdown_timeout_s: float = Field(10.0, gt=0)
    max_connections: int = Field(64, ge=1)
    max_connections_per_client: int = Field(8, ge=1)
    # Against DNS rebinding: the Host names this server answers to ("*": any), and the
    # origins besides its own whose pages may POST to it.
    allowed_hosts: list[str] = ["127.0.0.1", "localhost", "[::1]"]
    allowed_origins: list[str] = []
    # Record the decode steps as CUDA graphs (engine.decoder.forward); off until
    # benchmarks/gpu_check.sh has validated them on the GPU in use.
    cuda_graphs: bool = False
    # Measured speedup-against-batch curves (JSON, docs/api.md "Measured curves") the roofline
    # chart overlays; the default holds this project's own sweep of the shipped pair.
    measurements_dir: Path = SHIPPED_MEASUREMENTS
    # A `specscope costs` file timed through the decoding loop on this machine: "this
    # machine"'s overheads (its loop's own time a speculative step) come from it.
    machine_costs: Path = SHIPPED_MEASUREMENTS / "schedule" / "shipped-cpu-costs.json"
    # Saved runs: a SQLite file (":memory:" keeps them for the life of the process).
    db: str = str(DATA_DIR / "specscope.db")
    runs_kept: int = Field(10_000, ge=1)  # the oldest saved runs beyond this are deleted
    max_run_bytes: int = Field(2_000_000, ge=1_000)  # a larger run is not saved
    # Origins that may show the page in a frame (``?embed=1``); none by default.
    frame_ancestors: list[str] = []

    @field_validator("frame_ancestors")
    @classmethod
    def _origins_only(cls, origins: list[str]) -> list[str]:
        for origin in origins:
            if not ORIGIN.match(origin):
                raise ValueError(
                    f"frame_ancestors: {origin[:60]!r} is not an origin like https://docs.example.com"
                )
        return origins
    # "Your traffic": probes run through the same queue as live runs.
    probe_max_prompts: int = Field(200, ge=1)  # prompts in one uploaded file
    probe_max_bytes: int = Field(256 * 1024, ge=1)  # size of one uploaded file
    probe_max_new_tokens: int = Field(64, ge=1)  # new tokens per prompt
    probe_timeout_s: float = Field(600.0, gt=0)  # wall time after which a probe stops

    # A running vLLM server (http://host:port) for `--engine vllm`; server-side only.
    vllm_url: str | None = None

    @field_validator("vllm_url")
    @classmethod
    def _vllm_url_is_http(cls, url: str | None) -> str | None:
        if url is not None and not url.startswith(("http://", "https://")):
            raise ValueError(f"vllm_url must be an http:// or https:// address, got {url!r}")
        return url.rstrip("/") if url else None

    # The watch (/watch, /metrics): the only vLLM servers this server scrapes, comma-separated
    # URLs, each optionally named: "prod=http://10.0.0.5:8000,http://10.0.0.6:8000" (a name
    # left out is the URL's host:port). The page cannot make it fetch any other address.
    watch_urls: str = ""
    watch_interval: float = Field(10.0, ge=1.0, le=3600.0)  # seconds between scrapes
    # Per deployment name: the plan it deployed (specscope plan --json) and vLLM's step costs
    # (specscope sweep --engine vllm --costs-out), for the break-even and the assumed alpha.
    watch_plans: dict[str, Path] = {}
    watch_costs: dict[str, Path] = {}
    watch_window: int = Field(3, ge=1, le=1000)  # intervals pooled for the verdict
    watch_kept: int = Field(8640, ge=1)  # intervals kept per deployment (a day at 10 s)

    @field_validator("watch_urls")
    @classmethod
    def _watch_urls_are_http(cls, text: str) -> str:
        parse_watch_urls(text)
        return text

    @property
    def watch_deployments(self) -> dict[str, str]:
        """The watched deployments, name to URL (``watch_urls``)."""
        return parse_watch_urls(self.watch_urls)

    @model_validator(mode="after")
    def _default_pair_is_offered(self) -> Settings:
        if self.default_pair not in self.pairs:
            raise ValueError(
                f"default_pair {self.default_pair!r} is not one of the pairs "
                f"({', '.join(sorted(self.pairs))})"
            )
        return self

    @property
    def target(self) -> str:
        return self.pairs[self.default_pair].target

    @property
    def draft(self) -> str | None:
        return self.pairs[self.default_pair].draft
