#!/usr/bin/env bash
# GGEMM_DEBUG=1 prints every tensor map, the chosen kernel/config and the
# launch geometry of each call. Runs one GPU test with it; skips (77) when
# the GPU tests skip.
set -uo pipefail
tests_bin=$1
out=$(GGEMM_DEBUG=1 "$tests_bin" --gtest_filter='Shapes/GroupedMatmulGpu.MatchesReference/planes_aligned_kmajor' 2>&1)
if grep -q '\[  SKIPPED \]' <<<"$out"; then
  echo "SKIP: the GPU test skipped (no usable GPU)"; exit 77
fi
fail=0
for want in '\[ggemm\]   tensor map activations' '\[ggemm\]   tensor map weights' \
            '\[ggemm\]   tensor map output segment 2' '\[ggemm\] grouped_matmul m=' 'sm_[0-9]*a kernel ggemm_sm[0-9]*_grouped_' 'grid '; do
  grep -q "$want" <<<"$out" || { echo "FAIL: no line matching '$want'"; fail=1; }
done
grep '\[ggemm\]' <<<"$out" | head -8
exit $fail
