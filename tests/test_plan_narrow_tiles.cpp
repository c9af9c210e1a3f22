// Narrow tiles (plan_rules.h, narrow_tiles): tiles of 64 features and 64-row
// weight boxes where tiles of 128 would leave SMs idle (decode with few
// groups, or a last wave on at most half the SMs), as each architecture's
// planner applies the rule, and the GPU cases that take them.
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>

#include "plan_test_support.h"
#include "runtime/plan_rules.h"

namespace ggemm::testing {
namespace {

// The GPU cases decode_narrow_last_wave_* (test_gpu_grouped.cpp) take the
// narrow tiles they are named for: 9 rows in 10 groups (the cases leave no
// rows past the groups, unowned_rows = 0, so M is 9), N 2800 (22 wide
// column blocks, 198 tiles, a last wave of 66 on 132 SMs), every epilogue,
// SwiGLU with and without gather, and one column block more stays wide. So
// do decode_listing_every_expert_* (M 28 = 23 routed rows + 5 past the
// groups, 300 groups, K 768): narrow at N 2048 and 512, wide under a config.
TEST(Sm90Plan, DecodeNarrowLastWaveCasesTakeTheirPaths) {
  for (ggemm_epilogue e : {GGEMM_EPILOGUE_STORE, GGEMM_EPILOGUE_ROW_SCALE, GGEMM_EPILOGUE_SWIGLU})
    for (bool gather : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "epilogue " << int(e) << (gather ? ", gather" : ""));
      CallShape s = shape(1, 192);
      s.m = 9, s.num_groups = 10, s.n = 2800;
      s.epilogue = e;
      s.gather = gather;
      KernelPlan plan;
      ASSERT_EQ(sm90_persistent_plan(h200(), s, nullptr, &plan), GGEMM_STATUS_SUCCESS) << ggemm_last_error_message();
      EXPECT_EQ(plan.tile_m, 16u);
      EXPECT_EQ(plan.consumer_warpgroups, 1u);
      EXPECT_EQ(plan.tile_n, 64u);
      EXPECT_EQ(plan.weights_box_rows, 64u);
      EXPECT_EQ(plan.max_clusters, 132);
      s.n += 128;  // 23 column blocks: a last wave of 75
      ASSERT_EQ(sm90_persistent_plan(h200(), s, nullptr, &plan), GGEMM_STATUS_SUCCESS);
      EXPECT_EQ(plan.consumer_warpgroups, 2u);
      EXPECT_EQ(plan.tile_n, 128u);
    }
  for (int64_t n : {2048, 512}) {
    SCOPED_TRACE(::testing::Message() << "listing every expert, N " << n);
    CallShape s = shape(5, 768);
    s.m = 28, s.num_groups = 300, s.n = n;
    KernelPlan plan;
    ASSERT_EQ(sm90_persistent_plan(h200(), s, nullptr, &plan), GGEMM_STATUS_SUCCESS) << ggemm_last_error_message();
    EXPECT_EQ(plan.tile_m, 16u);
    EXPECT_EQ(plan.tile_n, 64u);
    ggemm_config wide = blank_config();
    wide.tile_m = 16;
    ASSERT_EQ(sm90_persistent_plan(h200(), s, &wide, &plan), GGEMM_STATUS_SUCCESS) << ggemm_last_error_message();
    EXPECT_EQ(plan.tile_n, 128u);
  }
}

// The decode rule's two conditions, each alone, on the H200's 132 SMs:
// wide tiles short of one wave narrow only when tile_m <= 64 and M <= the
// groups; and the tile counts that narrow, by hand (16 groups of one row,
// W / 16 column blocks): short of a wave, or a last wave of at most 66.
TEST(Sm90Plan, DecodeNarrowRuleByHand) {
  CallShape s = shape(1, 4096);
  s.m = 16, s.num_groups = 16;
  const auto narrow = [](const CallShape &c) {
    KernelPlan plan;
    EXPECT_EQ(sm90_persistent_plan(h200(), c, nullptr, &plan), GGEMM_STATUS_SUCCESS) << ggemm_last_error_message();
    return plan.tile_n == 64u;
  };
  const struct {
    int64_t wide_tiles;
    bool narrow;
  } by_hand[] = {{64, true},   {80, true},   {128, true},  {144, true},  {192, true},  {208, false},
                 {256, false}, {272, true},  {384, false}, {400, true},  {528, false}, {592, true}};
  for (const auto &c : by_hand) {
    CallShape call = s;
    call.n = c.wide_tiles / 16 * 128;
    EXPECT_EQ(narrow(call), c.narrow) << c.wide_tiles << " wide tiles";
  }
  // M above the groups (17 rows in 16 groups: 16 row blocks, tile_m 16):
  // 128 wide tiles, short of a wave but more than half, stay wide.
  CallShape more_rows = s;
  more_rows.m = 17, more_rows.n = 8 * 128;
  EXPECT_FALSE(narrow(more_rows));
  // tile_m above 64 with M <= the groups: 256 rows in 256 groups, no hint
  // (a group may hold all 256), 9 column blocks: 2304 wide tiles, a last
  // wave of 60, but tiles of 128 tokens stay wide.
  CallShape big_tiles = s;
  big_tiles.m = 256, big_tiles.num_groups = 256, big_tiles.max_rows_per_group = 0;
  big_tiles.n = 9 * 128;
  KernelPlan probe;
  ASSERT_EQ(sm90_persistent_plan(h200(), big_tiles, nullptr, &probe), GGEMM_STATUS_SUCCESS);
  EXPECT_GT(probe.tile_m, 64u);
  EXPECT_EQ(row_block_limit(big_tiles, probe.tile_m) * column_blocks(big_tiles) % 132, 60);
  EXPECT_EQ(probe.tile_n, 128u);
  // Gather keeps wide tiles short of a wave, not past it.
  CallShape gathered = s;
  gathered.gather = true;
  gathered.n = 8 * 128;  // 128 wide tiles
  EXPECT_FALSE(narrow(gathered));
  gathered.n = 12 * 128;  // 192: a last wave of 60
  EXPECT_TRUE(narrow(gathered));
  // SwiGLU at tile_m 256 (its own kernels) stays wide even with N <= 64.
  CallShape swiglu = shape(4096, 512);
  swiglu.m = 64 * 4096, swiglu.n = 64;
  swiglu.epilogue = GGEMM_EPILOGUE_SWIGLU;
  KernelPlan plan;
  ASSERT_EQ(sm90_persistent_plan(h200(), swiglu, nullptr, &plan), GGEMM_STATUS_SUCCESS) << ggemm_last_error_message();
  EXPECT_EQ(plan.tile_m, 256u);
  EXPECT_EQ(plan.tile_n, 128u);
  EXPECT_EQ(plan.weights_box_rows, 128u);
}

// The narrow-tile rule (plan_rules.h, narrow_tiles) as an architecture's
// planner applies it: tiles of 64 features and 64-row weight boxes where
// tiles of 128 would leave half the SMs idle (decode with few groups), the
// grid sized by them. `narrow` says whether a plan is narrow (and checks
// whatever else the architecture sets with it).
using Planner = std::function<ggemm_status(const DeviceProps &, const CallShape &, const ggemm_config *, KernelPlan *)>;
void expect_narrow_tiles_rule(const Planner &plan, const DeviceProps &props,
                              const std::function<bool(const KernelPlan &)> &narrow) {
  // Mixtral's down projection at one token, top-2, as torch's offs list it
  // (8 groups, 2 rows): 2 row blocks (rows in at most 2 groups, whatever the
  // listed 8) x 32 wide column blocks.
  CallShape down{};
  down.a_dtype = down.c_dtype = GGEMM_DTYPE_BF16;
  down.m = 2, down.n = 4096, down.k = 14336, down.num_groups = 8, down.transpose_b = true;
  EXPECT_EQ(row_block_bound(down, 16), 2);
  KernelPlan cfg;
  ASSERT_EQ(plan(props, down, nullptr, &cfg), GGEMM_STATUS_SUCCESS) << ggemm_last_error_message();
  EXPECT_EQ(cfg.tile_m, 16u);
  EXPECT_TRUE(narrow(cfg));
  EXPECT_EQ(cfg.tile_n, 64u);
  EXPECT_EQ(cfg.weights_box_rows, 64u);
  EXPECT_EQ(cfg.max_clusters, 128);
  // Wide tiles for half the SMs still narrow; one more column stays wide
  // (16 rows in one group: not decode, whose rule is below).
  CallShape edge = down;
  edge.m = 16, edge.num_groups = 1;
  edge.n = props.sm_count / 2 * 128;
  ASSERT_EQ(plan(props, edge, nullptr, &cfg), GGEMM_STATUS_SUCCESS);
  EXPECT_TRUE(narrow(cfg));
  EXPECT_EQ(cfg.max_clusters, props.sm_count);
  edge.n += 1;
  ASSERT_EQ(plan(props, edge, nullptr, &cfg), GGEMM_STATUS_SUCCESS);
  EXPECT_FALSE(narrow(cfg));
  EXPECT_EQ(cfg.tile_n, 128u);
  EXPECT_EQ(cfg.weights_box_rows, 128u);
  // SwiGLU: narrow with 4 octet pairs.
  CallShape swiglu = down;
  swiglu.epilogue = GGEMM_EPILOGUE_SWIGLU;
  swiglu.n = 4096;  // I 2048: 2 row blocks x 32 wide column blocks
  ASSERT_EQ(plan(props, swiglu, nullptr, &cfg), GGEMM_STATUS_SUCCESS) << ggemm_last_error_message();
  EXPECT_TRUE(narrow(cfg));
  EXPECT_EQ(cfg.weights_box_rows, 64u);
  // Not with MN-major weights. Decode short of one wave narrows (Qwen3-30B's
  // down projection at one token: 8 row blocks x 16 column blocks, 128 wide
  // tiles on 132 or 148 SMs), but not with gather on load.
  CallShape mn_major = down;
  mn_major.transpose_b = false;
  ASSERT_EQ(plan(props, mn_major, nullptr, &cfg), GGEMM_STATUS_SUCCESS);
  EXPECT_FALSE(narrow(cfg));
  CallShape qwen3_down = down;
  qwen3_down.m = 8, qwen3_down.n = 2048, qwen3_down.k = 768, qwen3_down.num_groups = 128;
  ASSERT_EQ(plan(props, qwen3_down, nullptr, &cfg), GGEMM_STATUS_SUCCESS);
  EXPECT_TRUE(narrow(cfg));
  EXPECT_EQ(cfg.max_clusters, props.sm_count);
  CallShape gathered = qwen3_down;
  gathered.gather = true;
  ASSERT_EQ(plan(props, gathered, nullptr, &cfg), GGEMM_STATUS_SUCCESS) << ggemm_last_error_message();
  EXPECT_FALSE(narrow(cfg));
  EXPECT_EQ(cfg.max_clusters, 8 * 16);
  // Counted whatever the routing: a rows-per-group bound that makes the
  // tiles few (2 groups of at most 16 rows) but M that does not (1024 rows
  // could make 65 row blocks) keeps them wide. And not under a config.
  CallShape hinted = down;
  hinted.m = 1024, hinted.num_groups = 2, hinted.max_rows_per_group = 16;
  EXPECT_EQ(row_block_bound(hinted, 16), 2);
  EXPECT_EQ(row_block_limit(hinted, 16), 65);
  ASSERT_EQ(plan(props, hinted, nullptr, &cfg), GGEMM_STATUS_SUCCESS);
  EXPECT_FALSE(narrow(cfg));
  ggemm_config configured = blank_config();
  configured.tile_m = 16;
  ASSERT_EQ(plan(props, down, &configured, &cfg), GGEMM_STATUS_SUCCESS) << ggemm_last_error_message();
  EXPECT_FALSE(narrow(cfg));
  EXPECT_EQ(cfg.tile_n, 128u);
  // Decode (tile_m <= 64, M <= the groups) past one wave: narrow when the
  // last wave of wide tiles runs on at most half the SMs, with or without
  // gather. Qwen3-235B's gate_up
  // at one token, as torch's offs list it: 8 row blocks x 24 = 192 tiles,
  // 60 in the last wave of 132.
  const int64_t sms = props.sm_count;
  CallShape gate_up = down;
  gate_up.m = 8, gate_up.n = 3072, gate_up.k = 4096, gate_up.num_groups = 128;
  ASSERT_EQ(plan(props, gate_up, nullptr, &cfg), GGEMM_STATUS_SUCCESS);
  EXPECT_EQ(narrow(cfg), 192 % sms != 0 && 2 * (192 % sms) <= sms);
  // The edges: 16 rows listed as 16 groups, W / 16 wide column blocks.
  CallShape waves = down;
  waves.m = 16, waves.num_groups = 16;
  const auto narrow_at = [&](int64_t wide_tiles) {
    EXPECT_EQ(wide_tiles % 16, 0);
    CallShape call = waves;
    call.n = wide_tiles / 16 * 128;
    KernelPlan c;
    EXPECT_EQ(plan(props, call, nullptr, &c), GGEMM_STATUS_SUCCESS) << ggemm_last_error_message();
    EXPECT_EQ(row_block_limit(call, c.tile_m) * column_blocks(call), wide_tiles);
    return narrow(c);
  };
  int narrow_past_a_wave = 0, wide_past_a_wave = 0;
  for (int64_t wide_tiles = 16; wide_tiles <= 4 * sms; wide_tiles += 16) {
    const int64_t last_wave = wide_tiles % sms;
    const bool expected = wide_tiles < sms || (last_wave != 0 && 2 * last_wave <= sms);
    EXPECT_EQ(narrow_at(wide_tiles), expected) << wide_tiles << " wide tiles";
    if (wide_tiles > sms) ++(expected ? narrow_past_a_wave : wide_past_a_wave);
  }
  EXPECT_GT(narrow_past_a_wave, 3);
  EXPECT_GT(wide_past_a_wave, 3);
  // Compute-bound tiles keep the wide ones whatever their last wave: 1024
  // rows in one group, a tile_m above 64, more than a wave with a last one
  // of a few tiles.
  CallShape prefill = waves;
  prefill.m = 1024;
  prefill.n = 4 * sms * 128;
  ASSERT_EQ(plan(props, prefill, nullptr, &cfg), GGEMM_STATUS_SUCCESS);
  EXPECT_GT(cfg.tile_m, 64u);
  const int64_t prefill_tiles = row_block_limit(prefill, cfg.tile_m) * column_blocks(prefill);
  EXPECT_GT(prefill_tiles, sms);
  prefill.n += 128;  // one more column block: a last wave of 1024 / tile_m tiles
  ASSERT_EQ(plan(props, prefill, nullptr, &cfg), GGEMM_STATUS_SUCCESS);
  EXPECT_GT(cfg.tile_m, 64u);
  const int64_t last_wave = row_block_limit(prefill, cfg.tile_m) * column_blocks(prefill) % sms;
  EXPECT_TRUE(last_wave != 0 && 2 * last_wave <= sms) << last_wave;
  EXPECT_FALSE(narrow(cfg));
}

// sm_90a's narrow tiles (one consumer warpgroup multiplying) against the
// H200's 132 SMs.
TEST(Sm90Plan, NarrowTilesWhereWideOnesLeaveHalfTheSmsIdle) {
  expect_narrow_tiles_rule(sm90_persistent_plan, h200(), [](const KernelPlan &p) {
    EXPECT_EQ(p.tile_n == 64, p.consumer_warpgroups == 1u) << "tile_n " << p.tile_n;
    return p.consumer_warpgroups == 1u;
  });
}

// sm_100a plans sm_90a's narrow tiles against the B200's 148 SMs (the MMA
// keeps M 128; never run on hardware), and a pair's tiles stay wide.
TEST(Sm100Plan, NarrowTilesWhereWideOnesLeaveHalfTheSmsIdle) {
  expect_narrow_tiles_rule(sm100_plan, b200(), [](const KernelPlan &p) { return p.tile_n == 64; });
  CallShape down{};
  down.a_dtype = down.c_dtype = GGEMM_DTYPE_BF16;
  down.m = 2, down.n = 4096, down.k = 14336, down.num_groups = 8, down.transpose_b = true;
  ggemm_config pair = blank_config();
  pair.cta_group = 2;
  KernelPlan cfg;
  ASSERT_EQ(sm100_plan(b200(), down, &pair, &cfg), GGEMM_STATUS_SUCCESS) << ggemm_last_error_message();
  EXPECT_EQ(cfg.tile_n, 128u);
}

}  // namespace
}  // namespace ggemm::testing
