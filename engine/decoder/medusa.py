"""Medusa heads (Cai et al. 2024): a drafter that guesses k tokens at once from one hidden state
of the target, in vLLM's layout (``vllm/model_executor/models/medusa.py``, ``method:
"medusa"``) so vLLM can load the same checkpoint.

At position t the target's final, normed hidden state ``h_t`` (what its LM head reads) gives
``x_{t+1}`` through the LM head; head i (0-based) guesses ``x_{t+2+i}`` from the same ``h_t``:

    r_i = h_t + SiLU(W_i h_t + b_i)          # num_hidden_layers residual blocks, one here
    q_i(x_{t+2+i}) = softmax(lm_head(r_i))   # the target's LM head, shared and frozen

Head i never sees ``x_{t+2} .. x_{t+1+i}``, so its guess is worse the further out it is:
acceptance falls by position instead of staying one alpha. The heads run in one pass whose
cost grows by one residual block and one LM-head product a head.

The checkpoint is a folder with ``config.json`` (``model_type: "medusa"``, ``num_heads``,
``num_hidden_layers``, ``medusa_fc_bias: true`` for these blocks' biases, ``original_lm_head:
true``: one LM head for every head) and ``model.safetensors`` holding
``blocks.{i}.layers.{j}.weight`` and ``.bias`` and ``lm_head.weight``, a copy of the target's
(vLLM builds the heads' LM head from the checkpoint, not from the target). vLLM overwrites
``num_heads`` with ``num_speculative_tokens``, so k must not exceed the heads trained.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file
from torch import nn

from engine.decoder.drafters import Drafts, choose, distributions, no_drafts


class ResidualBlock(nn.Module):
    """``x + SiLU(W x + b)``, ``layers`` times (vLLM's ``ResidualBlock``)."""

    def __init__(self, hidden: int, layers: int, bias: bool):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(hidden, hidden, bias=bias) for _ in range(layers))
        self.act = nn.SiLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = x + self.act(layer(x))
        return x


class MedusaHeads(nn.Module):
    """``num_heads`` residual blocks over the target's hidden state, one shared LM head."""

    def __init__(self, hidden: int, vocab: int, num_heads: int, num_layers: int = 1,
                 bias: bool = True):
        super().__init__()
        self.config = {"hidden_size": hidden, "vocab_size": vocab, "num_heads": num_heads,
                       "num_hidden_layers": num_layers, "medusa_fc_bias": bias}
        self.blocks = nn.ModuleList(ResidualBlock(hidden, num_layers, bias)
                                    for _ in range(num_heads))
        self.lm_head = nn.Linear(hidden, vocab, bias=False)
        for block in self.blocks:  # Medusa's start: every head guesses what the LM head does
            for layer in block.layers:
                nn.init.zeros_(layer.weight)
                if layer.bias is not None:
                    nn.init.zeros_(layer.bias)

    @property
    def num_heads(self) -> int:
        return len(self.blocks)

    @classmethod
    def for_target(cls, target, num_heads: int, num_layers: int = 1) -> MedusaHeads:
        """Heads for ``target`` (a transformers causal LM), its LM head copied in and frozen."""
        config = target.config
        heads = cls(config.hidden_size, config.vocab_size, num_heads, num_layers)
        heads.lm_head.weight.data.copy_(target.get_output_embeddings().weight.data)
        heads.lm_head.weight.requires_grad_(False)
        return heads

    def logits(self, hidden: torch.Tensor, head: int) -> torch.Tensor:
        """Head ``head``'s logits ``[..., V]`` from the target's ``hidden [..., H]``."""
        return self.lm_head(self.blocks[head](hidden))

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        """Every head's logits ``[..., num_heads, V]`` from ``hidden [..., H]``."""
        return torch.stack([self.logits(hidden, i) for i in range(self.num_heads)], dim=-2)

    def save(self, folder: str | Path, dtype: torch.dtype = torch.float16) -> None:
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        config = {"architectures": ["MedusaModel"], "model_type": "medusa", **self.config,
                  "original_lm_head": True, "truncated_vocab_size": self.config["vocab_size"],
                  "torch_dtype": str(dtype).removeprefix("torch.")}
        (folder / "config.json").write_text(json.dumps(config, indent=1) + "\n")
        tensors = {name: t.detach().to(dtype).contiguous()
                   for name, t in self.state_dict().items()}
        save_file(tensors, str(folder / "model.safetensors"))

    @classmethod
    def load(cls, folder: str | Path, dtype: torch.dtype = torch.float32) -> MedusaHeads:
        folder = Path(folder)
        config = json.loads((folder / "config.json").read_text())
        heads = cls(config["hidden_size"], config["vocab_size"], config["num_heads"],
                    config.get("num_hidden_layers", 1), config.get("medusa_fc_bias", False))
        heads.load_state_dict(load_file(str(folder / "model.safetensors")))
        return heads.to(dtype).eval()


def load_heads_for(pair, folder: str | Path) -> MedusaHeads:
    """The heads in ``folder`` for ``pair`` (a :class:`engine.decoder.loading.ModelPair`), in
    the pair's dtype and on its device; ValueError when they were trained for another target."""
    folder = Path(folder)
    if not (folder / "config.json").is_file():
        raise ValueError(f"{folder}: no Medusa heads there (no config.json); the shipped ones "
                         "are models/medusa")
    config = json.loads((folder / "config.json").read_text())
    if config.get("model_type") != "medusa":
        raise ValueError(f"{folder}: not Medusa heads (model_type {config.get('model_type')!r})")
    target = pair.target.config
    if (config["hidden_size"], config["vocab_size"]) != (target.hidden_size, target.vocab_size):
        raise ValueError(f"{folder}: the heads are {config['hidden_size']} wide over "
                         f"{config['vocab_size']} tokens, the target {target.hidden_size} over "
                         f"{target.vocab_size}: they were trained for another target")
    return MedusaHeads.load(folder, pair.dtype).to(pair.device)


class Medusa:
    """The heads as a drafter of the engine's one step (:mod:`engine.decoder.step`), for ``B``
    rows. It reads the target's final hidden states (``reads_target_hidden``) and keeps, per
    row, the one at the position whose logits chose the row's newest token: at prefill the
    prompt's second-to-last position (``h`` that chose the last prompt token), after a step
    that kept ``a`` drafts the verified pass's position ``a`` (``h`` that chose the next
    token). One proposal applies heads ``0 .. k-1`` to it: head i guesses the token ``i + 1``
    places after the newest. A row with no hidden state yet (a one-token prompt, first step)
    proposes none.

    Sampling (``greedy`` False) draws head i's token of row ``b`` from its own warped ``q_i``
    with ``uniforms[b, i]``, independently of the other heads; the rule uses exactly those
    ``q_i``, so it stays lossless. Greedy proposes each head's argmax (``q`` None), as vLLM
    does at every temperature.
    """

    reads_target_hidden = True

    def __init__(self, heads: MedusaHeads, vocab: int, batch: int, device: torch.device,
                 sampling: dict, greedy: bool):
        self.heads, self.vocab, self.device = heads, vocab, device
        self.sampling, self.greedy = sampling, greedy
        self.hidden: list[torch.Tensor | None] = [None] * batch  # [H] a row

    def uniforms_needed(self, k: int) -> int:
        return 0 if self.greedy else k

    def prefill(self, prompt_ids: list[list[int]], target_hidden: torch.Tensor | None = None
                ) -> None:
        """``target_hidden [B, n, H]``: the target over each prompt but its last token."""
        self.hidden = [target_hidden[b, len(ids) - 2] if len(ids) > 1 else None
                       for b, ids in enumerate(prompt_ids)]

    @torch.inference_mode()
    def propose(self, k: int, uniforms: torch.Tensor | None, clock, keep_logits: bool = False
                ) -> Drafts:
        """One pass of heads ``0 .. k-1``; ``uniforms [B, k]`` draw the tokens when sampling."""
        batch = len(self.hidden)
        real = torch.tensor([h is not None for h in self.hidden], device=self.device)
        if not bool(real.any()):
            return no_drafts(batch, self.device)
        some = next(h for h in self.hidden if h is not None)
        hidden = torch.stack([h if h is not None else torch.zeros_like(some)
                              for h in self.hidden]).to(self.heads.lm_head.weight.dtype)
        drafted, kept, marks, winners = [], [], [], []
        for i in range(k):
            logits = self.heads.logits(hidden, i)[:, : self.vocab]  # [B, V]
            marks.append(clock.mark())
            token, row = choose(logits, self.greedy, self.sampling, uniforms, i, winners)
            marks.append(clock.mark())
            drafted.append(token)
            kept.append(row)
        lengths = [k if h is not None else 0 for h in self.hidden]
        q, logits, finite = distributions(kept, winners, self.greedy, keep_logits, real)
        tokens = torch.stack(drafted, dim=1) * real[:, None]  # rows without a proposal: 0
        return Drafts(tokens, q, torch.tensor(lengths, device=self.device), lengths, finite,
                      marks, logits)

    def commit(self, k: int, accepted: list[int], next_tokens: list[int], drafts: Drafts,
               target_hidden: torch.Tensor | None = None) -> None:
        """``target_hidden [B, m + 1, H]``: the target over ``[last, d_1 .. d_m]`` (row
        ``b``'s real positions first); position ``accepted[b]`` chose the row's next token."""
        self.hidden = [target_hidden[b, a] for b, a in enumerate(accepted)]

    def keep_rows(self, order: list[int]) -> None:
        self.hidden = [self.hidden[i] for i in order]
