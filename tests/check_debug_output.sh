#!/usr/bin/env bash
# GGEMM_DEBUG=1 prints every tensor map, the chosen kernel/config and the
# launch geometry of each call. Runs one GPU test with it; skips (77) when
# the GPU tests skip. The test's K (64) is short enough for sm_90a's short-K
# kernel, which encodes no tensor map: $1 is ggemm_tests_forced_plan, run with
# --sm90_short_k=never (and --decode_gemv=never) to keep the call on the persistent kernel for the
# tensor-map lines; a second run with where_possible checks the short-K
# kernel's line on sm_90a, a third (K 136) the split short-K kernel's.
set -uo pipefail
tests_bin=$1
test_case='Shapes/GroupedMatmulGpu.MatchesReference/planes_aligned_kmajor'
out=$(GGEMM_DEBUG=1 "$tests_bin" --sm90_short_k=never --decode_gemv=never --gtest_filter="$test_case" 2>&1)
if grep -q '\[  SKIPPED \]' <<<"$out"; then
  echo "SKIP: the GPU test skipped (no usable GPU)"; exit 77
fi
fail=0
for want in '\[ggemm\]   tensor map activations' '\[ggemm\]   tensor map weights' \
            '\[ggemm\]   tensor map output segment 2' '\[ggemm\] grouped_matmul m=' 'sm_[0-9]*a kernel ggemm_sm[0-9]*_grouped_' 'grid '; do
  grep -q "$want" <<<"$out" || { echo "FAIL: no line matching '$want'"; fail=1; }
done
grep '\[ggemm\]' <<<"$out" | head -8
if grep -q 'sm_90a kernel' <<<"$out"; then
  out_k=$(GGEMM_DEBUG=1 "$tests_bin" --sm90_short_k=where_possible --gtest_filter="$test_case" 2>&1)
  grep -q 'sm_90a kernel ggemm_sm90_short_k_.*whole K, no pipeline' <<<"$out_k" ||
    { echo "FAIL: where_possible printed no short-K kernel line"; fail=1; }
  grep '\[ggemm\]' <<<"$out_k" | head -2
  # K 136: past the unsplit kernel's 128, so where_possible sends it to the split kernel.
  out_s=$(GGEMM_DEBUG=1 "$tests_bin" --sm90_short_k=where_possible \
    --gtest_filter='Shapes/GroupedMatmulGpu.MatchesReference/empty_and_inactive_groups' 2>&1)
  grep -q 'sm_90a kernel ggemm_sm90_short_k_.*_split8 .*K split over the cluster.*clusters of 8' <<<"$out_s" ||
    { echo "FAIL: where_possible printed no split short-K kernel line at K 136"; fail=1; }
  grep '\[ggemm\]' <<<"$out_s" | head -1
  # A K-sliced case (test_gpu_grouped.cpp's sliced2_*): the plan's K-sliced
  # stages need the driver's answer that it encodes such views, asked once
  # per device with its context current; without it every plan quietly
  # falls back to one slice per stage.
  out_sl=$(GGEMM_DEBUG=1 "$tests_bin" --sm90_short_k=never --decode_gemv=never \
    --gtest_filter='Shapes/GroupedMatmulGpu.MatchesReference/sliced2_k448_n1024' 2>&1)
  grep -q 'K-sliced view' <<<"$out_sl" && grep -q 'K slices each' <<<"$out_sl" ||
    { echo "FAIL: the K-sliced case printed no K-sliced view or no multi-slice stages"; fail=1; }
  grep '\[ggemm\] grouped_matmul' <<<"$out_sl" | head -1
fi
exit $fail
