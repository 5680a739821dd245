"""The speculative loop's bookkeeping and rollback, on mock models whose next token depends on
the whole sequence and its length: any token left in a cache after a rejection, or missing
after a full acceptance, changes every later prediction. Fast: no neural network.

The target predicts ``next(ids) = (31 * sum(ids) + 7 * len(ids)) % V``; the draft predicts the
same except at lengths divisible by ``MISS`` (then one more), so which drafts are accepted
is known in advance and the output must be the target's own greedy sequence.
"""

from __future__ import annotations

import pytest
import torch
from transformers import DynamicCache, PretrainedConfig

from engine.decoder.baseline import run_target_only
from engine.decoder.events import ACCEPTED, DISCARDED, REJECTED, TARGET, GenerationConfig
from engine.decoder.loading import ModelPair
from engine.decoder.speculative import speculate

V = 64
MISS = 5


def target_next(ids: list[int]) -> int:
    return (31 * sum(ids) + 7 * len(ids)) % V


def draft_next(ids: list[int]) -> int:
    return (target_next(ids) + (len(ids) % MISS == 0)) % V


class MockModel(torch.nn.Module):
    """A causal LM whose "cache" holds the token ids themselves (as keys), so its prediction
    at each position reads exactly what the cache holds."""

    def __init__(self, rule) -> None:
        super().__init__()
        self.rule = rule
        self.config = PretrainedConfig(num_hidden_layers=1, vocab_size=V,
                                       max_position_embeddings=4096)
        self.calls = 0

    def forward(self, input_ids, past_key_values, logits_to_keep, **_):
        self.calls += 1
        held = past_key_values.layers[0].keys if past_key_values.get_seq_length() else None
        before = [] if held is None else held.flatten().long().tolist()
        new = input_ids[0].tolist()
        keys = torch.tensor(new, dtype=torch.float32).view(1, 1, -1, 1)
        past_key_values.update(keys, keys, 0)
        logits = torch.full((len(new), V), -10.0)
        for i in range(len(new)):
            logits[i, self.rule(before + new[: i + 1])] = 10.0
        return type("Out", (), {"logits": logits[-logits_to_keep:][None]})


class ByteTokenizer:
    def __call__(self, text: str):
        return type("Encoding", (), {"input_ids": [b % V for b in text.encode()]})

    def decode(self, ids, skip_special_tokens=False) -> str:
        return "".join(chr(65 + i % 26) for i in ids)


@pytest.fixture
def mock_pair() -> ModelPair:
    return ModelPair(target=MockModel(target_next), draft=MockModel(draft_next),
                     tokenizer=ByteTokenizer(), device=torch.device("cpu"),
                     shared_vocab_size=V, stop_token_ids=frozenset(), dtype=torch.float32)


def greedy_reference(prompt_ids: list[int], n: int) -> list[int]:
    ids = list(prompt_ids)
    for _ in range(n):
        ids.append(target_next(ids))
    return ids[len(prompt_ids):]


def expected_cycles(prompt_ids: list[int], k: int, n: int) -> list[int]:
    """Drafts accepted in each cycle: the draft is right until the sequence length hits a
    multiple of MISS."""
    ids, accepted = list(prompt_ids), []
    while len(ids) - len(prompt_ids) < n:
        a = 0
        while a < k and len(ids) % MISS != 0:
            ids.append(target_next(ids))
            a += 1
        ids.append(target_next(ids))  # the correction, or the bonus token
        accepted.append(a)
    return accepted


def test_mock_rule_is_seen_through_the_caches():
    cache = DynamicCache(config=MockModel(target_next).config)
    model = MockModel(target_next)
    out = model(torch.tensor([[1, 2, 3]]), cache, 1).logits[0, -1]
    assert out.argmax() == target_next([1, 2, 3]) and cache.get_seq_length() == 3


@pytest.mark.parametrize("k", [1, 2, 4, 7])
def test_greedy_output_is_the_targets_and_every_cycle_is_accounted_for(mock_pair, k):
    prompt = "speculate"
    prompt_ids = mock_pair.tokenizer(prompt).input_ids
    n = 50
    config = GenerationConfig(prompt=prompt, k=k, temperature=0.0, max_new_tokens=n)
    *cycles, done = speculate(mock_pair, config)
    assert done.token_ids == greedy_reference(prompt_ids, n)
    assert done.token_ids == run_target_only(mock_pair, config)[1].token_ids
    expected = expected_cycles(prompt_ids, k, n)
    assert [c.n_accepted for c in cycles] == expected
    emitted = 0
    for c in cycles:
        kinds = [t.kind for t in c.tokens]
        drafts = kinds[:k]
        shown = min(c.n_accepted, c.n_emitted)
        assert drafts[:shown] == [ACCEPTED] * shown
        assert c.rejected == (c.n_accepted < k)
        if c.rejected:
            assert drafts[c.n_accepted] == REJECTED
        assert set(drafts[c.n_accepted + c.rejected:]) <= {DISCARDED}
        assert (kinds[-1] == TARGET) == (c.n_emitted > c.n_accepted)
        emitted += c.n_emitted
    assert emitted == n == len(done.token_ids)


def test_one_target_pass_per_cycle_and_k_draft_steps(mock_pair):
    k, n = 3, 40
    config = GenerationConfig(prompt="abc", k=k, temperature=0.0, max_new_tokens=n)
    *cycles, _ = speculate(mock_pair, config)
    # prefill (one pass each), then one target pass per cycle and k draft steps per cycle
    assert mock_pair.target.calls == 1 + len(cycles)
    assert mock_pair.draft.calls == 1 + k * len(cycles)


def test_sampled_runs_keep_the_caches_in_step(mock_pair):
    """Peaked mock distributions: sampling follows the argmax, so the sampled output is the
    greedy one, which only holds if every rollback left the right tokens in both caches."""
    prompt_ids = mock_pair.tokenizer("xyz").input_ids
    config = GenerationConfig(prompt="xyz", k=4, temperature=1.0, max_new_tokens=45, seed=9)
    done = list(speculate(mock_pair, config))[-1]
    assert done.token_ids == greedy_reference(prompt_ids, 45)
