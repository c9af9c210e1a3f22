#!/usr/bin/env bash
# The GPU tests of the public-ABI suite again with GGEMM_SM90_SHORT_K set
# ($2: 1 sends every call sm_90a's short-K kernels can run to them, 0 keeps
# every call on the persistent kernel), so each kernel choice the automatic
# rule makes is also tested against the one it did not make. The stress and
# 20 GB tests run once, in the main suite (as does AbiBasics, whose name
# says Gpu but which needs none). Skips (77) when the GPU tests
# skip (no usable GPU).
set -uo pipefail
tests_bin=$1 mode=$2
out=$(GGEMM_SM90_SHORT_K=$mode "$tests_bin" --gtest_brief=1 --gtest_filter='*Gpu*:-LargeGpu.*:StressGpu.*:AbiBasics.*' 2>&1)
rc=$?
echo "$out" | tail -15
passed=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' <<<"$out")
skipped=$(sed -n 's/^\[  SKIPPED \] \([0-9]*\) test.*/\1/p' <<<"$out")
if [ $rc -eq 0 ] && [ "${passed:-0}" = 0 ] && [ "${skipped:-0}" != 0 ]; then
  echo "SKIP: every GPU test skipped (no usable GPU)"; exit 77
fi
exit $rc
