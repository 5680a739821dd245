"""The EAGLE head against the shipped draft model, offline: counted and expected alpha per
domain on the held-out prompts, per-position acceptance, multiply-adds per token and the
measured time of one draft step.

    python -m engine.measure.eagle_compare --update models/eagle/training_summary.json

Alpha comes from a plain single-stream speculative sampler written here for measuring only
(each cycle: the drafter proposes k tokens, the target scores them in one pass, the standard
rule accepts: ``min(1, p/q)``, then a resample from ``max(p - q, 0)`` or a bonus token).
The target runs over the whole sequence every cycle without a cache: slow, but it leaves
nothing to get wrong, and timing is measured separately. Both drafters see the same prompts
and seeds. ``alpha_counted = accepted / trials`` (trials: the drafts the rule examined,
accepted ones plus the rejected one), ``alpha_expected`` = the mean of ``sum_x min(p, q)``
over the same drafts; 95% intervals are percentile bootstraps over the prompts.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F
from transformers import AutoModelForCausalLM, PreTrainedModel

from engine.decoder.common import Clock
from engine.decoder.eagle import Eagle, EagleHead, target_features
from engine.decoder.forward import forward, new_cache, rollback
from engine.decoder.sampling import warp
from engine.measure.probe import bootstrap_ratio

# ---- drafters -------------------------------------------------------------------------------


class HeadDrafter:
    """The engine's EAGLE drafter (:class:`engine.decoder.eagle.Eagle`), one row: fed only
    the target's hidden states at the positions each cycle verified, as the step feeds it."""

    def __init__(self, head: EagleHead, capacity: int = 1024):
        self.head, self.capacity = head, capacity
        self.clock = Clock(torch.device("cpu"))
        self.drafter: Eagle | None = None
        self.drafts = None

    def start(self, prompt: torch.Tensor, hidden: torch.Tensor, first: int) -> None:
        """``prompt [n]`` and the target's ``hidden [n, H]`` over it; ``first``: the token the
        target chose after it (the newest, which the target has not run yet)."""
        self.prompt, self.hidden = [*prompt.tolist(), first], hidden[None]
        self.drafter = None  # built at the first proposal, which knows the temperature

    def propose(self, k: int, temperature: float, gen: torch.Generator
                ) -> tuple[torch.Tensor, torch.Tensor]:
        if self.drafter is None:
            self.drafter = Eagle(self.head, self.head.config.vocab_size, self.capacity, 1,
                                 torch.device("cpu"), dict(temperature=temperature),
                                 greedy=temperature == 0.0)
            self.drafter.prefill([self.prompt], target_hidden=self.hidden)
        uniforms = None if temperature == 0.0 else torch.rand((1, k), generator=gen)
        self.drafts = self.drafter.propose(k, uniforms, self.clock)
        tokens = self.drafts.tokens[0]
        if self.drafts.q is None:  # greedy: the draft's distribution is its argmax
            return tokens, F.one_hot(tokens, self.head.config.vocab_size).float()
        return tokens, self.drafts.q[0]

    def commit(self, accepted: int, hidden: torch.Tensor, next_token: int) -> None:
        self.drafter.commit(len(self.drafts.tokens[0]), [accepted], [next_token], self.drafts,
                            target_hidden=hidden[None])


class ModelDrafter:
    """The draft model, run over the whole sequence for each draft (no cache: measuring
    alpha only)."""

    def __init__(self, draft: PreTrainedModel):
        self.draft = draft
        self.ids = torch.empty(0, dtype=torch.long)

    def start(self, prompt: torch.Tensor, hidden: torch.Tensor, first: int) -> None:
        self.ids = torch.cat([prompt, torch.tensor([first])])

    @torch.inference_mode()
    def propose(self, k: int, temperature: float, gen: torch.Generator
                ) -> tuple[torch.Tensor, torch.Tensor]:
        seq, drafts, qs = self.ids, [], []
        for _ in range(k):
            logits = self.draft(input_ids=seq[None]).logits[0, -1].float()
            q = warp(logits, temperature)
            token = (logits.argmax() if temperature == 0.0
                     else torch.multinomial(q, 1, generator=gen)[0])
            drafts.append(token)
            qs.append(q)
            seq = torch.cat([seq, token[None]])
        self.drafts = torch.stack(drafts)
        return self.drafts, torch.stack(qs)

    def commit(self, accepted: int, hidden: torch.Tensor, next_token: int) -> None:
        self.ids = torch.cat([self.ids, self.drafts[:accepted], torch.tensor([next_token])])


# ---- the sampler -----------------------------------------------------------------------------


@dataclass
class PromptRun:
    """What one prompt's run counted."""

    accepted: int = 0
    trials: int = 0
    overlap: float = 0.0  # sum over trials of sum_x min(p, q)
    cycles: int = 0
    # cycles that accepted at least i drafts, i = 1..k
    accepted_at: list[int] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)


@torch.inference_mode()
def run_prompt(target: PreTrainedModel, drafter, prompt_ids: torch.Tensor, k: int,
               temperature: float, max_new_tokens: int, seed: int, eos: int | None) -> PromptRun:
    gen = torch.Generator().manual_seed(seed)
    run = PromptRun(accepted_at=[0] * k)
    features = target_features(target, prompt_ids[None])[0]
    p = warp(target.lm_head(features[-1]).float(), temperature)
    first = torch.multinomial(p, 1, generator=gen)
    ids = torch.cat([prompt_ids, first])
    run.tokens.append(int(first))
    drafter.start(prompt_ids, features, int(first))
    while len(run.tokens) < max_new_tokens and not (eos is not None and run.tokens[-1] == eos):
        drafts, q = drafter.propose(k, temperature, gen)
        hidden = target_features(target, torch.cat([ids, drafts])[None])[0][len(ids) - 1 :]
        p = warp(target.lm_head(hidden).float(), temperature)  # [k + 1, V]
        a, new = _verify(drafts, q, p, gen)
        drafter.commit(a, hidden, new[a])
        run.cycles += 1
        run.accepted += a
        run.trials += a + (a < k)
        run.overlap += float(torch.minimum(p[: a + (a < k)], q[: a + (a < k)]).sum())
        for i in range(a):
            run.accepted_at[i] += 1
        new = new[: max_new_tokens - len(run.tokens)]
        if eos is not None and eos in new:
            new = new[: new.index(eos) + 1]
        run.tokens.extend(new)
        ids = torch.cat([ids, torch.tensor(new)])
    return run


def _verify(drafts: torch.Tensor, q: torch.Tensor, p: torch.Tensor, gen: torch.Generator
            ) -> tuple[int, list[int]]:
    """The standard rule: accepted count and the tokens to append (accepted drafts plus a
    resampled or bonus token). ``drafts [k]``, ``q [k, V]``, ``p [k + 1, V]``."""
    k = len(drafts)
    for i in range(k):
        x = int(drafts[i])
        ratio = float(p[i, x]) / max(float(q[i, x]), 1e-30)
        if torch.rand((), generator=gen).item() >= min(1.0, ratio):
            rest = (p[i] - q[i]).clamp(min=0)
            rest = rest / rest.sum() if rest.sum() > 0 else p[i]
            fix = int(torch.multinomial(rest, 1, generator=gen))
            return i, [int(t) for t in drafts[:i]] + [fix]
    bonus = int(torch.multinomial(p[k], 1, generator=gen))
    return k, [int(t) for t in drafts] + [bonus]


def pooled(runs: list[PromptRun], k: int, seed: int, bootstrap: int = 1000) -> dict:
    """Counted and expected alpha over the prompts with 95% intervals, and per-position
    acceptance (the share of cycles that accepted at least i drafts)."""
    accepted, trials = sum(r.accepted for r in runs), sum(r.trials for r in runs)
    cycles = sum(r.cycles for r in runs)
    rng = random.Random(seed)
    return {
        "alpha_counted": round(accepted / trials, 4) if trials else None,
        "alpha_counted_95": _rounded(bootstrap_ratio(runs, lambda r: r.accepted,
                                                     lambda r: r.trials, bootstrap, rng)),
        "alpha_expected": round(sum(r.overlap for r in runs) / trials, 4) if trials else None,
        "alpha_expected_95": _rounded(bootstrap_ratio(runs, lambda r: r.overlap,
                                                      lambda r: r.trials, bootstrap, rng)),
        "per_position_acceptance": [round(sum(r.accepted_at[i] for r in runs) / cycles, 4)
                                    for i in range(k)] if cycles else [],
        "tokens_per_cycle": round(sum(len(r.tokens) - 1 for r in runs) / cycles, 3)
        if cycles else None,
        "accepted": accepted,
        "trials": trials,
        "cycles": cycles,
        "prompts": len(runs),
    }


def _rounded(interval: list[float] | None) -> list[float] | None:
    return [round(x, 4) for x in interval] if interval else None


# ---- cost ----------------------------------------------------------------------------------


def multiply_adds(model: torch.nn.Module, lm_head: torch.nn.Linear | None = None) -> int:
    """Multiply-adds per token of the model's linear layers, plus ``lm_head`` when the model
    uses one it does not hold (the head uses the target's). The attention over the context
    is left out: it grows with the context and is small here (2 x context x hidden)."""
    total = sum(m.weight.numel() for m in model.modules() if isinstance(m, torch.nn.Linear))
    return total + (lm_head.weight.numel() if lm_head is not None else 0)


@torch.inference_mode()
def step_ms(step, steps: int = 200) -> tuple[float, float]:
    """Median wall time and median CPU time of this thread for ``step()``, in ms (the first
    tenth dropped as warm-up). CPU time leaves out the time other processes hold the core,
    which on a shared machine can be most of the wall time."""
    wall, cpu = [], []
    for _ in range(steps):
        t0, c0 = time.perf_counter(), time.thread_time()
        step()
        wall.append(time.perf_counter() - t0)
        cpu.append(time.thread_time() - c0)
    skip = steps // 10
    return 1000 * statistics.median(wall[skip:]), 1000 * statistics.median(cpu[skip:])


@torch.inference_mode()
def draft_step_costs(target, head: EagleHead, draft, context: int = 64, steps: int = 200,
                     repeats: int = 3) -> dict:
    """One draft step after ``context`` tokens, median ms of wall and of CPU time: the head
    (one entry through its layer with its cache, the LM head, argmax), the draft model and
    the target (one token through the engine's fast path, rolled back so every step sees
    the same context); c = draft step / target step."""
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(0, target.config.vocab_size, (1, context + 1), generator=gen)
    caches = {}
    for name, model in (("target", target), ("draft", draft)):
        cache = new_cache(model, capacity=context + 8, rollback=1)
        forward(model, cache, ids[:, :context], keep=1)
        caches[name] = (model, cache)

    def model_step(name):
        model, cache = caches[name]

        def step():
            forward(model, cache, ids[:, context:], keep=1).argmax(-1)
            rollback(cache, 1)
        return step

    features = target_features(target, ids[:, :context])
    head_cache = head.new_cache(1, context + 8)
    head(ids[:, 1:context], features[:, : context - 1], torch.arange(context - 1)[None],
         head_cache)
    token, feature = ids[:, context:], features[:, -1:]
    position = torch.tensor([[context - 1]])

    def head_step():
        out = head(token, feature, position, head_cache)
        head.logits(out[:, 0]).argmax(-1)
        head_cache.rollback([context - 1])

    steps_of = {"target": model_step("target"), "draft": model_step("draft"), "head": head_step}
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in steps_of}
    for _ in range(repeats):  # interleaved, so load from other processes hits all alike
        for name, step in steps_of.items():
            times[name].append(step_ms(step, steps))
    result: dict = {"context": context, "threads": torch.get_num_threads(),
                    "load_average": round(os.getloadavg()[0], 2)}
    for clock, i in (("wall", 0), ("cpu", 1)):
        ms = {name: statistics.median(t[i] for t in v) for name, v in times.items()}
        result[clock] = {
            "target_step_ms": round(ms["target"], 3),
            "draft_step_ms": round(ms["draft"], 3),
            "head_step_ms": round(ms["head"], 3),
            "c_draft": round(ms["draft"] / ms["target"], 3),
            "c_head": round(ms["head"] / ms["target"], 3),
        }
    return result


# ---- the comparison --------------------------------------------------------------------------


def measure(target_dir, head_dir, draft_dir, prompts_path, n_prompts: int = 20,
            max_new_tokens: int = 64, k: int = 4, seed: int = 1234,
            temperatures=(0.0, 1.0), log=print) -> dict:
    """Alpha per domain and temperature for the head and the draft model, and their costs."""
    from transformers import AutoTokenizer

    target = AutoModelForCausalLM.from_pretrained(target_dir, dtype=torch.float32).eval()
    draft = AutoModelForCausalLM.from_pretrained(draft_dir, dtype=torch.float32).eval()
    head = EagleHead.load(head_dir, target)
    tokenizer = AutoTokenizer.from_pretrained(target_dir)
    prompts = json.loads(Path(prompts_path).read_text())
    drafters = {"eagle": lambda: HeadDrafter(head), "draft": lambda: ModelDrafter(draft)}
    result: dict = {"k": k, "max_new_tokens": max_new_tokens, "prompts_per_domain": n_prompts,
                    "seed": seed, "alpha": {}}
    for t in temperatures:
        for domain, texts in prompts.items():
            for name, make in drafters.items():
                runs = []
                for i, text in enumerate(texts[:n_prompts]):
                    ids = torch.tensor(tokenizer(text, add_special_tokens=False).input_ids)
                    runs.append(run_prompt(target, make(), ids, k, t, max_new_tokens,
                                           seed + i, tokenizer.eos_token_id))
                r = pooled(runs, k, seed)
                result["alpha"][f"{name} {domain} T={t}"] = r
                log(f"{name} {domain} T={t}: alpha {r['alpha_counted']} "
                    f"{r['alpha_counted_95']}, expected {r['alpha_expected']}, "
                    f"per position {r['per_position_acceptance']}")
    result["multiply_adds_per_token"] = {
        "target": multiply_adds(target),
        "draft": multiply_adds(draft),
        "head": multiply_adds(head, target.get_output_embeddings()),
    }
    macs = result["multiply_adds_per_token"]
    result["c_predicted"] = {"draft": round(macs["draft"] / macs["target"], 3),
                             "head": round(macs["head"] / macs["target"], 3)}
    result["c_measured"] = draft_step_costs(target, head, draft)
    log(f"multiply-adds {macs}, c predicted {result['c_predicted']}, "
        f"measured {result['c_measured']}")
    return result


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(prog="python -m engine.measure.eagle_compare",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--target", type=Path, default=Path("models/target"))
    ap.add_argument("--head", type=Path, default=Path("models/eagle"))
    ap.add_argument("--draft", type=Path, default=Path("models/draft"))
    ap.add_argument("--prompts", type=Path, default=Path("models/heldout_prompts.json"))
    ap.add_argument("--n-prompts", type=int, default=20)
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--update", type=Path,
                    help="write the result into this training summary as 'heldout_alpha'")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    result = measure(args.target, args.head, args.draft, args.prompts, args.n_prompts,
                     args.max_new_tokens, args.k, args.seed)
    if args.update:
        summary = json.loads(args.update.read_text())
        summary["heldout_alpha"] = result
        args.update.write_text(json.dumps(summary, indent=1) + "\n")
    else:
        print(json.dumps(result, indent=1))
    return result


if __name__ == "__main__":
    main()
