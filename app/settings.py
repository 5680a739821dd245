"""Server settings, read from the environment with the ``SPECSCOPE_`` prefix."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel
from pydantic_settings import BaseSettings, SettingsConfigDict

REPO_ROOT = Path(__file__).resolve().parent.parent
SHIPPED_MODELS = REPO_ROOT / "models"


class PairSpec(BaseModel):
    """A draft/target pair the server may load: local paths or Hugging Face ids."""

    target: str
    draft: str
    label: str = ""


def _shipped_pairs() -> dict[str, PairSpec]:
    return {
        "shipped": PairSpec(
            target=str(SHIPPED_MODELS / "target"),
            draft=str(SHIPPED_MODELS / "draft"),
            label="shipped pair (trained by specscope)",
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
    load_models: bool = True  # False serves the slider page only
    max_new_tokens_limit: int = 256
    max_prompt_chars: int = 2000
    run_timeout_s: float = 120.0
    queue_size: int = 4

    @property
    def target(self) -> str:
        return self.pairs[self.default_pair].target

    @property
    def draft(self) -> str:
        return self.pairs[self.default_pair].draft
