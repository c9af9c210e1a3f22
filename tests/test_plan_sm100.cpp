// sm_100a (compiled and checked, never run on Blackwell hardware): stage
// selection from shared memory, the plan's automatic choices (tile_m,
// swizzle, stages, cta_group 2 pairs, gather and SwiGLU, the walker's tiles),
// every refused and every honoured override, and the agreement between the
// runtime's kernel registry and ptx/sm100/kernel_table.h. (Its narrow tiles:
// test_plan_narrow_tiles.cpp; its decode GEMV: test_plan_decode_gemv.cpp.)
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "plan_test_support.h"
#include "ptx/sm100/kernel_table.h"
#include "ptx/sm100/smem_layout.h"
#include "runtime/plan_rules.h"

namespace ggemm::testing {
namespace {

// A sm_100a persistent kernel's name in the registry (registry_name).
std::string sm100_kernel_name(ggemm_dtype a, ggemm_dtype c, bool kmajor, uint32_t tile_m, uint32_t cta_group) {
  return registry_name(Arch::kSm100a, KernelFamily::kPersistent, a, c, kmajor, tile_m, cta_group);
}

// Written from the documented layout (ptx/sm100/smem_layout.h), not from its
// code: per stage a 128-row weight tile and a tile_m-row token tile, each row
// one swizzle span, plus two 8-byte barriers (full, empty); once, two 8-byte
// barriers per tensor-memory accumulator (acc_full, acc_empty; two
// accumulators), 16 bytes for the address tcgen05.alloc writes, and 1024
// bytes to align the dynamic base. No epilogue staging: the epilogue stores
// from registers. Beside it, as on sm_90a, the static tile handoff
// (kHandoffBytes) counts against the opt-in limit.
uint64_t sm100_bytes_for(uint64_t stages, uint64_t tile_m, uint64_t swizzle) {
  return stages * (128 * swizzle + tile_m * swizzle + 16) + 2 * 16 + 16 + 1024;
}

uint32_t sm100_expected_stages(uint32_t tile_m, uint32_t swizzle, uint32_t smem) {
  uint32_t s = 0;
  while (s < sm100::kMaxStages && sm100_bytes_for(s + 1, tile_m, swizzle) + kHandoffBytes <= smem) ++s;
  return s;
}

TEST(Sm100MaxStages, MatchesTheDocumentedLayout) {
  bool saw_cap = false, saw_zero = false;
  for (uint32_t smem : kSmemSizes)
    for (uint32_t tile_m : kTileMs)
      for (uint32_t sw : kSwizzles) {
        SCOPED_TRACE(::testing::Message() << "smem " << smem << ", tile_m " << tile_m << ", swizzle " << sw);
        const uint32_t s = sm100::max_stages(tile_m, sw, smem);
        EXPECT_EQ(s, sm100_expected_stages(tile_m, sw, smem));
        EXPECT_LE(s, sm100::kMaxStages);
        saw_cap |= s == sm100::kMaxStages;
        saw_zero |= s == 0;
        if (s > 0) {
          // The layout the kernel builds with that count fits, byte for byte as documented ...
          EXPECT_LE(sm100::make_smem_layout(tile_m, sw, s).total_bytes() + kHandoffBytes, smem);
          EXPECT_EQ(sm100::make_smem_layout(tile_m, sw, s).total_bytes(), sm100_bytes_for(s, tile_m, sw));
        }
        // ... and one more stage would not, unless the cap stopped it.
        if (s < sm100::kMaxStages)
          EXPECT_GT(sm100::make_smem_layout(tile_m, sw, s + 1).total_bytes() + kHandoffBytes, smem);
      }
  EXPECT_TRUE(saw_cap);
  EXPECT_TRUE(saw_zero);
}

TEST(Sm100MaxStages, MonotoneInSharedMemory) {
  for (uint32_t tile_m : kTileMs)
    for (uint32_t sw : kSwizzles) {
      uint32_t prev = 0;
      for (uint32_t smem = 0; smem <= 262144; smem += 1024) {
        const uint32_t s = sm100::max_stages(tile_m, sw, smem);
        ASSERT_GE(s, prev) << "tile_m " << tile_m << ", swizzle " << sw << ", smem " << smem;
        prev = s;
      }
    }
}

TEST(Sm100MaxStages, KnownB200Values) {
  // Hand-computed on 232448 bytes (the B200's opt-in shared memory, as the
  // H200's): tile_m 128, 128B swizzle: per stage 16384 + 16384 + 16 = 32784;
  // fixed 32 + 16 + 1024 + 384 (the static tile handoff) = 1456;
  // (232448 - 1456) / 32784 = 7.05 -> 7 (one more than sm_90a, which stages
  // its epilogue in shared memory).
  EXPECT_EQ(sm100::max_stages(128, 128, 232448), 7u);
  // tile_m 256: 16384 + 32768 + 16 = 49168 per stage -> 4.
  EXPECT_EQ(sm100::max_stages(256, 128, 232448), 4u);
  // tile_m 16, 32B swizzle: 4096 + 512 + 16 = 4624 per stage -> 50, capped.
  EXPECT_EQ(sm100::max_stages(16, 32, 232448), sm100::kMaxStages);
  // One byte short of a single stage.
  const uint32_t one = uint32_t(sm100_bytes_for(1, 256, 128) + kHandoffBytes);
  EXPECT_EQ(sm100::max_stages(256, 128, one - 1), 0u);
  EXPECT_EQ(sm100::max_stages(256, 128, one), 1u);
}

TEST(Sm100Plan, TileM256ForEveryOutputAndEpilogue) {
  // Average group of 256 rows or more (balanced: the largest no more than
  // 4x the average): 256, also for fp32 output and the accumulate epilogue
  // (sm_90a stops at 128 for both).
  for (ggemm_dtype out : {GGEMM_DTYPE_BF16, GGEMM_DTYPE_FP16, GGEMM_DTYPE_FP32})
    for (ggemm_epilogue ep : {GGEMM_EPILOGUE_STORE, GGEMM_EPILOGUE_ACCUMULATE, GGEMM_EPILOGUE_ROW_SCALE}) {
      CallShape big = shape(1024, 4096, true, out);
      big.m = 64 * 256;
      big.epilogue = ep;
      KernelPlan cfg;
      ASSERT_EQ(sm100_plan(b200(), big, nullptr, &cfg), GGEMM_STATUS_SUCCESS) << ggemm_last_error_message();
      EXPECT_EQ(cfg.tile_m, 256u) << dtype_name(out) << ", epilogue " << ep;
      // 255-row average: 128, as on sm_90a.
      big.m = 64 * 255;
      ASSERT_EQ(sm100_plan(b200(), big, nullptr, &cfg), GGEMM_STATUS_SUCCESS);
      EXPECT_EQ(cfg.tile_m, 128u) << dtype_name(out) << ", epilogue " << ep;
    }
}

TEST(Sm100Plan, TileMAndSwizzleFollowTheSm90Rules) {
  const struct {
    int64_t rows;
    uint32_t tile_m;
  } cases[] = {{1, 16}, {16, 16}, {17, 32}, {32, 32}, {33, 64}, {64, 64}, {65, 128}, {4096, 128}};
  for (const auto &c : cases) {
    KernelPlan cfg;
    ASSERT_EQ(sm100_plan(b200(), shape(c.rows), nullptr, &cfg), GGEMM_STATUS_SUCCESS)
        << ggemm_last_error_message();
    EXPECT_EQ(cfg.tile_m, c.tile_m) << "max_rows_per_group " << c.rows;
    EXPECT_EQ(cfg.tile_n, 128u);
  }
  for (int64_t k : {8, 16, 24, 32, 40, 7168}) {
    KernelPlan cfg;
    ASSERT_EQ(sm100_plan(b200(), shape(4096, k, true), nullptr, &cfg), GGEMM_STATUS_SUCCESS);
    EXPECT_EQ(cfg.swizzle_bytes, k <= 16 ? 32u : k <= 32 ? 64u : 128u) << "K-major, k " << k;
    ASSERT_EQ(sm100_plan(b200(), shape(4096, k, false), nullptr, &cfg), GGEMM_STATUS_SUCCESS);
    EXPECT_EQ(cfg.swizzle_bytes, 128u) << "MN-major, k " << k;
  }
  // Narrow outputs (LoRA shrink): tile_m halves until three quarters of the
  // 148 SMs (111) get a tile.
  CallShape s = shape(512);
  s.m = 4096;
  s.num_groups = 8;
  const struct {
    int64_t col_blocks;
    uint32_t tile_m;
  } narrow[] = {{1, 32}, {2, 64}, {3, 64}, {32, 256}};
  for (const auto &c : narrow) {
    s.n = c.col_blocks * int64_t(kGroupedTileN);
    KernelPlan cfg;
    ASSERT_EQ(sm100_plan(b200(), s, nullptr, &cfg), GGEMM_STATUS_SUCCESS);
    EXPECT_EQ(cfg.tile_m, c.tile_m) << c.col_blocks << " column tiles";
  }
}

TEST(Sm100Plan, AutomaticStagesFillSharedMemory) {
  for (ggemm_dtype out : {GGEMM_DTYPE_BF16, GGEMM_DTYPE_FP16, GGEMM_DTYPE_FP32})
    for (int64_t rows : {1, 20, 50, 500})
      for (int64_t k : {16, 32, 512}) {
        KernelPlan cfg;
        ASSERT_EQ(sm100_plan(b200(), shape(rows, k, true, out), nullptr, &cfg), GGEMM_STATUS_SUCCESS);
        // Every stage that fits whatever K and the output dtype: no epilogue
        // buffers compete for the memory.
        EXPECT_EQ(cfg.stages, sm100_expected_stages(cfg.tile_m, cfg.swizzle_bytes, 232448))
            << "rows " << rows << ", k " << k << ", out " << dtype_name(out);
        EXPECT_GE(cfg.stages, 2u);
      }
}

void expect_refused_sm100(const ggemm_config &o, const CallShape &s, ggemm_status status,
                          std::vector<std::string> names, const DeviceProps &props = b200()) {
  clear_error();
  KernelPlan cfg;
  EXPECT_EQ(sm100_plan(props, s, &o, &cfg), status);
  const std::string msg = ggemm_last_error_message();
  for (const std::string &n : names)
    EXPECT_NE(msg.find(n), std::string::npos) << "message \"" << msg << "\" lacks \"" << n << "\"";
}

// The walker's rule counts a pair's tiles (256 weight rows) and a pair's
// step (grid / 2 pairs): with clusters of two, a grid whose pairs step
// across 4 groups' tiles keeps one thread, one pair more takes the lanes.
TEST(Sm100Plan, TileWalkRuleCountsPairTilesAndPairSteps) {
  ggemm_config o = blank_config();
  o.cta_group = 2;
  CallShape s = shape(16, 4096);
  s.n = 1024, s.m = 2048, s.num_groups = 128;
  KernelPlan plan;
  ASSERT_EQ(sm100_plan(b200(), s, &o, &plan), GGEMM_STATUS_SUCCESS) << ggemm_last_error_message();
  ASSERT_EQ(plan.cluster_size, 2u);
  const int64_t pair_tiles = row_block_bound(s, plan.tile_m) * column_blocks(s, plan.tile_n * 2);
  const int64_t pairs = 4 * pair_tiles / s.num_groups;
  EXPECT_FALSE(walk_by_lanes(plan, s, 2 * pairs));
  EXPECT_TRUE(walk_by_lanes(plan, s, 2 * (pairs + 1)));
}

// cta_group 2 (a cluster of two CTAs sharing each MMA) on request: the pair
// walks 256 weight rows, each CTA holds half the tokens, so tile_m starts at
// 32 and stages count half a token tile per CTA.
TEST(Sm100Plan, CtaGroup2OnRequest) {
  ggemm_config o = blank_config();
  o.cta_group = 2;
  KernelPlan cfg;
  ASSERT_EQ(sm100_plan(b200(), shape(), &o, &cfg), GGEMM_STATUS_SUCCESS) << ggemm_last_error_message();
  EXPECT_EQ(cfg.cluster_size, 2u);
  EXPECT_EQ(cfg.tile_n * cfg.cluster_size, 256u);  // the pair's weight rows
  EXPECT_EQ(cfg.stages, sm100::max_stages(cfg.tile_m, cfg.swizzle_bytes, 232448, 2));
  // The automatic tile_m never goes below 32 with cta_group 2 (a 10-row call
  // would get 16 with cta_group 1).
  CallShape small = shape(0);
  small.m = 10;
  ASSERT_EQ(sm100_plan(b200(), small, &o, &cfg), GGEMM_STATUS_SUCCESS);
  EXPECT_EQ(cfg.tile_m, 32u);
  o.cta_group = 0;
  ASSERT_EQ(sm100_plan(b200(), small, &o, &cfg), GGEMM_STATUS_SUCCESS);
  EXPECT_EQ(cfg.tile_m, 16u);
  EXPECT_EQ(cfg.cluster_size, 1u);
  // cluster_m 2 goes with cta_group 2 only.
  o.cta_group = 2;
  o.cluster_m = 2;
  EXPECT_EQ(sm100_plan(b200(), shape(), &o, &cfg), GGEMM_STATUS_SUCCESS) << ggemm_last_error_message();
  o.cta_group = 1;
  expect_refused_sm100(o, shape(), GGEMM_STATUS_INVALID_CONFIG, {"config->cluster_m = 2", "cta_group = 2"});
  // tile_m 16 cannot be split between the pair.
  o = blank_config();
  o.cta_group = 2;
  o.tile_m = 16;
  expect_refused_sm100(o, shape(), GGEMM_STATUS_INVALID_CONFIG, {"config->tile_m = 16 with cta_group 2"});
  o.tile_m = 0;
  o.mma_n = 16;  // mma_n alone fixes tile_m the same way
  expect_refused_sm100(o, shape(), GGEMM_STATUS_INVALID_CONFIG, {"config->mma_n = 16 with cta_group 2"});
  o.mma_n = 0;
  o.cta_group = 3;
  expect_refused_sm100(o, shape(), GGEMM_STATUS_INVALID_CONFIG, {"config->cta_group = 3"});
}

// Gather on load and the SwiGLU epilogue on sm_100a (kernels compiled and
// SASS-checked, never run on Blackwell hardware): planned as any other call
// but with cta_group 1 (the pair kernels compile neither path), every
// tile_m up to 256 (sm_90a stops at 128, its registers; sm_100a's epilogue
// reads tensor memory 8 columns at a time), and for SwiGLU whole octet-pair
// weight boxes (the shared 5-D view): 128 rows, or 64 on a narrow tile.
TEST(Sm100Plan, GatherAndSwigluRunWithCtaGroup1) {
  struct Case {
    bool gather, swiglu;
  };
  for (const Case &c : {Case{true, false}, Case{false, true}, Case{true, true}}) {
    SCOPED_TRACE(::testing::Message() << (c.gather ? "gather " : "") << (c.swiglu ? "swiglu" : ""));
    const auto call = [&](int64_t max_rows, int64_t n) {
      CallShape s = shape(max_rows);
      s.gather = c.gather;
      if (c.swiglu) s.epilogue = GGEMM_EPILOGUE_SWIGLU;
      s.n = n;
      return s;
    };
    for (int64_t rows : {1, 20, 50, 200}) {
      KernelPlan cfg;
      ASSERT_EQ(sm100_plan(b200(), call(rows, 4096), nullptr, &cfg), GGEMM_STATUS_SUCCESS)
          << ggemm_last_error_message();
      EXPECT_EQ(cfg.cluster_size, 1u) << "rows " << rows;
      EXPECT_EQ(cfg.tile_n, 128u);
      EXPECT_EQ(cfg.weights_box_rows, 128u);
      // The same tile as the plain call: neither changes the tile rules.
      KernelPlan plain;
      ASSERT_EQ(sm100_plan(b200(), shape(rows), nullptr, &plain), GGEMM_STATUS_SUCCESS);
      EXPECT_EQ(cfg.tile_m, plain.tile_m) << "rows " << rows;
      EXPECT_EQ(cfg.stages, sm100_expected_stages(cfg.tile_m, cfg.swizzle_bytes, 232448)) << "rows " << rows;
      EXPECT_EQ(cfg.kernel->name, sm100_kernel_name(GGEMM_DTYPE_BF16, GGEMM_DTYPE_BF16, true, cfg.tile_m, 1));
    }
    // Groups of 256 rows: tile_m 256, which sm_90a refuses for these calls.
    CallShape big = call(1024, 4096);
    big.m = 64 * 256;
    KernelPlan cfg;
    ASSERT_EQ(sm100_plan(b200(), big, nullptr, &cfg), GGEMM_STATUS_SUCCESS) << ggemm_last_error_message();
    EXPECT_EQ(cfg.tile_m, 256u);
    ggemm_config o = blank_config();
    o.tile_m = 256;
    ASSERT_EQ(sm100_plan(b200(), call(4096, 4096), &o, &cfg), GGEMM_STATUS_SUCCESS) << ggemm_last_error_message();
    EXPECT_EQ(cfg.tile_m, 256u);
    // N narrower than a tile (I = 8 for SwiGLU): SwiGLU loads a narrow
    // tile's 64-row box of 4 octet pairs (zeros past I), a gather alone N
    // rounded to 8.
    ASSERT_EQ(sm100_plan(b200(), call(4096, 16), nullptr, &cfg), GGEMM_STATUS_SUCCESS);
    EXPECT_EQ(cfg.weights_box_rows, c.swiglu ? 64u : 16u);
    EXPECT_EQ(cfg.tile_n, 64u);
    // A pair is refused, naming the part.
    o = blank_config();
    o.cta_group = 2;
    expect_refused_sm100(o, call(4096, 4096), GGEMM_STATUS_INVALID_CONFIG,
                         {"config->cta_group = 2", c.gather ? "a_row_index" : "SwiGLU", "cta_group 1"});
    o.cta_group = 1;
    ASSERT_EQ(sm100_plan(b200(), call(4096, 4096), &o, &cfg), GGEMM_STATUS_SUCCESS) << ggemm_last_error_message();
    EXPECT_EQ(cfg.cluster_size, 1u);
  }
  // fp16 operands and outputs take the fp16 kernels.
  CallShape h = shape();
  h.a_dtype = h.c_dtype = GGEMM_DTYPE_FP16;
  h.gather = true;
  h.epilogue = GGEMM_EPILOGUE_SWIGLU;
  KernelPlan cfg;
  ASSERT_EQ(sm100_plan(b200(), h, nullptr, &cfg), GGEMM_STATUS_SUCCESS) << ggemm_last_error_message();
  EXPECT_EQ(cfg.kernel->name, sm100_kernel_name(GGEMM_DTYPE_FP16, GGEMM_DTYPE_FP16, true, cfg.tile_m, 1));
}

TEST(Sm100Plan, RefusesWhatSm90Refuses) {
  // The override checks both architectures share, each with the field named.
  struct Case {
    void (*set)(ggemm_config &);
    bool transpose_b;
    ggemm_status status;
    std::vector<std::string> names;
  };
  const Case cases[] = {
      {[](ggemm_config &o) { o.struct_size -= 4; }, true, GGEMM_STATUS_INVALID_VALUE, {"struct_size"}},
      {[](ggemm_config &o) { o.cluster_m = 2; }, true, GGEMM_STATUS_INVALID_CONFIG, {"cluster_m", "sm_100a"}},
      {[](ggemm_config &o) { o.cluster_n = 2; }, true, GGEMM_STATUS_INVALID_CONFIG, {"cluster_n"}},
      {[](ggemm_config &o) { o.tile_n = 64; }, true, GGEMM_STATUS_INVALID_CONFIG, {"tile_n"}},
      // The tcgen05.mma M is the 128 weight rows (cta_group 1), not wgmma's 64.
      {[](ggemm_config &o) { o.mma_m = 64; }, true, GGEMM_STATUS_INVALID_CONFIG, {"mma_m", "tcgen05.mma", "128"}},
      {[](ggemm_config &o) { o.mma_k = 32; }, true, GGEMM_STATUS_INVALID_CONFIG, {"mma_k"}},
      {[](ggemm_config &o) { o.tile_m = 48; }, true, GGEMM_STATUS_INVALID_CONFIG, {"tile_m"}},
      {[](ggemm_config &o) { o.tile_m = 512; }, true, GGEMM_STATUS_INVALID_CONFIG, {"tile_m"}},
      {[](ggemm_config &o) { o.tile_m = 64, o.mma_n = 32; }, true, GGEMM_STATUS_INVALID_CONFIG, {"mma_n"}},
      {[](ggemm_config &o) { o.a_swizzle = 96; }, true, GGEMM_STATUS_INVALID_CONFIG, {"a_swizzle"}},
      {[](ggemm_config &o) { o.b_swizzle = 96; }, true, GGEMM_STATUS_INVALID_CONFIG, {"b_swizzle"}},
      {[](ggemm_config &o) { o.a_swizzle = 128, o.b_swizzle = 64; }, true, GGEMM_STATUS_INVALID_CONFIG,
       {"a_swizzle", "b_swizzle"}},
      {[](ggemm_config &o) { o.tile_k = 48; }, true, GGEMM_STATUS_INVALID_CONFIG, {"tile_k"}},
      {[](ggemm_config &o) { o.tile_k = 32, o.a_swizzle = 128; }, true, GGEMM_STATUS_INVALID_CONFIG, {"tile_k"}},
      {[](ggemm_config &o) { o.a_swizzle = 64; }, false, GGEMM_STATUS_INVALID_CONFIG,
       {"config->a_swizzle", "transpose_b"}},
      {[](ggemm_config &o) { o.stages = -1; }, true, GGEMM_STATUS_INVALID_CONFIG, {"stages"}},
      {[](ggemm_config &o) { o.stages = 1; }, true, GGEMM_STATUS_INVALID_CONFIG, {"stages"}},
      // One more than fits for the automatic tile (128) and swizzle (128).
      {[](ggemm_config &o) { o.stages = int(sm100::max_stages(128, 128, 232448)) + 1; }, true,
       GGEMM_STATUS_INVALID_CONFIG, {"stages"}},
  };
  for (const Case &c : cases) {
    ggemm_config o = blank_config();
    c.set(o);
    SCOPED_TRACE(::testing::Message() << "expecting a refusal naming " << c.names[0]);
    expect_refused_sm100(o, shape(4096, 4096, c.transpose_b), c.status, c.names);
  }
  // A device with too little shared memory for two stages of the tile:
  // refused, not launched with one stage.
  DeviceProps small = b200();
  small.smem_optin = 49152;
  ggemm_config o = blank_config();
  o.tile_m = 256;
  expect_refused_sm100(o, shape(), GGEMM_STATUS_INVALID_CONFIG, {"tile_m 256", "at least 2"}, small);
}

// The kernel's walker takes its tile width from the launch's weight box
// (sm100::walk_tile_n); the grid is sized by the plan's tile_n. Without a
// pair both must count the same column blocks, narrow or wide, N below a
// tile or not, in one segment or three (spanned by store, not by
// accumulate); a pair walks 256-row tiles, which max_clusters bounds by
// half the 128-row blocks plus the segments' ends.
TEST(Sm100Plan, WalkerTilesAreThePlansTiles) {
  struct Splits {
    int64_t split0, split1;  // as fractions of N: 0 = one segment
  };
  for (bool kmajor : {true, false})
    for (int64_t n : {8, 48, 64, 72, 120, 128, 200, 4096, 74 * 128 + 1})
      for (int64_t m : {1, 2, 4096})
        for (bool three_segments : {false, true})
          for (ggemm_epilogue epilogue : {GGEMM_EPILOGUE_STORE, GGEMM_EPILOGUE_ACCUMULATE})
            for (int cta_group : {1, 2}) {
              CallShape s = shape(4096, 4096, kmajor);
              s.n = n;
              s.m = m;
              s.num_groups = m < 8 ? 8 : 64;
              s.epilogue = epilogue;
              if (three_segments) s.split0 = n / 3, s.split1 = 2 * n / 3;
              ggemm_config pair = blank_config();
              pair.cta_group = 2;
              KernelPlan cfg;
              SCOPED_TRACE(::testing::Message() << (kmajor ? "K-major" : "MN-major") << " n " << n << " m " << m
                                                << (three_segments ? " three segments" : "") << " epilogue "
                                                << epilogue << " cta_group " << cta_group);
              ASSERT_EQ(sm100_plan(b200(), s, cta_group == 2 ? &pair : nullptr, &cfg), GGEMM_STATUS_SUCCESS)
                  << ggemm_last_error_message();
              const int64_t walked = column_blocks(s, sm100::walk_tile_n(kmajor, cfg.weights_box_rows, cfg.cluster_size));
              const int64_t planned = column_blocks(s, cfg.tile_n);
              if (cta_group == 1) {
                EXPECT_EQ(walked, planned);
              } else {
                EXPECT_EQ(cfg.tile_n, 128u);
                EXPECT_LE(walked, (planned + 1) / 2 + 2);
              }
            }
}

TEST(Sm100Plan, HonoursValidOverridesExactly) {
  struct Case {
    int tile_m, tile_k, a_swizzle, b_swizzle, mma_n, stages;
    bool transpose_b;
    ggemm_dtype out;
    ggemm_epilogue epilogue;
    PlannedTile want;  // tile_m, tile_n, swizzle_bytes, stages (0: as many as fit)
  };
  const Case cases[] = {
      {64, 0, 64, 0, 0, 3, true, GGEMM_DTYPE_BF16, GGEMM_EPILOGUE_STORE, {64, 128, 64, 3}},
      {0, 32, 0, 0, 32, 2, true, GGEMM_DTYPE_FP16, GGEMM_EPILOGUE_STORE, {32, 128, 64, 2}},
      // 256 with fp32 output and with accumulate: refused on sm_90a, fine here.
      {256, 64, 128, 128, 256, 3, true, GGEMM_DTYPE_FP32, GGEMM_EPILOGUE_STORE, {256, 128, 128, 3}},
      {256, 0, 0, 0, 0, 0, true, GGEMM_DTYPE_BF16, GGEMM_EPILOGUE_ACCUMULATE, {256, 128, 128, 0}},
      {16, 16, 32, 32, 16, 0, true, GGEMM_DTYPE_FP32, GGEMM_EPILOGUE_ROW_SCALE, {16, 128, 32, 0}},
      {128, 0, 0, 128, 0, 7, false, GGEMM_DTYPE_FP32, GGEMM_EPILOGUE_STORE, {128, 128, 128, 7}},
  };
  for (const Case &c : cases) {
    ggemm_config o = blank_config();
    o.tile_m = c.tile_m;
    o.tile_k = c.tile_k;
    o.a_swizzle = c.a_swizzle;
    o.b_swizzle = c.b_swizzle;
    o.mma_n = c.mma_n;
    o.stages = c.stages;
    // Fields at the only value sm_100a has (cta_group 1) are accepted as well as 0.
    o.tile_n = 128;
    o.mma_m = 128;
    o.mma_k = 16;
    o.cluster_m = o.cluster_n = 1;
    o.cta_group = 1;
    CallShape s = shape(4096, 4096, c.transpose_b, c.out);
    s.epilogue = c.epilogue;
    KernelPlan cfg;
    ASSERT_EQ(sm100_plan(b200(), s, &o, &cfg), GGEMM_STATUS_SUCCESS) << ggemm_last_error_message();
    EXPECT_EQ(cfg.tile_m, c.want.tile_m);
    EXPECT_EQ(cfg.tile_n, c.want.tile_n);
    EXPECT_EQ(cfg.swizzle_bytes, c.want.swizzle_bytes);
    EXPECT_EQ(cfg.stages, c.want.stages ? c.want.stages
                                        : sm100_expected_stages(c.want.tile_m, c.want.swizzle_bytes, 232448));
  }
}

// Every entry of ptx/sm100/kernel_table.h, with its cta_group. Only the
// name, tile_m and cta_group tokens are used (no CUDA header needed).
#define GGEMM_TEST_COLLECT_SM100(E, EN, O, ON, L, LN, TM, CG, SUFFIX)                                 \
  names.emplace("ggemm_sm100_grouped_" GGEMM_TEST_STR(EN) "_" GGEMM_TEST_STR(ON) "_" GGEMM_TEST_STR(LN) "_m" \
                    GGEMM_TEST_STR(TM) GGEMM_TEST_STR(SUFFIX),                                            \
                CG);

std::map<std::string, int> sm100_table_names() {
  std::map<std::string, int> names;
  GGEMM_SM100_KERNELS(GGEMM_TEST_COLLECT_SM100)
  return names;
}

TEST(Sm100KernelRegistry, EveryAcceptedConfigHasAKernelAndEveryKernelIsReachable) {
  const std::map<std::string, int> table = sm100_table_names();
  ASSERT_FALSE(table.empty());
  std::set<std::string> reached;
  const auto plan = [](const CallShape &s, const ggemm_config &o, KernelPlan *cfg) {
    return sm100_plan(b200(), s, &o, cfg);
  };
  for_each_accepted_config(
      {GGEMM_EPILOGUE_STORE, GGEMM_EPILOGUE_ACCUMULATE, GGEMM_EPILOGUE_ROW_SCALE}, &ggemm_config::cta_group, plan,
      [&](const CallShape &s, int cta_group, const KernelPlan &cfg) {
        EXPECT_EQ(cfg.cluster_size, cta_group == 2 ? 2u : 1u);
        const std::string name = sm100_kernel_name(s.a_dtype, s.c_dtype, s.transpose_b, cfg.tile_m, cfg.cluster_size);
        const auto it = table.find(name);
        EXPECT_TRUE(it != table.end()) << "config accepted but no kernel: " << name;
        if (it != table.end()) EXPECT_EQ(it->second, int(cfg.cluster_size)) << name;
        const std::string want = std::string("ggemm_sm100_grouped_") + label(s.a_dtype) + "_" + label(s.c_dtype) +
                                 "_" + (s.transpose_b ? "kmajor" : "mnmajor") + "_m" + std::to_string(cfg.tile_m) +
                                 (cfg.cluster_size == 2 ? "_cta2" : "");
        EXPECT_EQ(name, want);
        reached.insert(name);
      });
  for (const auto &entry : table)
    EXPECT_EQ(reached.count(entry.first), 1u) << "kernel no accepted config reaches: " << entry.first;
  // 2 operand dtypes x 3 output dtypes x 2 layouts x (5 tile_m with
  // cta_group 1 + 4 with cta_group 2).
  EXPECT_EQ(table.size(), 108u);
  EXPECT_EQ(reached.size(), 108u);
  // The suffix the table gives cta_group 2 kernels, as the runtime builds it.
  EXPECT_EQ(sm100_kernel_name(GGEMM_DTYPE_BF16, GGEMM_DTYPE_BF16, true, 128, 2),
            "ggemm_sm100_grouped_bf16_bf16_kmajor_m128_cta2");
  for (const auto &entry : table)
    if (entry.second == 2) EXPECT_EQ(entry.first.substr(entry.first.size() - 5), "_cta2");
}

}  // namespace
}  // namespace ggemm::testing
