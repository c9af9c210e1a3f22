#!/usr/bin/env bash
# The open problem of NOTES v0.7: compute-sanitizer racecheck hangs in about
# half the runs of StressGpu.ManyThreadsStreamsAndHandles (never without a
# sanitizer or under memcheck/synccheck/initcheck). Runs it under racecheck
# until a run outlives the normal ~11 s several times over, then reports
# what was in flight: each host thread's last call (GGEMM_STRESS_TRACE) with
# its kernel (GGEMM_DEBUG), GPU load, and — best effort — cuda-gdb attached
# to the hung process. Needs an existing build (scripts/h200_check.sh).
#
#   scripts/h200_racecheck_hang.sh [runs] [seconds per run]
#
# GGEMM_STRESS_THREADS (1..4), GGEMM_STRESS_SEED and GGEMM_STRESS_CALL_SEED
# pass through to the test: fewer threads, a hung run's seed (printed first
# in each log), or one call alone (its seed is in its trace line) narrow the
# hang down.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-$PWD/h200_out}
mkdir -p "$out"
export PATH=/usr/local/cuda/bin:$PATH
runs=${1:-6}
limit=${2:-45}
tests=./build/tests/ggemm_tests
[ -x "$tests" ] || { echo "no $tests: build first"; exit 1; }

for i in $(seq "$runs"); do
  log="$out/racecheck_run_$i.log"
  GGEMM_STRESS_CALLS=200 GGEMM_STRESS_TRACE=1 GGEMM_DEBUG=1 \
    compute-sanitizer --tool racecheck "$tests" --gtest_filter=StressGpu.ManyThreadsStreamsAndHandles > "$log" 2>&1 &
  pid=$!
  for _ in $(seq "$limit"); do kill -0 $pid 2>/dev/null || break; sleep 1; done
  if ! kill -0 $pid 2>/dev/null; then
    wait $pid
    echo "run $i: finished rc=$? $(grep -E 'RACECHECK SUMMARY' "$log") ($(grep -m1 -o 'seed [0-9]*' "$log"))"
    continue
  fi
  echo "run $i: still running after $limit s ($(grep -m1 -o 'seed [0-9]*, [0-9]* calls on [0-9]* threads' "$log"))"
  nvidia-smi --query-gpu=utilization.gpu,power.draw,clocks.sm --format=csv,noheader
  echo "last call of each thread (and the kernel of the last calls):"
  for t in 0 1 2 3; do grep "\[ trace    \] thread $t " "$log" | tail -1; done
  grep '^\[ggemm\]' "$log" | tail -4
  child=$(pgrep -f "ggemm_tests --gtest_filter=StressGpu" | grep -v "^$pid\$" | head -1)
  if [ -n "$child" ]; then
    timeout 60 cuda-gdb -p "$child" -batch -ex "info cuda kernels" -ex "info cuda warps" \
      -ex "thread apply all bt 5" > "$out/racecheck_gdb_$i.log" 2>&1
    echo "cuda-gdb rc=$?: $(grep -cE 'Kernel|Warp' "$out/racecheck_gdb_$i.log") kernel/warp lines (racecheck_gdb_$i.log)"
  fi
  kill -9 $pid 2>/dev/null
  [ -n "$child" ] && kill -9 "$child" 2>/dev/null
  break
done
