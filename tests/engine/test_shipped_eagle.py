"""The EAGLE head shipped in models/eagle: vLLM's checkpoint layout for the shipped target,
and a head that drafts the target's own greedy text better than chance by far."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM, AutoTokenizer

from engine.decoder.eagle import EagleHead
from engine.measure.eagle_compare import HeadDrafter, run_prompt

MODELS = Path(__file__).parents[2] / "models"
HEAD = MODELS / "eagle"


@pytest.fixture(scope="module")
def target():
    return AutoModelForCausalLM.from_pretrained(MODELS / "target", dtype=torch.float32).eval()


def test_the_checkpoint_is_a_one_layer_llama_with_the_heads_weights_only():
    config = json.loads((HEAD / "config.json").read_text())
    target = json.loads((MODELS / "target" / "config.json").read_text())
    assert config["architectures"] == ["LlamaForCausalLM"]
    assert config["num_hidden_layers"] == 1
    for key in ("hidden_size", "intermediate_size", "num_attention_heads", "vocab_size"):
        assert config[key] == target[key]
    names = set(load_file(HEAD / "model.safetensors"))
    assert "fc.weight" in names
    assert all(n == "fc.weight" or n.startswith("layers.0.") for n in names)
    assert not any("embed" in n or "lm_head" in n or "input_layernorm" in n for n in names)
    summary = json.loads((HEAD / "training_summary.json").read_text())
    assert summary["command"].startswith("python -m engine.training.train_eagle")


def test_the_head_drafts_most_of_the_targets_greedy_bible_text(target):
    """At T = 0 on a held-out prompt, most drafts are the target's own next tokens (an
    untrained head gets almost none)."""
    head = EagleHead.load(HEAD, target)
    prompts = json.loads((MODELS / "heldout_prompts.json").read_text())
    tokenizer = AutoTokenizer.from_pretrained(MODELS / "target")
    ids = torch.tensor(tokenizer(prompts["kjv"][0], add_special_tokens=False).input_ids)
    run = run_prompt(target, HeadDrafter(head), ids, k=4, temperature=0.0, max_new_tokens=32,
                     seed=0, eos=None)
    assert run.accepted / run.trials > 0.5
