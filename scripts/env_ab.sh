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
  # Only the median aggregate rows (every row's counters say "us_median").
  awk -v l="$var=$1" '$1 ~ /_median$/ {sub(/\/iterations:[0-9]+\/repeats:[0-9]+\/manual_time_median/, "", $1); print l, $1, $2}' "$log"
}
for r in $(seq "$rounds"); do
  for v in "${value_list[@]}"; do run "$v"; done
done > "$out/env_ab_medians.txt"

# One line per benchmark: the medians of each value in turn.
awk '{key=$2; v[key, $1] = v[key, $1] " " $3; if (!(key in seen)) {seen[key]; order[++n] = key}
      if (!($1 in lab)) {lab[$1]; labs[++nl] = $1}}
     END {for (i = 1; i <= n; ++i) {line = sprintf("%-60s", order[i]);
            for (j = 1; j <= nl; ++j) line = line sprintf(" %s:%s", labs[j], v[order[i], labs[j]]); print line}}' \
  "$out/env_ab_medians.txt"
