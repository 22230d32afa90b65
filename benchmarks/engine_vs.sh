#!/usr/bin/env bash
# The engine benchmarks (benchmarks/engine.py, benchmarks/collectives.py) on an older
# revision's engine and on this tree's, alternating case by case in one run so that both
# see the same machine; the same benchmark scripts (this tree's) drive both.
#
# Usage:  benchmarks/engine_vs.sh REV [ROUNDS [FLOWS]]   e.g. benchmarks/engine_vs.sh b1716d5 2
# (FLOWS: case (b)'s flow count, 100,000 by default; STRATEGIES=ecmp,pinning in the
# environment limits the strategies of case (a) and of the collectives, all by default.)
# Compare the CPU seconds first on a shared machine: wall time follows the load.
set -euo pipefail
rev=${1:?usage: benchmarks/engine_vs.sh REV [ROUNDS [FLOWS]]}
rounds=${2:-2}
flows=${3:-100000}
here=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-python}
old=$(mktemp -d)
trap 'rm -rf "$old"' EXIT
git -C "$here" archive "$rev" src | tar -x -C "$old"
bench() {  # TREE LABEL SCRIPT ARGS...
  local tree=$1 label=$2; shift 2
  echo "=== $label: $* (load $(cut -d' ' -f1-3 /proc/loadavg))"
  (cd "$here" && PYTHONPATH="$tree/src" "$python" "$@")
}
for tree in "$old" "$here"; do  # compile (and cache) each tree's kernels first
  (cd "$here" && PYTHONPATH="$tree/src" "$python" benchmarks/engine.py --skip-a --flows 500 >/dev/null)
done
only=${STRATEGIES:+--strategies $STRATEGIES}
for ((i = 1; i <= rounds; i++)); do
  for case in "benchmarks/engine.py --skip-b $only" "benchmarks/engine.py --skip-a --flows $flows" "benchmarks/collectives.py $only"; do
    if ((i % 2)); then order=("$old" "$here"); else order=("$here" "$old"); fi
    for tree in "${order[@]}"; do
      if [ "$tree" = "$old" ]; then label="$rev"; else label="this tree"; fi
      # shellcheck disable=SC2086
      bench "$tree" "$label" $case
    done
  done
done
echo "=== done (load $(cut -d' ' -f1-3 /proc/loadavg))"
