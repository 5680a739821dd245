"""Train the shipped draft/target pair: a byte-level BPE tokenizer, a Llama target, and a
shallow Llama draft distilled from the target, all on the same public-domain text.

    python -m engine.training.train_pair --out models   # the shipped pair (37 min on 2 cores)
    python -m engine.training.train_pair --out models --measure-only   # counted alpha, c, speedup
    python -m engine.training.train_pair --help

Both models are saved in Hugging Face format (config.json, model.safetensors, tokenizer files),
so they load with AutoModelForCausalLM / AutoTokenizer exactly like hub models.

Why the shapes: on a CPU, one decode step of a tiny model costs mostly per-layer framework
overhead, not arithmetic, so the step cost grows with depth. A 1-layer draft against a
many-layer target is what makes c (draft step / target step) small enough for speculation to
pay. Distillation (KL to the target's distribution) rather than plain next-token training is
what makes the draft's q close to the target's p, and alpha = E[sum_x min(p, q)] depends on
exactly that closeness.

Everything random draws from explicit seeded generators, so a run is reproducible on the same
machine and torch build (thread count can change float summation order, hence the last bits).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from tqdm import tqdm
from transformers import (
    AutoModelForCausalLM,
    LlamaConfig,
    LlamaForCausalLM,
    PreTrainedTokenizerFast,
)

from engine.decoder.sampling import warp
from engine.training.corpus import (
    DOMAINS,
    Corpus,
    CorpusMissing,
    load_domains,
    load_file,
    prompt_of,
)

EOS = "<|endoftext|>"
TEMPERATURES = (0.0, 0.7, 1.0)


@dataclass(frozen=True)
class Shape:
    layers: int
    hidden: int
    intermediate: int
    heads: int


# ---------------------------------------------------------------------------------------------
# tokenizer


def train_tokenizer(corpora: list[Corpus], vocab_size: int) -> PreTrainedTokenizerFast:
    """Byte-level BPE: every string round-trips, no unknown token, no normalisation."""
    tok = Tokenizer(models.BPE())
    # add_prefix_space=False: decode(encode(s)) == s exactly, with no leading space invented.
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        special_tokens=[EOS],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator((d for c in corpora for d in c.train), trainer=trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=EOS,
        eos_token=EOS,
        pad_token=EOS,
        unk_token=None,
        clean_up_tokenization_spaces=False,
        model_max_length=4096,
    )


def encode_stream(tokenizer: PreTrainedTokenizerFast, docs: list[str]) -> torch.Tensor:
    """Documents as one token stream, each followed by EOS (the document boundary)."""
    eos = tokenizer.eos_token_id
    ids: list[int] = []
    for enc in tokenizer(docs, add_special_tokens=False)["input_ids"]:
        ids.extend(enc)
        ids.append(eos)
    return torch.tensor(ids, dtype=torch.long)


def batches(stream: torch.Tensor, batch: int, seq_len: int, gen: torch.Generator) -> torch.Tensor:
    """Random windows of seq_len + 1 tokens (inputs and shifted labels)."""
    starts = torch.randint(0, len(stream) - seq_len - 1, (batch,), generator=gen)
    return torch.stack([stream[s : s + seq_len + 1] for s in starts.tolist()])


# ---------------------------------------------------------------------------------------------
# models


def make_model(shape: Shape, tokenizer: PreTrainedTokenizerFast, seq_len: int, seed: int):
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=shape.hidden,
        intermediate_size=shape.intermediate,
        num_hidden_layers=shape.layers,
        num_attention_heads=shape.heads,
        num_key_value_heads=shape.heads,
        max_position_embeddings=max(1024, seq_len),
        tie_word_embeddings=True,  # halves the size on disk for a small model
        bos_token_id=tokenizer.eos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.eos_token_id,
    )
    torch.manual_seed(seed)  # weight init uses the global generator; seed it explicitly
    model = LlamaForCausalLM(config)
    return model


def n_params(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def lr_at(step: int, steps: int, peak: float) -> float:
    """Linear warmup over 5% of the steps, then cosine decay to 10% of the peak."""
    warm = max(1, steps // 20)
    if step < warm:
        return peak * (step + 1) / warm
    t = (step - warm) / max(1, steps - warm)
    return peak * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * t)))


def optimizer(model: torch.nn.Module, lr: float) -> torch.optim.Optimizer:
    decay = [p for p in model.parameters() if p.dim() >= 2]
    rest = [p for p in model.parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": 0.1}, {"params": rest, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.95))


def autocast(args: argparse.Namespace) -> torch.autocast:
    """bf16 autocast: about 1.7x faster training on CPUs with AVX512-BF16; weights stay fp32."""
    return torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.bf16)


def fit(model, steps: int, lr: float, desc: str, next_batch, step_loss, args) -> list[float]:
    """The loop both models share: AdamW with the lr schedule, clipping, a progress bar.

    ``step_loss(x)`` gives the loss to minimise, the figure to record and the figures to show.
    """
    opt = optimizer(model, lr)
    losses: list[float] = []
    model.train()
    bar = tqdm(range(steps), desc=desc, disable=args.quiet)
    for step in bar:
        for group in opt.param_groups:
            group["lr"] = lr_at(step, steps, lr)
        loss, recorded, shown = step_loss(next_batch())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(recorded)
        bar.set_postfix(**shown(statistics.fmean(losses[-20:])))
    return losses


def train_target(model, stream, args, gen: torch.Generator) -> list[float]:
    def step_loss(x):
        with autocast(args):
            logits = model(input_ids=x[:, :-1]).logits
        loss = F.cross_entropy(logits.float().flatten(0, 1), x[:, 1:].flatten())
        return loss, loss.item(), lambda mean: {"loss": f"{mean:.3f}"}

    return fit(model, args.target_steps, args.target_lr, "target",
               lambda: batches(stream, args.batch_size, args.seq_len, gen), step_loss, args)


def train_draft(draft, target, stream, args, gen: torch.Generator) -> list[float]:
    """Distil: loss = w KL(p_target || q_draft) + (1 - w) CE(next token).

    Forward KL pulls q to cover everything p proposes; that is what acceptance rewards, since
    a token the draft never proposes can never be accepted.
    """
    w = args.kd_weight
    target.eval()

    def step_loss(x):
        with torch.inference_mode(), autocast(args):
            p_log = F.log_softmax(target(input_ids=x[:, :-1]).logits.float(), -1).flatten(0, 1)
        with autocast(args):
            q_logits = draft(input_ids=x[:, :-1]).logits.float().flatten(0, 1)
        q_log = F.log_softmax(q_logits, -1)
        kl = F.kl_div(q_log, p_log.clone(), log_target=True, reduction="batchmean")
        ce = F.cross_entropy(q_logits, x[:, 1:].flatten())
        return w * kl + (1 - w) * ce, ce.item(), lambda mean: {"ce": f"{mean:.3f}",
                                                              "kl": f"{kl.item():.3f}"}

    return fit(draft, args.draft_steps, args.draft_lr, "draft",
               lambda: batches(stream, args.batch_size, args.seq_len, gen), step_loss, args)


# ---------------------------------------------------------------------------------------------
# evaluation


@torch.inference_mode()
def evaluate(target, draft, stream: torch.Tensor, seq_len: int, max_windows: int) -> dict:
    """Held-out cross-entropy of both models, and expected alpha = mean sum_x min(p, q)."""
    target.eval()
    draft.eval()
    n = min(max_windows, max(1, (len(stream) - 1) // seq_len))
    ce = {"target": 0.0, "draft": 0.0}
    alpha = dict.fromkeys(TEMPERATURES, 0.0)
    for i in range(n):
        x = stream[i * seq_len : (i + 1) * seq_len + 1][None]
        tl = target(input_ids=x[:, :-1]).logits[0].float()
        dl = draft(input_ids=x[:, :-1]).logits[0].float()
        ce["target"] += F.cross_entropy(tl, x[0, 1:]).item() / n
        ce["draft"] += F.cross_entropy(dl, x[0, 1:]).item() / n
        for t in TEMPERATURES:
            alpha[t] += torch.minimum(warp(tl, t), warp(dl, t)).sum(-1).mean().item() / n
    return {
        "ce_target": round(ce["target"], 4),
        "ce_draft": round(ce["draft"], 4),
        "expected_alpha": {f"T={t}": round(a, 4) for t, a in alpha.items()},
        "tokens": n * seq_len,
    }


@torch.inference_mode()
def decode_step_ms(model, steps: int = 200, context: int = 64, dtype=torch.float32) -> float:
    """Median wall time of a one-token decode step with a KV cache, as the engine runs it."""
    model = model.to(dtype).eval()
    ids = torch.randint(
        0, model.config.vocab_size, (1, context), generator=torch.Generator().manual_seed(0)
    )
    out = model(input_ids=ids, use_cache=True)
    cache, tok = out.cache, out.logits[:, -1:].argmax(-1)
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        out = model(input_ids=tok, cache=cache, use_cache=True)
        times.append(time.perf_counter() - t0)
        cache, tok = out.cache, out.logits[:, -1:].argmax(-1)
    return 1000 * statistics.median(times[steps // 10 :])


def measure_c(out_dir: Path, dtype=torch.float32, steps: int = 200) -> dict:
    """c = median draft step / median target step, both loaded from disk like hub models."""
    target = AutoModelForCausalLM.from_pretrained(out_dir / "target", dtype=dtype)
    draft = AutoModelForCausalLM.from_pretrained(out_dir / "draft", dtype=dtype)
    # Interleave the two measurements so load from other processes hits both alike.
    t_ms, d_ms = [], []
    for _ in range(3):
        t_ms.append(decode_step_ms(target, steps, dtype=dtype))
        d_ms.append(decode_step_ms(draft, steps, dtype=dtype))
    t, d = statistics.median(t_ms), statistics.median(d_ms)
    return {
        "dtype": str(dtype).removeprefix("torch."),
        "target_step_ms": round(t, 3),
        "draft_step_ms": round(d, 3),
        "c": round(d / t, 3),
        "threads": torch.get_num_threads(),
    }


@torch.inference_mode()
def sample_text(model, tokenizer, prompt: str, n: int, temperature: float, seed: int) -> str:
    gen = torch.Generator().manual_seed(seed)
    ids = tokenizer(prompt, return_tensors="pt").input_ids
    out = model(input_ids=ids, use_cache=True)
    cache, new = out.cache, []
    logits = out.logits[0, -1]
    for _ in range(n):
        tok = torch.multinomial(warp(logits, temperature), 1, generator=gen)
        if tok.item() == tokenizer.eos_token_id:
            break
        new.append(tok.item())
        out = model(input_ids=tok[None], cache=cache, use_cache=True)
        cache, logits = out.cache, out.logits[0, -1]
    return prompt + tokenizer.decode(new)


def measure_pair(
    out_dir: Path,
    temperatures=TEMPERATURES,
    ks=range(1, 9),
    n_prompts: int = 8,
    max_new_tokens: int = 64,
) -> dict:
    """Counted alpha, c, v and measured speedup with the engine itself, on held-out prompts:
    the benchmark (engine.measure.bench) with our engine only and one repeat, pooled as it
    pools (counted alpha = accepted / trials over every cycle, speedup = decode tokens/s
    against target-only tokens/s of the same prompts in the same session).
    """
    from engine.decoder.loading import load_pair
    from engine.measure.bench import Bench, BenchConfig
    from engine.measure.bench_results import results

    pair = load_pair(str(out_dir / "target"), str(out_dir / "draft"), device="cpu")
    prompts = json.loads((out_dir / "heldout_prompts.json").read_text())

    def pooled(texts: list[str], temperature: float, ks) -> dict[int, dict]:
        config = BenchConfig(ks=list(ks), temperatures=[temperature],
                             max_new_tokens=max_new_tokens, prompts=texts, repeats=1,
                             transformers=False)
        bench = Bench(pair, config, log=lambda _: None)
        bench.run()
        per_k = results(bench)["temperatures"][str(temperature)]["k"]
        return {k: {"alpha_counted": round(r["alpha"], 3),
                    "alpha_expected": round(r["alpha_expected"], 3),
                    "c": round(r["c"], 3), "v": round(r["v"], 3),
                    "speedup": round(r["measured_speedup"], 3), "trials": r["trials"]}
                for k, r in per_k.items()}

    result: dict = {
        "threads": torch.get_num_threads(),
        "prompts_per_domain": n_prompts,
        "max_new_tokens": max_new_tokens,
        "alpha_k4": {},
        "k_sweep": {},
    }
    for t in temperatures:
        for domain, texts in prompts.items():
            r = pooled(texts[:n_prompts], t, [4])[4]
            result["alpha_k4"][f"{domain} T={t}"] = r
            print(f"k=4 T={t} {domain}: {r}", flush=True)
    every = [text for texts in prompts.values() for text in texts[:n_prompts]]
    for t in (1.0, 0.0):
        sweep = pooled(every, t, ks)
        for k, r in sweep.items():
            print(f"sweep T={t} k={k}: {r}", flush=True)
        best = max(sweep, key=lambda k: sweep[k]["speedup"])
        result["k_sweep"][f"T={t}"] = {"best_k": best, "runs": sweep}
    return result


# ---------------------------------------------------------------------------------------------
# CLI


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        prog="python -m engine.training.train_pair",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    ap.add_argument("--out", type=Path, default=Path("models"), help="writes OUT/target, OUT/draft")
    ap.add_argument(
        "--corpus-file",
        type=Path,
        help="train on this text file instead of the "
        "Debian corpora (documents separated by blank lines)",
    )
    ap.add_argument("--domains", nargs="+", default=list(DOMAINS), choices=DOMAINS)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch intra-op threads; with other processes on the cores, 1 is far faster than 2",
    )
    ap.add_argument("--vocab-size", type=int, default=4096)
    ap.add_argument("--seq-len", type=int, default=256)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument(
        "--target-shape",
        type=int,
        nargs=4,
        default=[8, 256, 768, 4],
        metavar=("LAYERS", "HIDDEN", "FFN", "HEADS"),
    )
    ap.add_argument(
        "--draft-shape",
        type=int,
        nargs=4,
        default=[1, 128, 384, 2],
        metavar=("LAYERS", "HIDDEN", "FFN", "HEADS"),
    )
    ap.add_argument("--target-steps", type=int, default=800)
    ap.add_argument("--draft-steps", type=int, default=500)
    ap.add_argument("--target-lr", type=float, default=2e-3)
    ap.add_argument("--draft-lr", type=float, default=3e-3)
    ap.add_argument(
        "--kd-weight",
        type=float,
        default=0.8,
        help="weight of KL(p||q) in the draft loss; the rest is next-token cross-entropy",
    )
    ap.add_argument("--eval-windows", type=int, default=40, help="held-out windows per domain")
    ap.add_argument("--save-dtype", choices=["float16", "float32"], default="float16")
    ap.add_argument("--prompts", type=int, default=20, help="held-out prompts saved per domain")
    ap.add_argument("--samples", type=int, default=60, help="tokens per text sample (0: none)")
    ap.add_argument(
        "--measure-steps",
        type=int,
        default=200,
        help="decode steps timed for c (0: skip the measurement)",
    )
    ap.add_argument(
        "--bf16",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="train under bf16 autocast (evaluation and saving are unaffected)",
    )
    ap.add_argument(
        "--measure-only",
        action="store_true",
        help="train nothing: measure the "
        "pair in OUT with the engine (counted alpha, c, v, speedup) and write "
        "OUT/measurements.json",
    )
    ap.add_argument("--quiet", action="store_true", help="no progress bars")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    threads = torch.get_num_threads()
    torch.set_num_threads(args.threads)
    try:
        if args.measure_only:
            result = measure_pair(args.out)
            (args.out / "measurements.json").write_text(json.dumps(result, indent=1) + "\n")
            return result
        return run(args)
    finally:
        torch.set_num_threads(threads)  # a caller (the test suite) keeps its own setting


def run(args: argparse.Namespace) -> dict:
    t_start = time.perf_counter()
    try:
        corpora = (
            load_file(args.corpus_file) if args.corpus_file else load_domains(tuple(args.domains))
        )
    except CorpusMissing as e:
        sys.exit(f"error: {e}")

    tokenizer = train_tokenizer(corpora, args.vocab_size)
    train_stream = torch.cat([encode_stream(tokenizer, c.train) for c in corpora])
    heldout = {c.domain: encode_stream(tokenizer, c.heldout) for c in corpora}
    print(
        f"corpus: {len(train_stream):,} training tokens; held out: "
        + ", ".join(f"{d} {len(s):,}" for d, s in heldout.items()),
        flush=True,
    )

    target_shape, draft_shape = Shape(*args.target_shape), Shape(*args.draft_shape)
    target = make_model(target_shape, tokenizer, args.seq_len, args.seed)
    draft = make_model(draft_shape, tokenizer, args.seq_len, args.seed + 1)
    print(
        f"target {n_params(target):,} params {target_shape}; "
        f"draft {n_params(draft):,} params {draft_shape}",
        flush=True,
    )

    t0 = time.perf_counter()
    target_losses = train_target(
        target, train_stream, args, torch.Generator().manual_seed(args.seed)
    )
    target_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    draft_losses = train_draft(
        draft, target, train_stream, args, torch.Generator().manual_seed(args.seed + 1)
    )
    draft_s = time.perf_counter() - t0

    evals = {
        d: evaluate(target, draft, s, args.seq_len, args.eval_windows) for d, s in heldout.items()
    }

    dtype = getattr(torch, args.save_dtype)
    for name, model in (("target", target), ("draft", draft)):
        path = args.out / name
        model.to(dtype).save_pretrained(path)
        tokenizer.save_pretrained(path)
        model.float()

    tail = max(1, min(50, len(target_losses) // 10))
    summary = {
        "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "target": {
            "params": n_params(target),
            "shape": asdict(target_shape),
            "train_seconds": round(target_s, 1),
            "final_train_loss": round(statistics.fmean(target_losses[-tail:]), 4),
        },
        "draft": {
            "params": n_params(draft),
            "shape": asdict(draft_shape),
            "train_seconds": round(draft_s, 1),
            "final_train_ce": round(statistics.fmean(draft_losses[-tail:]), 4),
        },
        "training_tokens": len(train_stream),
        "heldout": evals,
    }
    if args.measure_steps:
        summary["timing"] = measure_c(args.out, torch.float32, args.measure_steps)
    if args.samples:
        summary["samples"] = {
            c.domain: {
                name: sample_text(
                    m, tokenizer, prompt_of(c.heldout[0], 40), args.samples, 0.7, args.seed
                )
                for name, m in (("target", target), ("draft", draft))
            }
            for c in corpora
        }
    # Prompts from held-out documents, for measuring counted alpha with the engine later.
    prompts = {c.domain: [prompt_of(d) for d in c.heldout[: args.prompts]] for c in corpora}
    (args.out / "heldout_prompts.json").write_text(json.dumps(prompts, indent=1) + "\n")
    summary["total_seconds"] = round(time.perf_counter() - t_start, 1)
    (args.out / "training_summary.json").write_text(json.dumps(summary, indent=2) + "\n")

    print("\n== summary ==")
    print(
        f"target: final train loss {summary['target']['final_train_loss']}, "
        f"{summary['target']['train_seconds']} s"
    )
    print(
        f"draft:  final train CE {summary['draft']['final_train_ce']}, "
        f"{summary['draft']['train_seconds']} s"
    )
    for d, e in evals.items():
        print(
            f"held-out {d}: CE target {e['ce_target']} draft {e['ce_draft']}; "
            f"expected alpha {e['expected_alpha']}"
        )
    if "timing" in summary:
        print(f"timing: {summary['timing']}")
    print(f"total {summary['total_seconds']} s; wrote {args.out}/target, {args.out}/draft")
    return summary


if __name__ == "__main__":
    main()
