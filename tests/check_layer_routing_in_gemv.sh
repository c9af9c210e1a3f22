#!/usr/bin/env bash
# The MoE layer at decode routes its slots in the gate_up GEMV's prologue
# (ggemm_moe_ffn; ptx/sm90/decode_gemv.cuh, route_into_table), one launch
# fewer than a routing kernel: GGEMM_DEBUG=1 over the GPU layer cases made
# for it (tests/test_gpu_moe.cpp, *DecodeRoutedInGemv*) must show the routed
# GEMV on gate_up, and over a prefill case must not. And up to 4 tokens its
# down projection sums each token's slots itself (ptx/moe/decode_down.cuh):
# those cases launch ggemm_moe_decode_down and no combine; the 8-token
# decode case the combine and no decode down. Past 32 rows it gathers inside
# gate_up only where the rows are few an expert. Past that, up to 512 slots
# of up to 512 local experts, the routing and the token copy are one launch
# (ggemm_moe_route_expand), and ggemm_moe_route routes such calls in one CTA
# (ggemm_moe_route_one_cta); more experts, or more slots, take the scatter
# pass and the copy launch. $1 is ggemm_tests.
# Skips (77) when the GPU tests skip; on a GPU other than sm_90a there is no
# routed kernel and the layer routes by a launch of its own (skip).
set -uo pipefail
tests_bin=$1
decode='Cases/GpuMoeFfn.MatchesReference/*DecodeRoutedInGemv*'
out=$(GGEMM_DEBUG=1 "$tests_bin" --gtest_filter="$decode" 2>&1)
rc=$?
if grep -q '\[  SKIPPED \]' <<<"$out" && ! grep -q '\[  PASSED  \] [1-9]' <<<"$out"; then
  echo "SKIP: the GPU tests skipped (no usable GPU)"; exit 77
fi
if ! grep -q 'sm_90a kernel' <<<"$out"; then
  echo "SKIP: not an sm_90a GPU (the routed decode GEMV is sm_90a's)"; exit 77
fi
fail=0
[ $rc -eq 0 ] || { echo "FAIL: the decode layer cases failed (exit $rc)"; fail=1; }
cases=$(grep -c '^\[ RUN      \]' <<<"$out")
routed=$(grep -c "moe_ffn gate_up .*kernel ggemm_sm90_decode_gemv_routed_.*routing the MoE layer's [0-9]* slots in its prologue" <<<"$out")
echo "$cases decode layer cases, $routed gate_up launches on the routed GEMV"
grep "moe_ffn gate_up" <<<"$out" | head -3 | cut -c1-240
[ "$cases" -ge 6 ] || { echo "FAIL: expected at least 6 decode layer cases, ran $cases"; fail=1; }
[ "$routed" -eq "$cases" ] || { echo "FAIL: every decode case's gate_up should run the routed GEMV"; fail=1; }
down=$(grep -c 'moe kernel ggemm_moe_decode_down_' <<<"$out")
combines=$(grep -c 'moe kernel ggemm_moe_combine_' <<<"$out")
echo "$down decode down launches, $combines combine launches"
[ "$down" -eq "$cases" ] || { echo "FAIL: every decode case of at most 4 tokens should run the decode down"; fail=1; }
[ "$combines" -eq 0 ] || { echo "FAIL: a decode case of at most 4 tokens ran the combine"; fail=1; }
out_8=$(GGEMM_DEBUG=1 "$tests_bin" --gtest_filter='Cases/GpuMoeFfn.MatchesReference/Bf16DecodeSortedDownEightTokens' 2>&1)
if grep -q 'moe kernel ggemm_moe_decode_down_' <<<"$out_8" || ! grep -q 'moe kernel ggemm_moe_combine_' <<<"$out_8"; then
  echo "FAIL: the 8-token decode case should run the sorted down and the combine"; fail=1
fi
out_p=$(GGEMM_DEBUG=1 "$tests_bin" --gtest_filter='Cases/GpuMoeFfn.MatchesReference/Bf16E8K2' 2>&1)
if grep -q 'decode_gemv_routed' <<<"$out_p"; then
  echo "FAIL: a prefill call (600 slots) ran the routed GEMV"; fail=1
fi
# Past 32 routed rows: gathered inside gate_up (no expand copy) at 64 rows of
# at most 2 an expert, copied first at 64 rows of 8 an expert.
out_g=$(GGEMM_DEBUG=1 "$tests_bin" --gtest_filter='Cases/GpuMoeFfn.MatchesReference/*GatherSixtyFourRows*' 2>&1)
gathered=$(grep -c '^\[       OK \]' <<<"$out_g")
if [ "$gathered" -ne 3 ] || grep -q 'moe kernel ggemm_moe_expand_rows' <<<"$out_g"; then
  echo "FAIL: the three 64-row sparse cases should pass and gather inside gate_up (no expand copy; $gathered passed)"; fail=1
fi
if ! grep -q 'moe kernel ggemm_moe_decode_down_' <<<"$out_g"; then
  echo "FAIL: the 4-token 64-row case should run the decode down"; fail=1
fi
if grep -q 'moe kernel ggemm_moe_route_expand' <<<"$out_g"; then
  echo "FAIL: a gathering call ran the routing and copy launch"; fail=1
fi
out_c=$(GGEMM_DEBUG=1 "$tests_bin" --gtest_filter='Cases/GpuMoeFfn.MatchesReference/Bf16CopiesSixtyFourDenseRows:Cases/GpuMoeFfn.MatchesReference/Bf16RouteExpandFullChunkWideRows' 2>&1)
if [ "$(grep -c '^\[       OK \]' <<<"$out_c")" -ne 2 ] || [ "$(grep -c 'moe kernel ggemm_moe_route_expand' <<<"$out_c")" -ne 2 ] ||
   grep -q 'moe kernel ggemm_moe_expand_rows\|moe kernel ggemm_moe_route_scatter' <<<"$out_c"; then
  echo "FAIL: 64 rows of 8 an expert and a full 512-slot chunk should pass, copied in the routing's launch (ggemm_moe_route_expand)"; fail=1
fi
if ! grep -q 'moe kernel ggemm_moe_route_count' <<<"$out_p" || ! grep -q 'moe kernel ggemm_moe_expand_rows' <<<"$out_p"; then
  echo "FAIL: a prefill call of two routing chunks should run the count pass and the copy launch"; fail=1
fi
out_w=$(GGEMM_DEBUG=1 "$tests_bin" --gtest_filter='Cases/GpuMoeFfn.MatchesReference/Bf16OneChunkExperts640' 2>&1)
if ! grep -q '^\[       OK \]' <<<"$out_w" || ! grep -q 'moe kernel ggemm_moe_route_scatter' <<<"$out_w" ||
   ! grep -q 'moe kernel ggemm_moe_expand_rows' <<<"$out_w"; then
  echo "FAIL: one chunk of 640 local experts should pass on the scatter pass and the copy launch"; fail=1
fi
out_r=$(GGEMM_DEBUG=1 "$tests_bin" --gtest_filter='Cases/GpuMoeRoute.MatchesReference/OneChunk*' 2>&1)
one_cta=$(grep -c 'moe kernel ggemm_moe_route_one_cta' <<<"$out_r")
scatter=$(grep -c 'moe kernel ggemm_moe_route_scatter' <<<"$out_r")
echo "one-chunk routing cases: $one_cta on one CTA, $scatter on the scatter pass"
if grep -q '^\[  FAILED  \]' <<<"$out_r" || [ "$one_cta" -ne 9 ] || [ "$scatter" -ne 4 ]; then
  echo "FAIL: the 13 one-chunk routing cases should pass, the 9 of at most 512 experts on one CTA, 4 on the scatter pass"; fail=1
fi
exit $fail
