import pytest
import torch

from engine.decoder.loading import ModelPair, PairError, load_pair, resolve_device, set_threads


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


def test_a_missing_local_model_is_named(tmp_path):
    with pytest.raises(ValueError, match="no model at .*nowhere"):
        load_pair(str(tmp_path / "nowhere"), None, device="cpu")


def test_threads_default_to_one_on_a_cpu():
    before = torch.get_num_threads()
    try:
        assert set_threads(None, "cpu") == 1
        assert set_threads(2, "cpu") == 2
    finally:
        torch.set_num_threads(before)


def test_a_dropped_pair_is_freed(model_dirs):
    """Loading and dropping a pair returns its memory: nothing the engine keeps (the fast
    decoder of each model, its KV slots) holds on to the models once the pair is gone."""
    import gc
    import weakref

    from engine.decoder.events import GenerationConfig
    from engine.decoder.speculative import speculate

    pair = load_pair(model_dirs["target"], model_dirs["good"], device="cpu")
    config = GenerationConfig(prompt="the quick brown fox", k=3, max_new_tokens=6)
    assert list(speculate(pair, config))  # the fast path and its caches in use
    models = [weakref.ref(pair.target), weakref.ref(pair.draft)]
    del pair
    gc.collect()
    assert [m() for m in models] == [None, None]
