#!/usr/bin/env bash
# Same-run A/B of one environment variable on one benchmark binary: runs the
# benchmarks matching a filter with VAR set to each value in turn, ROUNDS
# times (V1, V2, V3, V1, V2, V3, ...: clock and power drift hit all alike),
# and prints each benchmark's medians per value side by side. For runtime
# switches (GGEMM_K_SLICES, GGEMM_BENCH_*) that need no second build.
#
#   scripts/env_ab.sh build/bench/ggemm_bench 'lora_shrink.*ggemm_graph' GGEMM_K_SLICES 1,2,4 [rounds]
#
# A value of "-" leaves VAR unset (the library's own choice). Env: OUT (logs;
# default ./h200_out).
set -euo pipefail
lib=$(cd "$(dirname "$0")" && pwd)/lib
binary=${1:?usage: scripts/env_ab.sh BINARY FILTER VAR V1,V2,... [ROUNDS]}
filter=${2:?usage: scripts/env_ab.sh BINARY FILTER VAR V1,V2,... [ROUNDS]}
var=${3:?usage: scripts/env_ab.sh BINARY FILTER VAR V1,V2,... [ROUNDS]}
values=${4:?usage: scripts/env_ab.sh BINARY FILTER VAR V1,V2,... [ROUNDS]}
rounds=${5:-2}
out=${OUT:-$PWD/h200_out}
mkdir -p "$out"
IFS=',' read -r -a value_list <<< "$values"

run() {  # $1 = value
  local log="$out/env_ab_${var}_$1.txt"
  if [ "$1" = "-" ]; then
    env -u "$var" "$binary" --benchmark_filter="$filter" --benchmark_min_time=0.1s > "$log" 2>&1
  else
    env "$var=$1" "$binary" --benchmark_filter="$filter" --benchmark_min_time=0.1s > "$log" 2>&1
  fi || echo "$var=$1: the benchmark binary exited with $? (see $log)" >&2
  awk -v l="$var=$1" -f "$lib/median_rows.awk" "$log"
}
for r in $(seq "$rounds"); do
  for v in "${value_list[@]}"; do run "$v"; done
done > "$out/env_ab_medians.txt"

# One line per benchmark: the medians of each variant in turn.
awk -f "$lib/median_table.awk" "$out/env_ab_medians.txt"
