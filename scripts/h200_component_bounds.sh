#!/usr/bin/env bash
# How long each MoE prefill row takes with one of its two resources taken
# away (NOTES v0.24): the loads alone (bench/experiments/probe_no_mma.patch:
# the consumers release every stage unread) and the MMAs alone
# (probe_no_load.patch: only the ring's first lap is loaded, later stages
# are released at once and the MMAs reread real data). Each is a lower bound
# on the real kernel's time for the same tile walk: no schedule of those
# tiles can beat its loads or its MMAs alone. One device call (~5 min):
#
#   OUT=$OUT scripts/h200_component_bounds.sh
#
# 1. every prefill row, main (A) / loads only (B) / MMAs only (C), two rounds
#    alternated (scripts/ab_bench.sh);
# 2. the Qwen3 rows at every tile walk the library can run (tile_m 128 and
#    256, single CTAs and pairs), the same three builds alternated;
# 3. with POWER=1 (default), each build alone for seconds on four rows with
#    nvidia-smi sampling the SM clock and power (as scripts/h200_power.sh).
# Outputs are wrong in B and C: never use their binaries for anything else.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-$PWD/h200_out}
mkdir -p "$out"
lib=scripts/lib
export PATH=/usr/local/cuda/bin:$PATH

# ab_bench.sh leaves its trees in /tmp; find this call's, not an earlier one's.
before=$(ls -d /tmp/ggemm_ab_* 2>/dev/null | sort)
OUT=$out/ab scripts/ab_bench.sh bench/experiments/probe_no_mma.patch,bench/experiments/probe_no_load.patch \
  'prefill(_zipf)?/ggemm/' 2 | tee "$out/bounds_prefill.txt"
new=$(comm -13 <(echo "$before") <(ls -d /tmp/ggemm_ab_* | sort))
A=$(echo "$new" | grep _A.)
B=$(echo "$new" | grep _B.)/build
C=$(echo "$new" | grep _C.)/build
for b in "$A" "$B" "$C"; do [ -x "$b/bench/ggemm_bench" ] || { echo "no benchmark binary in $b"; exit 1; }; done

for r in 1 2; do
  for walk in 128:1 256:1 128:2 256:2; do
    tm=${walk%%:*} cl=${walk#*:}
    for v in A:$A B:$B C:$C; do
      l=${v%%:*} d=${v#*:}
      log=$out/ab/walk_t${tm}_cl${cl}_$l.txt
      GGEMM_BENCH_TILE_M=$tm GGEMM_BENCH_CLUSTER_M=$cl "$d/bench/ggemm_bench" \
        --benchmark_filter='qwen3_30b_a3b_gate_up_prefill(_zipf)?/ggemm/' --benchmark_min_time=0.1s > "$log" 2>&1
      awk -v l="t$tm-cl$cl-$l" -f $lib/median_rows.awk "$log"
    done
  done
done > "$out/ab/walk_medians.txt"
awk -f $lib/median_table.awk "$out/ab/walk_medians.txt" | tee "$out/bounds_walks.txt"

if [ "${POWER:-1}" = 1 ]; then
  source scripts/lib/power_sampled_run.sh
  for spec in mixtral_gate_up_prefill:15 mixtral_down_prefill:30 qwen3_30b_a3b_gate_up_prefill:80 \
              qwen3_30b_a3b_gate_up_prefill_zipf:80; do
    row=${spec%%:*} reps=${spec#*:}
    d=$out/ab/power_$row
    mkdir -p "$d"
    for v in A:$A B:$B C:$C; do power_sampled_run "$d" "${v%%:*}" "$reps" "${v#*:}/bench/ggemm_bench" "^$row/ggemm/"; done
    python3 scripts/power_report.py "$d" "$row"
  done | tee "$out/bounds_power.txt"
fi
# The logs, packed: the device returns at most a few files from $OUT.
tar -C "$out" -czf "$out/bounds_logs.tgz" ab && rm -rf "$out/ab"
