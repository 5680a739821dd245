"""The EAGLE-1 head: vLLM's layout and checkpoint names, the computation EAGLE-1 defines,
its position-indexed cache (rollback, ragged batches) and drafting."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file
from support.runs import propose
from support.tiny_models import build_llama
from transformers.models.llama.modeling_llama import LlamaDecoderLayer

from engine.decoder.common import Clock
from engine.decoder.eagle import PADDING, Eagle, EagleHead, head_config, target_features

# What vLLM's EagleLlamaForCausalLM (vllm/model_executor/models/llama_eagle.py) loads: it
# prefixes "model." itself, stacks q/k/v and gate/up, has no input_layernorm (Identity), no
# final norm, and shares embed_tokens and lm_head from the target when they are absent.
VLLM_NAMES = {
    "fc.weight",
    "layers.0.self_attn.q_proj.weight",
    "layers.0.self_attn.k_proj.weight",
    "layers.0.self_attn.v_proj.weight",
    "layers.0.self_attn.o_proj.weight",
    "layers.0.mlp.gate_proj.weight",
    "layers.0.mlp.up_proj.weight",
    "layers.0.mlp.down_proj.weight",
    "layers.0.post_attention_layernorm.weight",
}


@pytest.fixture(scope="module")
def target():
    return build_llama(seed=0)


@pytest.fixture(scope="module")
def head(target):
    torch.manual_seed(5)
    head = EagleHead(head_config(target.config), target).eval()
    with torch.no_grad():  # a non-trivial norm weight, so a test can tell it is applied
        head.layers[0].post_attention_layernorm.weight.uniform_(0.5, 1.5)
    return head


def sequence(target, n: int, seed: int = 0):
    """Token ids ``[1, n + 1]`` and the target's features ``[1, n + 1, H]`` for them."""
    gen = torch.Generator().manual_seed(seed)
    ids = torch.randint(2, target.config.vocab_size, (1, n + 1), generator=gen)
    with torch.inference_mode():
        return ids, target_features(target, ids)


def fresh(head, ids, features, n: int) -> torch.Tensor:
    """The head's outputs for entries 0 .. n - 1 in one causal pass without a cache."""
    with torch.inference_mode():
        return head(ids[:, 1 : n + 1], features[:, :n], torch.arange(n)[None])


# ---- layout ----------------------------------------------------------------------------------


def test_the_head_owns_exactly_the_weights_vllm_loads(head, target):
    h = target.config.hidden_size
    state = {k: v for k, v in head.state_dict().items() if not k.startswith("rotary.")}
    assert set(state) == VLLM_NAMES
    assert state["fc.weight"].shape == (h, 2 * h)  # fc: [embed, feature] -> H, no bias
    assert state["layers.0.mlp.gate_proj.weight"].shape == (target.config.intermediate_size, h)
    assert head.fc.bias is None
    assert not any("input_layernorm" in k or k.startswith("norm") for k in state)


def test_the_config_is_a_one_layer_llama_of_the_targets_width(target):
    config = head_config(target.config)
    assert config.architectures == ["LlamaForCausalLM"]
    assert config.num_hidden_layers == 1
    for key in ("hidden_size", "intermediate_size", "num_attention_heads",
                "num_key_value_heads", "vocab_size", "rms_norm_eps"):
        assert getattr(config, key) == getattr(target.config, key)
    assert target.config.num_hidden_layers == 2  # the target's own config is left alone


def test_the_embedding_and_lm_head_are_the_targets_and_not_the_heads(head, target):
    assert head.shared.embed_tokens is target.get_input_embeddings()
    assert head.shared.lm_head is target.get_output_embeddings()
    own = {id(p) for p in head.parameters()}
    assert id(target.get_input_embeddings().weight) not in own
    x = torch.randn(3, target.config.hidden_size)
    assert torch.equal(head.logits(x), target.lm_head(x))  # no final norm before the LM head


def test_fc_reads_the_embedding_first_and_the_feature_second(head, target):
    h = target.config.hidden_size
    ids, features = sequence(target, 4)
    probe = EagleHead(head.config, target)
    probe.load_state_dict(head.state_dict())
    with torch.no_grad():
        probe.layers[0].self_attn.o_proj.weight.zero_()  # the layer adds nothing: out = fc(..)
        probe.layers[0].mlp.down_proj.weight.zero_()
        eye, zero = torch.eye(h), torch.zeros(h, h)
        probe.fc.weight.copy_(torch.cat([eye, zero], 1))
        embeds = probe(ids[:, 1:], features[:, :-1], torch.arange(4)[None])
        probe.fc.weight.copy_(torch.cat([zero, eye], 1))
        feats = probe(ids[:, 1:], features[:, :-1], torch.arange(4)[None])
    torch.testing.assert_close(embeds, target.get_input_embeddings()(ids[:, 1:]))
    torch.testing.assert_close(feats, features[:, :-1])


def test_the_layer_is_a_llama_decoder_layer_without_its_input_norm(head, target):
    """transformers' LlamaDecoderLayer with input_layernorm replaced by the identity (what
    vLLM does) on fc's output gives the head's output."""
    ids, features = sequence(target, 6)
    config = head_config(target.config)
    config._attn_implementation = "eager"  # the additive mask below, as written
    reference = LlamaDecoderLayer(config, layer_idx=0).eval()
    reference.load_state_dict(head.layers[0].state_dict(), strict=False)
    reference.input_layernorm = torch.nn.Identity()
    positions = torch.arange(6)[None] + 3  # rotary positions other than 0..n-1 too
    with torch.inference_mode():
        x = head.fc(torch.cat([target.get_input_embeddings()(ids[:, 1:]), features[:, :-1]], -1))
        allowed = torch.ones(6, 6, dtype=torch.bool).tril()
        mask = torch.zeros(6, 6).masked_fill(~allowed, float("-inf"))[None, None]
        expected = reference(x, attention_mask=mask, position_ids=positions,
                             position_embeddings=head.rotary(x, positions))
        expected = expected[0] if isinstance(expected, tuple) else expected
        got = head(ids[:, 1:], features[:, :-1], positions)
    torch.testing.assert_close(got, expected)


# ---- checkpoint ------------------------------------------------------------------------------


def test_save_then_load_gives_the_same_head(head, target, tmp_path):
    head.save(tmp_path, dtype=torch.float32)
    assert set(load_file(tmp_path / "model.safetensors")) == VLLM_NAMES
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["architectures"] == ["LlamaForCausalLM"]
    assert config["num_hidden_layers"] == 1
    loaded = EagleHead.load(tmp_path, target)
    ids, features = sequence(target, 8)
    torch.testing.assert_close(fresh(loaded, ids, features, 8), fresh(head, ids, features, 8),
                               rtol=0, atol=0)


def test_a_float16_checkpoint_loads_within_float16_rounding(head, target, tmp_path):
    head.save(tmp_path)  # float16 by default, like the shipped pair
    assert json.loads((tmp_path / "config.json").read_text())["dtype"] == "float16"
    loaded = EagleHead.load(tmp_path, target)
    assert loaded.fc.weight.dtype == torch.float32
    ids, features = sequence(target, 8)
    torch.testing.assert_close(fresh(loaded, ids, features, 8), fresh(head, ids, features, 8),
                               rtol=2e-2, atol=2e-2)


def test_loading_a_checkpoint_with_other_weights_fails_clearly(head, target, tmp_path):
    head.save(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    config["num_hidden_layers"] = 2
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match="one layer"):
        EagleHead.load(tmp_path, target)


# ---- the cache -------------------------------------------------------------------------------


def test_a_cached_pass_in_pieces_equals_one_fresh_pass(head, target):
    ids, features = sequence(target, 12)
    expected = fresh(head, ids, features, 12)
    cache = head.new_cache(1, 32)
    with torch.inference_mode():
        a = head(ids[:, 1:6], features[:, :5], torch.arange(5)[None], cache)
        b = head(ids[:, 6:13], features[:, 5:12], torch.arange(5, 12)[None], cache)
    torch.testing.assert_close(torch.cat([a, b], 1), expected)
    assert cache.lengths.tolist() == [12]


def test_rolling_back_drafts_then_rerunning_equals_a_fresh_run(head, target):
    """Drafted entries (the head's own features, other tokens) written past the verified
    length, rolled back and overwritten, leave no trace."""
    ids, features = sequence(target, 10)
    cache = head.new_cache(1, 32)
    gen = torch.Generator().manual_seed(3)
    with torch.inference_mode():
        head(ids[:, 1:7], features[:, :6], torch.arange(6)[None], cache)
        junk_ids = torch.randint(2, target.config.vocab_size, (1, 4), generator=gen)
        junk_features = torch.randn(1, 4, target.config.hidden_size, generator=gen) * 3
        head(junk_ids, junk_features, torch.arange(6, 10)[None], cache)
        cache.rollback([6])
        again = head(ids[:, 7:11], features[:, 6:10], torch.arange(6, 10)[None], cache)
    torch.testing.assert_close(again, fresh(head, ids, features, 10)[:, 6:])
    assert cache.lengths.tolist() == [10]


def test_a_pass_may_not_leave_a_gap_after_the_cached_length(head, target):
    ids, features = sequence(target, 8)
    cache = head.new_cache(1, 32)
    with torch.inference_mode():
        head(ids[:, 1:4], features[:, :3], torch.arange(3)[None], cache)
        with pytest.raises(ValueError, match="cached length"):
            head(ids[:, 5:6], features[:, 4:5], torch.tensor([[4]]), cache)
    small = head.new_cache(1, 4)
    with torch.inference_mode(), pytest.raises(ValueError, match="past the head's cache"):
        head(ids[:, 1:6], features[:, :5], torch.arange(5)[None], small)


def test_ragged_rows_with_padding_equal_each_row_on_its_own(head, target):
    (ids_a, f_a), (ids_b, f_b) = sequence(target, 9, seed=1), sequence(target, 9, seed=2)
    cache = head.new_cache(2, 32)
    h = target.config.hidden_size
    with torch.inference_mode():
        # row 0 holds 7 entries, row 1 holds 4 and then 5 more, padded to one tensor
        head(torch.cat([ids_a[:, 1:5], ids_b[:, 1:5]]), torch.cat([f_a[:, :4], f_b[:, :4]]),
             torch.arange(4).expand(2, -1), cache)
        tokens = torch.cat([torch.cat([ids_a[:, 5:8], torch.zeros(1, 2, dtype=torch.long)], 1),
                            ids_b[:, 5:10]])
        feats = torch.cat([torch.cat([f_a[:, 4:7], torch.full((1, 2, h), 9.0)], 1),
                           f_b[:, 4:9]])
        positions = torch.tensor([[4, 5, 6, PADDING, PADDING], [4, 5, 6, 7, 8]])
        out = head(tokens, feats, positions, cache)
    torch.testing.assert_close(out[0, :3], fresh(head, ids_a, f_a, 7)[0, 4:])
    torch.testing.assert_close(out[1], fresh(head, ids_b, f_b, 9)[0, 4:])
    assert cache.lengths.tolist() == [7, 9]


# ---- drafting --------------------------------------------------------------------------------


def test_greedy_drafts_follow_the_heads_own_features(head, target):
    ids, features = sequence(target, 6)
    cache = head.new_cache(1, 32)
    drafts, q = propose(head, cache, ids[:, 1:], features[:, :-1], torch.arange(6)[None], k=3)
    assert q is None and drafts.shape == (1, 3)
    # by hand: the last verified entry's output feature, then each draft fed back
    with torch.inference_mode():
        f = fresh(head, ids, features, 6)[:, -1:]
        tokens, seq_ids, seq_f = [], ids[:, 1:], features[:, :-1]
        for _ in range(3):
            token = head.logits(f[:, 0]).argmax(-1)
            tokens.append(int(token))
            seq_ids = torch.cat([seq_ids, token[None]], 1)
            seq_f = torch.cat([seq_f, f], 1)
            f = head(seq_ids, seq_f, torch.arange(seq_ids.shape[1])[None])[:, -1:]
    assert drafts[0].tolist() == tokens
    assert cache.lengths.tolist() == [8]  # 6 verified + the 2 drafts fed back


def test_sampled_drafts_come_with_their_distributions_and_follow_the_seed(head, target):
    ids, features = sequence(target, 6)

    def run(seed):
        cache = head.new_cache(1, 32)
        gen = torch.Generator().manual_seed(seed)
        return propose(head, cache, ids[:, 1:], features[:, :-1], torch.arange(6)[None], k=4,
                       temperature=1.0, generator=gen)

    drafts, q = run(0)
    assert q.shape == (1, 4, target.config.vocab_size)
    torch.testing.assert_close(q.sum(-1), torch.ones(1, 4))
    assert bool((q[0, torch.arange(4), drafts[0]] > 0).all())
    assert torch.equal(run(0)[0], drafts)
    assert any(not torch.equal(run(s)[0], drafts) for s in range(1, 6))


# ---- the drafter interface -------------------------------------------------------------------


CPU = torch.device("cpu")


def greedy_drafter(head, prompts: list[list[int]], hidden: torch.Tensor) -> Eagle:
    """The engine's EAGLE drafter for these rows, proposing argmaxes, prefilled with
    ``hidden [B, n, H]``: the target over each prompt but its last token."""
    drafter = Eagle(head, head.config.vocab_size, 64, len(prompts), CPU,
                    dict(temperature=0.0, top_k=0, top_p=1.0), greedy=True)
    drafter.prefill(prompts, target_hidden=hidden)
    return drafter


def test_the_drafter_proposes_per_row_what_a_fresh_head_proposes_over_the_whole_row(head,
                                                                                      target):
    """Two rows of different lengths, accepting different numbers of drafts each cycle: the
    drafter, fed only the target's hidden states at the verified positions, proposes what a
    fresh cache over each row's whole verified sequence proposes."""
    rows = [torch.tensor([5, 17, 42, 9, 100, 7]), torch.tensor([33, 8, 250])]
    next_tokens = [12, 13]
    n = max(len(r) for r in rows)
    padded = torch.stack([torch.cat([r, torch.zeros(n - len(r), dtype=torch.long)]) for r in rows])
    with torch.inference_mode():
        hidden = target_features(target, padded)  # right padding leaves real positions alone
    seqs = [torch.cat([r, torch.tensor([t])]) for r, t in zip(rows, next_tokens, strict=True)]
    drafter = greedy_drafter(head, [seq.tolist() for seq in seqs], hidden)
    k, clock = 3, Clock(CPU)
    for accepted in ([1, 0], [3, 2], [0, 3]):
        drafts = drafter.propose(k, None, clock)
        assert drafts.q is None and drafts.length_list == [k, k]
        for b, seq in enumerate(seqs):
            with torch.inference_mode():
                f = target_features(target, seq[None])[0][:-1]
            expected, _ = propose(head, head.new_cache(1, 64), seq[1:][None], f[None],
                                  torch.arange(len(seq) - 1)[None], k)
            assert drafts.tokens[b].tolist() == expected[0].tolist(), (accepted, b)
        # the target's pass over [last, d_1 .. d_k] of each row, and its choice after them
        hidden = torch.zeros(2, k + 1, target.config.hidden_size)
        fixes = [77, 78]
        for b, seq in enumerate(seqs):
            with torch.inference_mode():
                f = target_features(target, torch.cat([seq, drafts.tokens[b]])[None])[0]
            hidden[b] = f[len(seq) - 1 :]
            kept = drafts.tokens[b, : accepted[b]]
            seqs[b] = torch.cat([seq, kept, torch.tensor(fixes[b : b + 1])])
        drafter.commit(k, accepted, fixes, drafts, target_hidden=hidden)


def test_a_row_leaving_the_batch_leaves_the_others_drafting_as_before(head, target):
    ids, hidden = sequence(target, 7, seed=4)
    other, other_hidden = sequence(target, 7, seed=5)
    clock = Clock(CPU)
    both = greedy_drafter(head, [ids[0].tolist() + [20], other[0].tolist() + [21]],
                          torch.cat([hidden, other_hidden]))
    alone = greedy_drafter(head, [other[0].tolist() + [21]], other_hidden)
    drafts, by_itself = both.propose(2, None, clock), alone.propose(2, None, clock)
    assert drafts.tokens[1].tolist() == by_itself.tokens[0].tolist()
    step = torch.randn(2, 3, target.config.hidden_size)
    both.commit(2, [2, 1], [30, 31], drafts, target_hidden=step)
    alone.commit(2, [1], [31], by_itself, target_hidden=step[1:])
    both.keep_rows([1])
    after = both.propose(2, None, clock).tokens.tolist()
    assert after == alone.propose(2, None, clock).tokens.tolist()


def test_drafting_after_a_prompt_starts_from_the_targets_own_next_token(head, target):
    from support.runs import draft_after_prompt

    prompt = torch.tensor([5, 17, 42, 9, 100, 7])
    nxt, drafts, q = draft_after_prompt(target, head, prompt, k=3)
    with torch.inference_mode():
        assert nxt == int(target(input_ids=prompt[None]).logits[0, -1].argmax())
        f = target_features(target, prompt[None])
        tokens = torch.cat([prompt[1:], torch.tensor([nxt])])[None]
        expected, _ = propose(head, head.new_cache(1, 16), tokens, f, torch.arange(6)[None], 3)
    assert q is None and drafts.tolist() == expected[0].tolist()
    _, sampled, q = draft_after_prompt(target, head, prompt, k=3, temperature=1.0,
                                       generator=torch.Generator().manual_seed(0))
    assert q.shape == (3, target.config.vocab_size)
    assert bool((q[torch.arange(3), sampled] > 0).all())
