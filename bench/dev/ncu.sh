#!/usr/bin/env bash
# Nsight Compute on one ggemm kernel launch of each benchmark matching a
# filter (run after a build, on the H200). Clocks are left alone
# (--clock-control none, as the device notes ask). One text report per
# filter goes to $OUT/ncu_<n>.txt.
#
#   bench/dev/run.sh ncu 'lora_expand.*m4096_g8_r16/ggemm/' ['other filter' ...]
#
# Besides speed of light, warp states and occupancy, the reports carry the
# pipe utilisation (ComputeWorkloadAnalysis: the tensor pipe) and the
# shared-memory tables (MemoryWorkloadAnalysis_Tables: wavefronts, bank
# conflicts).
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-$PWD/h200_out}
mkdir -p "$out"
export PATH=/usr/local/cuda/bin:$PATH
i=0
for filter in "$@"; do
  i=$((i + 1))
  timeout 240 ncu --clock-control none -k 'regex:ggemm_sm90' --launch-skip 3 --launch-count 1 \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section LaunchStats \
    --section Occupancy --section SchedulerStats \
    --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables \
    ./build/bench/ggemm_bench --benchmark_filter="$filter" > "$out/ncu_$i.txt" 2>&1
  echo "ncu $i ($filter) rc=$?"
done
