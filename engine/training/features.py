"""What training a head on the shipped target needs first, shared by the EAGLE head's and the
Medusa heads' training: the target frozen, the pair's corpora as token streams, windows of the
training stream and the target's final hidden states over them (computed once, optionally
cached), and the thread count set for the run."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from engine.training.corpus import CorpusMissing, load_domains, load_file
from engine.training.train_pair import encode_stream


def windows_of(stream: torch.Tensor, seq_len: int, count: int = 0) -> torch.Tensor:
    """The stream cut into windows ``[N, seq_len]``; with ``count``, that many of them evenly
    spaced over the stream (so every domain keeps its share, and every part of each book)."""
    n = len(stream) // seq_len
    windows = stream[: n * seq_len].view(n, seq_len)
    if 0 < count < n:
        windows = windows[torch.linspace(0, n - 1, count).round().long()]
    return windows


@torch.inference_mode()
def compute_features(target, windows: torch.Tensor, batch: int = 16, log=print) -> torch.Tensor:
    """The target's features ``[N, seq_len, H]`` (float16) for ``windows [N, seq_len]``,
    each window run on its own from position 0."""
    n, seq_len = windows.shape
    features = torch.empty(n, seq_len, target.config.hidden_size, dtype=torch.float16)
    t0 = time.perf_counter()
    for i in range(0, n, batch):
        features[i : i + batch] = target.model(input_ids=windows[i : i + batch]).last_hidden_state
        if (i // batch) % 25 == 0:
            log(f"features: {min(i + batch, n)}/{n} windows, {time.perf_counter() - t0:.0f} s")
    return features


@dataclass
class Training:
    """The frozen target, its tokenizer, the training stream, the held-out streams by domain,
    the training windows ``[N, seq_len]`` and the target's features over them."""

    target: torch.nn.Module
    tokenizer: object
    stream: torch.Tensor
    heldout: dict[str, torch.Tensor]
    tokens: torch.Tensor
    features: torch.Tensor
    features_s: float
    cached: bool


def load_training(args: argparse.Namespace) -> Training:
    """From ``args``: ``target``, ``corpus_file`` or ``domains``, ``seq_len``, ``windows`` and
    ``features_cache`` (a file that keeps the features for the next run with these windows)."""
    target = AutoModelForCausalLM.from_pretrained(args.target, dtype=torch.float32).eval()
    for p in target.parameters():
        p.requires_grad_(False)
    tokenizer = AutoTokenizer.from_pretrained(args.target)
    try:
        corpora = load_file(args.corpus_file) if args.corpus_file else load_domains(
            tuple(args.domains))
    except CorpusMissing as e:
        sys.exit(f"error: {e}")
    stream = torch.cat([encode_stream(tokenizer, c.train) for c in corpora])
    heldout = {c.domain: encode_stream(tokenizer, c.heldout) for c in corpora}
    tokens = windows_of(stream, args.seq_len, args.windows)
    t0 = time.perf_counter()
    cache: Path | None = args.features_cache
    cached = bool(cache and cache.exists() and torch.equal(torch.load(cache)[0], tokens))
    features = torch.load(cache)[1] if cached else compute_features(target, tokens)
    if cache and not cached:
        torch.save((tokens, features), cache)
    features_s = time.perf_counter() - t0
    print(f"{len(stream):,} training tokens, {len(tokens):,} windows of {args.seq_len}; "
          f"features {'loaded' if cached else 'computed'} in {features_s:.0f} s", flush=True)
    return Training(target, tokenizer, stream, heldout, tokens, features, features_s, cached)


def with_threads(args: argparse.Namespace, run: Callable, argv: list[str] | None):
    """``run(args, argv)`` with torch set to ``args.threads`` threads, restored after."""
    threads = torch.get_num_threads()
    torch.set_num_threads(args.threads)
    try:
        return run(args, argv if argv is not None else sys.argv[1:])
    finally:
        torch.set_num_threads(threads)
