#!/usr/bin/env bash
# Same-run A/B of changes on the H200: builds the tree as it is (A) and one
# copy per patch (B, C, ...), then runs the benchmarks matching a filter
# alternately A, B, C, A, B, C (clock and power drift hit all alike), and
# prints each benchmark's medians side by side. One device call; the builds
# compile in parallel on the device's cores.
#
#   git diff > /tmp/b.patch; git stash        # B = the change, A = without it
#   bench/dev/run.sh ab /tmp/b.patch 'lora_.*ggemm_graph' [rounds]
#   bench/dev/run.sh ab /tmp/b.patch,/tmp/c.patch 'lora_' 3   # B and C against A
#   bench/dev/run.sh ab /path/to/other/source/tree '/ggemm/'   # B = another source tree as it is
#
# Env: OUT (logs; default ./h200_out).
# --dry-run: apply the patches and configure every tree, build and run
# nothing (for checking patches on a machine without a GPU).
# --tests: afterwards also build and run build/tests/ggemm_tests (every GPU
# and ABI test) in each patched tree, so a winner can land from this call.
set -euo pipefail
lib=$(cd "$(dirname "$0")" && pwd)/lib
cd "$(dirname "$0")/../.."
dry=0 tests=0
while [ $# -gt 0 ]; do
  case "$1" in
    --dry-run) dry=1; shift ;;
    --tests) tests=1; shift ;;
    *) break ;;
  esac
done
patches=${1:?usage: bench/dev/run.sh ab [--dry-run] [--tests] PATCH[,PATCH...] FILTER [ROUNDS]}
filter=${2:?usage: bench/dev/run.sh ab [--dry-run] [--tests] PATCH[,PATCH...] FILTER [ROUNDS]}
rounds=${3:-2}
out=${OUT:-$PWD/h200_out}
mkdir -p "$out"
export PATH=/usr/local/cuda/bin:$PATH

source "$lib/ab_trees.sh"
ab_prepare_trees "$patches" || exit 1
ab_configure_trees "$out" || exit 1
[ $dry -eq 1 ] && { echo "dry run: every tree configured"; exit 0; }

ab_build_trees "$out" ggemm_bench || exit 1

run() {  # $1 = label, $2 = binary
  local log="$out/ab_run_$1.txt"
  "$2" --benchmark_filter="$filter" --benchmark_min_time=0.1s > "$log" 2>&1 ||
    echo "$1: the benchmark binary exited with $? (see $log)" >&2
  awk -v l="$1" -f "$lib/median_rows.awk" "$log"
}
for r in $(seq "$rounds"); do
  for i in "${!labels[@]}"; do run "${labels[$i]}" "${builds[$i]}/bench/ggemm_bench"; done
done > "$out/ab_medians.txt"

# One line per benchmark: the medians of each variant in turn.
awk -f "$lib/median_table.awk" "$out/ab_medians.txt"

if [ $tests -eq 1 ]; then
  for i in "${!labels[@]}"; do
    [ "$i" -eq 0 ] && continue  # A is the tree as it is
    log="$out/ab_tests_${labels[$i]}.txt"
    if cmake --build "${builds[$i]}" --target ggemm_tests > "$log" 2>&1 &&
       timeout 300 "${builds[$i]}/tests/ggemm_tests" --gtest_brief=1 >> "$log" 2>&1; then
      echo "${labels[$i]}: ggemm_tests $(grep -E '^\[  PASSED' "$log")"
    else
      echo "${labels[$i]}: ggemm_tests FAILED (see $log)"; grep -E '^\[  FAILED' "$log" | head -5  || true
    fi
  done
fi
