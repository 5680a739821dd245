"""Throughput against batch size through this project's own batched engine
(:mod:`engine.decoder.batched`), for several speculation policies: off (k = 0), fixed k, and
a batch-size schedule (``[[lo, hi, k], ...]``, vLLM's ``num_speculative_tokens_per_batch_size``).

Each batch decodes B held-out prompts (cycled to B) for a fixed number of new tokens per row
(end of sequence ignored), after one untimed warm-up batch per policy; every repeat visits
every (policy, B) once, so a burst of load on a shared machine spreads over all of them.
Throughput is all rows' tokens over the decode steps' time (the prefill and the first step,
whose call runs the prefill, left out), per second of wall time and per second of CPU time
of the decoding thread (with one torch thread the work runs there; the wall clock also counts
the time other processes held the core). Figures are medians with the interquartile range.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from engine.decoder.batched import BatchConfig, BatchStepEvent, speculate_batch
from engine.decoder.drafter_spec import DRAFT_MODEL, DrafterSpec
from engine.decoder.loading import ModelPair
from engine.measure import sweep_results
from engine.measure.sweep_results import Policy, parse_policies, read_schedule, spread


@dataclass
class Cell:
    """One (policy, batch): every repeat's tokens/s by the wall and the CPU clock, and the
    acceptance counts."""

    wall: list[float]
    cpu: list[float]
    accepted: int = 0
    trials: int = 0


def time_batch(pair: ModelPair, prompts: Sequence[str], batch: int, policy: Policy,
               new_tokens: int, temperature: float, seed: int,
               drafter: DrafterSpec = DRAFT_MODEL) -> tuple[float, float, int, int]:
    """Tokens/s of wall and of CPU time, accepted drafts and trials, for one batch, every
    row drafting with ``drafter``."""
    # Each repeat (seed) takes the next B prompts, so a small batch meets every domain over
    # the repeats as a large one does; every policy of a repeat decodes the same rows.
    rows = [prompts[(seed * batch + i) % len(prompts)] for i in range(batch)]
    config = BatchConfig(rows, k=policy.k_at,
                         temperature=temperature, max_new_tokens=new_tokens,
                         seeds=[seed * 1000 + i for i in range(batch)])
    events = speculate_batch(pair, config, drafter=drafter)
    next(events)  # the prefill and the first step
    wall, cpu, tokens = time.perf_counter(), time.thread_time(), 0
    done = None
    for event in events:
        if isinstance(event, BatchStepEvent):
            tokens += sum(event.n_emitted)
        else:
            done = event
    wall, cpu = time.perf_counter() - wall, time.thread_time() - cpu
    return tokens / wall, tokens / max(cpu, 1e-9), done.accepted, done.trials


def sweep(pair: ModelPair, prompts: Sequence[str], batches: Sequence[int],
          policies: Sequence[Policy], new_tokens: int, repeats: int, temperature: float,
          log: Callable[[str], None] = lambda message: None,
          drafter: DrafterSpec = DRAFT_MODEL) -> dict[tuple[str, int], Cell]:
    pair = dataclasses.replace(pair, stop_token_ids=frozenset())  # fixed tokens per row
    cells = {(p.name, b): Cell([], []) for p in policies for b in batches}
    for policy in policies:  # warm-up: caches, rope tables, the allocator
        time_batch(pair, prompts, max(batches), policy, min(new_tokens, 8), temperature, 0,
                   drafter)
    for repeat in range(repeats):
        for batch in batches:
            for policy in policies:
                wall, cpu, accepted, trials = time_batch(
                    pair, prompts, batch, policy, new_tokens, temperature, repeat + 1, drafter)
                cell = cells[policy.name, batch]
                cell.wall.append(wall)
                cell.cpu.append(cpu)
                cell.accepted += accepted
                cell.trials += trials
        log(f"repeat {repeat + 1} of {repeats} done")
    return cells


def curves(cells: dict[tuple[str, int], Cell], policies: Sequence[Policy],
           batches: Sequence[int], meta: dict, clock: str = "wall") -> list[dict]:
    """One measured-curve JSON (engine.measure.curves) per speculative policy, with its
    ``policy``: speedup = its tokens/s over off's at each batch, by ``clock`` ("wall" or
    "cpu"); each point also carries the interquartile ranges and both clocks' speedups."""
    out = []
    for policy in policies:
        if policy.off:
            continue
        points = []
        accepted = trials = 0
        for batch in batches:
            cell, off = cells[policy.name, batch], cells["off", batch]
            accepted, trials = accepted + cell.accepted, trials + cell.trials
            spec, base = spread(getattr(cell, clock)), spread(getattr(off, clock))
            points.append({
                "batch": batch, "speedup": spec[1] / base[1], "tok_s_spec": spec[1],
                "tok_s_base": base[1], "tok_s_spec_iqr": [spec[0], spec[2]],
                "tok_s_base_iqr": [base[0], base[2]],
            } | {f"speedup_{c}": spread(getattr(cell, c))[1] / spread(getattr(off, c))[1]
                 for c in ("wall", "cpu")})
        per = "CPU-second" if clock == "cpu" else "second"
        drafter = {"ngram": ", prompt lookup", "eagle": ", EAGLE head",
                   "medusa": ", Medusa heads"}.get(meta.get("drafter"), "")
        out.append(meta | {
            "label": f"specscope engine{drafter}, {policy.name} (tokens per {per})",
            "policy": policy.name,
            "clock": clock,
            "k": policy.k,
            "alpha": round(accepted / trials, 4) if trials else 0.0,
            "method": "end-to-end",
            "points": points,
        } | ({"schedule": [list(r) for r in policy.schedule]} if policy.schedule else {}))
    return out


def table(cells: dict[tuple[str, int], Cell], policies: Sequence[Policy],
          batches: Sequence[int], which: str = "wall") -> str:
    """Markdown: tokens/s (median, interquartile range) per batch and policy, and the best."""
    return sweep_results.table(batches, [p.name for p in policies],
                               lambda name, i: spread(getattr(cells[name, batches[i]], which)))


def sweep_prompts(args) -> list[str]:
    """The prompts a sweep of this engine runs (``specscope sweep``, ``specscope costs``):
    ``--prompts`` (a built-in set or a file), else 20 a domain of the target's own. ValueError
    for an unknown set or a missing or malformed file."""
    from engine.measure.prompt_sets import load_source, pair_prompts

    return ([p.text for p in load_source(args.prompts)] if args.prompts
            else pair_prompts(args.target, per_domain=20))


def load_drafting(args) -> tuple[int, ModelPair, DrafterSpec, str]:
    """``(threads, pair, drafter, what drafts)`` for ``--drafter``: torch's threads set, the
    pair loaded (with its draft model for ``model`` only), the drafter built (vLLM's default
    n-gram bounds for ``ngram``, the head in ``--eagle`` for ``eagle``) and its words."""
    from engine.decoder.drafter_spec import options_of, spec_for
    from engine.decoder.loading import load_pair, set_threads

    options = options_of(args)
    threads = set_threads(args.threads, args.device)
    pair = load_pair(args.target, args.draft if args.drafter == "model" else None,
                     device=args.device)
    drafter = spec_for(pair, **options)
    words = {"ngram": f"prompt lookup (n = {drafter.lookup.prompt_lookup_min}.."
                      f"{drafter.lookup.prompt_lookup_max})",
             "eagle": f"EAGLE head {args.eagle}",
             "medusa": f"Medusa heads {args.medusa}"}.get(drafter.kind, args.draft)
    return threads, pair, drafter, words


def run_sweep(args) -> int:
    """``specscope sweep --engine specscope``: print the tables, write one curve per
    speculative policy (``--out NAME.json`` becomes ``NAME-k2.json``, ``NAME-schedule.json``,
    ...)."""
    import os
    import sys

    import torch

    def log(message: str) -> None:
        print(f"specscope sweep: {message}", file=sys.stderr, flush=True)

    try:
        if args.new_tokens < 1 or args.repeats < 1 or args.temperature < 0:
            raise ValueError("--new-tokens and --repeats must be at least 1, --temperature "
                             "at least 0")
        schedule = read_schedule(args.schedule) if args.schedule else None
        policies = parse_policies(args.policies or "off,2,4", schedule)
    except (OSError, ValueError) as error:
        print(f"specscope: error: {error}", file=sys.stderr)
        return 2
    try:
        prompts = sweep_prompts(args)
    except ValueError as error:  # an unknown set, a missing or malformed file
        print(f"specscope: error: {error}", file=sys.stderr)
        return 2
    threads, pair, drafter, draft = load_drafting(args)
    log(f"{len(policies)} policies x {len(args.batch)} batch sizes x {args.repeats} repeats, "
        f"{args.new_tokens} new tokens per row, {threads} thread(s)")
    cells = sweep(pair, prompts, args.batch, policies, args.new_tokens, args.repeats,
                  args.temperature, log, drafter)
    for which, clock in (("wall", "wall time"), ("cpu", "CPU time of the decoding thread")):
        print(f"\ntokens/s per second of {clock}: median (interquartile range)\n")
        print(table(cells, policies, args.batch, which))
    where = (f"{os.cpu_count()}-core CPU" if pair.device.type == "cpu"
             else torch.cuda.get_device_name(pair.device))
    dtype = str(pair.dtype).removeprefix("torch.")
    hardware = args.hardware or (f"this machine ({where}, {dtype}, {threads} torch thread(s), "
                                 "specscope engine)")
    meta = {"hardware": hardware, "target": args.target, "draft": draft,
            "drafter": args.drafter, "prompts": args.prompts or "the pair's held-out prompts",
            "temperature": args.temperature, "new_tokens": args.new_tokens,
            "repeats": args.repeats, "threads": threads,
            "command": "specscope " + " ".join(sys.argv[1:])}
    if args.models:
        meta["pair"] = args.models
    if args.out:
        for curve in curves(cells, policies, args.batch, meta, args.clock):
            slug = curve["policy"].replace("k = ", "k").replace(" ", "-")
            path = args.out.with_name(f"{args.out.stem}-{slug}{args.out.suffix or '.json'}")
            path.write_text(json.dumps(curve, indent=1) + "\n", encoding="utf-8")
            log(f"wrote {path}")
    return 0
