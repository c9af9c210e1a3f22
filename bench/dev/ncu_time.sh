#!/usr/bin/env bash
# Kernel durations and per-instruction counters by Nsight Compute, for
# comparing builds (run on the H200; clocks left alone, caches flushed
# before every profiled launch, so each launch is cold and none overlaps
# the one before it under programmatic dependent launch: a kernel's fixed
# costs show whole, where the benchmark's events see only what PDL leaves).
#
#   bench/dev/run.sh ncu_time FILTER BUILD [BUILD...]
#       each build's ggemm_bench (BUILD/bench/ggemm_bench, its own
#       libggemm beside it) on the benchmark rows matching FILTER; the
#       ggemm_sm90 kernel launches 6..30 (after the warm-up calls) timed by
#       gpu__time_duration: min, median, max in ns, a line per build
#   bench/dev/run.sh ncu_source FILTER BUILD OUT.csv
#       one launch's source page (SASS with instructions executed and stall
#       samples per instruction) for bench/dev/sass_counts.py
#
# How the LoRA expand's regression against e409675 was found
# (docs/performance.md, "Cold, against e409675").
set -uo pipefail
cd "$(dirname "$0")/../.."
export PATH=/usr/local/cuda/bin:$PATH
usage() { echo "usage: bench/dev/run.sh ncu_time FILTER BUILD [BUILD...] | ncu_source FILTER BUILD OUT.csv" >&2; exit 2; }
mode=${1:-}
filter=${2:-}
shift 2 2>/dev/null || usage
common=(--clock-control none --cache-control all -k 'regex:ggemm_sm90' --launch-skip 5)

bench_of() {  # BUILD -> its benchmark binary, with its own library first on the search path
  [ -x "$1/bench/ggemm_bench" ] || { echo "no $1/bench/ggemm_bench" >&2; return 1; }
  echo "$1/bench/ggemm_bench"
}

case "$mode" in
  time)
    [ $# -ge 1 ] || usage
    for build in "$@"; do
      bin=$(bench_of "$build") || exit 1
      log=$(mktemp)
      LD_LIBRARY_PATH="$build${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" timeout 300 ncu "${common[@]}" --launch-count 25 \
        --metrics gpu__time_duration.sum --csv "$bin" --benchmark_filter="$filter" > "$log" 2>&1
      # The CSV's last field is the value ("12,896" ns: a thousands comma).
      grep '"gpu__time_duration.sum"' "$log" | awk -F'","' '{v = $NF; gsub(/[",]/, "", v); print v}' | sort -n |
        awk -v b="$build" '{a[NR] = $1} END {
          if (NR == 0) { print b ": no ggemm_sm90 launch profiled"; exit }
          printf "%s: %d launches, ns min %d median %d max %d\n", b, NR, a[1], a[int((NR + 1) / 2)], a[NR] }'
      rm -f "$log"
    done ;;
  source)
    [ $# -eq 2 ] || usage
    bin=$(bench_of "$1") || exit 1
    rep=$(mktemp -u).ncu-rep
    LD_LIBRARY_PATH="$1${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" timeout 300 ncu "${common[@]}" --launch-count 1 \
      --section SourceCounters --section WarpStateStats -o "${rep%.ncu-rep}" "$bin" --benchmark_filter="$filter" \
      > "$2.log" 2>&1 || { tail -5 "$2.log"; exit 1; }
    ncu -i "$rep" --page source --csv --print-source sass > "$2" && rm -f "$rep" "$2.log"
    echo "$2: $(wc -l < "$2") lines" ;;
  *) usage ;;
esac
