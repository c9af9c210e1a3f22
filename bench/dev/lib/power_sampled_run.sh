# Sourced by bench/dev/power.sh.
# power_sampled_run DIR TAG REPS BINARY FILTER: one benchmark process of
# REPS repetitions (--repetitions) of the rows matching FILTER,
# while nvidia-smi samples the SM clock and power every 50 ms; writes
# DIR/power_TAG.{csv,json,txt} for bench/dev/power_report.py.
power_sampled_run() {
  local dir=$1 tag=$2 reps=$3 binary=$4 filter=$5 field=power.draw.instant smi
  # The instantaneous reading where the driver has it; the 1 s average if not.
  nvidia-smi --query-gpu=$field --format=csv,noheader > /dev/null 2>&1 || field=power.draw
  nvidia-smi --query-gpu=timestamp,clocks.sm,$field --format=csv,noheader,nounits -lms 50 > "$dir/power_$tag.csv" &
  smi=$!
  "$binary" --repetitions="$reps" --benchmark_filter="$filter" \
    --benchmark_out="$dir/power_$tag.json" --benchmark_out_format=json > "$dir/power_$tag.txt" 2>&1
  kill "$smi"; wait "$smi" 2>/dev/null
  sleep 2  # let the clock recover, so each process starts alike
}
