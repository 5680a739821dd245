import pytest
import torch

from engine.loading import (
    ModelPair,
    PairError,
    forward,
    load_pair,
    new_cache,
    resolve_device,
    rollback,
)


def test_load_pair_gives_models_tokenizer_and_vocabulary(good_pair):
    assert isinstance(good_pair, ModelPair)
    assert good_pair.device == torch.device("cpu") and good_pair.dtype == torch.float32
    assert good_pair.shared_vocab_size == 300
    assert not good_pair.target.training and not good_pair.draft.training
    assert 1 in good_pair.stop_token_ids  # "</s>"
    assert good_pair.tokenizer.decode(good_pair.tokenizer("the fox").input_ids) == "the fox"


def test_target_only_pair_has_no_draft(target_only_pair):
    assert target_only_pair.draft is None and target_only_pair.shared_vocab_size == 300


def test_embedding_sizes_may_differ_if_the_tokenizer_is_shared(wide_pair):
    assert wide_pair.target.get_output_embeddings().weight.shape[0] == 316
    assert wide_pair.draft.get_output_embeddings().weight.shape[0] == 300
    assert wide_pair.shared_vocab_size == 300


def test_a_draft_with_another_tokenizer_is_refused(model_dirs):
    with pytest.raises(PairError, match="do not share a tokenizer"):
        load_pair(model_dirs["target"], model_dirs["foreign"], device="cpu")
    assert issubclass(PairError, ValueError)


def test_dtype_can_be_overridden(model_dirs):
    pair = load_pair(model_dirs["target"], None, device="cpu", dtype=torch.bfloat16, warmup=False)
    assert pair.target.dtype == torch.bfloat16 and pair.dtype == torch.bfloat16


def test_device_resolution():
    assert resolve_device("cpu") == torch.device("cpu")
    if torch.cuda.is_available():
        assert resolve_device(None).type == "cuda"
    else:
        assert resolve_device(None) == torch.device("cpu")
        with pytest.raises(ValueError, match="CUDA is not available"):
            resolve_device("cuda")


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


def test_a_missing_local_model_is_named(tmp_path):
    with pytest.raises(ValueError, match="no model at .*nowhere"):
        load_pair(str(tmp_path / "nowhere"), None, device="cpu")
