"""Drafter kinds as pure pricing functions (standard library only): what one draft step reads
and computes, as a :class:`~engine.analytic.passes.Pass` of the roofline.

- a draft model: :func:`engine.analytic.passes.draft_pass` (its own weights and full KV cache)
- an EAGLE-style head (EAGLE-1, Li et al. 2024): one decoder layer of the target's width over
  ``fc([embed(x_{t+1}), f_t])``, the target's final hidden state ``f_t`` and the next token's
  embedding concatenated (``fc``: ``2 hidden -> hidden``), then the target's LM head. It keeps
  a KV cache of its one layer over the whole context. EAGLE-3 fuses features of three target
  layers (``fc``: ``3 hidden -> hidden``) and has its own LM head over a smaller draft
  vocabulary. The embedding table is shared with the target and only ``B`` rows of it are
  read, so it is not counted
- self-speculation with a bounded draft KV cache (MagicDec, Sadhukhan et al. 2024): the
  target drafts for itself, reading all its weights but attending over a fixed budget of
  cached tokens (StreamingLLM: attention sinks plus a recent window, e.g. 512 tokens) instead
  of the whole context

Chain drafts only: one token a draft step, ``k`` steps a cycle. EAGLE's own evaluations and
EAGLE-3's SGLang tables use draft trees (several candidates a step, verified together), which
this does not price.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from engine.analytic.overheads import cycle_s, plain_step_s
from engine.analytic.passes import Pass, Setting, forward_pass, target_pass
from engine.analytic.presets import MODELS, ModelShape

DRAFTER_WORDS = {"model": "draft model", "ngram": "prompt lookup (n-gram)",
                 "eagle": "EAGLE head", "medusa": "Medusa heads"}
"""The drafters the engine runs, by their one name (``--drafter``, ``drafter=`` in links and
the API), in words."""
DRAFTER_NAMES = tuple(DRAFTER_WORDS)
HEAD_DRAFTERS = ("eagle", "medusa")
"""The drafters that are heads trained for one target (a folder each), reading its hidden
states: a pair offers them only where it names their folder."""
STREAMING_BUDGET = 512  # tokens: MagicDec's StreamingLLM budget with a measured acceptance rate


@dataclass(frozen=True)
class HeadShape:
    """An EAGLE-style head's config.json values and what it feeds on.

    ``fc_inputs``: feature vectors concatenated into ``fc`` (2 for EAGLE-1: embedding and top
    hidden state; 3 for EAGLE-3: three layers' features). ``lm_head_vocab``: rows of the LM
    head the head applies (the target's vocabulary for EAGLE-1, which reuses the target's LM
    head; ``draft_vocab_size`` for EAGLE-3)."""

    label: str
    source: str
    target: str  # the key of the target's shape
    hidden: int
    intermediate: int
    heads: int
    kv_heads: int
    lm_head_vocab: int
    fc_inputs: int = 2
    fc_bias: bool = True
    checkpoint: str = ""
    method: str = "eagle"
    target_checkpoint: str | None = None

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    @property
    def params(self) -> int:
        """Weights one draft step reads: ``fc``, one decoder layer (attention, gated MLP, two
        RMSNorms), the final norm and the LM head."""
        h, q, kv = self.hidden, self.heads * self.head_dim, self.kv_heads * self.head_dim
        fc = self.fc_inputs * h * h + (h if self.fc_bias else 0)
        layer = h * q + 2 * h * kv + q * h + 3 * h * self.intermediate + 2 * h
        return fc + layer + h + self.lm_head_vocab * h

    def shape(self) -> ModelShape:
        """The head as a one-layer model for the roofline: its KV cache is one layer's."""
        return ModelShape(self.label, self.params, 1, self.heads, self.kv_heads, self.head_dim,
                          self.source, self.hidden)


EAGLE_HEADS: dict[str, HeadShape] = {
    # The head trained here for the shipped target (models/eagle/config.json): hidden 256,
    # intermediate 768, 1 layer, 4 heads, 4 KV heads, the target's 4096-row LM head; its fc
    # has no bias.
    "shipped-eagle": HeadShape(
        "the EAGLE head trained here (models/eagle)", "models/eagle/config.json",
        "shipped-target", hidden=256, intermediate=768, heads=4, kv_heads=4,
        lm_head_vocab=4096, fc_bias=False, checkpoint="models/eagle"),
    # yuhuili/EAGLE-llama2-chat-7B config.json (huggingface.co, revision ed8213c): hidden 4096,
    # intermediate 11008, 1 layer, 32 heads, 32 KV heads, vocab 32000. EAGLE-1 reuses the
    # target's LM head.
    "eagle-llama2-chat-7b": HeadShape(
        "EAGLE head of Llama 2 7B chat (yuhuili/EAGLE-llama2-chat-7B)",
        "yuhuili/EAGLE-llama2-chat-7B config.json", "llama-2-7b",
        hidden=4096, intermediate=11008, heads=32, kv_heads=32, lm_head_vocab=32000,
        checkpoint="yuhuili/EAGLE-llama2-chat-7B",
        target_checkpoint="meta-llama/Llama-2-7b-chat-hf"),
    # SpecForge's EAGLE-3 config for Llama 3 8B (configs/llama3-8B-eagle3.json, as stored in
    # huggingface.co/FasterDFlash/Hanrui): hidden 4096, intermediate 14336, 1 layer, 32 heads,
    # 8 KV heads, vocab 128256, draft_vocab_size 32000; Llama 3.1 8B has the same shape.
    # The config of yuhuili/EAGLE3-LLaMA3.1-Instruct-8B (the EAGLE-3 authors' head, which
    # vLLM's config/speculative.py names as its example of an "eagle3" checkpoint) was not in
    # the stored material; it drafts for Llama 3.1 8B Instruct, the base model's shape.
    "eagle3-llama-3.1-8b": HeadShape(
        "EAGLE-3 head of Llama 3.1 8B (SpecForge's llama3-8B-eagle3 config)",
        "SpecForge configs/llama3-8B-eagle3.json", "llama-3.1-8b",
        hidden=4096, intermediate=14336, heads=32, kv_heads=8, lm_head_vocab=32000,
        fc_inputs=3, fc_bias=False, checkpoint="yuhuili/EAGLE3-LLaMA3.1-Instruct-8B",
        method="eagle3", target_checkpoint="meta-llama/Llama-3.1-8B-Instruct"),
    # SpecForge's EAGLE-3 config for Llama 3 70B (configs/llama3-70B-ealge3.json, the file's
    # own spelling): hidden 8192, intermediate 28672, 1 layer, 64 heads, 8 KV heads, vocab
    # 128256, draft_vocab_size 32000. Llama 3.3 70B and 3.1 70B share the shape; the
    # EAGLE-3 authors' head for 3.3 70B (yuhuili/EAGLE3-LLaMA3.3-Instruct-70B) is the one
    # SGLang's PR 4716 served.
    "eagle3-llama-3.3-70b": HeadShape(
        "EAGLE-3 head of Llama 3.3 70B (SpecForge's llama3-70B eagle3 config)",
        "SpecForge configs/llama3-70B-ealge3.json", "llama-3.1-70b",
        hidden=8192, intermediate=28672, heads=64, kv_heads=8, lm_head_vocab=32000,
        fc_inputs=3, fc_bias=False, checkpoint="yuhuili/EAGLE3-LLaMA3.3-Instruct-70B",
        method="eagle3", target_checkpoint="meta-llama/Llama-3.3-70B-Instruct"),
}


@dataclass(frozen=True)
class MedusaShape:
    """Medusa heads' config.json values: ``num_heads`` heads of ``layers`` residual blocks
    (``hidden x hidden`` and a bias) over the target's final hidden state, each with its own
    LM head (``own_lm_heads``, Medusa-1's checkpoints) or one shared (``original_lm_head``).
    vLLM applies every head in one pass: its time grows by a block and an LM-head product a
    head, and the pass's fixed time is paid once, not once a draft token."""

    label: str
    source: str
    target: str  # the key of the target's shape
    hidden: int
    vocab: int
    num_heads: int
    layers: int = 1
    own_lm_heads: bool = True
    checkpoint: str = ""
    target_checkpoint: str | None = None

    def head_params(self) -> int:
        """Weights one head reads: its blocks and an LM head (vLLM applies the shared one
        head by head, so it is read once a head too)."""
        return self.layers * (self.hidden * self.hidden + self.hidden) + self.vocab * self.hidden

    def resident_params(self) -> int:
        """Weights held in memory: the blocks and one LM head, or one a head."""
        blocks = self.num_heads * self.layers * (self.hidden * self.hidden + self.hidden)
        return blocks + (self.num_heads if self.own_lm_heads else 1) * self.vocab * self.hidden

    def pass_shape(self, k: int) -> ModelShape:
        """Heads 1..k as one pass for the roofline: no KV cache, no attention."""
        return ModelShape(f"{self.label}, {k} heads", k * self.head_params(), 0, 1, 1, 1,
                          self.source, self.hidden)


MEDUSA_HEADS: dict[str, MedusaShape] = {
    # The heads trained here for the shipped target (models/medusa/config.json): 4 heads of one
    # residual block, 256 wide, sharing one copy of the target's 4096-row LM head.
    "shipped-medusa": MedusaShape(
        "the Medusa heads trained here (models/medusa)", "models/medusa/config.json",
        "shipped-target", hidden=256, vocab=4096, num_heads=4, own_lm_heads=False,
        checkpoint="models/medusa"),
}
# FasterDecoding/medusa-vicuna-7b-v1.3 config.json (huggingface.co): medusa_num_heads 5,
# medusa_num_layers 1; Medusa-1 checkpoints give every head its own LM head (vLLM's
# _remap_old_checkpoint_key maps their "{head}.{N}.weight" to lm_heads.{head}).
MEDUSA_1 = {"num_heads": 5, "layers": 1, "own_lm_heads": True,
            "source": "FasterDecoding/medusa-vicuna-7b-v1.3 config.json"}


def medusa_heads_of(target: ModelShape) -> MedusaShape:
    """Heads that draft for ``target``: the ones trained for it, else heads of the public
    Medusa-1 checkpoints' shape (five heads of one residual block, each with its own LM head
    over the target's vocabulary) sized to the target's width."""
    for heads in MEDUSA_HEADS.values():
        if MODELS.get(heads.target) == target:
            return heads
    return MedusaShape(f"Medusa-1 heads for {target.label} (the public checkpoints' shape)",
                       MEDUSA_1["source"], target.label, target.width, target.vocab,
                       MEDUSA_1["num_heads"], MEDUSA_1["layers"], MEDUSA_1["own_lm_heads"])


def medusa_pass(s: Setting, heads: MedusaShape, batch: float, k: int) -> Pass:
    """One pass of heads 1..k for ``batch`` rows, on the target's GPUs."""
    return forward_pass(heads.pass_shape(k), s, batch, 1)


def medusa_cycle(s: Setting, heads: MedusaShape, batch: float, k: int) -> float:
    """One Medusa cycle in plain target steps at ``batch``: one pass of k heads (its launch
    and the proposer's fixed time once) and one verification pass over ``k + 1`` positions,
    with the setting's overheads (:func:`engine.analytic.overheads.cycle_s` with a single
    draft pass of the heads' whole time)."""
    if not 1 <= k <= heads.num_heads:
        raise ValueError(f"the Medusa heads guess at most {heads.num_heads} tokens (k = {k})")
    o, layers = s.overheads, s.target.layers
    step = plain_step_s(target_pass(s, batch).seconds, o, batch, layers)
    return cycle_s(medusa_pass(s, heads, batch, k).seconds, target_pass(s, batch, k + 1).seconds,
                   1, o, batch, k * heads.layers, layers) / step


MTP_HEADS: dict[str, HeadShape] = {
    # XiaomiMiMo/MiMo-7B-Base config.json: num_nextn_predict_layers 1, a decoder layer of the
    # target's shape after eh_proj (2 x 4096 -> 4096, no bias), the target's LM head (151680
    # rows). vLLM serves it as method "mtp" from the target's own checkpoint.
    "mimo-7b": HeadShape(
        "MiMo 7B's own MTP layer", "XiaomiMiMo/MiMo-7B-Base config.json", "mimo-7b",
        hidden=4096, intermediate=11008, heads=32, kv_heads=8, lm_head_vocab=151680,
        fc_bias=False, checkpoint="XiaomiMiMo/MiMo-7B-Base", method="mtp",
        target_checkpoint="XiaomiMiMo/MiMo-7B-Base"),
}


def mtp_head_of(target: ModelShape) -> HeadShape | None:
    """The multi-token-prediction layers ``target`` ships (None: it ships none)."""
    return next((h for h in MTP_HEADS.values() if MODELS.get(h.target) == target), None)


def eagle_heads_of(target: ModelShape) -> list[HeadShape]:
    """The head presets drafting for ``target`` (none for most targets)."""
    return [h for h in EAGLE_HEADS.values() if MODELS.get(h.target) == target]


def eagle_draft_pass(s: Setting, head: HeadShape, batch: float, gpus: int | None = None) -> Pass:
    """One draft step of an EAGLE head for ``batch`` rows after ``s.context`` tokens: its
    weights, and one layer's KV cache over the whole context. ``gpus``: its tensor-parallel
    degree (the target's unless given; vLLM 0.32 lets an EAGLE head run on fewer)."""
    return forward_pass(head.shape(), s, batch, 1, gpus)


def eagle_tree_cycle_s(s: Setting, head: HeadShape, steps: int, topk: int, draft_tokens: int,
                       batch: float) -> float:
    """One cycle of an EAGLE head drafting a tree as SGLang does (s): ``steps`` head passes,
    each over ``topk`` tokens a row, and one target pass over the ``draft_tokens`` verified,
    with the setting's overheads (:func:`engine.analytic.overheads.cycle_s`)."""
    draft = forward_pass(head.shape(), s, batch, topk).seconds
    verify = target_pass(s, batch, draft_tokens).seconds
    return cycle_s(draft, verify, steps, s.overheads, batch, head.shape().layers,
                   s.target.layers)


def self_spec_draft_pass(s: Setting, batch: float, budget: int = STREAMING_BUDGET) -> Pass:
    """One draft step of self-speculation with a bounded KV cache: the target's weights, its
    KV cache cut to ``budget`` tokens (or the context, if shorter), on the target's GPUs."""
    if budget < 1:
        raise ValueError("a draft KV budget is at least one token")
    return forward_pass(s.target, replace(s, context=min(budget, s.context)), batch, 1)


def self_spec_cycle(s: Setting, batch: float, k: int, budget: int = STREAMING_BUDGET) -> float:
    """One cycle of self-speculation, in plain target steps at ``batch``: ``k`` draft steps
    over the bounded cache and one verification pass over ``k + 1`` positions, with the
    setting's overheads (:func:`engine.analytic.overheads.cycle_s` over the plain step; the
    draft is the target's own layers, so it launches as many); without any,
    ``(k t_draft(B) + t_p(B, k + 1)) / t_p(B, 1)``."""
    o, layers = s.overheads, s.target.layers
    step = plain_step_s(target_pass(s, batch).seconds, o, batch, layers)
    return cycle_s(self_spec_draft_pass(s, batch, budget).seconds,
                   target_pass(s, batch, k + 1).seconds, k, o, batch, layers, layers) / step


def self_spec_bytes(s: Setting, budget: int = STREAMING_BUDGET) -> tuple[float, float]:
    """Bytes on one GPU for self-speculation: the target's weights (the draft shares them),
    and what one sequence adds: the target's KV cache of ``L + k + 1`` tokens plus the
    draft's own bounded cache of ``budget`` tokens (MagicDec keeps the StreamingLLM cache
    beside the full one)."""
    weights = s.target.params * s.weight_bytes / s.gpus
    per_token = s.target.kv_bytes_per_token(s.kv_cache_dtype, s.gpus)
    return weights, (s.context + s.k + 1 + min(budget, s.context)) * per_token
