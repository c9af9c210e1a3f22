#!/usr/bin/env bash
# Power and clock beside the time of one MoE row, per implementation:
# do the compute-bound rows lose to the
# power cap's clock, or do they do less work per clock than cuBLAS? Each
# implementation runs alone in its own process for seconds
# (--repetitions) while nvidia-smi samples the SM clock and power
# every 50 ms; bench/dev/power_report.py keeps the samples of the row's own
# window and prints time, TFLOP/s, mean clock and power, and TFLOP/s per
# GHz (work per clock: the mainloop's efficiency with the clock divided out)
# and per kW.
#
#   bench/dev/run.sh power [row] [repetitions]   # default mixtral_down_prefill 60
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-$PWD/h200_out}
mkdir -p "$out"
row=${1:-mixtral_down_prefill}
reps=${2:-60}
bench=${GGEMM_BENCH_BINARY:-build/bench/ggemm_bench}
source bench/dev/lib/power_sampled_run.sh
for round in 1 2; do
  for impl in ggemm cublas_loop_graph cublas_grouped; do
    power_sampled_run "$out" "${impl}_$round" "$reps" "$bench" "^$row/$impl/"
  done
done
python3 bench/dev/power_report.py "$out" "$row"
