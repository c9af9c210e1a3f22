// sm_90a's pipeline in shared memory: how many stages fit (sm90::max_stages
// against the layout as documented, plan_test_support.h's bytes_for), and
// what the plan puts there: the stage count it chooses, K slices per stage,
// the epilogue's staging buffers and the accumulate epilogue's ring of old-C
// slots.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>

#include "plan_test_support.h"
#include "ptx/sm90/smem_layout.h"

namespace ggemm::testing {
namespace {

const uint32_t kOutBytes[] = {2, 4};

// The runtime's count of a kernel's static shared memory is the documented
// one (at the sizes of plan_test_support.h it moves no stage count, so the stage test alone
// would not see a miscount).
TEST(MaxStages, StaticSharedMemoryIsTheDocumentedOne) {
  for (uint32_t tile_m : kTileMs) EXPECT_EQ(sm90::static_smem_bytes(tile_m), sm90_static_bytes(tile_m)) << tile_m;
}

TEST(MaxStages, MatchesTheDocumentedLayout) {
  bool saw_cap = false, saw_zero = false;
  for (uint32_t smem : kSmemSizes)
    for (uint32_t tile_m : kTileMs)
      for (uint32_t sw : kSwizzles)
        for (uint32_t ob : kOutBytes) {
          SCOPED_TRACE(::testing::Message() << "smem " << smem << ", tile_m " << tile_m << ", swizzle " << sw
                                            << ", out bytes " << ob);
          const uint32_t s = sm90::max_stages(tile_m, sw, ob, smem);
          EXPECT_EQ(s, expected_stages(tile_m, sw, ob, smem));
          EXPECT_LE(s, sm90::kMaxStages);
          saw_cap |= s == sm90::kMaxStages;
          saw_zero |= s == 0;
          if (s > 0) {
            // The 128B-swizzled epilogue staging starts on a 1024-byte
            // boundary whatever the stage count (odd counts of 512-byte
            // token stages included).
            for (uint32_t n = 1; n <= s; ++n) EXPECT_EQ(sm90::make_smem_layout(tile_m, sw, ob, n).c_offset() % 1024, 0u);
            // The layout the kernel builds with that count fits ...
            EXPECT_LE(sm90::make_smem_layout(tile_m, sw, ob, s).total_bytes() + sm90_static_bytes(tile_m), smem);
            EXPECT_EQ(sm90::make_smem_layout(tile_m, sw, ob, s).total_bytes(), bytes_for(s, tile_m, sw, ob));
          }
          // ... and one more stage would not, unless the cap stopped it.
          if (s < sm90::kMaxStages) {
            EXPECT_GT(sm90::make_smem_layout(tile_m, sw, ob, s + 1).total_bytes() + sm90_static_bytes(tile_m), smem);
          }
        }
  // The sizes above reach both ends; otherwise the cap and the zero case went
  // untested.
  EXPECT_TRUE(saw_cap);
  EXPECT_TRUE(saw_zero);
}

TEST(MaxStages, KSlicedStagesMatchTheDocumentedLayout) {
  for (uint32_t tile_m : kTileMs)
    for (uint32_t box_rows : {48u, 128u})
      for (uint32_t buffers : {1u, 2u}) {
        const uint32_t s = sm90::max_stages(tile_m, 128, 2, 232448, buffers, 4, box_rows);
        EXPECT_EQ(s, expected_stages(tile_m, 128, 2, 232448, buffers, 4, box_rows))
            << "tile_m " << tile_m << ", box rows " << box_rows << ", buffers " << buffers;
        if (s > 0) {
          const sm90::SmemLayout l = sm90::make_smem_layout(tile_m, 128, 2, s, buffers, 4, box_rows);
          EXPECT_EQ(l.total_bytes(), bytes_for(s, tile_m, 128, 2, buffers, 4, box_rows));
          // Every slice of every stage starts on a 1024-byte boundary (the
          // 128B swizzle's atom): weight slices box_rows rows apart, token
          // slices tile_m rows apart.
          for (uint32_t st = 0; st < s; ++st)
            for (uint32_t sl = 0; sl < 4; ++sl) {
              EXPECT_EQ((l.weights_offset(st) + sl * box_rows * 128) % 1024, 0u);
              EXPECT_EQ((l.tokens_offset(st) + sl * tile_m * 128) % 1024, 0u);
            }
        }
      }
  // One slice: the plain layout, whatever the box rows.
  EXPECT_EQ(sm90::make_smem_layout(32, 128, 2, 10, 1, 1, 48).total_bytes(),
            sm90::make_smem_layout(32, 128, 2, 10).total_bytes());
}

TEST(MaxStages, MonotoneInSharedMemory) {
  for (uint32_t tile_m : kTileMs)
    for (uint32_t sw : kSwizzles)
      for (uint32_t ob : kOutBytes) {
        uint32_t prev = 0;
        for (uint32_t smem = 0; smem <= 262144; smem += 1024) {
          const uint32_t s = sm90::max_stages(tile_m, sw, ob, smem);
          ASSERT_GE(s, prev) << "tile_m " << tile_m << ", swizzle " << sw << ", out bytes " << ob << ", smem "
                             << smem;
          prev = s;
        }
      }
}

TEST(MaxStages, ZeroWhenNothingFits) {
  EXPECT_EQ(sm90::max_stages(16, 32, 2, 0), 0u);
  // One byte short of a single stage (static bytes included).
  const uint32_t one = uint32_t(bytes_for(1, 128, 128, 4) + sm90_static_bytes(128));
  EXPECT_EQ(sm90::max_stages(128, 128, 4, one - 1), 0u);
  EXPECT_EQ(sm90::max_stages(128, 128, 4, one), 1u);
}

TEST(MaxStages, KnownH200Values) {
  // Hand-computed: tile_m 128, 128B swizzle, bf16 out on 232448 bytes:
  // per stage 16384 + 16384 + 16 = 32784; fixed 32768 + 16 + 1024 + 384
  // (the static tile handoff) = 34192; (232448 - 34192) / 32784 = 6.05 -> 6.
  EXPECT_EQ(sm90::max_stages(128, 128, 2, 232448), 6u);
  // tile_m 256 stages its epilogue in two 128-token halves: 4 stages, not 3.
  EXPECT_EQ(sm90::max_stages(256, 128, 2, 232448), 4u);
  // tile_m 16, 32B swizzle: 4096 + 512 + 16 = 4624 per stage -> 49, capped.
  EXPECT_EQ(sm90::max_stages(16, 32, 2, 232448), sm90::kMaxStages);
}

// K-sliced stages where the views allow them (K-major, no cluster, 128-byte
// swizzle, K a multiple of 64) and the stage count is automatic: the fewest
// slices (1, 2 or 4) that load >= 20 KB per stage ((box rows + tile_m) x 128
// bytes a slice), where K covers two such stages and 3 fit; the test request
// (k_slices_request) forces 1, 2 or 4 where 2 stages fit.
TEST(Sm90Plan, KSlicedStagesWhereTheViewsAllowAndTheStagesAreSmall) {
  auto slices = [](CallShape s, const ggemm_config *o = nullptr) {
    KernelPlan cfg;
    EXPECT_EQ(sm90_persistent_plan(h200(), s, o, &cfg), GGEMM_STATUS_SUCCESS) << ggemm_last_error_message();
    return cfg.k_slices;
  };
  CallShape shrink = shape(512);  // LoRA shrink R 16: tile_m 32, 3R = 48, K 4096: 10 KB a slice
  shrink.m = 4096;
  shrink.num_groups = 8;
  shrink.n = 48;
  EXPECT_EQ(slices(shrink), 2u);
  KernelPlan cfg;
  ASSERT_EQ(sm90_persistent_plan(h200(), shrink, nullptr, &cfg), GGEMM_STATUS_SUCCESS);
  EXPECT_EQ(cfg.tile_m, 32u);
  EXPECT_EQ(cfg.weights_box_rows, 48u);
  // One multiplying warpgroup (N 48 <= 64): 10 stages where both would leave 7.
  EXPECT_EQ(cfg.consumer_warpgroups, 1u);
  EXPECT_EQ(cfg.stages, sm90::max_stages(32, 128, 2, 232448, 1, 2, 48, 1));
  EXPECT_EQ(cfg.stages, 10u);
  EXPECT_EQ(sm90::max_stages(32, 128, 2, 232448, 1, 2, 48), 7u);
  CallShape decode_shrink = shrink;  // M 64 over 8 adapters: tile_m 16, 8 KB a slice
  decode_shrink.m = 64;
  decode_shrink.max_rows_per_group = 8;
  ASSERT_EQ(sm90_persistent_plan(h200(), decode_shrink, nullptr, &cfg), GGEMM_STATUS_SUCCESS);
  EXPECT_EQ(cfg.tile_m, 16u);
  EXPECT_EQ(cfg.k_slices, 4u);
  EXPECT_EQ(slices(shape(16)), 2u);                        // decode tiles, N 4096: 18 KB a slice
  EXPECT_EQ(slices(shape(32)), 1u);                        // tile_m 32, 128-row boxes: 20 KB
  EXPECT_EQ(slices(shape(4096)), 1u);                      // tile_m 128
  EXPECT_EQ(slices(shape(16, 4096, false)), 1u);           // [E, K, N] weights
  EXPECT_EQ(slices(shape(16, 4160 + 8)), 1u);              // K not a multiple of 64
  EXPECT_EQ(slices(shape(16, 128)), 1u);                   // K under two 2-slice stages
  EXPECT_EQ(slices(shape(16, 256)), 2u);
  CallShape narrow = decode_shrink;  // 4 slices, but K under two 4-slice stages
  narrow.k = 448;
  EXPECT_EQ(slices(narrow), 2u);
  narrow.k = 512;
  EXPECT_EQ(slices(narrow), 4u);
  CallShape r64 = shrink;  // LoRA shrink R 64: tile_m 64, 128-row boxes: 24 KB a slice
  r64.n = 192;  // two column blocks
  ASSERT_EQ(sm90_persistent_plan(h200(), r64, nullptr, &cfg), GGEMM_STATUS_SUCCESS);
  EXPECT_EQ(cfg.tile_m, 64u);
  EXPECT_EQ(cfg.k_slices, 1u);
  // The GPU tests' K-sliced cases (test_gpu_grouped.cpp, sliced*).
  CallShape gpu_wide = shape(16, 576, true, GGEMM_DTYPE_FP16);
  gpu_wide.m = 40, gpu_wide.n = 200, gpu_wide.num_groups = 5;
  EXPECT_EQ(slices(gpu_wide), 2u);
  CallShape gpu_two = shape(16, 448);
  gpu_two.m = 72, gpu_two.n = 1024, gpu_two.num_groups = 8;
  EXPECT_EQ(slices(gpu_two), 2u);
  CallShape gpu_narrow = shape(31, 1088, true, GGEMM_DTYPE_FP32);  // few tiles: tile_m halves to 16
  gpu_narrow.a_dtype = GGEMM_DTYPE_FP16;
  gpu_narrow.m = 58, gpu_narrow.n = 48, gpu_narrow.num_groups = 3, gpu_narrow.epilogue = GGEMM_EPILOGUE_ACCUMULATE;
  EXPECT_EQ(slices(gpu_narrow), 4u);
  CallShape gpu_four = shape(16, 1088, true, GGEMM_DTYPE_FP32);
  gpu_four.m = 36, gpu_four.n = 40, gpu_four.num_groups = 4;
  EXPECT_EQ(slices(gpu_four), 4u);
  ggemm_config stages = blank_config();
  stages.stages = 6;
  EXPECT_EQ(slices(shape(16), &stages), 1u);  // a requested stage count keeps one slice per stage
  CallShape forced_off = shrink;
  forced_off.k_slices_request = 1;
  EXPECT_EQ(slices(forced_off), 1u);
  CallShape forced_on = shape(16, 128);  // K of one 2-slice stage: off by the rules
  forced_on.k_slices_request = 4;
  EXPECT_EQ(slices(forced_on), 4u);
  CallShape wide_tile = shape(4096);  // tile_m 128: off by the rules; 3 stages of 2 slices fit
  wide_tile.k_slices_request = 2;
  EXPECT_EQ(slices(wide_tile), 2u);
  wide_tile.k_slices_request = 4;  // not even 2 stages of 4 slices fit
  EXPECT_EQ(slices(wide_tile), 1u);
}

// Automatic stages: every one that fits, except when the whole K fits in the
// ring (two epilogue buffers then): at most 8, or two tiles' stages, since
// each stage costs barrier inits at kernel entry.
TEST(Sm90Plan, AutomaticStagesFillSharedMemoryUnlessTheWholeKFits) {
  for (ggemm_dtype out : {GGEMM_DTYPE_BF16, GGEMM_DTYPE_FP16, GGEMM_DTYPE_FP32})
    for (int64_t rows : {1, 20, 50, 500})
      for (int64_t k : {16, 32, 512, 1024}) {
        KernelPlan cfg;
        ASSERT_EQ(sm90_persistent_plan(h200(), shape(rows, k, true, out), nullptr, &cfg), GGEMM_STATUS_SUCCESS);
        const uint32_t fit = expected_stages(cfg.tile_m, cfg.swizzle_bytes, dtype_bytes(out), 232448,
                                             cfg.staging_buffers, cfg.k_slices, cfg.weights_box_rows);
        // Two epilogue buffers exactly when the whole K fits in the pipeline
        // (stages of k_slices slices of tile_k).
        const uint32_t fit2 = expected_stages(cfg.tile_m, cfg.swizzle_bytes, dtype_bytes(out), 232448, 2,
                                              cfg.k_slices, cfg.weights_box_rows);
        const uint32_t slices_of_k = (k + cfg.swizzle_bytes / 2 - 1) / (cfg.swizzle_bytes / 2);
        const uint32_t k_steps = (slices_of_k + cfg.k_slices - 1) / cfg.k_slices;
        EXPECT_EQ(cfg.staging_buffers, k_steps <= fit2 ? 2u : 1u);
        const uint32_t expected = cfg.staging_buffers == 2 ? std::min(fit, std::max(8u, 2 * k_steps)) : fit;
        EXPECT_EQ(cfg.stages, expected) << "rows " << rows << ", k " << k << ", out " << dtype_name(out);
        EXPECT_EQ(cfg.tile_n, 128u);
      }
}

TEST(Sm90Plan, TwoEpilogueBuffersOnlyWhenTheWholeKFits) {
  // Short K (a LoRA expand, K = rank 16: one k-step): the call is bound by its
  // output stores, so the epilogue gets two buffers and the stages that fit
  // beside them.
  CallShape lora = shape(4096, 16);
  KernelPlan cfg;
  ASSERT_EQ(sm90_persistent_plan(h200(), lora, nullptr, &cfg), GGEMM_STATUS_SUCCESS) << ggemm_last_error_message();
  EXPECT_EQ(cfg.staging_buffers, 2u);
  // Its one k-step per tile needs no deep ring: 8 stages, not the 20-odd that fit.
  EXPECT_GT(sm90::max_stages(cfg.tile_m, cfg.swizzle_bytes, 2, 232448, 2), 8u);
  EXPECT_EQ(cfg.stages, 8u);
  // Long K: one buffer, every stage that fits.
  ASSERT_EQ(sm90_persistent_plan(h200(), shape(4096, 4096), nullptr, &cfg), GGEMM_STATUS_SUCCESS);
  EXPECT_EQ(cfg.staging_buffers, 1u);
  EXPECT_EQ(cfg.stages, sm90::max_stages(cfg.tile_m, cfg.swizzle_bytes, 2, 232448, 1));
  // The second buffer costs exactly one buffer's bytes of pipeline room.
  const auto one = sm90::make_smem_layout(128, 128, 2, 4, 1), two = sm90::make_smem_layout(128, 128, 2, 4, 2);
  EXPECT_EQ(two.c_bytes, 2 * one.c_bytes);
}

// Accumulate: the old C comes through a ring of staging slots that the
// producer fills ahead of the epilogues (ptx/sm90/producer.cuh), 2 at
// least (the kernel frees a whole tile's slot one tile later); up to 4 when
// the whole K fits beside them (short K, bound by the reads of C in flight).
TEST(Sm90Plan, AccumulateRingOfOldCSlots) {
  for (ggemm_dtype out : {GGEMM_DTYPE_BF16, GGEMM_DTYPE_FP32})
    for (int64_t k : {16, 64, 4096, 14336}) {
      CallShape s = shape(4096, k, true, out);
      s.epilogue = GGEMM_EPILOGUE_ACCUMULATE;
      KernelPlan cfg;
      ASSERT_EQ(sm90_persistent_plan(h200(), s, nullptr, &cfg), GGEMM_STATUS_SUCCESS) << ggemm_last_error_message();
      SCOPED_TRACE(::testing::Message() << "k " << k << ", out " << dtype_name(out));
      EXPECT_LE(cfg.tile_m, 128u);
      const uint32_t k_steps = sm90::k_stages(uint32_t(k), cfg.swizzle_bytes / 2, cfg.k_slices);
      // The most slots (4, then 3) beside which the whole K still fits.
      uint32_t slots = 2, fit = 0;
      for (uint32_t n = 4; n > 2 && slots == 2; --n) {
        fit = expected_stages(cfg.tile_m, cfg.swizzle_bytes, dtype_bytes(out), 232448, n, cfg.k_slices,
                              cfg.weights_box_rows);
        if (fit >= 2 && k_steps <= fit) slots = n;
      }
      EXPECT_EQ(cfg.staging_buffers, slots);
      if (slots > 2) {
        EXPECT_EQ(cfg.stages, std::min(fit, std::max(8u, 2 * k_steps)));
      } else {
        const uint32_t fit2 = expected_stages(cfg.tile_m, cfg.swizzle_bytes, dtype_bytes(out), 232448, 2,
                                              cfg.k_slices, cfg.weights_box_rows);
        EXPECT_EQ(cfg.stages, fit2);
      }
      // Every branch is reached: the LoRA expand's K 16 (4 slots of bf16
      // outputs, 3 of fp32) and a long K (2).
      if (k == 16) EXPECT_EQ(cfg.staging_buffers, out == GGEMM_DTYPE_BF16 ? 4u : 3u);
      if (k == 14336) EXPECT_EQ(cfg.staging_buffers, 2u);
      EXPECT_LE(sm90::make_smem_layout(cfg.tile_m, cfg.swizzle_bytes, dtype_bytes(out), cfg.stages,
                                       cfg.staging_buffers, cfg.k_slices, cfg.weights_box_rows)
                        .total_bytes() +
                    sm90_static_bytes(cfg.tile_m),
                232448u);
    }
  // A requested stage count that fits only beside 2 slots gets 2; one that
  // fits beside none is refused.
  CallShape s = shape(4096, 16);
  s.epilogue = GGEMM_EPILOGUE_ACCUMULATE;
  KernelPlan cfg;
  ASSERT_EQ(sm90_persistent_plan(h200(), s, nullptr, &cfg), GGEMM_STATUS_SUCCESS);
  const uint32_t fit2 = sm90::max_stages(cfg.tile_m, cfg.swizzle_bytes, 2, 232448, 2, cfg.k_slices);
  const uint32_t fit4 = sm90::max_stages(cfg.tile_m, cfg.swizzle_bytes, 2, 232448, 4, cfg.k_slices);
  ASSERT_LT(fit4, fit2);
  ggemm_config o = blank_config();
  o.stages = int(fit2);
  ASSERT_EQ(sm90_persistent_plan(h200(), s, &o, &cfg), GGEMM_STATUS_SUCCESS) << ggemm_last_error_message();
  EXPECT_EQ(cfg.staging_buffers, 2u);
  EXPECT_EQ(cfg.stages, fit2);
  o.stages = int(fit2) + 1;
  expect_refused(o, s, GGEMM_STATUS_INVALID_CONFIG, {"stages"});
}

}  // namespace
}  // namespace ggemm::testing
