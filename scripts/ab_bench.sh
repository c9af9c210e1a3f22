#!/usr/bin/env bash
# Same-run A/B of a change on the H200: builds the tree as it is (A) and a
# copy with a patch applied (B), then runs the benchmarks matching a filter
# alternately A, B, A, B (clock and power drift hit both alike), and prints
# each benchmark's medians side by side. One device call; the two builds
# compile in parallel on the device's cores.
#
#   git diff > /tmp/b.patch; git stash        # B = the change, A = without it
#   scripts/ab_bench.sh /tmp/b.patch 'lora_.*ggemm_graph' [rounds]
#
# Env: OUT (logs; default ./h200_out), GGEMM_BENCH_* overrides apply to both.
# --dry-run: apply the patch and configure both trees, build and run nothing
# (for checking a patch on a machine without a GPU).
set -euo pipefail
cd "$(dirname "$0")/.."
dry=0
if [ "${1:-}" = "--dry-run" ]; then dry=1; shift; fi
patch=${1:?usage: scripts/ab_bench.sh [--dry-run] PATCH FILTER [ROUNDS]}
filter=${2:?usage: scripts/ab_bench.sh [--dry-run] PATCH FILTER [ROUNDS]}
rounds=${3:-2}
out=${OUT:-$PWD/h200_out}
mkdir -p "$out"
export PATH=/usr/local/cuda/bin:$PATH

a_build=$(mktemp -d /tmp/ggemm_ab_a.XXXXXX)
b_tree=$(mktemp -d /tmp/ggemm_ab_b.XXXXXX)
# The tracked and untracked source files, without build outputs.
git ls-files -co --exclude-standard -z | xargs -0 cp --parents -t "$b_tree"
(cd "$b_tree" && patch -p1 --quiet < "$(realpath "$patch")") || { echo "patch does not apply"; exit 1; }
echo "A: this tree, built in $a_build; B: $b_tree with $patch applied"

cmake -S . -B "$a_build" -G Ninja -DCMAKE_BUILD_TYPE=Release > "$out/ab_configure_a.log"
cmake -S "$b_tree" -B "$b_tree/build" -G Ninja -DCMAKE_BUILD_TYPE=Release > "$out/ab_configure_b.log"
[ $dry -eq 1 ] && { echo "dry run: both trees configured"; exit 0; }

cmake --build "$a_build" --target ggemm_bench > "$out/ab_build_a.log" 2>&1 &
build_a=$!
cmake --build "$b_tree/build" --target ggemm_bench > "$out/ab_build_b.log" 2>&1 &
build_b=$!
wait $build_a || { tail -20 "$out/ab_build_a.log"; exit 1; }
wait $build_b || { tail -20 "$out/ab_build_b.log"; exit 1; }

run() {  # $1 = label, $2 = binary
  local log="$out/ab_run_$1.txt"
  "$2" --benchmark_filter="$filter" --benchmark_min_time=0.1s > "$log" 2>&1 ||
    echo "$1: the benchmark binary exited with $? (see $log)" >&2
  awk -v l="$1" '/_median/ {sub(/\/iterations:[0-9]+\/repeats:[0-9]+\/manual_time_median/, "", $1); print l, $1, $2}' "$log"
}
for r in $(seq "$rounds"); do
  run A "$a_build/bench/ggemm_bench"
  run B "$b_tree/build/bench/ggemm_bench"
done > "$out/ab_medians.txt"

# One line per benchmark: its A medians, then its B medians.
awk '{key=$2; v[key, $1] = v[key, $1] " " $3; if (!(key in seen)) {seen[key]; order[++n] = key}}
     END {for (i = 1; i <= n; ++i) printf "%-60s A:%s | B:%s\n", order[i], v[order[i], "A"], v[order[i], "B"]}' \
  "$out/ab_medians.txt"
