"""Small models built by the tests and saved like hub models: a byte-level BPE tokenizer and
tiny random Llamas. Nothing is downloaded."""

from __future__ import annotations

from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

VOCAB = 300
CORPUS = [
    "the quick brown fox jumps over the lazy dog and the cat sat on the mat",
    "speculative decoding drafts tokens with a small model and verifies them with a large one",
    "héllo wörld, ça va? naïve café ✓ 日本語のテキスト 🙂",
]


def build_tokenizer(corpus: list[str], vocab_size: int = VOCAB) -> PreTrainedTokenizerFast:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=["<s>", "</s>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(corpus * 20, trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>")


def build_llama(seed: int, vocab_size: int = VOCAB, layers: int = 2) -> LlamaForCausalLM:
    config = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        bos_token_id=0,
        eos_token_id=1,
        initializer_range=0.1,  # peaked distributions: greedy ties are practically impossible
    )
    torch.manual_seed(seed)
    return LlamaForCausalLM(config).eval()


def perturbed(model: LlamaForCausalLM, scale: float, seed: int) -> LlamaForCausalLM:
    """A copy of ``model`` with Gaussian noise of ``scale`` times each tensor's std."""
    copy = build_llama(0, model.config.vocab_size, model.config.num_hidden_layers)
    copy.load_state_dict(model.state_dict())
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for param in copy.parameters():
            if param.dim() > 1:
                param.add_(torch.randn(param.shape, generator=gen) * param.std() * scale)
    return copy


def widened(model: LlamaForCausalLM, extra_rows: int) -> LlamaForCausalLM:
    """``model`` with ``extra_rows`` more (random) embedding and logit rows, like a model
    whose matrices were padded past the tokenizer (Qwen2.5-7B's 152064 vs 151936)."""
    wide = build_llama(7, model.config.vocab_size + extra_rows, model.config.num_hidden_layers)
    state = model.state_dict()
    with torch.no_grad():
        for name, param in wide.named_parameters():
            src = state[name]
            param[tuple(slice(0, s) for s in src.shape)] = src
    return wide


def save(root: Path, name: str, model, tokenizer) -> str:
    path = root / name
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return str(path)


def tiny_pair(root: Path) -> tuple[str, str]:
    """A target and a draft that is a noisy copy of it (so every token kind occurs)."""
    tokenizer = build_tokenizer(CORPUS)
    target = build_llama(seed=0)
    return (save(root, "target", target, tokenizer),
            save(root, "draft", perturbed(target, scale=0.3, seed=1), tokenizer))


def build_mistral(seed: int, sliding_window: int, vocab_size: int = VOCAB):
    """A tiny Mistral whose attention sees only the last ``sliding_window`` positions."""
    from transformers import MistralConfig, MistralForCausalLM

    config = MistralConfig(
        vocab_size=vocab_size, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
        sliding_window=sliding_window, bos_token_id=0, eos_token_id=1, initializer_range=0.1,
    )
    torch.manual_seed(seed)
    return MistralForCausalLM(config).eval()


def build_linear_attention(seed: int, vocab_size: int = VOCAB):
    """A tiny Qwen3-Next: one linear-attention (recurrent) layer, one attention layer; its
    weights are drawn wide enough that its next-token distributions are far from uniform."""
    from transformers import Qwen3NextConfig, Qwen3NextForCausalLM

    config = Qwen3NextConfig(
        vocab_size=vocab_size, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16, linear_num_value_heads=2,
        linear_num_key_heads=2, linear_key_head_dim=16, linear_value_head_dim=16,
        num_experts=2, num_experts_per_tok=1, moe_intermediate_size=32,
        shared_expert_intermediate_size=32, layer_types=["linear_attention", "full_attention"],
        max_position_embeddings=512, bos_token_id=0, eos_token_id=1, initializer_range=0.2,
    )
    torch.manual_seed(seed)
    return Qwen3NextForCausalLM(config).eval()


def build_zamba(seed: int, vocab_size: int = VOCAB):
    """A tiny Zamba: Mamba layers whose modeling code keeps no intermediate recurrent
    states, and a shared attention block at layers 2 and 5."""
    from transformers import ZambaConfig, ZambaForCausalLM

    config = ZambaConfig(
        vocab_size=vocab_size, hidden_size=64, intermediate_size=128, num_hidden_layers=6,
        num_attention_heads=4, num_key_value_heads=2, attention_hidden_size=128,
        attention_head_dim=32, mamba_d_state=8, mamba_d_conv=4, mamba_expand=2,
        mamba_dt_rank=8, n_mamba_heads=2, attn_layer_period=3, attn_layer_offset=2,
        pad_token_id=0, bos_token_id=0, eos_token_id=1,
    )
    torch.manual_seed(seed)
    return ZambaForCausalLM(config).eval()


def sampled_stream(target, n: int, seed: int = 0) -> torch.Tensor:
    """A token stream the tiny target itself wrote (greedy from random starts would loop;
    sampling gives text with structure the head can learn)."""
    gen = torch.Generator().manual_seed(seed)
    ids = torch.randint(2, target.config.vocab_size, (8, 1), generator=gen)
    with torch.inference_mode():
        while ids.shape[1] < n // 8 + 1:
            p = torch.softmax(target(input_ids=ids).logits[:, -1] * 2.0, -1)
            ids = torch.cat([ids, torch.multinomial(p, 1, generator=gen)], 1)
    return ids.flatten()
