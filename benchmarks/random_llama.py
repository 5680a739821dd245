"""A random-weight Llama pair of real shapes, saved like hub models, so that a GPU can time
8B-class decoding without downloading weights: the target has Llama 3.1 8B's shape, the draft
Llama 3.2 1B's (shapes from their published config files). Both use the shipped pair's
tokenizer; its ids lie inside the 128256-row vocabulary. Random weights make acceptance
meaningless (expect a low alpha); step times, c and v are what these models are for.

    python benchmarks/random_llama.py OUT [--device cuda] [--shape llama]

writes OUT/target and OUT/draft in bfloat16 (about 16.1 GB and 2.5 GB for ``llama``;
``tiny`` is the same recipe at toy size, for checking the recipe on a CPU).
"""

from __future__ import annotations

import argparse
import shutil
import time
from pathlib import Path

import torch
from transformers import LlamaConfig, LlamaForCausalLM

REPO = Path(__file__).resolve().parent.parent
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")

# Llama 3.1 8B and Llama 3.2 1B (config.json of meta-llama/Llama-3.1-8B and Llama-3.2-1B).
LLAMA_COMMON = dict(vocab_size=128256, max_position_embeddings=8192, rms_norm_eps=1e-5,
                    rope_parameters={"rope_theta": 500000.0, "rope_type": "default"},
                    hidden_act="silu", attention_bias=False, mlp_bias=False)
SHAPES: dict[str, dict[str, dict]] = {
    "llama": {
        "target": LLAMA_COMMON | dict(hidden_size=4096, intermediate_size=14336,
                                      num_hidden_layers=32, num_attention_heads=32,
                                      num_key_value_heads=8, head_dim=128,
                                      tie_word_embeddings=False),
        "draft": LLAMA_COMMON | dict(hidden_size=2048, intermediate_size=8192,
                                     num_hidden_layers=16, num_attention_heads=32,
                                     num_key_value_heads=8, head_dim=64,
                                     tie_word_embeddings=True),
    },
    "tiny": {
        "target": LLAMA_COMMON | dict(vocab_size=4608, hidden_size=128, intermediate_size=256,
                                      num_hidden_layers=4, num_attention_heads=4,
                                      num_key_value_heads=2, head_dim=32,
                                      tie_word_embeddings=False),
        "draft": LLAMA_COMMON | dict(vocab_size=4608, hidden_size=64, intermediate_size=128,
                                     num_hidden_layers=2, num_attention_heads=4,
                                     num_key_value_heads=2, head_dim=16,
                                     tie_word_embeddings=True),
    },
}


def write_model(out: Path, shape: dict, device: str, seed: int,
                tokenizer_dir: Path = REPO / "models" / "target") -> int:
    """Build one random model on ``device`` in bfloat16, save it with the tokenizer; its
    parameter count."""
    special = LlamaConfig.from_pretrained(tokenizer_dir)  # the shipped pair's bos/eos/pad ids
    config = LlamaConfig(**shape, bos_token_id=special.bos_token_id,
                         eos_token_id=special.eos_token_id, pad_token_id=special.pad_token_id)
    torch.manual_seed(seed)
    default = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    try:
        with torch.device(device):  # initialised where it is made: seconds on a GPU
            model = LlamaForCausalLM(config).eval()
    finally:
        torch.set_default_dtype(default)
    model.save_pretrained(out)
    for name in TOKENIZER_FILES:
        shutil.copy(tokenizer_dir / name, out / name)
    params = sum(p.numel() for p in model.parameters())
    del model
    return params


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--shape", choices=sorted(SHAPES), default="llama")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args(argv)
    for seed, role in enumerate(("target", "draft")):
        start = time.monotonic()
        params = write_model(args.out / role, SHAPES[args.shape][role], args.device, seed)
        if args.device.startswith("cuda"):
            torch.cuda.empty_cache()
        print(f"{role}: {params / 1e9:.3f} B parameters, bfloat16, written to "
              f"{args.out / role} in {time.monotonic() - start:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
