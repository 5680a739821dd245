#!/usr/bin/env bash
# The GPU check: everything specscope claims about CUDA, in about 9 minutes, on a machine with
# a CUDA device and a copy of this repository. Nothing is downloaded: the tests build tiny
# models, the shipped pair is in models/, and the 8B-shape pair is made from configs with
# random weights. Every step has its own time limit inside one overall budget (BUDGET_S, 540
# by default), and a step that fails or runs out of time does not stop the ones after it.
#
#   benchmarks/gpu_check.sh                  # PYTHON=... for another interpreter
#   BUDGET_S=300 SKIP_8B=1 benchmarks/gpu_check.sh
#   STEPS="0 4a 4b 5" benchmarks/gpu_check.sh   # only these steps (the others: "skipped")
#
# Needs: torch with CUDA, transformers, tokenizers, safetensors, pytest, scipy, and for the
# test suite's shared fixtures fastapi, uvicorn, jinja2, pydantic-settings, httpx. The repo is
# put on PYTHONPATH, so no install of specscope itself is needed (`make install-dev` works too).
#
# Steps:
#  1. the GPU-marked tests (bf16 forward against transformers, greedy equality with
#     transformers, the lossless chi-square, CUDA graphs against the eager pass, the bench);
#  1b. the cycle's clock on CUDA: one wait per cycle, by an event, and event times that add
#     up and stay within the wall time (benchmarks/cuda_clock.py);
#  2. `specscope bench` on the shipped pair, float32 (greedy compares like with like), ours
#     against transformers;
#  3. the shipped pair in bfloat16, ours only, CUDA graphs on and then off;
#  4. random-weight Llamas of Llama 3.1 8B and Llama 3.2 1B shape (benchmarks/random_llama.py),
#     then `specscope bench` on them, ours against transformers, bfloat16, greedy;
#  5. that target step against the H200's 4.8 TB/s bandwidth bound (benchmarks/bandwidth_bound.py);
#  6. `specscope roofline`, when this version of the command line has it;
#  7. the 8B-shape pair with CUDA graphs on.
# Output: OUT_DIR (benchmarks/results by default): gpu_check.log, the benches' JSON files and
# the bound. The random models go to WORK_DIR (a temporary folder, 19 GB), removed at the end.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
# DRY_RUN=1 walks the same steps on a CPU with toy sizes: a check of this script, not of a GPU.
if [ -n "${DRY_RUN:-}" ]; then
    DEVICE=cpu SHAPE=tiny KS=1,2 SHIPPED_KS=1-2 TOKENS=8 PROMPTS=1
    ROOFLINE=(--batches 1,2 --repeats 2 --warmup 1 --context 16)
else
    DEVICE=cuda SHAPE=llama KS=2,4 SHIPPED_KS=1-6 TOKENS=64 PROMPTS=2
    ROOFLINE=()
fi
[ -x "$PY" ] || PY=python3
OUT=${OUT_DIR:-benchmarks/results}
BUDGET_S=${BUDGET_S:-540}
WORK=${WORK_DIR:-$(mktemp -d)}
mkdir -p "$OUT" "$WORK"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
exec > >(tee "$OUT/gpu_check.log") 2>&1
trap '[ -z "${WORK_DIR:-}" ] && rm -rf "$WORK"' EXIT

SUMMARY=()
# step NAME LIMIT_S COMMAND...: run COMMAND for at most LIMIT_S seconds, or what is left.
step() {
    local name=$1 limit=$2 left start rc
    shift 2
    if [ -n "${STEPS:-}" ] && [[ " $STEPS " != *" ${name%%.*} "* ]]; then
        SUMMARY+=("skipped  $name (not in STEPS)")
        return 1
    fi
    left=$((BUDGET_S - SECONDS))
    if ((left < 10)); then
        SUMMARY+=("skipped  $name (the budget is spent)")
        return 1
    fi
    ((limit > left)) && limit=$left
    echo
    echo "== $name (at most ${limit} s; $(date -u +%H:%M:%S) UTC)"
    start=$SECONDS
    timeout --kill-after=10 "$limit" "$@"
    rc=$?
    case $rc in
        0) SUMMARY+=("ok       $name ($((SECONDS - start)) s)") ;;
        124 | 137) SUMMARY+=("TIMEOUT  $name (${limit} s)") ;;
        *) SUMMARY+=("FAILED   $name (exit $rc after $((SECONDS - start)) s)") ;;
    esac
    return $rc
}
BENCH=("$PY" -m engine.cli bench --quiet --device "$DEVICE")

step "0. the device and the packages" 30 "$PY" - "$DEVICE" <<'PY' || { printf '%s\n' "${SUMMARY[@]}"; exit 1; }
import importlib, sys
import torch
if sys.argv[1] == "cuda":
    assert torch.cuda.is_available(), "no CUDA device: nothing to check here"
    print("device:", torch.cuda.get_device_name(), "| CUDA", torch.version.cuda)
print("torch", torch.__version__, "| Python", sys.version.split()[0])
missing = []
for name in ("transformers", "tokenizers", "safetensors", "pytest", "scipy", "fastapi",
             "uvicorn", "jinja2", "pydantic_settings", "httpx"):
    try:
        module = importlib.import_module(name)
        print(f"  {name} {getattr(module, '__version__', '')}")
    except ImportError:
        missing.append(name)
if missing:
    sys.exit(f"missing packages: {', '.join(missing)}")
PY
test -f models/target/model.safetensors -a -f models/draft/model.safetensors ||
    { echo "models/target and models/draft are missing"; exit 1; }

step "1. GPU-marked tests" 110 "$PY" -m pytest -q -m gpu tests/engine -p no:cacheprovider

step "1b. the cycle's clock: one wait per cycle, event times" 40 \
    "$PY" benchmarks/cuda_clock.py --device "$DEVICE" --tokens "$((TOKENS * 2))"

SMALL=(--max-new-tokens "$TOKENS" --prompts "$PROMPTS" --repeats "$PROMPTS")
step "2. bench, shipped pair, float32, ours against transformers" 75 \
    "${BENCH[@]}" --dtype float32 --ks "$SHIPPED_KS" "${SMALL[@]}" \
    --out "$OUT/gpu_shipped_float32.json"

for graphs in 1 0; do
    SPECSCOPE_CUDA_GRAPHS=$graphs step "3. bench, shipped pair, bfloat16, CUDA graphs $graphs" 35 \
        "${BENCH[@]}" --dtype bfloat16 --ks "$KS" --temperatures 0 "${SMALL[@]}" --ours-only \
        --out "$OUT/gpu_shipped_graphs_$graphs.json"
done

PAIR=(--target "$WORK/target" --draft "$WORK/draft" --dtype bfloat16 --ks "$KS" --temperatures 0)
if [ -z "${SKIP_8B:-}" ] &&
    step "4a. random-weight Llama pair, 8B and 1B shapes" 90 \
        "$PY" benchmarks/random_llama.py "$WORK" --device "$DEVICE" --shape "$SHAPE"; then
    step "4b. bench, 8B target / 1B draft, bfloat16, ours against transformers" 110 \
        "${BENCH[@]}" "${PAIR[@]}" "${SMALL[@]}" --out "$OUT/gpu_llama8b.json" &&
        step "5. the 8B target step against the bandwidth bound" 20 \
            "$PY" benchmarks/bandwidth_bound.py "$OUT/gpu_llama8b.json" --bandwidth-tb-s 4.8
fi

if "$PY" -m engine.cli roofline --help >/dev/null 2>&1; then
    step "6. specscope roofline" 60 "$PY" -m engine.cli roofline --device "$DEVICE" \
        ${ROOFLINE[@]+"${ROOFLINE[@]}"}
else
    SUMMARY+=("skipped  6. specscope roofline (not in this version of the command line)")
fi

if [ -s "$WORK/target/config.json" ]; then
    SPECSCOPE_CUDA_GRAPHS=1 step "7. bench, 8B target / 1B draft, CUDA graphs on" 60 \
        "${BENCH[@]}" "${PAIR[@]}" "${SMALL[@]}" --ours-only --out "$OUT/gpu_llama8b_graphs_1.json"
fi

echo
echo "== summary ($SECONDS s in all; results in $OUT)"
printf '%s\n' "${SUMMARY[@]}"
! printf '%s\n' "${SUMMARY[@]}" | grep -qv '^ok\|^skipped'
