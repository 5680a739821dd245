"""The pair shipped in models/: loads offline through the engine's own loader, generates text
in the corpus's style, shares one tokenizer, and is a related pair (not a random draft)."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from transformers import AutoTokenizer

from engine.decoder.loading import check_same_tokenizer, load_pair

MODELS = Path(__file__).parents[2] / "models"
TARGET, DRAFT = MODELS / "target", MODELS / "draft"
ROUND_TRIP = [
    "In the beginning God created the heaven and the earth.",
    ":cruft: /kruhft/\n\n[very common] n. An unpleasant substance.",
    "  leading spaces, trailing tab\t, “curly quotes”, naïve café, ✓ 日本語 🙂\n\n\n",
    "",
]


@pytest.fixture(scope="module")
def offline():
    """No network: HF_HUB_OFFLINE=1 and any socket connection fails loudly."""
    mp = pytest.MonkeyPatch()
    mp.setenv("HF_HUB_OFFLINE", "1")
    mp.setenv("TRANSFORMERS_OFFLINE", "1")

    def refuse(*_args, **_kwargs):
        raise AssertionError("the shipped pair tried to reach the network")

    mp.setattr(socket.socket, "connect", refuse)
    yield
    mp.undo()


@pytest.fixture(scope="module")
def pair(offline):
    return load_pair(str(TARGET), str(DRAFT), device="cpu")


@torch.inference_mode()
def greedy(model, tokenizer, prompt: str, n: int) -> str:
    ids = tokenizer(prompt, return_tensors="pt").input_ids
    pad = tokenizer.eos_token_id
    out = model.generate(ids, max_new_tokens=n, do_sample=False, pad_token_id=pad)
    return tokenizer.decode(out[0, ids.shape[1] :])


def test_files_are_small_half_precision_llamas() -> None:
    total = 0
    for path in (TARGET, DRAFT):
        config = json.loads((path / "config.json").read_text())
        assert config["architectures"] == ["LlamaForCausalLM"]
        assert config["tie_word_embeddings"] is True
        assert config["dtype"] == "float16"
        total += sum(f.stat().st_size for f in path.iterdir())
    assert total <= 60 * 2**20


def test_loads_offline_through_the_engine(pair) -> None:
    assert pair.draft is not None
    assert pair.dtype == torch.float32  # fp16 on disk, float32 in memory: fp16 is slow on CPU
    assert pair.target.num_parameters() > 5 * pair.draft.num_parameters()


def test_the_two_share_one_tokenizer(offline) -> None:
    t, d = AutoTokenizer.from_pretrained(TARGET), AutoTokenizer.from_pretrained(DRAFT)
    assert t.get_vocab() == d.get_vocab()
    assert 1000 < len(t) <= 8192
    check_same_tokenizer(t, d)


@pytest.mark.parametrize("text", ROUND_TRIP)
def test_tokenizer_round_trips(pair, text: str) -> None:
    ids = pair.tokenizer(text).input_ids
    assert pair.tokenizer.decode(ids) == text


def test_target_writes_in_the_style_of_the_bible(pair) -> None:
    text = greedy(pair.target, pair.tokenizer, "And the LORD spake unto Moses, saying,", 30)
    words = text.split()
    assert len(words) >= 10
    assert {"the", "of", "and", "unto", "shall", "LORD"} & set(words)
    assert len(set(words)) >= 5  # not one token repeated


def test_both_write_jargon_file_entries(pair) -> None:
    """An entry's headword is followed by its definition, with {cross-references} in braces."""
    for model in (pair.target, pair.draft):
        text = greedy(model, pair.tokenizer, ":kluge: /klooj/", 30)
        assert len(text.split()) >= 5
        assert "{" in text and "}" in text


@torch.inference_mode()
@pytest.mark.parametrize(
    ("domain", "ce_target", "ce_draft"), [("kjv", 4.0, 4.5), ("jargon", 5.5, 6.0)]
)
def test_draft_is_related_to_the_target(
    pair, domain: str, ce_target: float, ce_draft: float
) -> None:
    """Both models predict held-out text well (an untrained model scores about log V = 8.3
    nats; the Jargon File is the harder text), and expected alpha at temperature 1,
    sum_x min(p, q), is high: an untrained draft against this sharp target overlaps little."""
    prompts = json.loads((MODELS / "heldout_prompts.json").read_text())
    ids = pair.tokenizer("\n\n".join(prompts[domain][:4]), return_tensors="pt").input_ids
    t_logits, d_logits = pair.target(input_ids=ids).logits[0], pair.draft(input_ids=ids).logits[0]
    assert F.cross_entropy(t_logits[:-1], ids[0, 1:]).item() < ce_target
    assert F.cross_entropy(d_logits[:-1], ids[0, 1:]).item() < ce_draft
    alpha = torch.minimum(F.softmax(t_logits, -1), F.softmax(d_logits, -1)).sum(-1).mean().item()
    assert 0.4 < alpha < 0.98
