"""On a CUDA device only (skipped elsewhere; benchmarks/gpu_check.sh runs them): the fast
forward pass in bfloat16 gives transformers' logits within bfloat16's rounding, the decode
steps replayed as CUDA graphs give the eager pass's logits, greedy speculation still equals
transformers' greedy decoding, sampled speculation is distributed as the target (chi-square),
and the benchmark runs. The CPU-side half of the graphs (the static pass they record) is
checked on every machine in test_forward.py, the verification rule's chi-square in
decoder/test_verify.py, and the whole loop's chi-square on a CPU in decoder/test_speculative.py."""

import dataclasses

import pytest
import torch
from support.lossless import chi_square_pvalue, target_marginals, token_counts
from support.tiny_models import build_llama

from engine.decoder.baseline import run_target_only
from engine.decoder.events import GenerationConfig
from engine.decoder.forward import FastDecoder, KVCache, forward, new_cache, rollback
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


def fast_and_reference_logits(device: str, dtype: torch.dtype) -> tuple[torch.Tensor, ...]:
    """``[40, V]`` logits of one sequence: the engine's fast path (a 32-token prefill, then 8
    single-token steps over its cache) and transformers' forward over the whole sequence."""
    model = build_llama(seed=0).to(device, dtype)
    gen = torch.Generator(device).manual_seed(0)
    ids = torch.randint(0, 300, (1, 40), device=device, generator=gen)
    with torch.inference_mode():
        theirs = model(input_ids=ids).logits[0].float()
        cache = new_cache(model, capacity=64)
        assert isinstance(cache, KVCache)  # the fast path, not transformers' fallback
        ours = [forward(model, cache, ids[:, :32], 32)]
        ours += [forward(model, cache, ids[:, i : i + 1], 1) for i in range(32, 40)]
    return torch.cat(ours).float(), theirs


def test_bfloat16_fast_forward_equals_transformers_within_rounding():
    ours, theirs = fast_and_reference_logits("cuda", torch.bfloat16)
    # Both round to bfloat16 (8 bits of mantissa) after every operation, in different orders
    # (fused kernels, cached keys): equal to a few units of the last place, not bit for bit.
    scale = theirs.abs().max()
    assert (ours - theirs).abs().max() <= 0.03 * scale
    assert (ours.argmax(-1) == theirs.argmax(-1)).float().mean() >= 0.95


def test_sampled_speculation_on_cuda_is_distributed_as_the_target(cuda_pair):
    """Lossless on the GPU: the first and second tokens of speculative runs (each either an
    accepted draft, a resampled token or the bonus token) follow the target's own
    distribution. 2000 runs: about 20 s on a GPU."""
    first, second = token_counts(cuda_pair, PROMPT, runs=2000)
    p1, p2 = target_marginals(cuda_pair, PROMPT)
    assert chi_square_pvalue(first, p1) > 1e-3
    assert chi_square_pvalue(second, p2) > 1e-3
    # The same counts tell a nearby distribution apart: the target's at temperature 0.7.
    assert chi_square_pvalue(first, target_marginals(cuda_pair, PROMPT, 0.7)[0]) < 1e-6
