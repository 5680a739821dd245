"""Train an EAGLE-1 head (engine/decoder/eagle.py) for the shipped target, on the pair's
training split, and measure it against the shipped draft model on the held-out prompts.

    python -m engine.training.train_eagle --out models/eagle    # the shipped head
    python -m engine.training.train_eagle --help

The objectives are EAGLE-1's (Li et al. 2024): at position t the head reads ``x_{t+1}`` and
the target's feature ``f_t`` plus noise U(-0.1, 0.1), and predicts ``f_{t+1}``; the loss is

    smooth_L1(f^_{t+1}, f_{t+1}) + w CE(p_{t+2}, q_{t+2})

where ``p = softmax(lm_head(f_{t+1}))`` is the target's distribution and ``q =
softmax(lm_head(f^_{t+1}))`` the head's through the same frozen LM head (w = 0.1 as in
EAGLE-1). The noise teaches the head to draft from features that are not quite the target's,
which is what it reads from the second draft on (its own).

The target's features do not change during training, so they are computed once over the whole
training stream (in windows of ``--seq-len`` tokens, the context the target was trained on)
and kept in float16; each step then costs only the head and the LM head.
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

from engine.decoder.eagle import EagleHead, head_config
from engine.training.corpus import DOMAINS
from engine.training.features import compute_features, load_training, windows_of, with_threads
from engine.training.train_pair import lr_at, n_params, optimizer

NOISE = 0.1  # features get U(-NOISE, NOISE) added in training (EAGLE-1)


def head_loss(head: EagleHead, tokens: torch.Tensor, features: torch.Tensor,
              noise: torch.Tensor | None, cls_weight: float) -> tuple[torch.Tensor, dict]:
    """EAGLE-1's loss on windows ``tokens [B, L]`` with the target's ``features [B, L, H]``.

    Entry t (t = 0 .. L - 2) reads ``tokens[:, t + 1]`` and ``features[:, t]`` (+ ``noise``
    ``[B, L - 1, H]``) at position t; it is scored against ``features[:, t + 1]`` and the
    target's distribution read from it. Returns the loss and its parts (floats), with the
    share of entries whose argmax matches the target's.
    """
    f = features.float()
    f_in = f[:, :-1] + (noise if noise is not None else 0.0)
    f_next = f[:, 1:]
    positions = torch.arange(f_in.shape[1]).expand(f_in.shape[0], -1)
    predicted = head(tokens[:, 1:], f_in, positions)
    reg = F.smooth_l1_loss(predicted, f_next)
    with torch.no_grad():
        p_logits = head.logits(f_next)
        p = torch.softmax(p_logits.float(), -1)
    q_logits = head.logits(predicted).float()
    cls = -(p * F.log_softmax(q_logits, -1)).sum(-1).mean()
    top1 = (q_logits.argmax(-1) == p_logits.argmax(-1)).float().mean()
    loss = reg + cls_weight * cls
    return loss, {"loss": loss.item(), "reg": reg.item(), "cls": cls.item(), "top1": top1.item()}


def train(head: EagleHead, tokens: torch.Tensor, features: torch.Tensor, args,
          log=print) -> list[dict]:
    """AdamW with warmup and cosine decay over ``args.steps`` steps of ``args.batch_size``
    random windows; the mean of each loss part over every ``args.log_every`` steps."""
    gen = torch.Generator().manual_seed(args.seed)
    for shared in (head.shared.embed_tokens.weight, head.shared.lm_head.weight):
        shared.requires_grad_(False)  # the target's: frozen, and no gradient to compute
    params = [p for p in head.parameters() if p.requires_grad]
    opt = optimizer(head, args.lr)
    curve: list[dict] = []
    window: list[dict] = []
    head.train()
    t0 = time.perf_counter()
    for step in range(args.steps):
        for group in opt.param_groups:
            group["lr"] = lr_at(step, args.steps, args.lr)
        rows = torch.randint(0, len(tokens), (args.batch_size,), generator=gen)
        f = features[rows]
        noise = (torch.rand(f.shape[0], f.shape[1] - 1, f.shape[2], generator=gen) * 2 - 1) * NOISE
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.bf16):
            loss, parts = head_loss(head, tokens[rows], f, noise, args.cls_weight)
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
    head.eval()
    return curve


@torch.inference_mode()
def heldout_loss(head: EagleHead, tokens: torch.Tensor, features: torch.Tensor,
                 cls_weight: float, batch: int = 16) -> dict:
    """The loss parts (no noise) averaged over every window given."""
    parts = []
    for i in range(0, len(tokens), batch):
        _, p = head_loss(head, tokens[i : i + batch], features[i : i + batch], None, cls_weight)
        parts.append((len(tokens[i : i + batch]), p))
    n = sum(w for w, _ in parts)
    return {k: round(sum(w * p[k] for w, p in parts) / n, 4) for k in parts[0][1]}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        prog="python -m engine.training.train_eagle",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    ap.add_argument("--out", type=Path, default=Path("models/eagle"))
    ap.add_argument("--target", type=Path, default=Path("models/target"))
    ap.add_argument("--draft", type=Path, default=Path("models/draft"),
                    help="the draft model the head is measured against")
    ap.add_argument("--prompts", type=Path, default=Path("models/heldout_prompts.json"))
    ap.add_argument("--corpus-file", type=Path,
                    help="train on this text file instead of the Debian corpora")
    ap.add_argument("--domains", nargs="+", default=list(DOMAINS), choices=DOMAINS)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seq-len", type=int, default=256)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--cls-weight", type=float, default=0.1,
                    help="weight of the token loss beside the feature regression")
    ap.add_argument("--log-every", type=int, default=25)
    ap.add_argument("--windows", type=int, default=2000,
                    help="train on this many windows spread evenly over the stream (0: all)")
    ap.add_argument("--eval-windows", type=int, default=40, help="held-out windows per domain")
    ap.add_argument("--features-cache", type=Path,
                    help="keep the target's features in this file and reuse them")
    ap.add_argument("--bf16", action=argparse.BooleanOptionalAction, default=True,
                    help="train under bf16 autocast (features and evaluation stay float32)")
    ap.add_argument("--measure-prompts", type=int, default=20,
                    help="held-out prompts per domain for alpha (0: skip)")
    ap.add_argument("--measure-tokens", type=int, default=64)
    ap.add_argument("--k", type=int, default=4, help="drafts per cycle for counted alpha")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> dict:
    return with_threads(parse_args(argv), run, argv)


def run(args: argparse.Namespace, argv: list[str]) -> dict:
    t_start = time.perf_counter()
    data = load_training(args)
    target, stream, heldout, tokens, features = (data.target, data.stream, data.heldout,
                                                  data.tokens, data.features)
    features_s, cached = data.features_s, data.cached

    torch.manual_seed(args.seed)  # weight init draws from the global generator
    head = EagleHead(head_config(target.config), target)
    print(f"head: {n_params(head):,} parameters of its own", flush=True)
    t0 = time.perf_counter()
    curve = train(head, tokens, features, args, log=lambda s: print(s, flush=True))
    train_s = time.perf_counter() - t0

    heldout_losses = {}
    for domain, s in heldout.items():
        h_tokens = windows_of(s, args.seq_len, args.eval_windows)
        h_features = compute_features(target, h_tokens, log=lambda _: None)
        heldout_losses[domain] = heldout_loss(head, h_tokens, h_features, args.cls_weight)
    head.save(args.out)
    summary: dict = {
        "command": "python -m engine.training.train_eagle " + shlex.join(argv),
        "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "seed": args.seed,
        "threads": torch.get_num_threads(),
        "head_params": n_params(head),
        "training_tokens": len(stream),
        "windows": len(tokens),
        "window_tokens": tokens.numel(),
        "features_seconds": round(features_s, 1),
        "features_cached": cached,
        "train_seconds": round(train_s, 1),
        "loss_curve": curve,
        "heldout_loss": heldout_losses,
    }
    path = args.out / "training_summary.json"
    path.write_text(json.dumps(summary, indent=1) + "\n")
    if args.measure_prompts:
        from engine.measure.eagle_compare import measure

        summary["heldout_alpha"] = measure(
            args.target, args.out, args.draft, args.prompts, n_prompts=args.measure_prompts,
            max_new_tokens=args.measure_tokens, k=args.k, seed=args.seed,
            log=lambda s: print(s, flush=True))
    summary["total_seconds"] = round(time.perf_counter() - t_start, 1)
    path.write_text(json.dumps(summary, indent=1) + "\n")
    print(f"held-out loss: {heldout_losses}")
    print(f"total {summary['total_seconds']} s; wrote {args.out}")
    return summary


if __name__ == "__main__":
    main()
