"""Train Medusa heads (engine/decoder/medusa.py) for the shipped target, on the pair's training
split, in vLLM's ``medusa`` layout.

    python -m engine.training.train_medusa --out models/medusa    # the shipped heads
    python -m engine.training.train_medusa --help

Medusa-1 with self-distillation (Cai et al. 2024, sections 2.3.1 and 2.3.2): the target is
frozen; head i reads the target's final hidden state ``h_t`` and learns the target's own
distribution of ``x_{t+2+i}``, ``p = softmax(lm_head(h_{t+1+i}))``, by cross-entropy
``-sum_x p(x) log q_i(x)``, weighted ``0.8^i`` (farther heads are harder and matter less: a
draft is used only up to its first rejection). Distilling the target's distribution rather
than the corpus's next token is what acceptance rewards. The blocks start at zero, so every
head starts by guessing what the LM head guesses for the next token.

The heads share the target's LM head (``original_lm_head``): the shipped target is 256 wide
over 4,096 tokens, so one LM head a head would be 1.05M parameters each, sixteen times a
block's 65.8K, to learn from the same 1.5M training tokens; sharing trains only the blocks.
The price is the same in compute (each head still multiplies by the LM head) and 1/k of it in
weights read.

The target's hidden states are computed once over the training windows (as for the EAGLE
head, ``engine.training.train_eagle``); a step then costs the heads and the LM head only.
"""

from __future__ import annotations

import argparse
import json
import shlex
import statistics
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from engine.decoder.medusa import MedusaHeads
from engine.training.corpus import DOMAINS
from engine.training.features import compute_features, load_training, windows_of, with_threads
from engine.training.train_pair import lr_at, n_params, optimizer

DECAY = 0.8  # head i's loss weight is DECAY ** i (Medusa-1)


def heads_loss(heads: MedusaHeads, features: torch.Tensor) -> tuple[torch.Tensor, dict]:
    """The weighted self-distillation loss on the target's ``features [B, L, H]``, with each
    head's cross-entropy and the share of positions whose argmax is the target's."""
    f = features.float()
    length = f.shape[1]
    total = torch.zeros(())
    parts: dict[str, float] = {}
    for i in range(heads.num_heads):
        h = f[:, : length - 1 - i]  # h_t for every t whose x_{t+2+i} the window holds
        with torch.no_grad():
            p_logits = heads.lm_head(f[:, 1 + i :]).float()  # the target's own x_{t+2+i}
            p = torch.softmax(p_logits, -1)
        q_logits = heads.logits(h, i).float()
        ce = -(p * F.log_softmax(q_logits, -1)).sum(-1).mean()
        total = total + DECAY**i * ce
        parts[f"ce{i}"] = ce.item()
        parts[f"top1_{i}"] = (q_logits.argmax(-1) == p_logits.argmax(-1)).float().mean().item()
    parts = {"loss": total.item(), **parts}
    return total, parts


def train(heads: MedusaHeads, features: torch.Tensor, args, log=print) -> list[dict]:
    """AdamW with warmup and cosine decay over ``args.steps`` steps of ``args.batch_size``
    random windows; each loss part averaged over every ``args.log_every`` steps."""
    gen = torch.Generator().manual_seed(args.seed)
    params = [p for p in heads.parameters() if p.requires_grad]
    opt = optimizer(heads, args.lr)
    curve: list[dict] = []
    window: list[dict] = []
    heads.train()
    t0 = time.perf_counter()
    for step in range(args.steps):
        for group in opt.param_groups:
            group["lr"] = lr_at(step, args.steps, args.lr)
        rows = torch.randint(0, len(features), (args.batch_size,), generator=gen)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.bf16):
            loss, parts = heads_loss(heads, features[rows])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        window.append(parts)
        if (step + 1) % args.log_every == 0 or step + 1 == args.steps:
            point = {"step": step + 1, "seconds": round(time.perf_counter() - t0, 1)}
            point |= {k: round(statistics.fmean(w[k] for w in window), 4) for k in parts}
            curve.append(point)
            window = []
            log(f"step {point['step']}/{args.steps}: {point}")
    heads.eval()
    return curve


@torch.inference_mode()
def heldout_loss(heads: MedusaHeads, features: torch.Tensor, batch: int = 16) -> dict:
    """The loss parts averaged over every window given."""
    parts = []
    for i in range(0, len(features), batch):
        _, p = heads_loss(heads, features[i : i + batch])
        parts.append((len(features[i : i + batch]), p))
    n = sum(w for w, _ in parts)
    return {k: round(sum(w * p[k] for w, p in parts) / n, 4) for k in parts[0][1]}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        prog="python -m engine.training.train_medusa",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    ap.add_argument("--out", type=Path, default=Path("models/medusa"))
    ap.add_argument("--target", type=Path, default=Path("models/target"))
    ap.add_argument("--corpus-file", type=Path,
                    help="train on this text file instead of the Debian corpora")
    ap.add_argument("--domains", nargs="+", default=list(DOMAINS), choices=DOMAINS)
    ap.add_argument("--heads", type=int, default=4, help="heads: the largest k they serve")
    ap.add_argument("--layers", type=int, default=1, help="residual blocks a head")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seq-len", type=int, default=256)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--log-every", type=int, default=25)
    ap.add_argument("--windows", type=int, default=2000,
                    help="train on this many windows spread evenly over the stream (0: all)")
    ap.add_argument("--eval-windows", type=int, default=40, help="held-out windows per domain")
    ap.add_argument("--features-cache", type=Path,
                    help="keep the target's features in this file and reuse them")
    ap.add_argument("--bf16", action=argparse.BooleanOptionalAction, default=True,
                    help="train under bf16 autocast (features and evaluation stay float32)")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> dict:
    return with_threads(parse_args(argv), run, argv)


def run(args: argparse.Namespace, argv: list[str]) -> dict:
    t_start = time.perf_counter()
    data = load_training(args)
    target, stream, heldout, tokens, features = (data.target, data.stream, data.heldout,
                                                  data.tokens, data.features)

    torch.manual_seed(args.seed)
    heads = MedusaHeads.for_target(target, args.heads, args.layers)
    trained = sum(p.numel() for p in heads.parameters() if p.requires_grad)
    print(f"heads: {trained:,} parameters trained, {n_params(heads):,} with the shared LM head",
          flush=True)
    t0 = time.perf_counter()
    curve = train(heads, features, args, log=lambda s: print(s, flush=True))
    train_s = time.perf_counter() - t0

    heldout_losses = {
        domain: heldout_loss(heads, compute_features(
            target, windows_of(s, args.seq_len, args.eval_windows), log=lambda _: None))
        for domain, s in heldout.items()}
    heads.save(args.out)
    summary = {
        "command": "python -m engine.training.train_medusa " + shlex.join(argv),
        "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "seed": args.seed,
        "threads": torch.get_num_threads(),
        "trained_params": trained,
        "params_with_lm_head": n_params(heads),
        "training_tokens": len(stream),
        "windows": len(tokens),
        "features_seconds": round(data.features_s, 1),
        "features_cached": data.cached,
        "train_seconds": round(train_s, 1),
        "loss_curve": curve,
        "heldout_loss": heldout_losses,
        "total_seconds": round(time.perf_counter() - t_start, 1),
    }
    (args.out / "training_summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    print(f"held-out loss: {heldout_losses}")
    print(f"total {summary['total_seconds']} s; wrote {args.out}")
    return summary


if __name__ == "__main__":
    main()
