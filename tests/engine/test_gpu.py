"""On a CUDA device only (skipped elsewhere; benchmarks/gpu_check.sh runs them): the decode
steps replayed as CUDA graphs give the eager pass's logits, greedy speculation still equals
transformers' greedy decoding, and the benchmark runs. The CPU-side half of the graphs (the
static pass they record) is checked on every machine in test_forward.py."""

import dataclasses

import pytest
import torch
from support.tiny_models import build_llama

from engine.decoder.baseline import run_target_only
from engine.decoder.events import GenerationConfig
from engine.decoder.forward import FastDecoder, forward, new_cache, rollback
from engine.decoder.loading import load_pair
from engine.decoder.speculative import speculate
from engine.measure.bench import BenchConfig, run_bench

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]
PROMPT = "the quick brown fox"


@pytest.fixture(scope="module")
def cuda_pair(model_dirs):
    """The tiny pair on the GPU, in float32 so that greedy ties cannot differ by rounding."""
    return load_pair(model_dirs["target"], model_dirs["good"], device="cuda", dtype=torch.float32)


def test_cuda_graph_replays_give_the_eager_logits():
    model = build_llama(seed=0).to("cuda")
    decoder = FastDecoder.of(model)
    decoder.use_graphs(True)
    assert decoder.graphs
    ids = torch.randint(0, 300, (1, 80), device="cuda")
    # (tokens, logits kept, positions rolled back): a prefill, steps, verification passes
    plan = [(12, 12, 0), (1, 1, 0), (1, 1, 0), (5, 5, 2), (2, 1, 0), (1, 1, 0), (5, 5, 0)]

    def run(graphs: bool) -> tuple[list[torch.Tensor], object]:
        decoder.graphs = graphs
        cache, out, pos = new_cache(model, capacity=64), [], 0
        with torch.inference_mode():
            for n, keep, back in plan:
                out.append(forward(model, cache, ids[:, pos : pos + n], keep))
                rollback(cache, back)
                pos += n - back
        return out, cache

    graphed, cache = run(True)
    assert cache.slot.graphs and all(g is not None for g in cache.slot.graphs.values())
    eager, _ = run(False)
    decoder.graphs = True
    for a, b in zip(graphed, eager, strict=True):
        torch.testing.assert_close(a, b, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("k", [1, 4])
def test_greedy_speculation_on_cuda_equals_transformers(cuda_pair, k):
    pair = dataclasses.replace(cuda_pair, stop_token_ids=frozenset())
    config = GenerationConfig(prompt=PROMPT, k=k, temperature=0.0, max_new_tokens=48)
    _, baseline = run_target_only(pair, config)
    done = list(speculate(pair, config))[-1]
    ids = torch.tensor([pair.tokenizer(PROMPT).input_ids], device="cuda")
    with torch.inference_mode():
        theirs = pair.target.generate(
            ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=48,
            eos_token_id=[], pad_token_id=0,
        )
    assert done.token_ids == baseline.token_ids == theirs[0, ids.shape[1] :].tolist()


def test_sampled_speculation_on_cuda_is_seeded(cuda_pair):
    config = GenerationConfig(prompt=PROMPT, k=3, temperature=1.0, max_new_tokens=40, seed=3)
    first = list(speculate(cuda_pair, config))[-1].token_ids
    assert list(speculate(cuda_pair, config))[-1].token_ids == first


def test_the_benchmark_runs_on_cuda(cuda_pair):
    config = BenchConfig(ks=(1, 3), max_new_tokens=12, prompts=[PROMPT], repeats=1)
    result = run_bench(cuda_pair, config)
    assert result["setting"]["device"].startswith("cuda")
    assert result["results"]["greedy_check"]["match"]


def test_cuda_graphs_are_opt_in(model_dirs):
    plain = load_pair(model_dirs["target"], model_dirs["good"], device="cuda", warmup=False)
    assert not FastDecoder.of(plain.target).graphs and not FastDecoder.of(plain.draft).graphs
    graphed = load_pair(model_dirs["target"], model_dirs["good"], device="cuda", warmup=False,
                        cuda_graphs=True)
    assert FastDecoder.of(graphed.target).graphs and FastDecoder.of(graphed.draft).graphs
