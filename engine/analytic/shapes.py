"""Model shapes the published measurements need beyond :data:`engine.analytic.MODELS`
(Llama 2 7B and 70B, measured by gpt-fast), and one look-up over both.

Values are copied from each model's config.json (hidden_size, intermediate_size,
num_hidden_layers, num_attention_heads, num_key_value_heads, vocab_size,
tie_word_embeddings; head_dim = hidden_size / num_attention_heads). The gated meta-llama
repositories were read through copies that keep ``_name_or_path`` pointing at them.
"""

from __future__ import annotations

from engine.analytic.presets import MODELS, ModelShape, decoder_parameters


def llama_shape(label: str, source: str, *, hidden: int, intermediate: int, layers: int,
                heads: int, kv_heads: int, vocab: int, tied: bool = False) -> ModelShape:
    """A Llama decoder's :class:`ModelShape` from its config.json values."""
    head_dim = hidden // heads
    params = decoder_parameters(hidden, intermediate, layers, heads, kv_heads, head_dim, vocab,
                                tied)
    return ModelShape(label, params, layers, heads, kv_heads, head_dim, source, hidden,
                      0 if tied else vocab * hidden, vocab=vocab)


EXTRA_MODELS: dict[str, ModelShape] = {
    # config.json of meta-llama/Llama-2-7b-hf, as copied in huggingface.co/
    # nailiamirzakhmedova/Llama-2-7b-hf-human-values-boolean (_name_or_path
    # meta-llama/Llama-2-7b-hf): 4096, 11008, 32 layers, 32 heads, 32 KV heads, vocab 32000.
    "llama-2-7b": llama_shape(
        "Llama 2 7B", "meta-llama/Llama-2-7b-hf config.json",
        hidden=4096, intermediate=11008, layers=32, heads=32, kv_heads=32, vocab=32000),
    # config.json of meta-llama/Llama-2-70b-hf, as copied in huggingface.co/TheBloke/
    # Llama-2-70B-fp16: 8192, 28672, 80 layers, 64 heads, 8 KV heads, vocab 32000.
    "llama-2-70b": llama_shape(
        "Llama 2 70B", "meta-llama/Llama-2-70b-hf config.json",
        hidden=8192, intermediate=28672, layers=80, heads=64, kv_heads=8, vocab=32000),
}


def model(key: str) -> ModelShape:
    """The shape named ``key``: a preset of the roofline or one of :data:`EXTRA_MODELS`."""
    if key in EXTRA_MODELS:
        return EXTRA_MODELS[key]
    if key in MODELS:
        return MODELS[key]
    raise KeyError(f"no model shape {key!r}; known: "
                   f"{', '.join(sorted({*MODELS, *EXTRA_MODELS}))}")
