"""Training Medusa heads: self-distillation's loss going down on a tiny target, seeded, each
head scored against the target's own distribution of the token it guesses."""

from __future__ import annotations

import argparse

import torch
from support.tiny_models import build_llama, sampled_stream

from engine.decoder.medusa import MedusaHeads
from engine.training.features import compute_features, windows_of
from engine.training.train_medusa import DECAY, heads_loss, train


def args(**kw) -> argparse.Namespace:
    base = {"steps": 60, "batch_size": 4, "lr": 1e-2, "seed": 7, "log_every": 20,
            "bf16": False}
    return argparse.Namespace(**(base | kw))


def test_training_lowers_the_heads_loss_and_repeats_with_the_seed():
    target = build_llama(seed=0)
    windows = windows_of(sampled_stream(target, 1200), 24)
    features = compute_features(target, windows, log=lambda _: None)

    def trained():
        torch.manual_seed(3)
        heads = MedusaHeads.for_target(target, num_heads=2)
        return heads, train(heads, features, args(), log=lambda _: None)

    heads, curve = trained()
    assert curve[-1]["loss"] < curve[0]["loss"]
    assert curve == trained()[1]
    assert not heads.lm_head.weight.requires_grad  # the target's, frozen


def test_each_head_is_scored_against_the_targets_distribution_of_its_token():
    target = build_llama(seed=0)
    heads = MedusaHeads.for_target(target, num_heads=2)
    features = torch.randn(1, 6, target.config.hidden_size)
    loss, parts = heads_loss(heads, features)
    f = features.float()
    expected = 0.0
    for i in range(2):
        p = torch.softmax(heads.lm_head(f[:, 1 + i:]), -1)
        q = torch.log_softmax(heads.logits(f[:, : 6 - 1 - i], i), -1)
        ce = -(p * q).sum(-1).mean()
        assert abs(parts[f"ce{i}"] - ce.item()) < 1e-5
        expected += DECAY**i * ce.item()
    assert abs(loss.item() - expected) < 1e-5
