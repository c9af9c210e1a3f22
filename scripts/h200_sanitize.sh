#!/usr/bin/env bash
# compute-sanitizer's four tools over the GPU tests of the public-ABI suite
# (every test whose name has "Gpu": grouped matmul, LoRA shrink/expand, graph
# replays, malformed routing, threads and streams), on an sm_90 machine with an existing build (run
# scripts/h200_check.sh or the default preset first). One log per tool in
# $OUT (default ./h200_out); the last lines of each are printed.
#
#   scripts/h200_sanitize.sh [gtest-filter]      # default: *Gpu*:-LargeGpu.*
#
# The LargeGpu tests (20 GB buffers, 64-bit addressing) are left out: under
# the sanitizers they would take hours. The stress test runs 200 calls
# instead of 2000 (GGEMM_STRESS_CALLS).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-$PWD/h200_out}
mkdir -p "$out"
export PATH=/usr/local/cuda/bin:$PATH
filter=${1:-*Gpu*:-LargeGpu.*}
export GGEMM_STRESS_CALLS=${GGEMM_STRESS_CALLS:-200}
# Each stress call is printed before it is enqueued: if a tool hangs there,
# the log names the calls in flight (and GGEMM_DEBUG=1 their kernels).
export GGEMM_STRESS_TRACE=${GGEMM_STRESS_TRACE:-1}
tests=./build/tests/ggemm_tests
[ -x "$tests" ] || { echo "no $tests: build first"; exit 1; }

status=0
for tool in memcheck racecheck synccheck initcheck; do
  extra=()
  [ "$tool" = memcheck ] && extra=(--leak-check full)
  run_filter=$filter
  if [ "$tool" = racecheck ]; then
    # Racecheck once hung in about half the runs of the stress test, never
    # without a sanitizer nor under the other tools; the cause was never
    # found and it has not recurred since 4009214. The stress test runs on
    # its own below, bounded, so a hang costs 90 s, not the whole pass.
    run_filter="$filter:-StressGpu.*"
  fi
  # The sanitizers slow kernels down by one to two orders of magnitude; the
  # 10 s in-kernel wait bound still holds for these test sizes.
  # Per-test output (no --gtest_brief): a tool that runs out of time still
  # shows which test it was in and how long the others took.
  timeout 420 compute-sanitizer --tool "$tool" "${extra[@]}" --error-exitcode 99 \
    "$tests" --gtest_filter="$run_filter" > "$out/sanitize_$tool.log" 2>&1
  rc=$?
  [ $rc -eq 124 ] && echo "$tool: timed out in $(grep -E '^\[ RUN' "$out/sanitize_$tool.log" | tail -1)"
  grep -E '^\[ +OK \].*\(([0-9]{5,}) ms\)' "$out/sanitize_$tool.log" | sed "s/^/$tool slow: /" | head -5
  [ $rc -ne 0 ] && status=1
  echo "$tool rc=$rc: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|tests? (ran|passed)|PASSED|FAILED' "$out/sanitize_$tool.log" | tr '\n' ' ')"
done
# The stress tests under racecheck, on their own (see above); a hang is
# reported, with the calls in flight, and does not fail the script.
timeout 90 compute-sanitizer --tool racecheck --error-exitcode 99 "$tests" --gtest_filter='StressGpu.*' \
  > "$out/sanitize_racecheck_stress.log" 2>&1
rc=$?
if [ $rc -eq 124 ]; then
  echo "racecheck stress: hung (known open problem); calls in flight:"
  for t in 0 1 2 3; do grep "\[ trace    \] thread $t " "$out/sanitize_racecheck_stress.log" | tail -1; done
else
  [ $rc -ne 0 ] && status=1
  echo "racecheck stress rc=$rc: $(grep -E 'RACECHECK SUMMARY|PASSED|FAILED' "$out/sanitize_racecheck_stress.log" | tr '\n' ' ')"
fi
exit $status
