#!/usr/bin/env bash
# GPU check for specscope, for a machine with a CUDA device and a copy of this repository.
# Needs no internet: the tests build their own tiny models, the benchmark uses the pair
# shipped in models/. Takes about 2-4 minutes; every step has its own time limit.
#
#   benchmarks/gpu_check.sh            # PYTHON=... to use another interpreter
#
# 1. the GPU-marked tests (CUDA graphs against the eager pass, greedy equality with
#    transformers on CUDA, the benchmark on CUDA);
# 2. a short benchmark of the shipped pair on the GPU in float32 (so that the greedy check
#    compares like with like), our engine against transformers;
# 3. the same for our engine alone in bfloat16 (the default dtype on CUDA), with CUDA graphs
#    on and then off, to show what the graphs are worth.
# Results: benchmarks/results/gpu_*.md and .json.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
OUT=benchmarks/results
mkdir -p "$OUT"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1

"$PY" - <<'PY'
import torch
assert torch.cuda.is_available(), "no CUDA device: nothing to check here"
print("device:", torch.cuda.get_device_name(), "| torch", torch.__version__)
PY
test -f models/target/model.safetensors -a -f models/draft/model.safetensors \
    || { echo "models/target and models/draft are missing"; exit 1; }

echo "== 1. GPU-marked tests"
timeout 120 "$PY" -m pytest -q -m gpu tests/engine -p no:cacheprovider

echo "== 2. benchmark, float32, ours against transformers"
timeout 120 "$PY" -m engine.cli bench --device cuda --dtype float32 --ks 1-8 \
    --max-new-tokens 64 --prompts 2 --repeats 2 --out "$OUT/gpu_float32.json" \
    | tee "$OUT/gpu_float32.md"

echo "== 3. benchmark, bfloat16, ours only: CUDA graphs on, then off"
SPECSCOPE_CUDA_GRAPHS=1 timeout 45 "$PY" -m engine.cli bench --device cuda --ks 2,4,6 \
    --temperatures 0 --max-new-tokens 64 --prompts 2 --repeats 2 --ours-only --out "$OUT/gpu_graphs_on.json" \
    | tee "$OUT/gpu_graphs_on.md" || echo "(bfloat16: exit $? - see the greedy check above)"
SPECSCOPE_CUDA_GRAPHS=0 timeout 45 "$PY" -m engine.cli bench --device cuda --ks 2,4,6 \
    --temperatures 0 --max-new-tokens 64 --prompts 2 --repeats 2 --ours-only \
    --out "$OUT/gpu_graphs_off.json" | tee "$OUT/gpu_graphs_off.md" || echo "(bfloat16: exit $? - see the greedy check above)"
echo "== done: $OUT"
