#!/usr/bin/env bash
# The planned schedule against off and every fixed k through this project's batched engine,
# on this machine with the shipped pair (docs/measurements.md, "The schedule through our loop").
# Alpha and the loop's costs are measured first, on the sweep's own prompts at its temperature;
# the plan is made from them alone; then the sweep runs every policy and the schedule.
#
#     benchmarks/schedule_proof.sh [OUT_DIR]     (default: measurements)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-measurements}
PY=${PY:-.venv/bin/python}
S="$PY -m engine.cli"
mkdir -p "$OUT/schedule"
PROMPTS="$OUT/schedule/sweep-prompts.jsonl"
BATCHES=1,2,4,8,16,32,64
$PY - "$PROMPTS" <<'PYTHON'
import json, sys
held_out = json.load(open("models/heldout_prompts.json"))
with open(sys.argv[1], "w") as out:
    for i in range(20):  # the domains interleaved, 20 prompts each
        for domain, prompts in held_out.items():
            if i < len(prompts):
                out.write(json.dumps({"text": prompts[i], "domain": domain}) + "\n")
PYTHON
$S probe "$PROMPTS" --temperatures 0 --k 4 --max-new-tokens 32 --json \
    --out "$OUT/schedule/shipped-cpu-probe.json" > /dev/null
$S costs --engine specscope --batch $BATCHES --k-max 4 --prompts "$PROMPTS" --repeats 3 \
    --clock cpu --out "$OUT/schedule/shipped-cpu-costs.json"
$S plan --from-probe "$OUT/schedule/shipped-cpu-probe.json" \
    --costs "$OUT/schedule/shipped-cpu-costs.json" --k-max 4 --max-num-seqs 64 \
    --target models/target --draft models/draft --json > "$OUT/schedule/shipped-cpu-plan.json"
$S sweep --engine specscope --target models/target --draft models/draft --device cpu \
    --batch $BATCHES --policies off,1,2,4 --schedule "$OUT/schedule/shipped-cpu-plan.json" \
    --prompts "$PROMPTS" --new-tokens 32 --repeats 5 --temperature 0 --models shipped \
    --clock cpu --out "$OUT/specscope-shipped-cpu.json"
