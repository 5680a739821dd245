"""A model that produces NaN logits (an overflow in half precision, a broken checkpoint) ends
the run with a readable error on every path: greedy and sampled, speculative and target-only."""

from __future__ import annotations

import pytest
import torch
from support.tiny_models import CORPUS, build_llama, build_tokenizer, save

from engine.decoder.baseline import target_only
from engine.decoder.events import GenerationConfig
from engine.decoder.loading import load_pair
from engine.decoder.speculative import speculate

BROKEN_TOKEN = 5


@pytest.fixture(scope="module")
def dirs(tmp_path_factory) -> dict[str, str]:
    """A sound model and one whose logit for one token is NaN at every position."""
    root = tmp_path_factory.mktemp("faults")
    tokenizer = build_tokenizer(CORPUS)
    sound, broken = build_llama(seed=0), build_llama(seed=0)
    with torch.no_grad():
        broken.lm_head.weight[BROKEN_TOKEN] = float("nan")
    return {"sound": save(root, "sound", sound, tokenizer),
            "broken": save(root, "broken", broken, tokenizer)}


def run(events) -> None:
    for _ in events:
        pass


@pytest.mark.parametrize("temperature", [0.0, 1.0], ids=["greedy", "sampled"])
@pytest.mark.parametrize("broken", ["target", "draft"])
def test_nan_logits_stop_speculation_with_a_readable_error(dirs, broken, temperature):
    target, draft = (dirs["broken"], dirs["sound"]) if broken == "target" else (
        dirs["sound"], dirs["broken"])
    pair = load_pair(target, draft, device="cpu")
    config = GenerationConfig("the quick brown fox", k=3, temperature=temperature,
                              max_new_tokens=8)
    with pytest.raises(ValueError, match="not finite numbers"):
        run(speculate(pair, config))


@pytest.mark.parametrize("temperature", [0.0, 1.0], ids=["greedy", "sampled"])
def test_nan_logits_stop_target_only_decoding_with_a_readable_error(dirs, temperature):
    pair = load_pair(dirs["broken"], None, device="cpu")
    config = GenerationConfig("the quick brown fox", temperature=temperature, max_new_tokens=8)
    with pytest.raises(ValueError, match="not finite numbers"):
        run(target_only(pair, config))


def test_the_sound_model_runs_on_every_path(dirs):
    """The check does not fire on healthy logits (nor on the -inf of a top-k filter)."""
    pair = load_pair(dirs["sound"], dirs["sound"], device="cpu")
    for temperature in (0.0, 1.0):
        config = GenerationConfig("the quick brown fox", k=3, temperature=temperature,
                                  top_k=5, max_new_tokens=8)
        run(speculate(pair, config))
        run(target_only(pair, config))
