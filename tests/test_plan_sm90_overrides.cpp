// A caller's config (ggemm_config) on sm_90a: every refused override, each
// with its own message, and the valid ones honoured exactly (pairs included).
#include <gtest/gtest.h>

#include <cstdint>

#include "plan_test_support.h"
#include "ptx/sm90/smem_layout.h"

namespace ggemm::testing {
namespace {

TEST(Sm90Plan, RefusesWrongStructSize) {
  ggemm_config o = blank_config();
  o.struct_size = sizeof(ggemm_config) - 4;
  expect_refused(o, shape(), GGEMM_STATUS_INVALID_VALUE, {"struct_size"});
}

TEST(Sm90Plan, RefusesCtaGroup2) {
  ggemm_config o = blank_config();
  o.cta_group = 2;
  expect_refused(o, shape(), GGEMM_STATUS_INVALID_CONFIG, {"cta_group", "sm_100a"});
}

TEST(Sm90Plan, PairsShareTheTokenTileOfPrefillTiles) {
  // cluster_m 2: two CTAs along the weight rows share a 128- or 256-token
  // tile by multicast.
  ggemm_config o = blank_config();
  o.cluster_m = 2;
  KernelPlan cfg;
  ASSERT_EQ(sm90_persistent_plan(h200(), shape(), &o, &cfg), GGEMM_STATUS_SUCCESS) << ggemm_last_error_message();
  EXPECT_EQ(cfg.tile_m, 128u);
  EXPECT_EQ(cfg.cluster_size, 2u);
  EXPECT_EQ(cfg.stages, expected_stages(128, 128, 2, 232448));  // each CTA's layout is unchanged
  o.tile_m = 256;
  ASSERT_EQ(sm90_persistent_plan(h200(), shape(), &o, &cfg), GGEMM_STATUS_SUCCESS) << ggemm_last_error_message();
  EXPECT_EQ(cfg.cluster_size, 2u);
  // Automatic: no clusters.
  ASSERT_EQ(sm90_persistent_plan(h200(), shape(), nullptr, &cfg), GGEMM_STATUS_SUCCESS);
  EXPECT_EQ(cfg.cluster_size, 1u);
  // Smaller token tiles have no pair kernel.
  o.tile_m = 64;
  expect_refused(o, shape(), GGEMM_STATUS_INVALID_CONFIG, {"config->cluster_m = 2", "tile_m is 64"});
  o = blank_config();
  o.cluster_m = 2;
  expect_refused(o, shape(16), GGEMM_STATUS_INVALID_CONFIG, {"config->cluster_m = 2", "tile_m is 16"});
  o.cluster_m = 4;
  expect_refused(o, shape(), GGEMM_STATUS_INVALID_CONFIG, {"cluster_m"});
  o = blank_config();
  o.cluster_n = 2;
  expect_refused(o, shape(), GGEMM_STATUS_INVALID_CONFIG, {"cluster_n"});
}

TEST(Sm90Plan, RefusesMmaAndTileShapes) {
  ggemm_config o = blank_config();
  o.tile_n = 64;
  expect_refused(o, shape(), GGEMM_STATUS_INVALID_CONFIG, {"tile_n"});
  o = blank_config();
  o.mma_m = 128;
  expect_refused(o, shape(), GGEMM_STATUS_INVALID_CONFIG, {"mma_m"});
  o = blank_config();
  o.mma_k = 32;
  expect_refused(o, shape(), GGEMM_STATUS_INVALID_CONFIG, {"mma_k"});
  o = blank_config();
  o.tile_m = 48;
  expect_refused(o, shape(), GGEMM_STATUS_INVALID_CONFIG, {"tile_m"});
  o = blank_config();
  o.tile_m = 256;  // fine for 16-bit outputs, not instantiated for fp32
  expect_refused(o, shape(4096, 4096, true, GGEMM_DTYPE_FP32), GGEMM_STATUS_INVALID_CONFIG, {"tile_m", "fp32"});
  o = blank_config();
  o.tile_m = 64;
  o.mma_n = 32;
  expect_refused(o, shape(), GGEMM_STATUS_INVALID_CONFIG, {"mma_n"});
}

TEST(Sm90Plan, RefusesSwizzleAndTileK) {
  ggemm_config o = blank_config();
  o.a_swizzle = 96;
  expect_refused(o, shape(), GGEMM_STATUS_INVALID_CONFIG, {"a_swizzle"});
  o = blank_config();
  o.b_swizzle = 96;
  expect_refused(o, shape(), GGEMM_STATUS_INVALID_CONFIG, {"b_swizzle"});
  o = blank_config();
  o.a_swizzle = 128;
  o.b_swizzle = 64;
  expect_refused(o, shape(), GGEMM_STATUS_INVALID_CONFIG, {"a_swizzle", "b_swizzle"});
  o = blank_config();
  o.tile_k = 48;
  expect_refused(o, shape(), GGEMM_STATUS_INVALID_CONFIG, {"tile_k"});
  o = blank_config();
  o.tile_k = 32;
  o.a_swizzle = 128;  // tile_k must be swizzle / 2 = 64
  expect_refused(o, shape(), GGEMM_STATUS_INVALID_CONFIG, {"tile_k"});
  // Gather on load: only the 128-byte swizzle (rows land 128 bytes apart).
  CallShape gathered = shape(4096, 24, true);
  gathered.gather = true;
  for (int sw : {32, 64}) {
    o = blank_config();
    o.a_swizzle = sw;
    expect_refused(o, gathered, GGEMM_STATUS_INVALID_CONFIG, {"a_swizzle", "gather on load"});
  }
  // [E, K, N] weights: only the 128-byte path exists.
  o = blank_config();
  o.a_swizzle = 64;
  expect_refused(o, shape(4096, 4096, false), GGEMM_STATUS_INVALID_CONFIG, {"config->a_swizzle", "transpose_b"});
  o = blank_config();
  o.tile_k = 32;
  expect_refused(o, shape(4096, 4096, false), GGEMM_STATUS_INVALID_CONFIG, {"config->a_swizzle", "transpose_b"});
}

TEST(Sm90Plan, RefusesTileM256WithAccumulate) {
  ggemm_config o = blank_config();
  o.tile_m = 256;
  CallShape s = shape();
  s.epilogue = GGEMM_EPILOGUE_ACCUMULATE;
  expect_refused(o, s, GGEMM_STATUS_INVALID_CONFIG, {"config->tile_m", "accumulate"});
  // mma_n alone fixes tile_m too (the plan takes it as tile_m): it was
  // accepted, and the tile_m 256 kernel, which has no accumulate epilogue,
  // stored over C instead of adding (a review found it).
  o = blank_config();
  o.mma_n = 256;
  expect_refused(o, s, GGEMM_STATUS_INVALID_CONFIG, {"config->mma_n = 256", "accumulate"});
  o.mma_n = 128;
  KernelPlan cfg;
  EXPECT_EQ(sm90_persistent_plan(h200(), s, &o, &cfg), GGEMM_STATUS_SUCCESS) << ggemm_last_error_message();
  EXPECT_EQ(cfg.tile_m, 128u);
}

TEST(Sm90Plan, RefusesStages) {
  ggemm_config o = blank_config();
  o.stages = 1;  // a pipeline needs a stage to fill while one is consumed
  expect_refused(o, shape(), GGEMM_STATUS_INVALID_CONFIG, {"stages"});
  // Also where the whole K fits the ring (K 64 and 256: the two-buffer
  // branch), with the accumulate epilogue's ring, and gathered: these were
  // accepted, and the kernel waited forever on its one stage (a review
  // found it; the device wait traps after 10 s).
  for (int64_t k : {int64_t(64), int64_t(256)}) {
    CallShape short_k = shape(4096, k);
    expect_refused(o, short_k, GGEMM_STATUS_INVALID_CONFIG, {"stages"});
    short_k.epilogue = GGEMM_EPILOGUE_ACCUMULATE;
    expect_refused(o, short_k, GGEMM_STATUS_INVALID_CONFIG, {"stages"});
    short_k.epilogue = GGEMM_EPILOGUE_STORE;
    short_k.gather = true;
    expect_refused(o, short_k, GGEMM_STATUS_INVALID_CONFIG, {"stages"});
  }
  o.stages = -1;
  expect_refused(o, shape(), GGEMM_STATUS_INVALID_CONFIG, {"stages"});
  // One more than fits for the automatic tile (128) and swizzle (128).
  o.stages = int(sm90::max_stages(128, 128, 2, 232448)) + 1;
  expect_refused(o, shape(), GGEMM_STATUS_INVALID_CONFIG, {"stages"});
}

TEST(Sm90Plan, RefusesWhatDoesNotFitTwoStages) {
  // A device with too little shared memory for the chosen tile: refused, not
  // launched with one stage.
  DeviceProps small = h200();
  small.smem_optin = 49152;
  ggemm_config o = blank_config();
  o.tile_m = 256;
  clear_error();
  KernelPlan cfg;
  EXPECT_EQ(sm90_persistent_plan(small, shape(), &o, &cfg), GGEMM_STATUS_INVALID_CONFIG);
  EXPECT_STRNE(ggemm_last_error_message(), "");
}

TEST(Sm90Plan, HonoursValidOverridesExactly) {
  struct Case {
    int tile_m, tile_k, a_swizzle, b_swizzle, mma_n, stages;
    bool transpose_b;
    ggemm_dtype out;
    PlannedTile want;  // tile_m, tile_n, swizzle_bytes, stages
  };
  const Case cases[] = {
      {64, 0, 64, 0, 0, 3, true, GGEMM_DTYPE_BF16, {64, 128, 64, 3}},
      {0, 32, 0, 0, 32, 2, true, GGEMM_DTYPE_FP16, {32, 128, 64, 2}},   // tile_m from mma_n, swizzle from tile_k
      {256, 64, 128, 128, 256, 3, true, GGEMM_DTYPE_BF16, {256, 128, 128, 3}},
      {16, 16, 32, 32, 16, 0, true, GGEMM_DTYPE_FP32, {16, 128, 32, 0}},  // stages 0: as many as fit
      {128, 0, 0, 128, 0, 2, false, GGEMM_DTYPE_FP32, {128, 128, 128, 2}},
  };
  for (const Case &c : cases) {
    ggemm_config o = blank_config();
    o.tile_m = c.tile_m;
    o.tile_k = c.tile_k;
    o.a_swizzle = c.a_swizzle;
    o.b_swizzle = c.b_swizzle;
    o.mma_n = c.mma_n;
    o.stages = c.stages;
    // Fields at the only value sm_90a has are accepted as well as 0.
    o.tile_n = 128;
    o.mma_m = 64;
    o.mma_k = 16;
    o.cluster_m = o.cluster_n = 1;
    o.cta_group = 1;
    // Each case differs from the automatic choice (tile_m 128, 128B, most stages) somewhere.
    KernelPlan cfg;
    ASSERT_EQ(sm90_persistent_plan(h200(), shape(4096, 4096, c.transpose_b, c.out), &o, &cfg), GGEMM_STATUS_SUCCESS)
        << ggemm_last_error_message();
    const uint32_t want_stages =
        c.want.stages ? c.want.stages : expected_stages(c.want.tile_m, c.want.swizzle_bytes, dtype_bytes(c.out), 232448);
    EXPECT_EQ(cfg.tile_m, c.want.tile_m);
    EXPECT_EQ(cfg.tile_n, c.want.tile_n);
    EXPECT_EQ(cfg.swizzle_bytes, c.want.swizzle_bytes);
    EXPECT_EQ(cfg.stages, want_stages);
  }
}

}  // namespace
}  // namespace ggemm::testing
