"""Loading a target and a draft once, and refusing pairs that cannot speculate together.

The forward pass over a KV cache that can be rolled back lives in :mod:`engine.decoder.forward`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedModel

from engine.decoder.forward import FastDecoder, forward, new_cache, rollback

# Encoded by both tokenizers of a pair; any difference means they do not share a tokenizer.
_PROBE = "Hello, world! The 3 quick foxes: héllo wörld ✓ 日本語\n\tdef f(x): return x**2"


class PairError(ValueError):
    """The draft cannot speculate for the target (most often: different tokenizers)."""


@dataclass
class ModelPair:
    """A target, an optional draft (None for target-only runs) and their shared tokenizer.

    ``shared_vocab_size`` is the number of logit rows both models have; distributions are
    compared over these ids only (Qwen2.5-0.5B has 151936 rows, Qwen2.5-7B 152064).
    """

    target: PreTrainedModel
    draft: PreTrainedModel | None
    tokenizer: object
    device: torch.device
    shared_vocab_size: int
    stop_token_ids: frozenset[int]
    dtype: torch.dtype
    target_name: str = ""
    draft_name: str | None = None


def load_pair(
    target: str,
    draft: str | None,
    device: str | None = None,
    dtype: torch.dtype | None = None,
    warmup: bool = True,
    cuda_graphs: bool = False,
) -> ModelPair:
    """Load ``target`` and ``draft`` (local paths or Hugging Face ids) and their tokenizer.

    Device: CUDA when present, else CPU, unless ``device`` says otherwise. Dtype: bfloat16 on
    CUDA, float32 elsewhere, unless ``dtype`` says otherwise. Raises :class:`PairError` when
    the two do not share a tokenizer. ``cuda_graphs``: replay decode steps as CUDA graphs
    (the ``cuda_graphs`` setting; opt-in until validated on the GPU in use).
    """
    for name in (target, draft):
        _check_local(name)
    dev = resolve_device(device)
    dt = dtype or (torch.bfloat16 if dev.type == "cuda" else torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(target)
    if draft is not None and draft != target:
        check_same_tokenizer(tokenizer, AutoTokenizer.from_pretrained(draft))
    target_model = _load_model(target, dev, dt)
    draft_model = None
    if draft is not None:
        draft_model = target_model if draft == target else _load_model(draft, dev, dt)
    if draft_model is not None:
        for name, model in ((target, target_model), (draft, draft_model)):
            check_rollback(name, model, dev)
    rows = [logit_rows(target_model)] + ([logit_rows(draft_model)] if draft_model else [])
    pair = ModelPair(
        target=target_model,
        draft=draft_model,
        tokenizer=tokenizer,
        device=dev,
        shared_vocab_size=min(rows),
        stop_token_ids=stop_token_ids(tokenizer, target_model),
        dtype=dt,
        target_name=target,
        draft_name=draft,
    )
    for model in (target_model, draft_model):
        decoder = FastDecoder.of(model) if model is not None else None
        if decoder is not None:
            decoder.use_graphs(cuda_graphs)
    if warmup:
        warm_up(pair)
    return pair


def resolve_device(device: str | None) -> torch.device:
    if device is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dev = torch.device(device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {device!r} asked for, but CUDA is not available here")
    return dev


def set_threads(threads: int | None, device: str | None) -> int:
    """Set torch's CPU threads; ``None`` means 1 on a CPU (small models run fastest and
    steadiest on one thread, and the other core stays free for the server) and torch's own
    choice on CUDA. Returns the number in use."""
    if threads is None and resolve_device(device).type == "cpu":
        threads = 1
    if threads:
        torch.set_num_threads(threads)
    return torch.get_num_threads()


def _check_local(name: str | None) -> None:
    """A name that is clearly a path (absolute or relative to ".") must exist; anything else
    may be a Hugging Face id."""
    if name and name.startswith(("/", "./", "../")) and not Path(name).is_dir():
        raise ValueError(f"no model at {name}: the directory does not exist")


def _load_model(name: str, device: torch.device, dtype: torch.dtype) -> PreTrainedModel:
    model = AutoModelForCausalLM.from_pretrained(name, dtype=dtype)
    return model.to(device).eval()


def check_same_tokenizer(target_tok, draft_tok) -> None:
    """Raise :class:`PairError` unless both tokenizers map the same strings to the same ids.

    End-of-sequence tokens may differ (a base draft for an instruct target is a fine pair).
    """
    tv, dv = target_tok.get_vocab(), draft_tok.get_vocab()
    if tv != dv:
        differ = sum(1 for tok, i in tv.items() if dv.get(tok) != i) + len(dv.keys() - tv.keys())
        raise PairError(
            "the target and the draft do not share a tokenizer "
            f"(vocabularies of {len(tv)} and {len(dv)} entries, {differ} differ); "
            "speculative decoding needs the draft to speak the target's token ids"
        )
    if target_tok(_PROBE).input_ids != draft_tok(_PROBE).input_ids:
        raise PairError(
            "the target and the draft tokenizers have the same vocabulary but split text "
            "differently; speculative decoding needs one shared tokenizer"
        )


# The rollback check: a prefill, a verification of DEPTH drafts, all but the first rejected.
PREFIX, DEPTH = 6, 4


@torch.inference_mode()
def check_rollback(name: str, model: PreTrainedModel, device: torch.device) -> None:
    """Raise :class:`PairError` unless ``model``'s cache rolls back correctly after a rejected
    draft, checked by doing it: a prefill, a verification of ``DEPTH`` drafts, a rollback of
    all but the first, and the next token, whose logits must be those of one fresh pass over
    the kept sequence. A cache layer's word is not enough: in transformers 5.25 every
    linear-attention layer says it can be cropped, yet a family whose modeling code keeps no
    intermediate recurrent states restores the wrong state, or raises."""
    gen = torch.Generator().manual_seed(0)
    vocab = int(model.config.get_text_config().vocab_size)
    ids = torch.randint(0, vocab, (1, PREFIX + DEPTH + 1), generator=gen).to(device)
    kept = torch.cat([ids[:, : PREFIX + 1], ids[:, -1:]], dim=1)  # the first draft, the next
    try:
        cache = new_cache(model, rollback=DEPTH)
        forward(model, cache, ids[:, :PREFIX], keep=1)
        forward(model, cache, ids[:, PREFIX : PREFIX + DEPTH], keep=DEPTH)
        rollback(cache, DEPTH - 1)
        got = forward(model, cache, ids[:, -1:], keep=1).float()
    except Exception as error:  # whatever the modeling code raises, the user hears why
        why = f"rolling its cache back raised {error!r}"
        raise PairError(_cannot_roll_back(name, why)) from error
    want = forward(model, new_cache(model), kept, keep=1).float()
    # Only finite logits are compared: a broken checkpoint's NaN is the decoding loop's to
    # report, with its own message.
    finite = torch.isfinite(want) & torch.isfinite(got)
    if not finite.any():
        return
    diff = float((got - want)[finite].abs().max())
    scale = max(1.0, float(want[finite].abs().max()))
    tolerance = 1e-3 if model.dtype == torch.float32 else 5e-2
    if diff > tolerance * scale:
        raise PairError(_cannot_roll_back(
            name, f"after a rollback its next logits differ from a fresh pass by {diff:.3g}"))


def _cannot_roll_back(name: str, why: str) -> str:
    return (f"{name} cannot be used for speculative decoding here: {why}. Its cache cannot "
            "be rolled back after a rejected draft (linear-attention (recurrent) layers whose "
            "modeling code keeps no intermediate states, in the installed transformers); "
            "target-only decoding works")


def logit_rows(model: PreTrainedModel) -> int:
    """How many token ids the model scores (its output embedding rows)."""
    head = model.get_output_embeddings()
    if head is not None:
        return int(head.weight.shape[0])
    return int(model.config.get_text_config().vocab_size)


def stop_token_ids(tokenizer, model: PreTrainedModel) -> frozenset[int]:
    """End-of-sequence ids: the tokenizer's and the target's generation config's."""
    ids: set[int] = set()
    for eos in (tokenizer.eos_token_id, getattr(model.generation_config, "eos_token_id", None)):
        if isinstance(eos, int):
            ids.add(eos)
        elif eos is not None:
            ids.update(int(i) for i in eos)
    return frozenset(ids)


@torch.inference_mode()
def warm_up(pair: ModelPair) -> None:
    """A short prefill and two decode steps per model, so first-call costs stay out of the
    timings."""
    ids = torch.zeros((1, 4), dtype=torch.long, device=pair.device)
    for model in {id(m): m for m in (pair.target, pair.draft) if m is not None}.values():
        cache = new_cache(model)
        forward(model, cache, ids, keep=1)
        for _ in range(2):
            forward(model, cache, ids[:, :1], keep=1)
