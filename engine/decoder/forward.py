"""The forward pass with a KV cache that can be rolled back: ``new_cache``, ``forward`` and
``rollback`` are all the loops use. Llama-family decoders take a fast path written out here;
any other model runs through transformers with a ``DynamicCache``. ``forward_batch`` runs
several sequences of the same length in lockstep (the roofline measurement times it)."""

from __future__ import annotations

import functools
import inspect
import logging
import weakref
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch.nn.modules import module as nn_module
from transformers import DynamicCache, PreTrainedModel

log = logging.getLogger("specscope")


def new_cache(
    model: PreTrainedModel, capacity: int = 256, fast: bool = True, batch: int = 1,
    rollback: int = 0,
):
    """An empty KV cache for ``model``: the engine's own :class:`KVCache` when
    :class:`FastDecoder` can run the model (Llama-family decoders), else a transformers
    ``DynamicCache``. ``capacity``: positions to reserve (it grows when needed); ``batch``:
    sequences held side by side.

    A model with forward hooks (instrumentation, fault injection) gets transformers' path,
    where the hooks run. ``rollback``: the most positions one :func:`rollback` may remove
    (``k + 1`` for a verification of k drafts; 0: never rolled back). A ``DynamicCache``
    then records the past: a sliding-window layer keeps what passes out of its window until
    :func:`rollback` says how much of it is still needed, and a linear-attention
    (recurrent) layer keeps the state after each of a pass's last ``rollback`` tokens, so
    a rollback restores the state it had there (transformers >= 5.25; families whose
    modeling code keeps no such states are refused by
    :func:`engine.decoder.loading.check_rollback`)."""
    decoder = FastDecoder.of(model) if fast else None
    if decoder is None or decoder.hooked():
        cache = DynamicCache(config=model.config)
        if rollback:
            cache.activate_past_recording(recurrent_states_to_keep=rollback)
        return cache
    return KVCache(decoder, capacity, batch)


def forward(model: PreTrainedModel, cache, ids: torch.Tensor, keep: int) -> torch.Tensor:
    """Run ``ids [1, n]`` after what ``cache`` holds, appending them to it; the logits
    ``[keep, V]`` of the last ``keep`` positions."""
    return forward_batch(model, cache, ids, keep)[0]


def forward_batch(model: PreTrainedModel, cache, ids: torch.Tensor, keep: int) -> torch.Tensor:
    """Run ``ids [B, n]`` (B sequences, n new tokens each) after what ``cache`` holds; the
    logits ``[B, keep, V]`` of each sequence's last ``keep`` positions."""
    if isinstance(cache, KVCache):
        return cache.decoder(cache, ids, keep)
    cache_arg = {_cache_kwarg(type(model)): cache}
    return model(input_ids=ids, use_cache=True, logits_to_keep=keep, **cache_arg).logits


def rollback(cache, n: int) -> None:
    """Forget the last ``n`` positions of ``cache`` (``n = 0`` lets a sliding window drop
    what it kept for a rollback that did not come)."""
    if isinstance(cache, KVCache):
        if n > 0:
            cache.crop(-n)
    else:
        cache.crop(-n)  # negative: tokens to remove (the meaning every 5.x release shares)


# ---- the fast path -------------------------------------------------------------------------
#
# transformers' forward pass spends most of a small model's decode step outside arithmetic:
# a module call per layer and sub-layer, keyword plumbing, a causal mask built every step and
# a DynamicCache that concatenates (copies) every layer's keys and values on every step. For
# the decoders below the engine runs the same operations itself, in the same order, on the
# model's own weights (nothing is copied), with keys and values written into one
# preallocated tensor. Rolling back is moving a length. The logits are bit-for-bit those of
# ``model(...)`` (tests/engine/decoder/test_forward.py checks it); anything else falls back to
# ``model(...)``.
#
# On CUDA a small model's step costs kernel launches, not arithmetic: there the decode steps
# (every pass after the prefill) are recorded once per shape as CUDA graphs and replayed.
# A graph needs fixed shapes, so it attends over the whole cache under a mask: its logits
# equal the eager pass's up to rounding (tests/engine/test_gpu.py; the static pass it
# records is checked on the CPU too). Graphs are opt-in (``load_pair(..., cuda_graphs=True)``,
# the ``cuda_graphs`` setting) until the GPU check (benchmarks/gpu_check.sh) has run them on a
# real device.


class KVSlot:
    """Keys and values of every layer, ``[layers, 2, batch, kv_heads, capacity, head_dim]``,
    and the
    CUDA graphs recorded on that memory. Slots return to their decoder's pool when their cache
    is dropped: allocating and first touching the memory can cost more than a short run's
    decode steps, and a graph replays only on the memory it was recorded on."""

    def __init__(self, kv: torch.Tensor):
        self.kv = kv
        self.layers = [(kv[i, 0], kv[i, 1]) for i in range(kv.shape[0])]  # views, made once
        self.graphs: dict[tuple[int, int], _Graph | None] = {}


class KVCache:
    """The engine's KV cache: a :class:`KVSlot` whose first ``length`` positions are valid."""

    def __init__(self, decoder: FastDecoder, capacity: int, batch: int = 1):
        self.decoder = decoder
        self.length = 0
        self.slot = decoder.take_slot(max(capacity, 1), batch)

    @property
    def kv(self) -> torch.Tensor:
        return self.slot.kv

    @property
    def capacity(self) -> int:
        return self.kv.shape[4]

    def reserve(self, end: int) -> None:
        """Make room for positions up to ``end`` (doubling, so growth is rare)."""
        capacity = self.capacity
        if end > capacity:
            slot = self.decoder.take_slot(max(end, 2 * capacity), self.kv.shape[2])
            slot.kv[..., : self.length, :] = self.kv[..., : self.length, :]
            self.decoder.give_slot(self.slot)
            self.slot = slot

    def get_seq_length(self) -> int:
        return self.length

    def crop(self, length: int) -> None:
        """Keep the first ``length`` positions; a negative ``length`` removes that many."""
        self.length = max(self.length + length if length < 0 else min(length, self.length), 0)

    def __del__(self) -> None:
        if getattr(self, "slot", None) is not None:  # None: __init__ failed
            self.decoder.give_slot(self.slot)


class RaggedCache:
    """The keys and values of ``B`` sequences side by side, each with its own length: row
    ``b``'s first ``lengths[b]`` positions are valid (``[layers, 2, B, kv_heads, capacity,
    head_dim]``). What batched speculation needs: rows accept different numbers of drafts,
    so each rolls back by its own amount, and finished rows leave the batch.

    Positions past a row's length may hold anything finite (padding written by a ragged
    pass); attention masks them. The memory starts at zero (a masked position must not hold
    NaN: attention weighs values by 0, and 0 x NaN is NaN) and is not pooled: a batch's slot
    is as large as the batch, and rare."""

    def __init__(self, decoder: FastDecoder, capacity: int, batch: int):
        self.decoder = decoder
        self.lengths = [0] * batch
        self.slot = decoder.new_slot(max(capacity, 1), batch)

    @property
    def kv(self) -> torch.Tensor:
        return self.slot.kv

    @property
    def capacity(self) -> int:
        return self.kv.shape[4]

    @property
    def batch(self) -> int:
        return len(self.lengths)

    def reserve(self, end: int) -> None:
        """Make room for positions up to ``end`` in every row (doubling)."""
        if end > self.capacity:
            slot = self.decoder.new_slot(max(end, 2 * self.capacity), self.batch)
            used = max(self.lengths, default=0)
            slot.kv[..., :used, :] = self.kv[..., :used, :]
            self.slot = slot

    def rollback(self, counts: list[int]) -> None:
        """Forget the last ``counts[b]`` positions of each row ``b``."""
        self.lengths = [max(n - c, 0) for n, c in zip(self.lengths, counts, strict=True)]

    def keep_rows(self, order: list[int]) -> None:
        """Keep only the rows ``order`` (indices into the batch, in the new order). When every
        row that moves comes from past the new end (as
        :func:`engine.decoder.rows.survivors_order` arranges), the moves happen in place and
        the slot becomes a view of its first rows: retiring rows copies only the rows that
        move, not the cache."""
        if order == list(range(self.batch)):
            return
        size = len(order)
        moves = [(j, src) for j, src in enumerate(order) if src != j]
        if all(src >= size for _, src in moves):
            if moves:
                used = max(self.lengths[src] for _, src in moves)
                device = self.kv.device
                dst = torch.tensor([j for j, _ in moves], dtype=torch.long, device=device)
                src = torch.tensor([s for _, s in moves], dtype=torch.long, device=device)
                self.kv[:, :, dst, :, :used] = self.kv[:, :, src, :, :used]
            self.slot = KVSlot(self.kv[:, :, :size])
        else:
            used = max((self.lengths[r] for r in order), default=0)
            slot = self.decoder.new_slot(self.capacity, size)
            index = torch.tensor(order, dtype=torch.long, device=self.kv.device)
            slot.kv[..., :used, :] = self.kv[:, :, index, :, :used]
            self.slot = slot
        self.lengths = [self.lengths[r] for r in order]


def forward_ragged(cache: RaggedCache, ids: torch.Tensor, valid: list[int], keep: int
                   ) -> torch.Tensor:
    """Run ``ids [B, n]`` after what each row of ``cache`` holds; row ``b``'s real tokens
    are its first ``valid[b]`` (the rest is padding, which advances nothing). The logits
    ``[B, keep, V]`` at each row's last ``keep`` real positions."""
    return cache.decoder.ragged(cache, ids, valid, keep)


class FastDecoder:
    """The forward pass of a Llama, Mistral or Qwen2 decoder, written out (see above)."""

    TYPES = frozenset({"llama", "mistral", "qwen2"})
    ROPE_TYPES = frozenset({"default", "linear", "llama3"})  # tables that depend on position only
    POOL = 4  # free slots kept per model
    GRAPH_MAX_TOKENS = 64  # passes of at most this many tokens are replayed as CUDA graphs
    _made: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    @classmethod
    def of(cls, model: PreTrainedModel) -> FastDecoder | None:
        """The (cached) fast path for ``model``, or None when it does not apply."""
        if model not in cls._made:
            cls._made[model] = cls(model) if cls.applies_to(model) else None
        return cls._made[model]

    @classmethod
    def applies_to(cls, model: PreTrainedModel) -> bool:
        config = model.config
        rope = (getattr(config, "rope_parameters", None) or {}).get("rope_type", "default")
        layer_types = getattr(config, "layer_types", None) or ["full_attention"]
        sliding = getattr(config, "sliding_window", None) and config.model_type == "mistral"
        inner = getattr(model, "model", None)
        return (
            config.model_type in cls.TYPES
            and config._attn_implementation == "sdpa"
            and config.hidden_act == "silu"
            and rope in cls.ROPE_TYPES
            and set(layer_types) == {"full_attention"}
            and not sliding
            and getattr(config, "pretraining_tp", 1) == 1
            and not getattr(config, "mlp_bias", False)
            and inner is not None
            and hasattr(inner, "rotary_emb")
            and model.lm_head.bias is None
        )

    def __init__(self, model: PreTrainedModel):
        config, inner = model.config, model.model
        attn = inner.layers[0].self_attn
        self.heads, self.kv_heads = config.num_attention_heads, config.num_key_value_heads
        self.head_dim = attn.head_dim
        self.groups = self.heads // self.kv_heads
        self.scale = attn.scaling
        self.embed = inner.embed_tokens.weight
        self.head = model.lm_head.weight
        self.norm = (inner.norm.weight, inner.norm.variance_epsilon)
        self.layers = [_layer_weights(layer) for layer in inner.layers]
        self.rotary = inner.rotary_emb
        self.cos = self.sin = self.embed.new_empty((0, self.head_dim))  # grown on demand
        # Not the model itself: this decoder is the model's value in ``_made``, a weak-keyed
        # map, and a value that refers to its key keeps it (and its memory) alive forever.
        self.model = weakref.ref(model)
        self.pool: list[KVSlot] = []
        self.graphs = False  # opt-in: use_graphs
        self._graph_pool = None
        self.grouped_attention = True  # False: repeat the KV heads on the ragged path too

    def use_graphs(self, on: bool) -> None:
        """Replay decode steps as CUDA graphs (only ever on a CUDA device)."""
        self.graphs = on and self.embed.device.type == "cuda"

    def hooked(self) -> bool:
        """Whether forward hooks are registered (on the model, a submodule or globally)."""
        if nn_module._global_forward_hooks or nn_module._global_forward_pre_hooks:
            return True
        model = self.model()
        modules = model.modules() if model is not None else ()
        return any(m._forward_hooks or m._forward_pre_hooks for m in modules)

    # -- memory --

    def take_slot(self, capacity: int, batch: int = 1) -> KVSlot:
        """A free slot for ``batch`` sequences of at least ``capacity`` positions (the smallest
        such), or a new one."""
        fits = [s for s in self.pool if s.kv.shape[4] >= capacity and s.kv.shape[2] == batch
                and self._current(s.kv)]
        if fits:
            slot = min(fits, key=lambda s: s.kv.shape[4])
            self.pool.remove(slot)
            return slot
        shape = (len(self.layers), 2, batch, self.kv_heads, capacity, self.head_dim)
        return KVSlot(self.embed.new_zeros(shape))

    def new_slot(self, capacity: int, batch: int) -> KVSlot:
        """A fresh, zeroed slot outside the pool (for :class:`RaggedCache`)."""
        shape = (len(self.layers), 2, batch, self.kv_heads, capacity, self.head_dim)
        return KVSlot(self.embed.new_zeros(shape))

    def give_slot(self, slot: KVSlot) -> None:
        self.pool.append(slot)
        if len(self.pool) > self.POOL:
            self.pool.remove(min(self.pool, key=lambda s: s.kv[0, 0].numel()))

    def _current(self, t: torch.Tensor) -> bool:
        return t.dtype == self.embed.dtype and t.device == self.embed.device

    def _rope_table(self, end: int) -> tuple[torch.Tensor, torch.Tensor]:
        """cos and sin ``[>= end, head_dim]``, made by the model's own rotary module."""
        if end > self.cos.shape[0] or not self._current(self.cos):
            positions = torch.arange(max(end, 2 * self.cos.shape[0]), device=self.embed.device)
            cos, sin = self.rotary(self.embed[:1][None], positions[None])
            self.cos, self.sin = cos[0], sin[0]
        return self.cos, self.sin

    # -- the pass --

    @torch.inference_mode()
    def __call__(self, cache: KVCache, ids: torch.Tensor, keep: int,
                 hidden: list | None = None) -> torch.Tensor:
        """``hidden``: a list that receives the final hidden states ``[B, n, hidden]`` (after
        the final norm, every position of the pass), for drafters that read them."""
        n, start = ids.shape[-1], cache.length
        cache.reserve(start + n)
        logits = None
        single = ids.shape[0] == 1  # graphs are recorded for one sequence
        if (self.graphs and single and start > 0 and n <= self.GRAPH_MAX_TOKENS
                and keep in (1, n) and hidden is None):
            logits = self._replay(cache.slot, ids, start, keep)
        if logits is None:
            logits = self._lockstep(cache.slot, ids, start, keep, hidden)
        cache.length = start + n
        return logits

    def _lockstep(self, slot: KVSlot, ids: torch.Tensor, start: int, keep: int,
                  hidden: list | None = None) -> torch.Tensor:
        """Every row of ``ids [B, n]`` starts at position ``start``."""
        n = ids.shape[-1]
        cos, sin = self._rope_table(start + n)
        # transformers' SDPA path: no mask (is_causal for a first chunk) or a boolean one
        mask = None
        if n > 1 and start > 0:
            mask = torch.ones((n, start + n), dtype=torch.bool, device=ids.device)
            mask = mask.tril(start)
        where = slice(start, start + n)
        return self._pass(slot, ids, keep, cos[where], sin[where], where, mask, hidden)

    @torch.inference_mode()
    def ragged(self, cache: RaggedCache, ids: torch.Tensor, valid: list[int], keep: int,
               hidden: list | None = None) -> torch.Tensor:
        """:func:`forward_ragged`. Rows of one length with no padding take the lockstep pass
        (at B = 1 the single stream's pass, bit for bit); otherwise each row gets its own
        rotary positions, its keys and values are scattered to its own positions, and a
        mask ``[B, 1, n, upto]`` lets query ``j`` of row ``b`` see positions up to
        ``lengths[b] + j``."""
        batch, n = ids.shape
        lengths = cache.lengths
        upto = max(lengths) + n
        cache.reserve(upto)
        if min(lengths) == max(lengths) and all(v == n for v in valid):
            logits = self._lockstep(cache.slot, ids, lengths[0], keep, hidden)
        else:
            device = ids.device
            positions = torch.tensor(lengths, device=device)[:, None] + torch.arange(
                n, device=device)  # [B, n]
            mask = torch.arange(upto, device=device) <= positions[:, :, None]  # [B, n, upto]
            cos, sin = self._rope_table(upto)
            cos, sin = cos[positions][:, None], sin[positions][:, None]  # [B, 1, n, d]
            rows_keep: int | torch.Tensor = keep
            if any(v != n for v in valid):  # each row's last real positions
                last = torch.tensor(valid, device=device)[:, None] - keep
                rows_keep = (last + torch.arange(keep, device=device)).clamp_(min=0)
            logits = self._pass(cache.slot, ids, rows_keep, cos, sin, positions, mask[:, None],
                                hidden)
        cache.lengths = [length + v for length, v in zip(lengths, valid, strict=True)]
        return logits

    def static_pass(self, slot: KVSlot, ids, start: torch.Tensor, keep: int, rope):
        """The pass with every shape fixed by ``ids`` and ``slot`` alone, as a CUDA graph
        needs: ``start`` is a tensor, keys and values go in by index, and attention spans the
        whole capacity under a mask. Same results as :meth:`__call__` up to rounding."""
        n, capacity = ids.shape[-1], slot.kv.shape[4]
        positions = start + torch.arange(n, device=ids.device)
        mask = torch.arange(capacity, device=ids.device) <= positions[:, None]
        cos, sin = rope[0][positions], rope[1][positions]
        return self._pass(slot, ids, keep, cos, sin, positions, mask)

    def _pass(self, slot: KVSlot, ids, keep, cos, sin, where, mask, hidden: list | None = None
              ) -> torch.Tensor:
        """``ids [B, n]`` through every layer; new keys and values go to positions ``where``
        (a slice, an index tensor ``[n]``, or ``[B, n]`` for positions of each row's own) and
        each query attends to the cache up to the end of ``where`` (or as far as ``mask``
        spans). Logits ``[B, keep, V]`` of the last ``keep`` positions, or of the positions
        ``keep [B, m]`` of each row. ``hidden``: receives the final hidden states of every
        position, after the final norm (``[B, n, hidden]``)."""
        batch, n = ids.shape
        upto = mask.shape[-1] if mask is not None else where.stop
        # The ragged pass's per-row mask [B, 1, n, upto]: grouped-query heads attend to the
        # keys and values as stored (see _grouped_attention); elsewhere transformers' way.
        grouped = (self.grouped_attention and self.groups > 1 and mask is not None
                   and mask.dim() == 4)
        rows = None
        if isinstance(where, torch.Tensor) and where.dim() == 2:  # per-row positions [B, n]
            rows = torch.arange(batch, device=ids.device)[:, None]
        x = F.embedding(ids, self.embed)  # [B, n, hidden]
        for (norm1, attn, norm2, mlp), (k_cache, v_cache) in zip(
            self.layers, slot.layers, strict=True
        ):
            (wq, bq), (wk, bk), (wv, bv), (wo, bo) = attn
            h = _rms_norm(x, *norm1)
            q = F.linear(h, wq, bq).view(batch, n, -1, self.head_dim).transpose(1, 2)
            k = F.linear(h, wk, bk).view(batch, n, -1, self.head_dim).transpose(1, 2)
            v = F.linear(h, wv, bv).view(batch, n, -1, self.head_dim).transpose(1, 2)
            q, k = _rope(q, cos, sin), _rope(k, cos, sin)
            if rows is None:
                k_cache[:, :, where] = k  # the cache: [B, kv_heads, capacity, head_dim]
                v_cache[:, :, where] = v
            else:  # scattered: row b's token j goes to position where[b, j]
                k_cache[rows, :, where] = k.transpose(1, 2)  # indexed as [B, n, kv_heads, d]
                v_cache[rows, :, where] = v.transpose(1, 2)
            keys, values = k_cache[:, :, :upto], v_cache[:, :, :upto]
            if grouped:
                o = self._grouped_attention(q, keys, values, mask)
            else:
                gqa = self.groups > 1 and mask is None  # else repeat the heads, as transformers
                if self.groups > 1 and mask is not None:
                    keys, values = self._repeat_kv(keys), self._repeat_kv(values)
                o = F.scaled_dot_product_attention(
                    q, keys, values, mask, scale=self.scale, is_causal=n > 1 and mask is None,
                    enable_gqa=gqa,
                )
            x = x + F.linear(o.transpose(1, 2).reshape(batch, n, -1), wo, bo)
            h = _rms_norm(x, *norm2)
            gate, up, down = mlp
            x = x + F.linear(F.silu(F.linear(h, gate)) * F.linear(h, up), down)
        if hidden is not None:  # the norm is per position: norm all, then keep
            x = _rms_norm(x, *self.norm)
            hidden.append(x)
        if isinstance(keep, torch.Tensor):  # [B, m]: positions to keep, per row
            x = x[torch.arange(batch, device=ids.device)[:, None], keep]
        else:
            x = x[:, -keep:]
        return F.linear(x if hidden is not None else _rms_norm(x, *self.norm), self.head)

    def _grouped_attention(self, q, keys, values, mask) -> torch.Tensor:
        """Attention of ``q [B, heads, n, d]`` over ``keys, values [B, kv_heads, L, d]`` under
        ``mask [B, 1, n, L]`` without repeating the keys and values per query head: the
        ``groups`` query heads that share a KV head are stacked along the query axis
        (``[B, kv_heads, groups * n, d]``, head ``h = kv * groups + g``), so each layer reads
        its cache once instead of copying it ``groups`` times. ``[B, heads, n, d]``."""
        batch, heads, n, dim = q.shape
        stacked = q.reshape(batch, self.kv_heads, self.groups * n, dim)
        o = F.scaled_dot_product_attention(stacked, keys, values, mask.repeat(1, 1, self.groups, 1),
                                           scale=self.scale)
        return o.view(batch, heads, n, dim)

    def _repeat_kv(self, x: torch.Tensor) -> torch.Tensor:
        """``[B, kv_heads, L, d]`` to ``[B, heads, L, d]``, as transformers' ``repeat_kv`` (by
        expanding: ``repeat_interleave`` would wait for the GPU, which a graph cannot)."""
        batch, kv_heads, length, dim = x.shape
        x = x[:, :, None].expand(batch, kv_heads, self.groups, length, dim)
        return x.reshape(batch, kv_heads * self.groups, length, dim)

    # -- CUDA graphs --

    def _replay(self, slot: KVSlot, ids, start: int, keep: int) -> torch.Tensor | None:
        key = (ids.shape[-1], keep)
        if key not in slot.graphs:
            slot.graphs[key] = self._record(slot, *key)
        graph = slot.graphs[key]
        if graph is None:
            return None
        graph.ids.copy_(ids.view(1, -1))
        graph.start.fill_(start)
        graph.graph.replay()
        return graph.logits.clone()  # the next replay overwrites the output

    def _record(self, slot: KVSlot, n: int, keep: int) -> _Graph | None:
        capacity = slot.kv.shape[4]
        rope = tuple(t[:capacity] for t in self._rope_table(capacity))
        device = self.embed.device
        ids = torch.zeros((1, n), dtype=torch.long, device=device)
        # The warm-up runs write past every valid position (the cache was reserved for them).
        start = torch.full((), capacity - n, dtype=torch.long, device=device)
        try:
            if self._graph_pool is None:
                self._graph_pool = torch.cuda.graph_pool_handle()
            stream = torch.cuda.Stream(device)
            stream.wait_stream(torch.cuda.current_stream(device))
            with torch.cuda.stream(stream):
                for _ in range(2):
                    self.static_pass(slot, ids, start, keep, rope)
            torch.cuda.current_stream(device).wait_stream(stream)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, pool=self._graph_pool):
                logits = self.static_pass(slot, ids, start, keep, rope)
        except Exception as error:  # noqa: BLE001 - eager decoding is always a fallback
            log.warning("CUDA graphs are off for this model: %s", error)
            self.graphs = False
            return None
        return _Graph(graph, ids, start, logits, rope)


@dataclass
class _Graph:
    graph: object  # torch.cuda.CUDAGraph
    ids: torch.Tensor  # [1, n] input, copied in before each replay
    start: torch.Tensor  # the first position, filled in before each replay
    logits: torch.Tensor  # [1, keep, V] output
    rope: tuple  # the cos and sin tables the graph reads (kept alive)


def _layer_weights(layer) -> tuple:
    """A decoder layer's weights, in the order :meth:`FastDecoder.__call__` uses them."""
    a, m = layer.self_attn, layer.mlp
    norm1, norm2 = layer.input_layernorm, layer.post_attention_layernorm
    return (
        (norm1.weight, norm1.variance_epsilon),
        [(p.weight, p.bias) for p in (a.q_proj, a.k_proj, a.v_proj, a.o_proj)],
        (norm2.weight, norm2.variance_epsilon),
        [m.gate_proj.weight, m.up_proj.weight, m.down_proj.weight],
    )


def _rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    if x.dtype == torch.float32 and x.device.type == "cpu":
        # one call instead of six; the same bits as the sequence below (tested)
        return F.rms_norm(x, weight.shape, weight, eps)
    # transformers' LlamaRMSNorm, operation for operation
    x32 = x.to(torch.float32)
    x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)
    return weight * x32.to(x.dtype)


def _rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    # transformers' apply_rotary_pos_emb: x cos + rotate_half(x) sin
    half = x.shape[-1] // 2
    return (x * cos) + (torch.cat((-x[..., half:], x[..., :half]), dim=-1) * sin)


@functools.cache
def _cache_kwarg(model_class: type) -> str:
    # transformers renamed ``past_key_values`` to ``cache`` during 5.x
    params = inspect.signature(model_class.forward).parameters
    return "cache" if "cache" in params else "past_key_values"
