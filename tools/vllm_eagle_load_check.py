"""Does vLLM take our EAGLE head as an EAGLE draft for the shipped target? Offline, no
server: builds vLLM's SpeculativeConfig with ``method="eagle"`` and the head's folder, then
vLLM's own ``EagleLlamaForCausalLM`` from that config, loads the checkpoint through its
``load_weights`` and compares every loaded tensor with the file. Run it with vLLM's Python:

    .venv-vllm/bin/python tools/vllm_eagle_load_check.py --target models/target --head models/eagle

It prints what vLLM made of the config and the weights, and exits non-zero on a mismatch.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import torch
from safetensors.torch import load_file


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--target", default="models/target")
    ap.add_argument("--head", default="models/eagle")
    ap.add_argument("--k", type=int, default=4)
    args = ap.parse_args()
    os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")

    from vllm.config import (
        CacheConfig,
        DeviceConfig,
        LoadConfig,
        ModelConfig,
        ParallelConfig,
        SpeculativeConfig,
        VllmConfig,
        set_current_vllm_config,
    )
    from vllm.distributed import init_distributed_environment, initialize_model_parallel

    model_config = ModelConfig(model=args.target, dtype="float32", max_model_len=1024,
                               enforce_eager=True)
    parallel = ParallelConfig()
    spec = SpeculativeConfig(method="eagle", model=args.head,
                             num_speculative_tokens=args.k, target_model_config=model_config,
                             target_parallel_config=parallel)
    draft = spec.draft_model_config
    report: dict = {
        "method": spec.method,
        "draft_architectures": draft.architectures,
        "draft_hf_config_type": type(draft.hf_config).__name__,
        "draft_layers": draft.hf_config.model.num_hidden_layers
        if hasattr(draft.hf_config, "model") else draft.hf_config.num_hidden_layers,
        "draft_dtype": str(draft.dtype),
        "num_speculative_tokens": spec.num_speculative_tokens,
    }

    vllm_config = VllmConfig(model_config=model_config, speculative_config=spec,
                             parallel_config=parallel, cache_config=CacheConfig(),
                             device_config=DeviceConfig(device="cpu"), load_config=LoadConfig())
    from vllm.model_executor.models.llama_eagle import EagleLlamaForCausalLM

    with set_current_vllm_config(vllm_config), torch.device("cpu"):
        init_distributed_environment(world_size=1, rank=0, local_rank=0,
                                     distributed_init_method="tcp://127.0.0.1:29517",
                                     backend="gloo")
        initialize_model_parallel(1, 1)
        model = EagleLlamaForCausalLM(vllm_config=vllm_config)
    file = load_file(os.path.join(args.head, "model.safetensors"))
    model.load_weights(iter(file.items()))
    params = dict(model.named_parameters())
    report["vllm_parameters"] = {k: list(v.shape) for k, v in params.items()}
    report["has_own_embed_tokens"] = getattr(model, "has_own_embed_tokens", None)
    report["has_own_lm_head"] = getattr(model, "has_own_lm_head", None)
    report["has_input_layernorm"] = not isinstance(model.model.layers[0].input_layernorm,
                                                   torch.nn.Identity)
    report["has_final_norm"] = hasattr(model.model, "norm")

    # every tensor of the file, where vLLM put it (q/k/v and gate/up stacked)
    prefix = "model.layers.0."
    expected = {
        "model.fc.weight": file["fc.weight"],
        prefix + "self_attn.qkv_proj.weight": torch.cat(
            [file[f"layers.0.self_attn.{n}_proj.weight"] for n in "qkv"]),
        prefix + "self_attn.o_proj.weight": file["layers.0.self_attn.o_proj.weight"],
        prefix + "mlp.gate_up_proj.weight": torch.cat(
            [file[f"layers.0.mlp.{n}_proj.weight"] for n in ("gate", "up")]),
        prefix + "mlp.down_proj.weight": file["layers.0.mlp.down_proj.weight"],
        prefix + "post_attention_layernorm.weight":
            file["layers.0.post_attention_layernorm.weight"],
    }
    mismatched = [name for name, t in expected.items()
                  if name not in params or not torch.equal(params[name].float().cpu(), t.float())]
    report["loaded_equal_to_file"] = not mismatched
    report["mismatched"] = mismatched
    print(json.dumps(report, indent=1))
    return 1 if mismatched else 0


if __name__ == "__main__":
    sys.exit(main())
