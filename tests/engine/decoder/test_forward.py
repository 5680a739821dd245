"""The engine's speed-ups keep its results: the written-out forward pass gives transformers'
logits bit for bit, greedy verification is the general rule on one-hot distributions, and
the sampler never draws a token of probability zero."""

import importlib.util
from pathlib import Path

import pytest
import torch
from support.rules import verify, verify_greedy
from transformers import (
    LlamaConfig,
    LlamaForCausalLM,
    MistralConfig,
    MistralForCausalLM,
    Qwen2Config,
    Qwen2ForCausalLM,
)

from engine.decoder.forward import (
    FastDecoder,
    KVCache,
    KVSlot,
    RaggedCache,
    forward,
    forward_batch,
    forward_ragged,
    new_cache,
    rollback,
)
from engine.decoder.sampling import greedy, sample, warp

SHAPE = dict(
    vocab_size=300,
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,  # grouped-query attention
    max_position_embeddings=512,
    initializer_range=0.1,
)


def build(kind: str):
    torch.manual_seed(0)
    if kind == "llama":
        return LlamaForCausalLM(LlamaConfig(**SHAPE)).eval()
    if kind == "qwen2":  # biases on q, k and v
        return Qwen2ForCausalLM(Qwen2Config(**SHAPE)).eval()
    return MistralForCausalLM(MistralConfig(**SHAPE, sliding_window=None)).eval()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("kind", ["llama", "qwen2", "mistral"])
def test_fast_forward_gives_transformers_logits_bit_for_bit(kind, dtype):
    model = build(kind).to(dtype)
    ids = torch.randint(0, 300, (1, 60), generator=torch.Generator().manual_seed(1))
    fast, slow = new_cache(model, capacity=8), new_cache(model, fast=False)
    assert isinstance(fast, KVCache) and not isinstance(slow, KVCache)
    with torch.inference_mode():
        # a prefill, single steps, verification-sized chunks, rollbacks; the cache grows twice
        pos = 0
        for n, back in [(12, 0), (1, 0), (1, 0), (5, 2), (1, 0), (9, 9), (3, 0), (7, 1), (1, 0)]:
            chunk = ids[:, pos : pos + n]
            assert torch.equal(forward(model, fast, chunk, n), forward(model, slow, chunk, n))
            rollback(fast, back)
            rollback(slow, back)
            pos += n - back
            assert fast.get_seq_length() == slow.get_seq_length() == pos
    assert fast.capacity >= pos


def test_models_the_fast_path_does_not_cover_use_transformers():
    eager = build("llama")
    eager.config._attn_implementation = "eager"
    torch.manual_seed(0)
    windowed = MistralForCausalLM(MistralConfig(**SHAPE, sliding_window=16)).eval()
    for model in (eager, windowed):
        assert FastDecoder.of(model) is None
        assert not isinstance(new_cache(model), KVCache)
    assert FastDecoder.of(build("llama")) is not None


def test_greedy_verification_is_the_rule_on_one_hot_distributions():
    gen = torch.Generator().manual_seed(0)
    for _ in range(200):
        k = int(torch.randint(1, 6, (1,), generator=gen))
        p_logits = torch.randn(k + 1, 5, generator=gen)
        q_logits = torch.randn(k, 5, generator=gen)
        # agree on a random prefix, so every acceptance length occurs
        agree = int(torch.randint(0, k + 1, (1,), generator=gen))
        q_logits[:agree] = p_logits[:agree]
        drafts = q_logits.argmax(-1)
        expected = verify(drafts, greedy(q_logits), greedy(p_logits), gen)
        assert verify_greedy(drafts.tolist(), p_logits.argmax(-1).tolist()) == expected


def test_sampling_never_draws_a_token_of_probability_zero():
    logits = torch.tensor([[3.0, 2.0, 1.0, 0.0, -1.0, -2.0]]).expand(50_000, 6)
    probs = warp(logits, temperature=1.0, top_p=0.8)  # the tail is cut to exactly 0
    draws = sample(probs, torch.Generator().manual_seed(0))
    allowed = (probs[0] > 0).nonzero().flatten().tolist()
    assert set(draws.tolist()) == set(allowed)
    leading_zero = torch.tensor([0.0, 0.0, 0.7, 0.0, 0.3])
    assert set(sample(leading_zero.expand(5000, 5), None).tolist()) == {2, 4}


@pytest.mark.parametrize("kind", ["llama", "qwen2"])
def test_the_static_pass_for_cuda_graphs_matches_the_eager_pass(kind):
    """What a CUDA graph replays (fixed shapes, the start as a tensor, masked attention over
    the whole cache), checked here on the CPU against the eager pass."""
    model = build(kind)
    decoder = FastDecoder.of(model)
    ids = torch.randint(0, 300, (1, 40), generator=torch.Generator().manual_seed(2))
    cache = new_cache(model, capacity=64)
    with torch.inference_mode():
        forward(model, cache, ids[:, :10], 1)
        rope = tuple(t[:64] for t in decoder._rope_table(64))
        for pos, n, keep in [(10, 1, 1), (11, 5, 5), (16, 2, 1), (18, 1, 1)]:
            copy = KVSlot(cache.kv.clone())
            start = torch.tensor(pos)
            static = decoder.static_pass(copy, ids[:, pos : pos + n], start, keep, rope)
            eager = forward(model, cache, ids[:, pos : pos + n], keep)
            torch.testing.assert_close(static[0], eager, atol=1e-5, rtol=1e-5)
            valid = cache.length
            torch.testing.assert_close(copy.kv[..., :valid, :], cache.kv[..., :valid, :])


def test_caches_reuse_their_memory():
    model = build("llama")
    first = new_cache(model, capacity=100)
    kv = first.kv
    del first
    again = new_cache(model, capacity=50)
    assert again.kv is kv and again.get_seq_length() == 0
    other = new_cache(model, capacity=50)
    assert other.kv is not kv


def test_rollback_forgets_the_last_positions(target_only_pair):
    model = target_only_pair.target
    ids = torch.tensor([[5, 6, 7, 8, 9, 10]])
    with torch.inference_mode():
        scratch = forward(model, new_cache(model), ids, keep=6)
        cache = new_cache(model)
        forward(model, cache, ids[:, :5], keep=1)
        rollback(cache, 2)
        assert cache.get_seq_length() == 3
        rollback(cache, 0)
        assert cache.get_seq_length() == 3
        again = forward(model, cache, ids[:, 3:], keep=3)
    torch.testing.assert_close(again, scratch[3:], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("kind", ["llama", "qwen2"])
def test_a_batch_gives_each_sequence_the_logits_it_gets_alone(kind):
    """Batched passes (prefill, steps, a verification-sized chunk, a rollback, growth past the
    reserved capacity) against the same sequences run one at a time."""
    model = build(kind)
    ids = torch.randint(0, 300, (3, 40), generator=torch.Generator().manual_seed(3))
    batched = new_cache(model, capacity=8, batch=3)
    alone = [new_cache(model, capacity=8) for _ in range(3)]
    assert batched.kv.shape[2] == 3
    with torch.inference_mode():
        pos = 0
        for n, back in [(10, 0), (1, 0), (5, 2), (1, 0), (6, 0)]:
            chunk = ids[:, pos : pos + n]
            together = forward_batch(model, batched, chunk, n)
            assert together.shape == (3, n, 300)
            for row, cache in enumerate(alone):
                single = forward(model, cache, chunk[row : row + 1], n)
                torch.testing.assert_close(together[row], single, atol=1e-5, rtol=1e-5)
                rollback(cache, back)
            rollback(batched, back)
            pos += n - back
    assert batched.capacity >= pos


def test_batches_through_transformers_when_the_fast_path_does_not_apply():
    model = build("llama")
    model.config._attn_implementation = "eager"
    ids = torch.randint(0, 300, (2, 6), generator=torch.Generator().manual_seed(4))
    with torch.inference_mode():
        together = forward_batch(model, new_cache(model, batch=2), ids, 1)
        single = forward(model, new_cache(model), ids[1:], 1)
    assert together.shape == (2, 1, 300)
    torch.testing.assert_close(together[1], single, atol=1e-5, rtol=1e-5)


def padded(lists: list[list[int]]) -> torch.Tensor:
    width = max(len(ids) for ids in lists)
    return torch.tensor([ids + [0] * (width - len(ids)) for ids in lists])


@pytest.mark.parametrize("kind", ["llama", "qwen2"])
def test_ragged_rows_give_each_rows_own_logits(kind):
    """Rows of different lengths in one cache: a ragged prefill (one row empty), verification
    chunks, per-row rollbacks, inputs of 1 to 3 real tokens padded to one width, a retired
    row, growth past the capacity. Each row's logits equal its own sequence's from a fresh
    single-row pass, up to the rounding of a different batch shape."""
    model = build(kind)
    gen = torch.Generator().manual_seed(3)
    seqs = [torch.randint(0, 300, (80,), generator=gen).tolist() for _ in range(3)]
    cache = RaggedCache(FastDecoder.of(model), capacity=8, batch=3)
    done = [0, 0, 0]

    def run(rows: list[int], counts: list[int], keep: int) -> None:
        ids = padded([seqs[r][done[r] : done[r] + n] for r, n in zip(rows, counts, strict=True)])
        with torch.inference_mode():
            logits = forward_ragged(cache, ids, counts, keep)
        for i, (r, n) in enumerate(zip(rows, counts, strict=True)):
            done[r] += n
            if n >= keep:
                alone = forward(model, new_cache(model), torch.tensor([seqs[r][: done[r]]]), keep)
                torch.testing.assert_close(logits[i], alone, atol=2e-5, rtol=1e-5)

    rows = [0, 1, 2]
    run(rows, [7, 15, 0], 1)
    for counts, keep, back in [([1, 1, 1], 1, [0, 0, 0]), ([5, 5, 5], 5, [3, 0, 4]),
                               ([2, 1, 3], 1, [0, 0, 0]), ([4, 4, 4], 4, [0, 2, 1])]:
        run(rows, counts, keep)
        cache.rollback(back)
        done = [d - b for d, b in zip(done, back, strict=True)]
        assert cache.lengths == done
    cache.keep_rows([2, 0])  # row 1 leaves; the order may change
    rows = [2, 0]
    for counts, keep in [([1, 1], 1), ([6, 6], 6), ([1, 2], 1)]:
        run(rows, counts, keep)
    assert cache.lengths == [done[2], done[0]] and cache.capacity >= max(done) > 8


def test_a_batch_of_one_row_is_the_single_stream_pass_bit_for_bit():
    model = build("llama")
    ids = torch.randint(0, 300, (1, 30), generator=torch.Generator().manual_seed(4))
    single, ragged = new_cache(model), RaggedCache(FastDecoder.of(model), 8, 1)
    with torch.inference_mode():
        pos = 0
        for n, back in [(10, 0), (1, 0), (5, 3), (2, 0), (1, 0)]:
            chunk = ids[:, pos : pos + n]
            assert torch.equal(forward_ragged(ragged, chunk, [n], n)[0],
                               forward(model, single, chunk, n))
            rollback(single, back)
            ragged.rollback([back])
            pos += n - back


def test_grouped_query_heads_on_the_ragged_path_equal_the_expanded_form():
    """A random Llama of grouped-query shape (benchmarks/random_llama.py, ``tiny``: 4 query
    heads share 2 KV heads): the ragged pass, which attends with the keys and values as
    stored, gives the logits of the same pass with the heads repeated (transformers' way)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    spec = importlib.util.spec_from_file_location(
        "random_llama", Path(__file__).parents[3] / "benchmarks" / "random_llama.py")
    random_llama = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(random_llama)
    shape = random_llama.SHAPES["tiny"]["target"] | {"num_key_value_heads": 1}
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(**shape)).eval()
    decoder = FastDecoder.of(model)
    assert decoder.groups == 4
    gen = torch.Generator().manual_seed(1)
    prompts = [torch.randint(0, 4000, (n,), generator=gen).tolist() for n in (9, 3, 14)]
    logits = {}
    for grouped in (True, False):
        decoder.grouped_attention = grouped
        cache = RaggedCache(decoder, capacity=32, batch=3)
        with torch.inference_mode():
            forward_ragged(cache, padded(prompts), [len(p) for p in prompts], 1)
            step = torch.randint(0, 4000, (3, 5), generator=torch.Generator().manual_seed(2))
            logits[grouped] = forward_ragged(cache, step, [5, 2, 4], 5)
    decoder.grouped_attention = True
    torch.testing.assert_close(logits[True], logits[False], atol=1e-5, rtol=1e-5)


def test_retiring_rows_moves_only_the_rows_that_move(target_only_pair):
    """Rows 1 and 3 of 5 finish: the survivors past the new end move into their places (one
    copy each, in the same memory), and every row keeps its keys, values and length."""
    from engine.decoder.rows import survivors_order

    model = target_only_pair.target
    cache = RaggedCache(FastDecoder.of(model), capacity=16, batch=5)
    ids = torch.randint(0, 300, (5, 6), generator=torch.Generator().manual_seed(5))
    with torch.inference_mode():
        forward_ragged(cache, ids, [6, 2, 5, 3, 4], 1)
    before = cache.kv.clone()
    order = survivors_order([0, 2, 4])
    assert order == [0, 4, 2]  # row 4 fills the hole row 1 left; rows 0 and 2 stay
    memory = cache.kv.data_ptr()
    cache.keep_rows(order)
    assert cache.kv.data_ptr() == memory and cache.batch == 3
    assert cache.lengths == [6, 4, 5]
    for new, old in enumerate(order):
        length = cache.lengths[new]
        assert torch.equal(cache.kv[:, :, new, :, :length], before[:, :, old, :, :length])


def test_the_pass_hands_back_its_final_hidden_states(target_only_pair):
    """For drafters that read them (an EAGLE head): the target's hidden states after its
    final norm at every position of the pass, as transformers computes them, and the logits
    unchanged."""
    model = target_only_pair.target
    ids = torch.randint(0, 300, (2, 7), generator=torch.Generator().manual_seed(6))
    cache = RaggedCache(FastDecoder.of(model), capacity=16, batch=2)
    hidden: list = []
    with torch.inference_mode():
        logits = FastDecoder.of(model).ragged(cache, ids, [7, 4], 2, hidden)
        expected = model.model(input_ids=ids).last_hidden_state
        plain = FastDecoder.of(model).ragged(RaggedCache(FastDecoder.of(model), 16, 2), ids,
                                             [7, 4], 2)
    assert hidden[0].shape == (2, 7, model.config.hidden_size)
    torch.testing.assert_close(hidden[0][0], expected[0], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(hidden[0][1, :4], expected[1, :4], atol=1e-5, rtol=1e-5)
    assert torch.equal(logits, plain)
