#!/usr/bin/env bash
# Nsight Compute on one ggemm kernel launch of each benchmark matching a
# filter (run after a build, on the H200). Clocks are left alone
# (--clock-control none, as the device notes ask). One text report per
# filter goes to $OUT/ncu_<n>.txt.
#
#   scripts/ncu_bench.sh 'lora_expand.*m4096_g8_r16/ggemm/' ['other filter' ...]
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-$PWD/h200_out}
mkdir -p "$out"
export PATH=/usr/local/cuda/bin:$PATH
i=0
for filter in "$@"; do
  i=$((i + 1))
  timeout 240 ncu --clock-control none -k 'regex:ggemm_sm90' --launch-skip 3 --launch-count 1 \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section LaunchStats \
    --section Occupancy --section SchedulerStats \
    ./build/bench/ggemm_bench --benchmark_filter="$filter" > "$out/ncu_$i.txt" 2>&1
  echo "ncu $i ($filter) rc=$?"
done
