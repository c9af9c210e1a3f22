// The sm_90a plan's automatic tile: tile_m by rows per group and by how many
// tiles fill the SMs, the consumer warpgroups, the swizzle by K, and where
// the tile walker's lanes walk together. (The narrow tiles of decode:
// test_plan_narrow_tiles.cpp; stages: test_plan_sm90_stages.cpp.)
#include <gtest/gtest.h>

#include <cstdint>

#include "plan_test_support.h"
#include "ptx/sm90/smem_layout.h"
#include "runtime/plan_rules.h"

namespace ggemm::testing {
namespace {

TEST(Sm90Plan, TileM256OnlyForLargeGroups) {
  // Average group of 256 rows or more (and no larger than the largest): 256.
  CallShape big = shape(1024);
  big.m = 64 * 256;
  KernelPlan cfg;
  ASSERT_EQ(sm90_persistent_plan(h200(), big, nullptr, &cfg), GGEMM_STATUS_SUCCESS) << ggemm_last_error_message();
  EXPECT_EQ(cfg.tile_m, 256u);
  // 255-row average: 128.
  CallShape below = big;
  below.m = 64 * 255;
  ASSERT_EQ(sm90_persistent_plan(h200(), below, nullptr, &cfg), GGEMM_STATUS_SUCCESS);
  EXPECT_EQ(cfg.tile_m, 128u);
  // Skewed routing: the largest group more than 4x the average (Zipf-like)
  // takes 128; up to 4x, and with no bound (0, or M: nothing known), the
  // average decides.
  CallShape skewed = big;
  skewed.max_rows_per_group = 4 * 256 + 1;
  ASSERT_EQ(sm90_persistent_plan(h200(), skewed, nullptr, &cfg), GGEMM_STATUS_SUCCESS);
  EXPECT_EQ(cfg.tile_m, 128u);
  for (int64_t bound : {int64_t(0), big.m}) {
    CallShape unknown = big;
    unknown.max_rows_per_group = bound;
    ASSERT_EQ(sm90_persistent_plan(h200(), unknown, nullptr, &cfg), GGEMM_STATUS_SUCCESS);
    EXPECT_EQ(cfg.tile_m, 256u) << "max_rows_per_group " << bound;
  }
  // The average never counts above the largest group.
  CallShape capped = big;
  capped.max_rows_per_group = 200;
  ASSERT_EQ(sm90_persistent_plan(h200(), capped, nullptr, &cfg), GGEMM_STATUS_SUCCESS);
  EXPECT_EQ(cfg.tile_m, 128u);
  // No 256 for fp32 output (not instantiated) or the accumulate epilogue
  // (not offered at 256).
  CallShape fp32 = big;
  fp32.c_dtype = GGEMM_DTYPE_FP32;
  ASSERT_EQ(sm90_persistent_plan(h200(), fp32, nullptr, &cfg), GGEMM_STATUS_SUCCESS);
  EXPECT_EQ(cfg.tile_m, 128u);
  CallShape acc = big;
  acc.epilogue = GGEMM_EPILOGUE_ACCUMULATE;
  ASSERT_EQ(sm90_persistent_plan(h200(), acc, nullptr, &cfg), GGEMM_STATUS_SUCCESS);
  EXPECT_EQ(cfg.tile_m, 128u);
}

TEST(Sm90Plan, TileMGrowsWithRowsPerGroup) {
  const struct {
    int64_t rows;
    uint32_t tile_m;
  } cases[] = {{1, 16}, {16, 16}, {17, 32}, {32, 32}, {33, 64}, {64, 64}, {65, 128}, {4096, 128}};
  for (const auto &c : cases) {
    KernelPlan cfg;
    ASSERT_EQ(sm90_persistent_plan(h200(), shape(c.rows), nullptr, &cfg), GGEMM_STATUS_SUCCESS)
        << ggemm_last_error_message();
    EXPECT_EQ(cfg.tile_m, c.tile_m) << "max_rows_per_group " << c.rows;
  }
  // max_rows_per_group 0 means "M": a 10-row call gets the decode tile.
  CallShape s = shape(0);
  s.m = 10;
  KernelPlan cfg;
  ASSERT_EQ(sm90_persistent_plan(h200(), s, nullptr, &cfg), GGEMM_STATUS_SUCCESS);
  EXPECT_EQ(cfg.tile_m, 16u);
}

// LoRA shrink shapes (Llama-3-8B: K 4096, 8 adapters of 512 tokens): one or
// two column tiles per row block, so tile_m halves until at least three
// quarters of the 132 SMs get a tile.
TEST(Sm90Plan, NarrowOutputsHalveTileMToFillTheSms) {
  CallShape s = shape(512);
  s.m = 4096;
  s.num_groups = 8;
  const struct {
    int64_t col_blocks;
    uint32_t tile_m;  // bound on tiles at that tile_m
  } cases[] = {
      {1, 32},   // 3R = 48 in one spanning tile: 8 x 16 = 128 tiles >= 99
      {2, 64},   // 3R = 192: 8 x 8 x 2 = 128 tiles
      {3, 64},   // 3R = 384: 8 x 8 x 3 = 192 (128 would give 96 < 99)
      {32, 256}, // wide N: already 8 x 2 x 32 = 512 tiles at 256
  };
  for (const auto &c : cases) {
    s.n = c.col_blocks * int64_t(kGroupedTileN);
    KernelPlan cfg;
    ASSERT_EQ(sm90_persistent_plan(h200(), s, nullptr, &cfg), GGEMM_STATUS_SUCCESS) << ggemm_last_error_message();
    EXPECT_EQ(cfg.tile_m, c.tile_m) << c.col_blocks << " column tiles";
  }
  // Never below 16, however few the tiles.
  s.m = 16;
  s.num_groups = 1;
  s.max_rows_per_group = 16;
  s.n = 48;
  KernelPlan cfg;
  ASSERT_EQ(sm90_persistent_plan(h200(), s, nullptr, &cfg), GGEMM_STATUS_SUCCESS);
  EXPECT_EQ(cfg.tile_m, 16u);
}

// The GPU cases row_scale_tile_m256_* (tests/test_gpu_grouped.cpp) run the
// paths they are named for: the tile_m 256 persistent kernel with one
// multiplying warpgroup (K-major, N 64), two (N 384), two with the second
// one's columns past N (MN-major, N 64), and pairs.
TEST(Sm90Plan, RowScaleTileM256CasesTakeTheirPaths) {
  struct Want {
    int64_t n;
    bool kmajor;
    int cluster;
    uint32_t consumers;
  };
  for (const Want &w : {Want{64, true, 0, 1}, Want{384, true, 0, 2}, Want{64, false, 0, 2}, Want{384, true, 2, 2}})
    for (int64_t k : {int64_t(128), int64_t(520)}) {
      SCOPED_TRACE(::testing::Message() << "n " << w.n << (w.kmajor ? " K-major" : " MN-major") << ", k " << k
                                        << ", cluster " << w.cluster);
      CallShape s = shape(600, k, w.kmajor);
      s.m = 27 + 400 + 150 + 600 + 256;
      s.num_groups = 6;
      s.n = w.n;
      s.epilogue = GGEMM_EPILOGUE_ROW_SCALE;
      ggemm_config cfg{};
      cfg.struct_size = sizeof cfg;
      cfg.tile_m = 256;
      cfg.cluster_m = w.cluster;
      KernelPlan plan;
      ASSERT_EQ(sm90_persistent_plan(h200(), s, &cfg, &plan), GGEMM_STATUS_SUCCESS) << ggemm_last_error_message();
      EXPECT_EQ(plan.tile_m, 256u);
      EXPECT_EQ(plan.consumer_warpgroups, w.consumers);
      EXPECT_EQ(plan.cluster_size, w.cluster == 2 ? 2u : 1u);
    }
}

// The tile walker's lanes walk together where a CTA's step (grid tiles)
// crosses more listed groups than one thread's batch of kWalkBatch, by the
// host's bounds: decode calls listing every expert, not LoRA's few
// adapters of many tiles.
TEST(Sm90Plan, TileWalkByLanesWhereAStepCrossesManyGroups) {
  const auto lanes = [](const CallShape &c) {
    KernelPlan plan;
    if (sm90_persistent_plan(h200(), c, nullptr, &plan) != GGEMM_STATUS_SUCCESS) {
      ADD_FAILURE() << "no plan: " << ggemm_last_error_message();
      return false;  // (a failed plan has tile_m 0: the rule would divide by it)
    }
    return walk_by_lanes(plan, c, plan.max_clusters * plan.cluster_size);
  };
  CallShape lora = shape(0, 16);  // LoRA expand: 8 adapters, M 1024, Q/K/V 6144 features
  lora.m = 1024, lora.num_groups = 8, lora.n = 6144;
  EXPECT_FALSE(lanes(lora));
  lora.m = 64;  // its decode: 8 groups of ~8 rows, 48 column blocks each
  EXPECT_FALSE(lanes(lora));
  CallShape listed = shape(8, 768);  // one token of top-8 over 128 listed experts
  listed.m = 8, listed.num_groups = 128, listed.n = 2048;
  EXPECT_TRUE(lanes(listed));
  CallShape one = listed;  // one group: nothing to cross
  one.num_groups = 1;
  EXPECT_FALSE(lanes(one));
  // At the threshold: 2048 rows in 128 groups of at most 16 (the plan's
  // tile_m), N 1024; `tiles` is the host's bound, a step of g CTAs crosses
  // g * 128 / tiles groups on average: one thread up to 4, the lanes past.
  CallShape by_hand = shape(16, 4096);
  by_hand.n = 1024, by_hand.m = 2048, by_hand.num_groups = 128;
  KernelPlan plan;
  ASSERT_EQ(sm90_persistent_plan(h200(), by_hand, nullptr, &plan), GGEMM_STATUS_SUCCESS);
  const int64_t tiles = row_block_bound(by_hand, plan.tile_m) * column_blocks(by_hand, plan.tile_n);
  EXPECT_EQ(walk_by_lanes(plan, by_hand, 132), 132 * 128 > 4 * tiles);
  EXPECT_FALSE(walk_by_lanes(plan, by_hand, 4 * tiles / 128));  // four groups a step: one thread
  EXPECT_TRUE(walk_by_lanes(plan, by_hand, 4 * tiles / 128 + 1));
}

TEST(Sm90Plan, SwizzleFollowsK) {
  const struct {
    int64_t k;
    uint32_t swizzle;
  } cases[] = {{8, 32}, {16, 32}, {24, 64}, {32, 64}, {40, 128}, {64, 128}, {7168, 128}};
  for (const auto &c : cases) {
    KernelPlan cfg;
    ASSERT_EQ(sm90_persistent_plan(h200(), shape(4096, c.k, true), nullptr, &cfg), GGEMM_STATUS_SUCCESS);
    EXPECT_EQ(cfg.swizzle_bytes, c.swizzle) << "K-major, k " << c.k;
    // Gathered token rows land 128 bytes apart, whatever K.
    CallShape gathered = shape(4096, c.k, true);
    gathered.gather = true;
    ASSERT_EQ(sm90_persistent_plan(h200(), gathered, nullptr, &cfg), GGEMM_STATUS_SUCCESS);
    EXPECT_EQ(cfg.swizzle_bytes, 128u) << "gathered, k " << c.k;
    // [E, K, N] weights only have the 128-byte MN-major path.
    ASSERT_EQ(sm90_persistent_plan(h200(), shape(4096, c.k, false), nullptr, &cfg), GGEMM_STATUS_SUCCESS);
    EXPECT_EQ(cfg.swizzle_bytes, 128u) << "MN-major, k " << c.k;
  }
}

// One multiplying consumer warpgroup when N <= 64 with K-major weights and no
// cluster (Sm90GroupedParams::consumer_warpgroups): its slot ends 64 rows
// past the last slice's box instead of 128, and only its staging is kept.
TEST(Sm90Plan, OneConsumerWarpgroupWhenNFitsInIt) {
  EXPECT_EQ(sm90::weights_stage_rows(2, 48, 1), 2u * 48 + 16);
  EXPECT_EQ(sm90::weights_stage_rows(2, 48), 2u * 48 + 80);
  EXPECT_EQ(sm90::weights_stage_rows(1, 64, 1), 64u);
  EXPECT_EQ(sm90::weights_stage_rows(1, 128), 128u);
  const sm90::SmemLayout one = sm90::make_smem_layout(32, 128, 2, 10, 1, 2, 48, 1),
                         two = sm90::make_smem_layout(32, 128, 2, 10, 1, 2, 48, 2);
  EXPECT_EQ(one.weights_stage_bytes, (2u * 48 + 16) * 128);
  EXPECT_EQ(one.c_bytes * 2, two.c_bytes);
  EXPECT_EQ(one.tokens_stage_bytes, two.tokens_stage_bytes);
  auto consumers = [](CallShape s, const ggemm_config *o = nullptr) {
    KernelPlan cfg;
    EXPECT_EQ(sm90_persistent_plan(h200(), s, o, &cfg), GGEMM_STATUS_SUCCESS) << ggemm_last_error_message();
    return cfg.consumer_warpgroups;
  };
  CallShape narrow = shape(512);
  narrow.n = 64;
  EXPECT_EQ(consumers(narrow), 1u);
  narrow.n = 40;
  EXPECT_EQ(consumers(narrow), 1u);
  narrow.n = 72;
  EXPECT_EQ(consumers(narrow), 2u);
  CallShape mn_major = shape(512, 4096, false);  // [E, K, N]: both warpgroups' boxes
  mn_major.n = 48;
  EXPECT_EQ(consumers(mn_major), 2u);
  CallShape pair = shape(4096);  // a pair cluster: both
  pair.n = 48;
  ggemm_config cluster = blank_config();
  cluster.tile_m = 128;
  cluster.cluster_m = 2;
  EXPECT_EQ(consumers(pair, &cluster), 2u);
}

}  // namespace
}  // namespace ggemm::testing
