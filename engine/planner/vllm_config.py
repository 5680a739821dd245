"""The vLLM deployment of a plan: engine arguments that vLLM 0.32 accepts as printed.

A plan is deployed by one ``LLM(...)`` call (or ``vllm serve``) whose engine-level arguments
say how many GPUs hold the target (``tensor_parallel_size``), how many sequences may run at
once (``max_num_seqs``, never more than fit: vLLM would queue the rest and every planned range
above them would never run), how much of each GPU's memory vLLM may take
(``gpu_memory_utilization``, the usable share the plan assumed) and the context the plan was
made for (``max_model_len``), and whose ``speculative_config`` carries the draft, the schedule
and the way the draft samples (``draft_sample_method``: alpha depends on it).

What vLLM refuses is never printed (docs/design.md, "vLLM facts"):

- ``method: "draft_model"``: the draft-model proposer (``v1/spec_decode/draft_model.py``)
  refuses, when its worker starts, a draft whose tensor-parallel size is not the target's.
  ``SpeculativeConfig`` itself accepts 1, so only the proposer's rule catches it here.
- ``data_parallel_size > 1``: vLLM drops ``num_speculative_tokens_per_batch_size`` and runs
  the static ``num_speculative_tokens`` (``config/vllm.py``), so a schedule is not deployable;
  the best fixed k is printed instead.
- self-speculation with a bounded draft KV cache (MagicDec): none of vLLM 0.32's speculative
  methods (``config/speculative.py``, ``SpeculativeMethod``) drafts with the target's weights
  over a cut-down cache; ``draft_model`` with the target as its own draft keeps a full KV
  cache for the draft, which is the opposite of the point. No config is printed for it.

An EAGLE head deploys as ``method: "eagle"`` or ``"eagle3"`` with the head's checkpoint as
``model`` (vLLM shares the target's embedding, and for EAGLE-1 its LM head); vLLM has no
placement rule for it, so a head on one GPU beside a sharded target is
``draft_tensor_parallel_size: 1``. Drafts are chains: vLLM 0.32 verifies chains only (it has
no tree attention backend).

A schedule is printed only where it beats the plan's best fixed k by more than
:data:`SCHEDULE_MARGIN`; else the fixed k, which keeps vLLM's full CUDA graphs on every model
runner. With a speculative config ``max_num_batched_tokens`` is set to at least 8,192 (vLLM
warns below it) and to what every row's verification takes at ``max_num_seqs``.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass

from engine.analytic.acceptance import DRAFT_SAMPLES
from engine.planner.schedule import Plan

# vLLM's draft_sample_method: engine.analytic.acceptance.DRAFT_SAMPLES ("greedy" is vLLM's
# default; "probabilistic" the rule this project's engine and probe measure).
DRAFT_SAMPLE_WORDS = {
    "probabilistic": "the draft samples from q, accepted with min(1, p/q)",
    "greedy": "the draft's argmax, q one-hot, accepted with p(x)",
}
DEFAULT_DRAFT_SAMPLE = "probabilistic"  # the rule this project's engine and probe measure
METHOD = "draft_model"
EAGLE_METHODS = ("eagle", "eagle3", "mtp")  # vLLM's EAGLE proposer runs all three
SELF_SPEC = "self-spec"  # a drafter vLLM 0.32 does not serve: no method name of its own
MEDUSA = "medusa"  # one fixed k, at most the heads trained; each head's argmax drafted
# The engine arguments that make vLLM hold the weights as the plan priced them (bf16: the
# checkpoints' own dtype; int4 needs a checkpoint quantized beforehand, AWQ or GPTQ).
WEIGHTS = {"fp8": {"quantization": "fp8"}, "fp32": {"dtype": "float32"}}
DO_NOT_SPECULATE = "do not speculate here"


class Refused(ValueError):
    """A deployment vLLM would refuse; the message says why and what to change."""


@dataclass(frozen=True)
class Deployment:
    """What the engine arguments need beyond the plan: the models vLLM loads, the GPUs of
    one replica (``gpus``, tensor parallel) and how many replicas (``data_parallel``), the
    usable share of memory and the context the plan assumed (None: not known to the costs),
    where the draft runs and how it samples."""

    target: str
    draft: str
    gpus: int = 1
    data_parallel: int = 1
    usable: float | None = None
    context: int | None = None
    draft_sharded: bool = True
    draft_sample: str = DEFAULT_DRAFT_SAMPLE
    dtype: str = "bf16"  # the weights the plan priced: fp8 is vLLM's online quantization
    method: str = METHOD  # "draft_model", "eagle", "eagle3", or SELF_SPEC (not servable)


def refusal(d: Deployment) -> str | None:
    """Why vLLM 0.32 would refuse the deployment, or None when it accepts it."""
    if d.draft_sample not in DRAFT_SAMPLES:
        return f"draft_sample_method must be one of {', '.join(DRAFT_SAMPLES)}"
    if d.method == SELF_SPEC:
        return ("vLLM 0.32 does not serve self-speculation with a bounded draft KV cache: none "
                "of its speculative methods (config/speculative.py) drafts with the target's "
                "weights over a StreamingLLM-style cache, and method \"draft_model\" with the "
                "target as its own draft keeps a full KV cache for the draft, so it reads as "
                "much as the target at every draft step. The figures are those of an engine "
                "that does (MagicDec's, built on gpt-fast); no vLLM config is printed.")
    if d.method not in (METHOD, *EAGLE_METHODS, MEDUSA):
        return f"unknown speculative method {d.method!r}"
    if d.method == METHOD and d.gpus > 1 and not d.draft_sharded:
        return (f"vLLM 0.32 does not run a draft model on one GPU beside a target on {d.gpus}: "
                "its draft-model proposer (v1/spec_decode/draft_model.py) requires the draft's "
                "tensor-parallel size to be the target's and refuses any other when the worker "
                "starts. No config is printed for this placement; choose the sharded draft "
                "to deploy (the figures for one GPU stay, as a what-if).")
    return None


def schedule_dropped(d: Deployment) -> bool:
    """vLLM drops a schedule under data parallelism (``config/vllm.py``)."""
    return d.data_parallel > 1


SCHEDULE_MARGIN = 1.02
"""A schedule must beat the best fixed k by more than this: the fitted terms move a cycle's
price by about as much (a 1B draft's c by 2 % with the launch term alone), and a schedule
costs what the plan cannot price (piecewise CUDA graphs on vLLM's V1 model runner)."""
MIN_BATCHED_TOKENS = 8192  # vLLM warns below this with any speculative config


def schedule_pays(p: Plan) -> bool:
    """Whether the plan's per-batch schedule beats its best fixed k by more than the margin
    (a plan of one range is a fixed k already)."""
    return len(p.ranges) > 1 and p.fixed_gain > SCHEDULE_MARGIN


def speculative_config(p: Plan, d: Deployment) -> dict | None:
    """vLLM's ``speculative_config`` for the plan, or None when it never speculates.

    ``num_speculative_tokens`` is the largest k in the plan (vLLM sizes its buffers by it and
    caps every range at it). A plan with one range needs no schedule: a static k says the
    same, without the dynamic path's other effects (vLLM turns CUDA graphs to piecewise for
    it). Under data parallelism the schedule would be dropped, so the best fixed k is the
    config. Raises :class:`Refused` for what vLLM refuses."""
    why = refusal(d)
    if why is not None:
        raise Refused(why)
    if not p.speculates:
        return None
    if schedule_dropped(d) or not schedule_pays(p) or d.method == MEDUSA:
        config: dict = {"method": d.method, "model": d.draft,
                        "num_speculative_tokens": p.fixed_k}
    else:
        config = {"method": d.method, "model": d.draft, "num_speculative_tokens": p.k_max_used}
        if len(p.ranges) > 1:
            config["num_speculative_tokens_per_batch_size"] = p.vllm_ranges()
    if d.method == "mtp":  # the target's own layers: vLLM loads them from the target
        del config["model"]
    if d.method in EAGLE_METHODS and d.gpus > 1 and not d.draft_sharded:
        config["draft_tensor_parallel_size"] = 1
    if d.method != MEDUSA:  # vLLM's Medusa drafts each head's argmax whatever this says
        config["draft_sample_method"] = d.draft_sample
    return config


def engine_args(p: Plan, d: Deployment, config: dict | None) -> dict:
    """The engine-level arguments of ``LLM(...)`` / ``vllm serve`` for the plan, in the
    order they are printed; ``speculative_config`` last (absent when None)."""
    largest = p.largest_batch or 1
    args: dict = {"model": d.target, "tensor_parallel_size": d.gpus}
    args |= WEIGHTS.get(d.dtype, {})
    if d.data_parallel > 1:
        args["data_parallel_size"] = d.data_parallel
    args["max_num_seqs"] = min(p.max_num_seqs, largest)
    if d.usable is not None:
        args["gpu_memory_utilization"] = round(d.usable, 4)
    if d.context is not None:
        # vLLM needs room for one token at least; the plan's context is the KV cache's length
        args["max_model_len"] = max(d.context, 1)
    if config is not None:
        rows = args["max_num_seqs"] * (config["num_speculative_tokens"] + 1)
        args["max_num_batched_tokens"] = max(MIN_BATCHED_TOKENS, rows)
        args["speculative_config"] = config
    return args


def json_text(value: object) -> str:
    """A value as JSON, which Python reads back the same (strings, numbers, lists, dicts of
    them; no true/false/null in what is printed here)."""
    return json.dumps(value)


def python_snippet(args: dict, alpha_note: str | None = None) -> str:
    """``LLM(...)`` with the engine arguments, one a line; the speculative config's
    ``draft_sample_method`` line says which alpha it assumes."""
    lines = ["from vllm import LLM", "", "llm = LLM("]
    for key, value in args.items():
        if key != "speculative_config":
            lines.append(f"    {key}={json_text(value)},")
    config = args.get("speculative_config")
    if config is not None:
        lines.append("    speculative_config={")
        for key, value in config.items():
            note = f"  # {alpha_note}" if key == "draft_sample_method" and alpha_note else ""
            lines.append(f"        {json_text(key)}: {json_text(value)},{note}")
        lines.append("    },")
    lines.append(")")
    return "\n".join(lines)


def serve_command(args: dict) -> str:
    """The same deployment as a ``vllm serve`` command line (POSIX shell quoting)."""
    parts = ["vllm", "serve", shlex.quote(args["model"])]
    for key, value in args.items():
        if key == "model":
            continue
        text = json_text(value) if isinstance(value, dict) else str(value)
        parts += [f"--{key.replace('_', '-')}", shlex.quote(text)]
    return " ".join(parts)
