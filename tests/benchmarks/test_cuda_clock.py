"""benchmarks/cuda_clock.py, the GPU check's proof that a cycle waits for the device once:
on the CPU it runs the same generation, and its checks catch times that do not add up."""

from __future__ import annotations

from dataclasses import replace

from support.scripts import load_script

cuda_clock = load_script("cuda_clock")


def test_on_the_cpu_nothing_waits_and_the_times_hold(capsys):
    assert cuda_clock.main(["--device", "cpu", "--k", "2", "--tokens", "12"]) == 0
    out = capsys.readouterr().out
    assert "waits per cycle (after the first): torch.cuda.synchronize 0.00, event 0.00" in out
    assert out.rstrip().endswith("ok")


def test_the_checks_fail_on_waits_and_on_times_that_do_not_add_up():
    result = cuda_clock.measure("models/target", "models/draft", "cpu", k=2, tokens=12)
    assert cuda_clock.check(result) == []
    first = result["cycles"][0]
    broken = replace(first, draft_ms=first.cycle_ms + 1.0)
    failures = cuda_clock.check({**result, "cycles": [broken, *result["cycles"][1:]],
                                 "per_cycle_waits": [(1, 0)]})
    assert len(failures) == 2
    assert "waited 1 time(s) by torch.cuda.synchronize" in failures[0]
    assert "do not add up" in failures[1]
    on_cuda = cuda_clock.check({**result, "device": "cuda:0", "per_cycle_waits": [(0, 1)] * 3})
    assert on_cuda == []
