#!/usr/bin/env bash
# The GPU tests of the public-ABI suite again with one sm_90a kernel choice
# forced: $1 is ggemm_tests_forced_plan (tests/forced_plan_main.cpp: the
# plan's internal test request), $2 its flag, --sm90_short_k=never|
# where_possible, --decode_gemv=never|where_possible or
# --sm90_token_major=never|where_possible (never keeps
# every call off that family, where_possible sends it every call it can
# run), so each kernel choice the automatic rule makes is also tested
# against the one it did not make. The stress and 20 GB tests run once, in
# the main suite (as does AbiBasics, whose name says Gpu but which needs
# none). Skips (77) when the GPU tests skip (no usable GPU).
set -uo pipefail
tests_bin=$1 flag=$2
out=$("$tests_bin" "$flag" --gtest_brief=1 --gtest_filter='*Gpu*:-LargeGpu.*:StressGpu.*:AbiBasics.*' 2>&1)
rc=$?
echo "$out" | tail -15
passed=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' <<<"$out")
skipped=$(sed -n 's/^\[  SKIPPED \] \([0-9]*\) test.*/\1/p' <<<"$out")
if [ $rc -eq 0 ] && [ "${passed:-0}" = 0 ] && [ "${skipped:-0}" != 0 ]; then
  echo "SKIP: every GPU test skipped (no usable GPU)"; exit 77
fi
exit $rc
