"""``specscope roofline``: time batched forward passes of a real pair and see where
speculation stops paying on this machine.

For each batch B it times the target's pass over T = 1..k+1 new tokens per sequence and the
draft's single step, all after a KV cache of ``context`` tokens, with warm-up passes and
repeats (medians; the spread is the interquartile range). From the medians: c(B), v(B), the
speedup S(B) they predict at the given alpha (docs/design.md, "At a batch size"), and the
bandwidth and FLOP/s of the roofline that best fits every pass ("this machine").
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

from engine import defaults
from engine.analytic.fit import TimedPass, fit_hardware
from engine.analytic.presets import ModelShape
from engine.analytic.theory import expected_tokens
from engine.decoder.forward import forward_batch, new_cache, rollback
from engine.measure.curves import Fit, MeasuredCurve, MeasuredPoint


@dataclass(frozen=True)
class SweepConfig:
    batches: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64)
    k: int = defaults.K
    alpha: float = 0.7
    context: int = 128
    repeats: int = 15
    warmup: int = 3
    seed: int = 0


@dataclass(frozen=True)
class Timing:
    """One kind of pass at one batch: median and interquartile range, in ms."""

    model: str  # "target" or "draft"
    batch: int
    tokens: int
    median_ms: float
    q1_ms: float
    q3_ms: float


def shape_of(model) -> ModelShape:
    """The roofline's view of a loaded transformers model."""
    c = model.config
    return ModelShape(
        c.name_or_path or c.model_type, sum(p.numel() for p in model.parameters()),
        c.num_hidden_layers, c.num_attention_heads, c.num_key_value_heads,
        getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads,
        hidden=c.hidden_size,
        input_table=0 if c.tie_word_embeddings else model.get_input_embeddings().weight.numel(),
        vocab=c.vocab_size)


@torch.inference_mode()
def time_pass(model, batch: int, tokens: int, config: SweepConfig, vocab: int,
              gen: torch.Generator) -> list[float]:
    """Seconds of ``repeats`` passes of ``batch`` x ``tokens`` new tokens, each after the same
    ``context`` cached tokens (the pass is rolled back after each timing)."""
    device = model.device
    cache = new_cache(model, capacity=config.context + tokens, batch=batch, rollback=tokens)
    prefix = torch.randint(0, vocab, (batch, config.context), generator=gen).to(device)
    if config.context:
        forward_batch(model, cache, prefix, 1)
    ids = torch.randint(0, vocab, (batch, tokens), generator=gen).to(device)
    times = []
    for i in range(config.warmup + config.repeats):
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        start = time.perf_counter()
        forward_batch(model, cache, ids, 1)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        if i >= config.warmup:
            times.append(time.perf_counter() - start)
        rollback(cache, tokens)
    return times


def _timing(model: str, batch: int, tokens: int, seconds: list[float]) -> Timing:
    q1, median, q3 = statistics.quantiles(seconds, n=4) if len(seconds) > 1 else seconds * 3
    return Timing(model, batch, tokens, median * 1e3, q1 * 1e3, q3 * 1e3)


def median_ms(timings: list[Timing], model: str, batch: int, tokens: int) -> float:
    return next(t.median_ms for t in timings
                if (t.model, t.batch, t.tokens) == (model, batch, tokens))


def measured_costs(timings: list[Timing], k: int, batch: int) -> tuple[float, float]:
    """Measured c(B) and v(B), from the medians."""
    step = median_ms(timings, "target", batch, 1)
    return (median_ms(timings, "draft", batch, 1) / step,
            median_ms(timings, "target", batch, k + 1) / step)


@dataclass(frozen=True)
class Sweep:
    config: SweepConfig
    timings: list[Timing]
    curve: MeasuredCurve


def run_sweep(pair, config: SweepConfig, label: str, hardware: str, pair_preset: str | None,
              log: Callable[[str], None] = lambda _: None) -> Sweep:
    """Time every pass, then derive the curve and the fit (see the module docstring)."""
    gen = torch.Generator().manual_seed(config.seed)
    vocab = pair.shared_vocab_size
    timings: list[Timing] = []
    passes: list[TimedPass] = []
    shapes = {"target": shape_of(pair.target), "draft": shape_of(pair.draft)}
    for batch in config.batches:
        plan = [("target", t) for t in range(1, config.k + 2)] + [("draft", 1)]
        for which, tokens in plan:
            model = pair.target if which == "target" else pair.draft
            seconds = time_pass(model, batch, tokens, config, vocab, gen)
            timings.append(_timing(which, batch, tokens, seconds))
            passes.append(TimedPass(shapes[which], batch, tokens, config.context,
                                    statistics.median(seconds)))
        log(f"batch {batch}: target step {timings[-config.k - 2].median_ms:.2f} ms")
    dtype = "fp32" if pair.dtype == torch.float32 else "bf16"
    bandwidth, flops = fit_hardware(passes, dtype)
    tokens = expected_tokens(config.alpha, config.k)
    points = []
    for batch in config.batches:
        c, v = measured_costs(timings, config.k, batch)
        s = tokens / (config.k * c + v)
        base = batch * 1000 / median_ms(timings, "target", batch, 1)
        points.append(MeasuredPoint(batch, s, base * s, base))
    curve = MeasuredCurve(
        label=label, hardware=hardware, target=pair.target_name, draft=pair.draft_name or "",
        k=config.k, alpha=config.alpha, points=tuple(points), pair=pair_preset,
        method="predicted", context=config.context, fit=Fit(bandwidth, flops))
    return Sweep(config, timings, curve)


def to_json(sweep: Sweep) -> dict:
    """The measured-curve file, with the timing table as ``passes``."""
    data = sweep.curve.to_json()
    data["passes"] = [vars(t) for t in sweep.timings]
    return data


def table(sweep: Sweep) -> str:
    """The sweep as a Markdown table, and the fit."""
    k = sweep.config.k
    head = (f"| B | t_p(B,1) ms | t_p(B,{k + 1}) ms | t_q(B,1) ms | c(B) | v(B) | "
            f"S(B) at α = {sweep.config.alpha:g} | tok/s base → spec |")
    lines = [head, "|" + " ---: |" * 8]
    for point in sweep.curve.points:
        b = point.batch
        c, v = measured_costs(sweep.timings, k, b)
        spread = [t for t in sweep.timings if t.batch == b]
        cells = []
        for model, tokens in (("target", 1), ("target", k + 1), ("draft", 1)):
            t = next(x for x in spread if (x.model, x.tokens) == (model, tokens))
            cells.append(f"{t.median_ms:.3f} ({t.q1_ms:.3f}–{t.q3_ms:.3f})")
        lines.append(f"| {b} | {' | '.join(cells)} | {c:.3f} | {v:.3f} | {point.speedup:.2f}× | "
                     f"{point.tok_s_base:.0f} → {point.tok_s_spec:.0f} |")
    fit = sweep.curve.fit
    lines.append("")
    lines.append(f"Fitted roofline of this machine: {fit.bandwidth / 1e9:.2f} GB/s, "
                 f"{fit.flops / 1e9:.1f} GFLOP/s (context {sweep.config.context} tokens; "
                 "medians, interquartile range in brackets).")
    return "\n".join(lines)
