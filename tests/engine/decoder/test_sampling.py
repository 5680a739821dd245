import pytest
import torch
from scipy.stats import chisquare

from engine.decoder.events import GREEDY_BELOW, GenerationConfig
from engine.decoder.sampling import check_finite, greedy, row_uniforms, sample, sample_with, warp

LOGITS = torch.tensor([[2.0, 1.0, 0.5, 0.0, -1.0], [0.0, 0.0, 3.0, 1.0, 2.0]])


def test_warp_keeps_shape_and_gives_probabilities():
    probs = warp(LOGITS, temperature=0.7, top_k=0, top_p=1.0)
    assert probs.shape == LOGITS.shape and probs.dtype == torch.float32
    assert torch.allclose(probs.sum(-1), torch.ones(2))
    assert torch.allclose(probs, torch.softmax(LOGITS / 0.7, -1))


def test_temperature_zero_is_one_hot_argmax():
    probs = warp(LOGITS, temperature=0.0, top_k=2, top_p=0.5)
    assert torch.equal(probs, greedy(LOGITS))
    assert probs.argmax(-1).tolist() == [0, 2] and probs.sum().item() == 2.0


def test_top_k_keeps_the_k_most_likely():
    probs = warp(LOGITS, temperature=1.0, top_k=2)
    assert (probs > 0).sum(-1).tolist() == [2, 2]
    assert torch.allclose(probs[0, :2], torch.softmax(LOGITS[0, :2], -1))


def test_top_p_keeps_the_smallest_set_reaching_p():
    probs = torch.softmax(LOGITS[0], -1)  # about 0.55, 0.20, 0.12, 0.07, 0.03
    kept = warp(LOGITS[0], temperature=1.0, top_p=0.6)
    assert (kept > 0).tolist() == [True, True, False, False, False]
    assert torch.allclose(kept[:2], probs[:2] / probs[:2].sum())
    assert (warp(LOGITS[0], 1.0, top_p=0.5) > 0).sum() == 1  # the top token alone reaches 0.5
    assert (warp(LOGITS[0], 1.0, top_p=1.0) > 0).all()


def test_sample_follows_the_distribution_and_is_seeded():
    probs = torch.tensor([0.5, 0.3, 0.15, 0.05, 0.0])
    draws = sample(probs.expand(20_000, 5), torch.Generator().manual_seed(0))
    counts = torch.bincount(draws, minlength=5)
    assert counts[4] == 0
    assert chisquare(counts[:4].numpy(), (probs[:4] * 20_000).numpy()).pvalue > 1e-3
    again = sample(probs.expand(20_000, 5), torch.Generator().manual_seed(0))
    assert torch.equal(draws, again)


def test_temperatures_below_the_threshold_are_greedy():
    for temperature in (1e-39, 1e-30, GREEDY_BELOW / 2):
        probs = warp(LOGITS, temperature)
        assert torch.equal(probs, greedy(LOGITS)), temperature
    assert GenerationConfig(prompt="x", temperature=1e-39).greedy
    assert not GenerationConfig(prompt="x", temperature=0.01).greedy


def test_tiny_top_p_keeps_the_most_likely_token():
    for top_p in (1e-46, 1e-300, 1e-9):
        probs = warp(LOGITS, 1.0, top_p=top_p)
        assert torch.isfinite(probs).all(), top_p
        assert torch.equal(probs, greedy(LOGITS)), top_p


def test_rows_that_are_not_finite_give_a_valid_id_and_a_clear_error():
    bad = torch.tensor([[float("nan")] * 5, [0.1, 0.2, 0.3, 0.4, 0.0]])
    ids = sample(bad, torch.Generator().manual_seed(0))
    assert ids.min() >= 0 and ids.max() < 5
    with pytest.raises(ValueError, match="not finite numbers"):
        check_finite(bad)
    check_finite(bad[1:])


def test_greedy_carries_a_broken_logit_row_to_the_finiteness_check():
    inf, nan = float("inf"), float("nan")
    logits = torch.tensor([[0.1, nan, 0.3], [0.1, inf, 0.3], [-inf, 0.2, 0.1], [0.5, 0.2, 0.1]])
    probs = greedy(logits)
    assert torch.isnan(probs[:2]).all()  # NaN or +inf: the argmax means nothing
    assert probs[2:].tolist() == [[0.0, 1.0, 0.0], [1.0, 0.0, 0.0]]  # -inf is a masked token
    with pytest.raises(ValueError, match="not finite numbers"):
        check_finite(probs)
    check_finite(probs[2:])

def test_row_uniforms_draw_each_row_with_its_own_generator():
    """Row b's tokens, drawn with its share of ``row_uniforms``, are what ``sample`` gives for
    that row and generator alone, whatever the other rows are: a batch never couples its
    rows' random streams. Rows may draw different counts; the rest of a row is 0."""
    gen = torch.Generator().manual_seed(5)
    probs = torch.softmax(torch.randn(6, 50, generator=gen) * 3, dim=-1)
    seeds = [11, 12, 13, 11, 14, 15]
    for _ in range(20):
        u = row_uniforms([torch.Generator().manual_seed(s) for s in seeds], [1] * 6, 3,
                         torch.device("cpu"))
        assert u.shape == (6, 3) and (u[:, 1:] == 0).all()
        alone = [int(sample(probs[b], torch.Generator().manual_seed(s)))
                 for b, s in enumerate(seeds)]
        assert sample_with(probs, u[:, 0]).tolist() == alone
        seeds = [s + 6 for s in seeds]
    ragged = row_uniforms([torch.Generator().manual_seed(1) for _ in range(2)], [0, 2], 2,
                          torch.device("cpu"))
    assert ragged[0].tolist() == [0.0, 0.0]
    assert ragged[1].tolist() == torch.rand(2, generator=torch.Generator().manual_seed(1)).tolist()
