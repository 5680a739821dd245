"""Tiny pairs for the engine tests, saved like hub models and loaded back through
``load_pair``. Nothing is downloaded."""

from __future__ import annotations

import pytest
from support.tiny_models import CORPUS, build_llama, build_tokenizer, perturbed, save, widened

from engine.decoder.loading import load_pair


@pytest.fixture(scope="session")
def model_dirs(tmp_path_factory) -> dict[str, str]:
    """target; good (noisy copy), bad (unrelated), twin (identical copy), wide_target (the
    target with 16 more logit rows) and foreign (a draft with another tokenizer)."""
    root = tmp_path_factory.mktemp("models")
    tokenizer = build_tokenizer(CORPUS)
    target = build_llama(seed=0)
    good = perturbed(target, scale=0.05, seed=1)
    return {
        "target": save(root, "target", target, tokenizer),
        "good": save(root, "good", good, tokenizer),
        "bad": save(root, "bad", build_llama(seed=2, layers=1), tokenizer),
        "twin": save(root, "twin", target, tokenizer),
        "wide_target": save(root, "wide_target", widened(target, extra_rows=16), tokenizer),
        "foreign": save(
            root, "foreign", build_llama(seed=3), build_tokenizer(CORPUS[:1] + ["zebra"])
        ),
    }


def _pair(model_dirs, draft: str | None, target: str = "target"):
    return load_pair(model_dirs[target], model_dirs[draft] if draft else None, device="cpu")


@pytest.fixture(scope="session")
def good_pair(model_dirs):
    return _pair(model_dirs, "good")


@pytest.fixture(scope="session")
def bad_pair(model_dirs):
    return _pair(model_dirs, "bad")


@pytest.fixture(scope="session")
def twin_pair(model_dirs):
    return _pair(model_dirs, "twin")


@pytest.fixture(scope="session")
def wide_pair(model_dirs):
    """Like Qwen2.5-7B (152064 rows) with Qwen2.5-0.5B (151936 rows) as its draft."""
    return _pair(model_dirs, "good", target="wide_target")


@pytest.fixture(scope="session")
def target_only_pair(model_dirs):
    return _pair(model_dirs, None)
