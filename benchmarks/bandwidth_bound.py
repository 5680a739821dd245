"""How close a measured target step comes to the memory-bandwidth limit.

A decode step of one sequence reads every weight once plus the KV cache so far, so it cannot
take less than ``(N b + L kv) / BW`` (docs/design.md, the roofline model at B = 1, T = 1): ``N``
parameters of ``b`` bytes, ``L`` tokens of context, ``kv = 2 x layers x kv_heads x head_dim x b``
bytes per token. Reads a ``specscope bench --out`` JSON file and prints the bound, the median
measured target step (greedy) and their ratio, the fraction of the bandwidth achieved.

    python benchmarks/bandwidth_bound.py RESULT.json [--bandwidth-tb-s 4.8]

4.8 TB/s is the H200's HBM3e bandwidth (NVIDIA H200 Tensor Core GPU datasheet).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from tokenizers import Tokenizer

H200_TB_S = 4.8
BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}


def kv_bytes_per_token(config: dict, dtype_bytes: int) -> int:
    heads = config["num_attention_heads"]
    head_dim = config.get("head_dim") or config["hidden_size"] // heads
    kv_heads = config.get("num_key_value_heads") or heads
    return 2 * config["num_hidden_layers"] * kv_heads * head_dim * dtype_bytes


def bound(result: dict, config: dict, prompt_tokens: list[int], bandwidth_tb_s: float) -> dict:
    """The step-time bound and the measured median target step of a bench result;
    ``prompt_tokens``: the length of each of its prompts."""
    setting = result["setting"]
    b = BYTES[setting["dtype"]]
    params = setting["target_model"]["params"]
    # context at a middle decode step: a mean prompt plus half of the new tokens
    half = setting["config"]["max_new_tokens"] / 2
    context = round(sum(prompt_tokens) / len(prompt_tokens) + half)
    weights = params * b
    cache = context * kv_bytes_per_token(config, b)
    bound_ms = (weights + cache) / (bandwidth_tb_s * 1e12) * 1e3
    measured_ms = result["results"]["temperatures"]["0.0"]["step_ms"]
    return {"params": params, "dtype": setting["dtype"], "weight_bytes": weights,
            "kv_bytes": cache, "context_tokens": context, "bandwidth_tb_s": bandwidth_tb_s,
            "bound_ms": bound_ms, "measured_ms": measured_ms,
            "fraction_of_bandwidth": bound_ms / measured_ms,
            "device": setting["device_name"]}


def describe(b: dict) -> str:
    return (f"target step on {b['device']}: {b['params'] / 1e9:.2f} B parameters in "
            f"{b['dtype']} = {b['weight_bytes'] / 1e9:.2f} GB of weights + "
            f"{b['kv_bytes'] / 1e6:.1f} MB of KV cache ({b['context_tokens']} tokens); at "
            f"{b['bandwidth_tb_s']} TB/s at least {b['bound_ms']:.2f} ms; measured "
            f"{b['measured_ms']:.2f} ms (median, greedy): "
            f"{100 * b['fraction_of_bandwidth']:.0f}% of the bandwidth bound")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("result", type=Path, help="a `specscope bench --out` JSON file")
    parser.add_argument("--bandwidth-tb-s", type=float, default=H200_TB_S)
    args = parser.parse_args(argv)
    result = json.loads(args.result.read_text(encoding="utf-8"))
    target = Path(result["setting"]["target"])
    config = json.loads((target / "config.json").read_text(encoding="utf-8"))
    tokenizer = Tokenizer.from_file(str(target / "tokenizer.json"))
    lengths = [len(tokenizer.encode(p).ids) for p in result["setting"]["config"]["prompts"]]
    b = bound(result, config, lengths, args.bandwidth_tb_s)
    print(describe(b))
    print(json.dumps(b))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
