"""An EAGLE-1 head: a one-layer drafter that predicts the target's next feature from its last
one, in vLLM's layout (``vllm/model_executor/models/llama_eagle.py``) so vLLM can load the
same checkpoint with ``"method": "eagle"``.

At position t the head reads the target's feature ``f_t`` (its last hidden state, after its
final norm: what the LM head reads) and the next token ``x_{t+1}``:

    h = fc([embed(x_{t+1}), f_t])              # fc: 2H -> H, no bias
    f_{t+1}^ = layer(h, rotary position t)     # one Llama decoder layer, no input norm
    q(x_{t+2}) = softmax(lm_head(f_{t+1}^))    # no final norm

``embed`` and ``lm_head`` are the target's, shared and frozen: they are not in the head's
parameters or its checkpoint (vLLM shares them from the target when the checkpoint lacks
them). Drafting a second token feeds the head its own ``f^`` in place of the target's.

The checkpoint is a folder with ``config.json`` (a plain one-layer ``LlamaForCausalLM`` of the
target's width) and ``model.safetensors`` holding ``fc.weight`` and ``layers.0.*`` only (no
``input_layernorm``, no ``norm``, no ``embed_tokens``, no ``lm_head``); vLLM prefixes
``model.`` itself when it loads an EAGLE head.

The head keeps its own KV cache of one layer, indexed by position: writing position t
overwrites whatever a rolled-back draft left there, and attention masks every position after
the query's, so rolling back is only lowering a length.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file
from torch import nn
from transformers import LlamaConfig, PreTrainedModel
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding, apply_rotary_pos_emb

from engine.decoder.drafters import Drafts, choose, distributions, no_drafts

PADDING = -1  # a position that marks a padded entry of a ragged batch: written nowhere


class RMSNorm(nn.Module):
    """Llama's RMSNorm (computed in float32, as transformers and vLLM compute it)."""

    def __init__(self, hidden: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dtype = x.dtype
        x = x.float()
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x.to(dtype)


class Attention(nn.Module):
    def __init__(self, config: LlamaConfig):
        super().__init__()
        self.heads = config.num_attention_heads
        self.kv_heads = config.num_key_value_heads
        self.head_dim = getattr(config, "head_dim", None) or config.hidden_size // self.heads
        h = config.hidden_size
        bias = bool(getattr(config, "attention_bias", False))
        self.q_proj = nn.Linear(h, self.heads * self.head_dim, bias=bias)
        self.k_proj = nn.Linear(h, self.kv_heads * self.head_dim, bias=bias)
        self.v_proj = nn.Linear(h, self.kv_heads * self.head_dim, bias=bias)
        self.o_proj = nn.Linear(self.heads * self.head_dim, h, bias=bias)


class MLP(nn.Module):
    def __init__(self, config: LlamaConfig):
        super().__init__()
        h, i = config.hidden_size, config.intermediate_size
        bias = bool(getattr(config, "mlp_bias", False))
        self.gate_proj = nn.Linear(h, i, bias=bias)
        self.up_proj = nn.Linear(h, i, bias=bias)
        self.down_proj = nn.Linear(i, h, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(nn.Module):
    """A Llama decoder layer without its input norm (EAGLE-1 drops it: ``fc``'s output goes
    straight into attention), so it has ``post_attention_layernorm`` and no
    ``input_layernorm``."""

    def __init__(self, config: LlamaConfig):
        super().__init__()
        self.self_attn = Attention(config)
        self.mlp = MLP(config)
        self.post_attention_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)


@dataclass
class Shared:
    """The target's embedding and LM head, which the head uses but does not own (a plain
    holder, so that torch does not register them as the head's submodules)."""

    embed_tokens: nn.Embedding
    lm_head: nn.Linear


class EagleCache:
    """Keys and values of the head's one layer, ``[B, kv_heads, capacity + 1, head_dim]``
    each, indexed by absolute position; the last slot takes padded entries and is never
    attended. ``lengths[b]``: positions of row ``b`` that hold verified (or drafted) entries;
    a pass may start anywhere up to it."""

    def __init__(self, head: EagleHead, batch: int, capacity: int):
        attn = head.layers[0].self_attn
        shape = (batch, attn.kv_heads, capacity + 1, attn.head_dim)
        weight = attn.k_proj.weight
        self.k = torch.zeros(shape, dtype=weight.dtype, device=weight.device)
        self.v = torch.zeros_like(self.k)
        self.lengths = torch.zeros(batch, dtype=torch.long)

    @property
    def capacity(self) -> int:
        return self.k.shape[2] - 1

    @property
    def batch(self) -> int:
        return self.k.shape[0]

    def rollback(self, lengths: torch.Tensor | list[int]) -> None:
        """Keep the first ``lengths[b]`` positions of each row (never more than it has)."""
        lengths = torch.as_tensor(lengths, dtype=torch.long)
        self.lengths = torch.minimum(self.lengths, lengths)

    def keep_rows(self, rows: list[int]) -> None:
        """Keep only the rows ``rows`` (indices into the batch, in the new order)."""
        index = torch.tensor(rows, dtype=torch.long)
        self.k, self.v = self.k[index.to(self.k.device)], self.v[index.to(self.k.device)]
        self.lengths = self.lengths[index]


class EagleHead(nn.Module):
    """The head's own weights (``fc`` and ``layers.0``) plus the target's shared embedding
    and LM head. ``config``: the target's config with one layer."""

    def __init__(self, config: LlamaConfig, target: PreTrainedModel | None = None):
        super().__init__()
        self.config = config
        h = config.hidden_size
        self.fc = nn.Linear(2 * h, h, bias=False)
        self.layers = nn.ModuleList([DecoderLayer(config)])
        self.rotary = LlamaRotaryEmbedding(config)
        self.shared: Shared | None = None
        if target is not None:
            self.share(target)

    def share(self, target: PreTrainedModel) -> None:
        """Use ``target``'s embedding and LM head (frozen: the head never trains them)."""
        self.shared = Shared(target.get_input_embeddings(), target.get_output_embeddings())

    # ---- the computation ---------------------------------------------------------------

    def forward(
        self,
        tokens: torch.Tensor,
        features: torch.Tensor,
        positions: torch.Tensor,
        cache: EagleCache | None = None,
    ) -> torch.Tensor:
        """The head's output features ``[B, n, H]``: entry i reads token ``tokens[:, i]``
        (``x_{t+1}``) and feature ``features[:, i]`` (``f_t``, the target's or the head's
        own) at rotary position ``positions[:, i]`` (t) and predicts ``f_{t+1}``.

        ``tokens``, ``positions``: ``[B, n]`` long; ``features``: ``[B, n, H]``. Without a
        cache the n entries are one causal sequence (training: positions must increase along
        n). With a cache the entries are written at their positions (overwriting them) and
        each attends the row's positions up to its own; ``PADDING`` positions write nothing
        and their outputs are meaningless.
        """
        x, q, k, v = self._project(tokens, features, positions)
        if cache is None:
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                                 enable_gqa=k.shape[1] != q.shape[1])
        else:
            out = self._attend_cached(cache, q, k, v, positions)
        return self._finish(x, out)

    def forward_tree(self, tokens: torch.Tensor, features: torch.Tensor, positions: torch.Tensor,
                     cache: EagleCache, tree_kv: list[torch.Tensor], mask: torch.Tensor
                     ) -> torch.Tensor:
        """Entries of a draft tree, one row: ``tokens``, ``positions`` ``[1, n]``, ``features
        [1, n, H]``. Each attends the row's cached positions and, among the tree's entries
        (those in ``tree_kv``, ``[k, v]`` each ``[1, kv_heads, m, head_dim]``, then these n),
        the ones ``mask [n, m + n]`` allows: its ancestors and itself. These entries' keys
        and values are appended to ``tree_kv``; the cache is not written. Features ``[1, n,
        H]``."""
        x, q, k, v = self._project(tokens, features, positions)
        length = int(cache.lengths[0])
        if tree_kv:
            k, v = torch.cat([tree_kv[0], k], dim=2), torch.cat([tree_kv[1], v], dim=2)
        tree_kv[:] = [k, v]
        keys = torch.cat([cache.k[:, :, :length], k.to(cache.k.dtype)], dim=2)
        values = torch.cat([cache.v[:, :, :length], v.to(cache.v.dtype)], dim=2)
        seen = torch.cat([torch.ones((mask.shape[0], length), dtype=torch.bool,
                                     device=mask.device), mask], dim=1)
        out = F.scaled_dot_product_attention(q, keys, values, attn_mask=seen[None, None],
                                             enable_gqa=keys.shape[1] != q.shape[1])
        return self._finish(x, out)

    def _project(self, tokens, features, positions):
        """The fused input ``x [B, n, H]`` and its rotated queries, keys and values."""
        assert self.shared is not None, "share(target) first: the head uses its embedding"
        embeds = self.shared.embed_tokens(tokens).to(features.dtype)
        x = self.fc(torch.cat((embeds, features), dim=-1))
        attn = self.layers[0].self_attn
        b, n, _ = x.shape
        q = attn.q_proj(x).view(b, n, attn.heads, attn.head_dim).transpose(1, 2)
        k = attn.k_proj(x).view(b, n, attn.kv_heads, attn.head_dim).transpose(1, 2)
        v = attn.v_proj(x).view(b, n, attn.kv_heads, attn.head_dim).transpose(1, 2)
        cos, sin = self.rotary(x, positions.clamp(min=0))
        q, k = apply_rotary_pos_emb(q, k, cos, sin)
        return x, q, k, v

    def _finish(self, x, out):
        layer = self.layers[0]
        b, n, _ = x.shape
        x = x + layer.self_attn.o_proj(out.transpose(1, 2).reshape(b, n, -1))
        return x + layer.mlp(layer.post_attention_layernorm(x))

    def _attend_cached(self, cache: EagleCache, q, k, v, positions: torch.Tensor):
        # The bookkeeping runs on Python ints (one read of the positions): a decode step is
        # a handful of small matrix products, and tensor ops for it would cost as much.
        rows = positions.tolist()
        lengths = cache.lengths.tolist()
        ends = []
        for row, length in zip(rows, lengths, strict=True):
            real = [p for p in row if p >= 0]
            if real and min(real) > length:
                raise ValueError(
                    f"a pass must start at or before each row's cached length {lengths}; "
                    f"it starts at {[min((p for p in r if p >= 0), default=None) for r in rows]}")
            ends.append(max(real, default=-1) + 1)
        end = max(ends)
        if end > cache.capacity:
            raise ValueError(f"position {end - 1} is past the head's cache ({cache.capacity})")
        n = positions.shape[1]
        first = rows[0][0]
        if len(rows) == 1 and rows[0] == list(range(first, first + n)) and first >= 0:
            # one row, consecutive positions: a slice, and causal within the new entries
            cache.k[:, :, first : first + n] = k.to(cache.k.dtype)
            cache.v[:, :, first : first + n] = v.to(cache.v.dtype)
            mask = None if n == 1 else (torch.arange(end, device=q.device)[None, :]
                                        <= torch.arange(first, first + n, device=q.device)[:, None])
        else:
            slots = positions.masked_fill(positions < 0, cache.capacity)  # padding: spare slot
            index = torch.arange(cache.batch, device=q.device)[:, None]
            cache.k[index, :, slots] = k.transpose(1, 2).to(cache.k.dtype)
            cache.v[index, :, slots] = v.transpose(1, 2).to(cache.v.dtype)
            # a padded query attends position 0 only (an all-masked row would give NaN)
            mask = (torch.arange(end, device=q.device)[None, None, :]
                    <= positions.clamp(min=0)[:, :, None])[:, None]  # [B, 1, n, end]
        cache.lengths = torch.tensor([max(e, length) for e, length in zip(ends, lengths,
                                                                          strict=True)])
        return F.scaled_dot_product_attention(
            q, cache.k[:, :, :end], cache.v[:, :, :end], attn_mask=mask,
            enable_gqa=cache.k.shape[1] != q.shape[1],
        )

    def logits(self, features: torch.Tensor) -> torch.Tensor:
        """``[..., V]``: the target's LM head on the head's features (no final norm)."""
        assert self.shared is not None, "share(target) first: the head uses its LM head"
        return self.shared.lm_head(features.to(self.shared.lm_head.weight.dtype))

    def new_cache(self, batch: int = 1, capacity: int = 1024) -> EagleCache:
        return EagleCache(self, batch, capacity)

    # ---- checkpoint ----------------------------------------------------------------------

    def save(self, folder: str | Path, dtype: torch.dtype = torch.float16) -> None:
        """``config.json`` (one-layer LlamaForCausalLM) and ``model.safetensors`` with the
        head's own weights, in the names vLLM's ``EagleLlamaForCausalLM`` loads."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        config = self.config.to_diff_dict()  # what save_pretrained writes: no defaults
        config["dtype"] = str(dtype).removeprefix("torch.")
        (folder / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
        weights = {name: t.detach().to(dtype).contiguous() for name, t in self.state_dict().items()
                   if not name.startswith("rotary.")}
        save_file(weights, str(folder / "model.safetensors"), metadata={"format": "pt"})

    @classmethod
    def load(cls, folder: str | Path, target: PreTrainedModel | None = None,
             dtype: torch.dtype = torch.float32) -> EagleHead:
        """The head saved in ``folder``, in ``dtype``, sharing ``target``'s embedding and
        LM head (pass it, or call :meth:`share` later)."""
        folder = Path(folder)
        config = LlamaConfig.from_dict(json.loads((folder / "config.json").read_text()))
        if config.num_hidden_layers != 1:
            raise ValueError(f"{folder}: an EAGLE head has one layer, not "
                             f"{config.num_hidden_layers}")
        head = cls(config, target)
        weights = load_file(str(folder / "model.safetensors"))
        missing, unexpected = head.load_state_dict(weights, strict=False)
        missing = [m for m in missing if not m.startswith("rotary.")]
        if missing or unexpected:
            raise ValueError(f"{folder}: weights missing {missing}, unexpected {unexpected}")
        return head.to(dtype).eval()


def head_config(target_config: LlamaConfig) -> LlamaConfig:
    """The head's config: the target's, with one layer and the plain Llama architecture."""
    config = LlamaConfig.from_dict(target_config.to_dict())
    config.num_hidden_layers = 1
    config.architectures = ["LlamaForCausalLM"]
    return config


# ---- the target's features ------------------------------------------------------------------


def target_features(target: PreTrainedModel, ids: torch.Tensor) -> torch.Tensor:
    """The target's last hidden states ``[B, n, H]`` (after its final norm) for ``ids
    [B, n]`` from position 0: the ``f_t`` the head reads. The target's logits are
    ``target.lm_head`` of these."""
    return target.model(input_ids=ids, use_cache=False).last_hidden_state


# ---- the head as a drafter of the engine's step ---------------------------------------------


class Eagle:
    """The head as a drafter of the engine's one step (:mod:`engine.decoder.step`), for ``B``
    rows: the interface of :class:`engine.decoder.drafters.DraftModel` plus
    ``reads_target_hidden``, so the step hands it the target's final hidden states.

    The target's cache holds every token but the newest (``last``), so the head's entries are
    ``(x_{t+1}, f_t)`` for every position t the target has run: at prefill t = 0..n-2 of the
    prompt (``x_{n-1}`` being ``last``); after a step that kept ``a`` drafts and chose ``x``,
    the ``a + 1`` entries ``(d_1, f_last) .. (d_a, f_{a-1}), (x, f_a)`` from the target's pass
    over ``[last, d_1 .. d_m]``. The entries wait (``pending``) until the next proposal, whose
    first pass runs them (overwriting the head's own drafted entries there, as vLLM's proposer
    does) and drafts ``d_1`` from the head's own output at the newest, as EAGLE does. After a
    verified cycle the entries are those of vLLM's proposer; in the first cycle the head also
    drafts the prompt's next token, which vLLM's prefill takes from the target. A row without
    any entry yet (a one-token prompt, first step) proposes none.

    Sampling (``greedy`` False) draws draft ``i`` of row ``b`` with ``uniforms[b, i]`` from the
    row's own generator; greedy proposes argmaxes with ``q`` None (one-hot).
    """

    reads_target_hidden = True

    def __init__(self, head: EagleHead, vocab: int, capacity: int, batch: int,
                 device: torch.device, sampling: dict, greedy: bool):
        """``sampling``: ``warp``'s temperature, top_k and top_p; ``greedy``: propose argmaxes
        (temperature 0, or ``draft_sample="greedy"``)."""
        self.head, self.vocab, self.device = head, vocab, device
        self.sampling, self.greedy = sampling, greedy
        self.cache = head.new_cache(batch, capacity)
        self.hidden_size = head.config.hidden_size
        self.verified = [0] * batch  # positions whose entries read the target's features
        # each row's entries not yet run: tokens, positions and features [n_i, H] chunks
        self.pending: list[tuple[list[int], list[int], list[torch.Tensor]]] = []

    def uniforms_needed(self, k: int) -> int:
        return 0 if self.greedy else k

    def prefill(self, prompt_ids: list[list[int]], target_hidden: torch.Tensor | None = None
                ) -> None:
        """``target_hidden [B, n, H]``: the target over each prompt but its last token (None
        when every prompt is one token)."""
        self.cache.rollback([0] * len(prompt_ids))
        self.verified = [0] * len(prompt_ids)
        self.pending = []
        for b, ids in enumerate(prompt_ids):
            n = len(ids) - 1
            features = [target_hidden[b, :n]] if n > 0 else []
            self.pending.append((list(ids[1:]), list(range(n)), features))

    @torch.inference_mode()
    def propose(self, k: int, uniforms: torch.Tensor | None, clock, keep_logits: bool = False
                ) -> Drafts:
        """``k`` lockstep head passes (the first over each row's pending entries); ``uniforms
        [B, k]`` draw the tokens when sampling."""
        batch = len(self.pending)
        counts = [len(tokens) for tokens, _, _ in self.pending]
        real = torch.tensor([n > 0 for n in counts], device=self.device)
        if not any(counts):  # every row is a one-token prompt: nothing to draft from yet
            return no_drafts(batch, self.device)
        tokens, positions, features = self._pending_batch(max(counts))
        self.cache.rollback(self.verified)
        self.verified = [v + n for v, n in zip(self.verified, counts, strict=True)]
        self.pending = [([], [], []) for _ in range(batch)]
        rows = torch.arange(batch, device=self.device)
        newest = (torch.tensor(counts, device=self.device) - 1).clamp(min=0)
        position = torch.where(real, positions[rows, newest], PADDING)[:, None]  # [B, 1]
        drafted, kept, marks, winners = [], [], [], []
        feature = None
        for i in range(k):
            if i == 0:
                feature = self.head(tokens, features, positions, self.cache)[rows, newest][:, None]
            else:
                position = torch.where(real[:, None], position + 1, PADDING)
                feature = self.head(drafted[-1][:, None], feature, position, self.cache)
            logits = self.head.logits(feature[:, 0])[:, : self.vocab]  # [B, V]
            marks.append(clock.mark())
            token, row = choose(logits, self.greedy, self.sampling, uniforms, i, winners)
            marks.append(clock.mark())
            drafted.append(token)
            kept.append(row)
        lengths = [k if n else 0 for n in counts]
        q, logits, finite = distributions(kept, winners, self.greedy, keep_logits, real)
        tokens_out = torch.stack(drafted, dim=1) * real[:, None]  # rows without a proposal: 0
        return Drafts(tokens_out, q, torch.tensor(lengths, device=self.device), lengths, finite,
                      marks, logits)

    def _pending_batch(self, width: int):
        """Every row's pending entries padded on the right: tokens and positions ``[B, width]``
        (``PADDING`` positions), features ``[B, width, H]``."""
        batch = len(self.pending)
        dtype = self.head.fc.weight.dtype
        tokens = torch.zeros((batch, width), dtype=torch.long, device=self.device)
        positions = torch.full((batch, width), PADDING, dtype=torch.long, device=self.device)
        features = torch.zeros((batch, width, self.hidden_size), dtype=dtype, device=self.device)
        for b, (ids, where, chunks) in enumerate(self.pending):
            n = len(ids)
            if n:
                tokens[b, :n] = torch.tensor(ids, device=self.device)
                positions[b, :n] = torch.tensor(where, device=self.device)
                features[b, :n] = torch.cat(chunks).to(dtype)
        return tokens, positions, features

    def commit(self, k: int, accepted: list[int], next_tokens: list[int], drafts: Drafts,
               target_hidden: torch.Tensor | None = None) -> None:
        """``target_hidden [B, m + 1, H]``: the target over ``[last, d_1 .. d_m]`` (row ``b``'s
        real positions first). Row ``b``'s new entries are its ``accepted[b]`` drafts and its
        next token, beside the target's features at ``last, d_1 .. d_a``."""
        proposals = drafts.tokens.tolist() if drafts.width else None
        for b, (a, token) in enumerate(zip(accepted, next_tokens, strict=True)):
            ids, where, chunks = self.pending[b]
            start = self.verified[b] + len(ids)
            new = (proposals[b][:a] if proposals is not None else []) + [token]
            ids += new
            where += range(start, start + len(new))
            chunks.append(target_hidden[b, : a + 1])

    def keep_rows(self, order: list[int]) -> None:
        self.cache.keep_rows(order)
        self.verified = [self.verified[i] for i in order]
        self.pending = [self.pending[i] for i in order]


def load_head_for(pair, folder: str | Path) -> EagleHead:
    """The head in ``folder`` for ``pair`` (a :class:`engine.decoder.loading.ModelPair`): in
    the pair's dtype, on its device, sharing its target's embedding and LM head."""
    folder = Path(folder)
    if not (folder / "config.json").is_file():
        raise ValueError(f"{folder}: no EAGLE head there (no config.json); the shipped one is "
                         "models/eagle")
    head = EagleHead.load(folder, pair.target, dtype=pair.dtype).to(pair.device)
    if head.config.hidden_size != pair.target.config.hidden_size:
        raise ValueError(f"{folder}: the head is {head.config.hidden_size} wide, the target "
                         f"{pair.target.config.hidden_size}: it was trained for another target")
    return head
