#!/usr/bin/env bash
# The slider page's latency, this checkout against another commit, alternating A B A B A B in
# one run with the same benchmark script (this checkout's), the load average printed before
# each run (docs/measurements.md, "Slider page").
#
#     benchmarks/page_latency_ab.sh COMMIT [MOVES]     (default: 200 moves a run)
set -euo pipefail
cd "$(dirname "$0")/.."
COMMIT=$1
MOVES=${2:-200}
PY=${PY:-$PWD/.venv/bin/python}
OTHER=$(mktemp -d)/other
SCRIPTS=$(mktemp -d)
cp benchmarks/page_latency.py benchmarks/browser_session.py "$SCRIPTS"/
git worktree add -q --detach "$OTHER" "$COMMIT"
trap 'git worktree remove --force "$OTHER"' EXIT
for run in 1 2 3; do
  for side in "$OTHER" "$PWD"; do
    name=$([ "$side" = "$PWD" ] && echo "this checkout" || echo "$COMMIT")
    echo "== $name, run $run, load average $(cut -d' ' -f1-3 /proc/loadavg)"
    (cd "$side" && PYTHONPATH="$side:$SCRIPTS" "$PY" "$SCRIPTS/page_latency.py" --moves "$MOVES")
  done
done
