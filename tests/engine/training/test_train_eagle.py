"""Training the EAGLE head: the target's features computed once, and EAGLE-1's loss going
down on a tiny target, seeded."""

from __future__ import annotations

import argparse

import torch
from support.tiny_models import build_llama, sampled_stream

from engine.decoder.eagle import EagleHead, head_config, target_features
from engine.training.features import compute_features, windows_of
from engine.training.train_eagle import head_loss, train


def args(**kw) -> argparse.Namespace:
    base = {"steps": 80, "batch_size": 4, "lr": 1e-2, "seed": 7, "log_every": 20,
            "bf16": False, "cls_weight": 0.1}
    return argparse.Namespace(**(base | kw))


def test_features_are_the_targets_last_hidden_states_window_by_window():
    target = build_llama(seed=0)
    s = torch.randint(2, target.config.vocab_size, (100,), generator=torch.Generator())
    tokens = windows_of(s, 16)
    features = compute_features(target, tokens, batch=4, log=lambda _: None)
    assert tokens.shape == (6, 16) and features.shape == (6, 16, target.config.hidden_size)
    assert features.dtype == torch.float16
    with torch.inference_mode():
        expected = target_features(target, s[32:48][None])[0]
    torch.testing.assert_close(features[2].float(), expected, rtol=1e-3, atol=1e-3)


def test_a_window_count_spreads_the_windows_over_the_whole_stream():
    s = torch.arange(1000)
    assert windows_of(s, 10).shape == (100, 10)
    picked = windows_of(s, 10, count=5)
    assert picked[:, 0].tolist() == [0, 250, 500, 740, 990]  # first and last included
    assert torch.equal(windows_of(s, 10, count=500), windows_of(s, 10))  # more than there are


def test_training_lowers_eagles_loss_and_repeats_with_the_seed():
    target = build_llama(seed=0)
    tokens = windows_of(sampled_stream(target, 512), 32)
    features = compute_features(target, tokens, log=lambda _: None)

    def run():
        torch.manual_seed(1)
        head = EagleHead(head_config(target.config), target)
        return head, train(head, tokens, features, args(), log=lambda _: None)

    head, curve = run()
    assert [p["step"] for p in curve] == [20, 40, 60, 80]
    assert curve[-1]["loss"] < 0.85 * curve[0]["loss"]
    assert curve[-1]["reg"] < curve[0]["reg"] and curve[-1]["cls"] < curve[0]["cls"]
    assert all(not p.requires_grad or p.grad is not None for p in head.parameters())
    assert target.lm_head.weight.grad is None  # the shared LM head stays frozen
    def timeless(curve):
        return [{k: v for k, v in p.items() if k != "seconds"} for p in curve]

    assert timeless(run()[1]) == timeless(curve)


def test_the_token_loss_is_cross_entropy_to_the_targets_distribution():
    """With the head's prediction equal to the next feature, the regression part is 0 and
    the token part is the entropy of the target's own p."""
    target = build_llama(seed=0)
    tokens = windows_of(sampled_stream(target, 64), 8)
    features = compute_features(target, tokens, log=lambda _: None)
    head = EagleHead(head_config(target.config), target)
    f = features[:2].float()

    class Oracle(torch.nn.Module):  # predicts f_{t+1} exactly
        shared = head.shared
        logits = head.logits

        def forward(self, tokens, features, positions):
            return f[:, 1:]

    _, parts = head_loss(Oracle(), tokens[:2], features[:2], None, cls_weight=0.1)
    p = torch.softmax(target.lm_head(f[:, 1:]), -1)
    entropy = -(p * p.log()).sum(-1).mean()
    assert parts["reg"] == 0.0
    assert abs(parts["cls"] - entropy.item()) < 1e-4
    assert parts["top1"] == 1.0
