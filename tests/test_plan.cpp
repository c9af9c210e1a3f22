// Stage selection from shared memory, the sm_90a and sm_100a plans
// (automatic choices and every refused override), the agreement between the
// runtime's kernel registry and each architecture's kernel table, and which
// devices get which kernels.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <numeric>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "ggemm.h"
#include "ptx/sm100/kernel_table.h"
#include "ptx/sm100/smem_layout.h"
#include "ptx/sm90/kernel_table.h"
#include "ptx/sm90/short_k_layout.h"
#include "ptx/sm90/smem_layout.h"
#include "api/src/errors.h"
#include "api/src/validate.h"
#include "runtime/device.h"
#include "runtime/launch_grouped.h"
#include "runtime/launch_moe.h"
#include "runtime/kernel_registry.h"
#include "runtime/plan.h"
#include "ptx/sm90/token_major_layout.h"
#include "runtime/plan_rules.h"
#include "bench/harness_ptx.h"
#include "ptx/sm90/params.h"

namespace ggemm {
namespace {

// The fields of a plan the override tests expect.
struct PlannedTile {
  uint32_t tile_m, tile_n, swizzle_bytes, stages;
};

// A call as these tests describe it: the plan's shape, and what a test
// forces through the plan's test request (runtime/plan.h, PlanRequest).
struct CallShape : GroupedShape {
  int short_k_request = 0;        // -1: never a short-K kernel; 1: wherever one can run
  int decode_gemv_request = 0;    // -1: never the decode GEMV; 1: wherever it can run
  int token_major_request = 0;    // -1: never the sm_90a token-major kernel; 1: wherever it can run
  uint32_t k_slices_request = 0;  // sm_90a slices of K per stage; 0 = automatic
};

PlanRequest request_of(const CallShape &s) {
  PlanRequest r;
  r.sm90_short_k = s.short_k_request < 0   ? PlanRequest::Sm90ShortK::kNever
                   : s.short_k_request > 0 ? PlanRequest::Sm90ShortK::kWherePossible
                                           : PlanRequest::Sm90ShortK::kAutomatic;
  r.decode_gemv = s.decode_gemv_request < 0   ? PlanRequest::DecodeGemv::kNever
                       : s.decode_gemv_request > 0 ? PlanRequest::DecodeGemv::kWherePossible
                                                   : PlanRequest::DecodeGemv::kAutomatic;
  r.sm90_k_slices = s.k_slices_request;
  r.sm90_token_major = s.token_major_request < 0   ? PlanRequest::TokenMajor::kNever
                       : s.token_major_request > 0 ? PlanRequest::TokenMajor::kWherePossible
                                                   : PlanRequest::TokenMajor::kAutomatic;
  return r;
}

// A plan as the C ABI would report it: the config checks of the API layer,
// then the plan; a refusal leaves its message as the thread's last error.
ggemm_status take_plan(const StatusOr<KernelPlan> &plan, KernelPlan *out) {
  if (!plan.ok()) return report(plan.status());
  *out = plan.value();
  return GGEMM_STATUS_SUCCESS;
}

// The sm_90a persistent kernel's plan (short-K kernels, the decode GEMV and
// the token-major kernel ruled out).
ggemm_status sm90_persistent_plan(const DeviceProps &props, const CallShape &s, const ggemm_config *o,
                                  KernelPlan *out) {
  GGEMM_TRY(validate_config(o, Arch::kSm90a, props, s));
  PlanRequest r = request_of(s);
  r.sm90_short_k = PlanRequest::Sm90ShortK::kNever;
  r.decode_gemv = PlanRequest::DecodeGemv::kNever;
  r.sm90_token_major = PlanRequest::TokenMajor::kNever;
  return take_plan(plan_sm90(props, s, o, r), out);
}

// The sm_100a persistent kernel's plan (the decode GEMV ruled out).
ggemm_status sm100_plan(const DeviceProps &props, const CallShape &s, const ggemm_config *o, KernelPlan *out) {
  GGEMM_TRY(validate_config(o, Arch::kSm100a, props, s));
  PlanRequest r;
  r.decode_gemv = PlanRequest::DecodeGemv::kNever;
  return take_plan(plan_sm100(props, s, o, r), out);
}

// The tile of the sm_90a plan when it is of `family`, else 0.
uint32_t sm90_tile_if(KernelFamily family, const DeviceProps &props, const CallShape &s, const ggemm_config *o) {
  StatusOr<KernelPlan> plan = plan_sm90(props, s, o, request_of(s));
  return plan.ok() && plan->family() == family ? plan->tile_m : 0u;
}
uint32_t sm90_short_k_tile(const DeviceProps &props, const CallShape &s, const ggemm_config *o) {
  return sm90_tile_if(KernelFamily::kShortK, props, s, o);
}
uint32_t sm90_short_k_split_tile(const DeviceProps &props, const CallShape &s, const ggemm_config *o) {
  return sm90_tile_if(KernelFamily::kShortKSplit, props, s, o);
}

// A kernel's name in the registry, or "" when it has none.
std::string registry_name(Arch arch, KernelFamily family, ggemm_dtype a, ggemm_dtype c, bool kmajor,
                          uint32_t tile_m, uint32_t cluster) {
  const KernelEntry *e = find_kernel(arch, family, a, c, kmajor, tile_m, cluster);
  return e ? e->name : "";
}
std::string sm90_short_k_kernel_name(ggemm_dtype a, ggemm_dtype c, uint32_t tile_m, uint32_t splits = 1) {
  return registry_name(Arch::kSm90a, splits > 1 ? KernelFamily::kShortKSplit : KernelFamily::kShortK, a, c, true,
                       tile_m, splits);
}
std::string sm100_kernel_name(ggemm_dtype a, ggemm_dtype c, bool kmajor, uint32_t tile_m, uint32_t cta_group) {
  return registry_name(Arch::kSm100a, KernelFamily::kPersistent, a, c, kmajor, tile_m, cta_group);
}

// ---- (a) stages from shared memory --------------------------------------------

const uint32_t kSmemSizes[] = {232448 /* H200 */, 166912 /* A100-like */, 101376, 49152, 0};
const uint32_t kTileMs[] = {16, 32, 64, 128, 256};
const uint32_t kSwizzles[] = {128, 64, 32};
const uint32_t kOutBytes[] = {2, 4};

// Written from the documented layout, not from smem_layout.h: per stage a
// 128-row weight tile and a tile_m-row token tile, each row one swizzle span,
// plus two 8-byte barriers (full, empty); once, the epilogue staging (two
// warpgroups of min(tile_m, 128) x 64 outputs), the accumulate epilogue's 4
// full and 4 empty 8-byte barriers, and 1024 bytes to align the dynamic base. The staging
// (128B-swizzled) starts on a 1024-byte boundary after the stages.
// With k_slices > 1 a stage holds k_slices slices of K: the weight box's
// slices packed at box_rows rows apiece plus the (128 - box_rows) rows a
// 128-row tile reaches past the last one, and k_slices token tiles.
uint64_t bytes_for(uint64_t stages, uint64_t tile_m, uint64_t swizzle, uint64_t out_bytes, uint64_t buffers = 1,
                   uint64_t k_slices = 1, uint64_t box_rows = 128) {
  // The epilogue stages at most 128 tokens at a time.
  const uint64_t staged_tokens = tile_m < 128 ? tile_m : 128;
  const uint64_t weight_rows = k_slices * box_rows + 128 - box_rows;
  const uint64_t operands = (stages * (weight_rows * swizzle + k_slices * tile_m * swizzle) + 1023) / 1024 * 1024;
  return operands + stages * 16 + buffers * 2 * staged_tokens * 64 * out_bytes + 8 * 8 + 1024;
}

// Beside the dynamic layout, every sm_90a kernel has the tile handoff in
// static shared memory (ptx/blocks/tile_handoff.h): 8 slots of a full and an empty
// barrier (8 bytes each) and a 32-byte tile; a kernel whose tile is two
// epilogue chunks (tile_m 256) also has the row-scale epilogue's weights of a
// tile, a float per token, and the full and empty barriers that hand them
// from the row-scale loader to the consumers (ptx/sm90/row_scales.h). All
// count against the opt-in limit.
constexpr uint64_t kHandoffBytes = 8 * (2 * 8 + 32);
uint64_t sm90_static_bytes(uint64_t tile_m) { return kHandoffBytes + (tile_m > 128 ? tile_m * 4 + 2 * 8 : 0); }

uint32_t expected_stages(uint32_t tile_m, uint32_t swizzle, uint32_t out_bytes, uint32_t smem, uint32_t buffers = 1,
                         uint32_t k_slices = 1, uint32_t box_rows = 128) {
  uint32_t s = 0;
  while (s < sm90::kMaxStages &&
         bytes_for(s + 1, tile_m, swizzle, out_bytes, buffers, k_slices, box_rows) + sm90_static_bytes(tile_m) <= smem)
    ++s;
  return s;
}

// The runtime's count of a kernel's static shared memory is the documented
// one (at the sizes above it moves no stage count, so the stage test alone
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

// ---- (b) config choice -----------------------------------------------------------

DeviceProps h200() {
  DeviceProps p;
  p.ordinal = 0;
  p.cc_major = 9;
  p.cc_minor = 0;
  p.sm_count = 132;
  p.smem_optin = 232448;
  return p;
}

CallShape shape(int64_t max_rows = 4096, int64_t k = 4096, bool transpose_b = true,
                   ggemm_dtype c = GGEMM_DTYPE_BF16) {
  CallShape s;
  s.a_dtype = GGEMM_DTYPE_BF16;
  s.c_dtype = c;
  s.m = 64 * 200;  // 200-row groups on average: the automatic tile_m is 128
  s.n = 4096;
  s.k = k;
  s.transpose_b = transpose_b;
  s.num_groups = 64;
  s.max_rows_per_group = max_rows;
  return s;
}

ggemm_config blank_config() {
  ggemm_config c{};
  c.struct_size = sizeof(ggemm_config);
  return c;
}

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

// Runs choose_sm90_config with `o` and expects `status` and a message naming
// every string in `names`.
void expect_refused(const ggemm_config &o, const CallShape &s, ggemm_status status,
                    std::vector<std::string> names) {
  clear_error();
  KernelPlan cfg;
  EXPECT_EQ(sm90_persistent_plan(h200(), s, &o, &cfg), status);
  const std::string msg = ggemm_last_error_message();
  for (const std::string &n : names) EXPECT_NE(msg.find(n), std::string::npos) << "message \"" << msg << "\" lacks \"" << n << "\"";
}

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

// ---- (c) kernel names -----------------------------------------------------------

// Every name the table instantiates. Only the *_name and tile_m tokens are
// used; the type arguments (__nv_bfloat16, WeightLayout::...) are dropped, so
// no CUDA header is needed.
#define GGEMM_TEST_STR2(x) #x
#define GGEMM_TEST_STR(x) GGEMM_TEST_STR2(x)
#define GGEMM_TEST_COLLECT_NAME(E, EN, O, ON, L, LN, TM, CL, SUF)                                            \
  names.insert("ggemm_sm90_grouped_" GGEMM_TEST_STR(EN) "_" GGEMM_TEST_STR(ON) "_" GGEMM_TEST_STR(LN) "_m" GGEMM_TEST_STR( \
      TM) GGEMM_TEST_STR(SUF));

#define GGEMM_TEST_COLLECT_STORE_NAME(E, EN, O, ON, L, LN, TM, CL, SUF) \
  GGEMM_TEST_COLLECT_NAME(E, EN, O, ON, L, LN, TM, CL, SUF##_store)

#define GGEMM_TEST_COLLECT_ACCUMULATE_NAME(E, EN, O, ON, L, LN, TM, CL, SUF) \
  GGEMM_TEST_COLLECT_NAME(E, EN, O, ON, L, LN, TM, CL, SUF##_accumulate)

// The general kernels and their store-only and accumulate-only twins
// (suffixes _store, _accumulate).
std::set<std::string> table_names() {
  std::set<std::string> names;
  GGEMM_SM90_KERNELS(GGEMM_TEST_COLLECT_NAME)
  GGEMM_SM90_KERNELS(GGEMM_TEST_COLLECT_STORE_NAME)
  GGEMM_SM90_ACCUMULATE_KERNELS(GGEMM_TEST_COLLECT_ACCUMULATE_NAME)
  return names;
}

// The table's *_name token for each dtype.
const char *label(ggemm_dtype t) {
  return t == GGEMM_DTYPE_BF16 ? "bf16" : t == GGEMM_DTYPE_FP16 ? "fp16" : "fp32";
}

// Every config a caller can ask for on a 4096 x 4096 call, over operand and
// output dtypes, weight layouts, `epilogues`, tile_m and cluster size (the
// config field `cluster` points at: cluster_m or cta_group), passed to
// `each` with the call's shape when `plan` accepts it.
void for_each_accepted_config(std::initializer_list<ggemm_epilogue> epilogues, int ggemm_config::*cluster,
                              const std::function<ggemm_status(const CallShape &, const ggemm_config &,
                                                               KernelPlan *)> &plan,
                              const std::function<void(const CallShape &, int, const KernelPlan &)> &each) {
  for (ggemm_dtype a : {GGEMM_DTYPE_BF16, GGEMM_DTYPE_FP16})
    for (ggemm_dtype c : {GGEMM_DTYPE_BF16, GGEMM_DTYPE_FP16, GGEMM_DTYPE_FP32})
      for (bool transpose_b : {true, false})
        for (ggemm_epilogue epilogue : epilogues)
          for (int clusters : {0, 1, 2})
            for (int tile_m : {0, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256, 512}) {
              CallShape s = shape(4096, 4096, transpose_b, c);
              s.a_dtype = a;
              s.epilogue = epilogue;
              ggemm_config o = blank_config();
              o.tile_m = tile_m;
              o.*cluster = clusters;
              KernelPlan cfg;
              if (plan(s, o, &cfg) == GGEMM_STATUS_SUCCESS) each(s, clusters, cfg);
            }
}

TEST(Sm90KernelRegistry, EveryAcceptedConfigHasAKernelAndNoKernelIsUnreachable) {
  const std::set<std::string> table = table_names();
  ASSERT_FALSE(table.empty());
  std::set<std::string> reached;
  const auto plan = [](const CallShape &s, const ggemm_config &o, KernelPlan *cfg) {
    return sm90_persistent_plan(h200(), s, &o, cfg);
  };
  for_each_accepted_config(
      {GGEMM_EPILOGUE_STORE, GGEMM_EPILOGUE_ROW_SCALE, GGEMM_EPILOGUE_ACCUMULATE}, &ggemm_config::cluster_m, plan,
      [&](const CallShape &s, int cluster_m, const KernelPlan &cfg) {
        const std::string name = cfg.kernel->name;
        EXPECT_EQ(table.count(name), 1u) << "config accepted but no kernel: " << name;
        // And the right one of the table's entries: operand then output
        // dtype, K-major exactly when B is [E, N, K] (transpose_b), the
        // store-only twin exactly for the store epilogue, the
        // accumulate-only one for the accumulate epilogue.
        const bool store = s.epilogue == GGEMM_EPILOGUE_STORE;
        const bool accumulate = s.epilogue == GGEMM_EPILOGUE_ACCUMULATE;
        const std::string want = std::string("ggemm_sm90_grouped_") + label(s.a_dtype) + "_" + label(s.c_dtype) +
                                 "_" + (s.transpose_b ? "kmajor" : "mnmajor") + "_m" + std::to_string(cfg.tile_m) +
                                 (cluster_m == 2 ? "_cl2" : "") + (store ? "_store" : accumulate ? "_accumulate" : "");
        EXPECT_EQ(name, want);
        EXPECT_EQ(cfg.family(), store        ? KernelFamily::kPersistentStore
                                : accumulate ? KernelFamily::kPersistentAccumulate
                                             : KernelFamily::kPersistent)
            << name;
        reached.insert(name);
      });
  for (const std::string &n : table) EXPECT_EQ(reached.count(n), 1u) << "kernel no accepted config reaches: " << n;
  // Twice (general and store-only) 2 operand dtypes x 2 layouts x (5 + 5 +
  // 4 tile_m over bf16/fp16/fp32 out, plus the pairs: 2 + 2 + 1), and the
  // accumulate-only twins of the tiles up to 128: 2 x 2 x 3 x (4 + the pair).
  EXPECT_EQ(table.size(), 212u);
}


// The store-only and accumulate-only twins take every call with their
// epilogue and no gather, of every size the persistent kernel plans (decode
// tiles, narrow tiles), and serve nothing else; the general kernels serve
// everything.
TEST(Sm90EpilogueTwins, TakeTheirCallsAndServeNothingElse) {
  std::set<uint32_t> store_tiles;  // the store twins' tile_m over the three sizes
  for (int64_t m : {int64_t(16), int64_t(1024), int64_t(32768)})
    for (ggemm_epilogue e : {GGEMM_EPILOGUE_STORE, GGEMM_EPILOGUE_ROW_SCALE, GGEMM_EPILOGUE_ACCUMULATE,
                             GGEMM_EPILOGUE_SWIGLU})
      for (bool gather : {false, true}) {
        CallShape s = shape(m, 2048);
        s.m = m, s.n = 1536, s.num_groups = 128, s.max_rows_per_group = 0, s.epilogue = e, s.gather = gather;
        s.token_major_request = -1, s.decode_gemv_request = -1, s.short_k_request = -1;
        KernelPlan plan;
        ASSERT_EQ(sm90_persistent_plan(h200(), s, nullptr, &plan), GGEMM_STATUS_SUCCESS)
            << m << " " << e << " " << gather << ": " << ggemm_last_error_message();
        const bool twin = (e == GGEMM_EPILOGUE_STORE || e == GGEMM_EPILOGUE_ACCUMULATE) && !gather;
        EXPECT_EQ(plan.family() == KernelFamily::kPersistentStore, twin && e == GGEMM_EPILOGUE_STORE)
            << plan.kernel->name;
        EXPECT_EQ(plan.family() == KernelFamily::kPersistentAccumulate, twin && e == GGEMM_EPILOGUE_ACCUMULATE)
            << plan.kernel->name;
        EXPECT_TRUE(plan.serves(s)) << plan.kernel->name;
        if (twin && e == GGEMM_EPILOGUE_STORE) store_tiles.insert(plan.tile_m);
        // A twin serves no other epilogue and no gather.
        if (!twin) continue;
        for (ggemm_epilogue other : {GGEMM_EPILOGUE_STORE, GGEMM_EPILOGUE_ROW_SCALE, GGEMM_EPILOGUE_ACCUMULATE,
                                     GGEMM_EPILOGUE_SWIGLU}) {
          CallShape t = s;
          t.epilogue = other;
          EXPECT_EQ(plan.serves(t), other == e) << plan.kernel->name << " " << other;
        }
        CallShape t = s;
        t.gather = true;
        EXPECT_FALSE(plan.serves(t)) << plan.kernel->name;
      }
  // Decode, mid-size and prefill tiles: the twins were planned at more
  // than one tile_m.
  EXPECT_GE(store_tiles.size(), 2u);
}

// Every launch checks its plan's kernel against the call before it fills
// the parameters: a twin refuses another epilogue or a gather, and any
// kernel a gather index the shape does not announce (or the reverse).
TEST(Sm90EpilogueTwins, TheLaunchRefusesACallItsKernelDoesNotServe) {
  CallShape s = shape(1024, 2048);
  s.m = 1024, s.n = 1536, s.num_groups = 8;
  KernelPlan store_plan, general_plan;
  ASSERT_EQ(sm90_persistent_plan(h200(), s, nullptr, &store_plan), GGEMM_STATUS_SUCCESS);
  ASSERT_EQ(store_plan.family(), KernelFamily::kPersistentStore);
  CallShape scaled = s;
  scaled.epilogue = GGEMM_EPILOGUE_ROW_SCALE;
  ASSERT_EQ(sm90_persistent_plan(h200(), scaled, nullptr, &general_plan), GGEMM_STATUS_SUCCESS);
  ASSERT_EQ(general_plan.family(), KernelFamily::kPersistent);
  const int32_t index[1] = {0};
  GroupedLaunch l{};
  l.shape = s;
  EXPECT_TRUE(check_kernel_serves(l, store_plan).ok());
  EXPECT_TRUE(check_kernel_serves(l, general_plan).ok());
  l.shape = scaled;  // another epilogue on the store twin
  EXPECT_EQ(check_kernel_serves(l, store_plan).code(), GGEMM_STATUS_INTERNAL_ERROR);
  EXPECT_TRUE(check_kernel_serves(l, general_plan).ok());
  l.shape = s;  // a gather index the shape does not announce
  l.a_row_index = index;
  EXPECT_EQ(check_kernel_serves(l, store_plan).code(), GGEMM_STATUS_INTERNAL_ERROR);
  EXPECT_EQ(check_kernel_serves(l, general_plan).code(), GGEMM_STATUS_INTERNAL_ERROR);
  l.shape.gather = true;  // announced: the general kernel gathers, the twin cannot
  EXPECT_EQ(check_kernel_serves(l, store_plan).code(), GGEMM_STATUS_INTERNAL_ERROR);
  EXPECT_TRUE(check_kernel_serves(l, general_plan).ok());
  l.a_row_index = nullptr;  // a gather without its index
  EXPECT_EQ(check_kernel_serves(l, general_plan).code(), GGEMM_STATUS_INTERNAL_ERROR);
}

// SwiGLU (the MoE gate_up): at tile_m 256 the plan takes the SwiGLU-only
// kernel (the general tile_m 256 kernels have no SwiGLU path); below 256 the
// general kernel; with a gather, tile_m 128 at most (the gather loader
// exists up to 128); no cluster; one K slice.
TEST(Sm90Swiglu, PrefillTakesTheSwigluOnlyKernelAtTileM256) {
  CallShape s = shape(4096, 2048);
  s.m = 32768, s.n = 1536, s.num_groups = 128, s.max_rows_per_group = 0;  // Qwen3-30B-A3B gate_up, 4096 tokens
  s.epilogue = GGEMM_EPILOGUE_SWIGLU;
  KernelPlan plan;
  ASSERT_EQ(sm90_persistent_plan(h200(), s, nullptr, &plan), GGEMM_STATUS_SUCCESS) << ggemm_last_error_message();
  EXPECT_EQ(plan.tile_m, 256u);
  EXPECT_EQ(plan.family(), KernelFamily::kPersistentSwiglu);
  EXPECT_STREQ(plan.kernel->name, "ggemm_sm90_grouped_bf16_bf16_kmajor_m256_swiglu");
  EXPECT_EQ(plan.k_slices, 1u);
  EXPECT_EQ(plan.weights_box_rows, 128u);
  EXPECT_TRUE(plan.persistent());
  // The same call with the store epilogue: the store-only kernel at 256.
  CallShape store = s;
  store.epilogue = GGEMM_EPILOGUE_STORE;
  ASSERT_EQ(sm90_persistent_plan(h200(), store, nullptr, &plan), GGEMM_STATUS_SUCCESS);
  EXPECT_EQ(plan.tile_m, 256u);
  EXPECT_EQ(plan.family(), KernelFamily::kPersistentStore);
  EXPECT_STREQ(plan.kernel->name, "ggemm_sm90_grouped_bf16_bf16_kmajor_m256_store");
  // Gathered: tile_m 128 on the general kernel.
  s.gather = true;
  ASSERT_EQ(sm90_persistent_plan(h200(), s, nullptr, &plan), GGEMM_STATUS_SUCCESS);
  EXPECT_EQ(plan.tile_m, 128u);
  EXPECT_EQ(plan.family(), KernelFamily::kPersistent);
  EXPECT_FALSE(plan.narrow_token_boxes);
  // A config asking for tile_m 256 with a gather is refused, by name.
  ggemm_config o = blank_config();
  o.tile_m = 256;
  EXPECT_EQ(sm90_persistent_plan(h200(), s, &o, &plan), GGEMM_STATUS_INVALID_CONFIG);
  EXPECT_NE(std::string(ggemm_last_error_message()).find("tile_m"), std::string::npos) << ggemm_last_error_message();
  // Without the gather, the config's 256 takes the SwiGLU-only kernel.
  s.gather = false;
  ASSERT_EQ(sm90_persistent_plan(h200(), s, &o, &plan), GGEMM_STATUS_SUCCESS) << ggemm_last_error_message();
  EXPECT_EQ(plan.family(), KernelFamily::kPersistentSwiglu);
}

// ---- (c2) sm_90a short-K kernel: when it takes a call, its tile, its names ------

// The LoRA expand of Llama-3-8B's Q/K/V (q 4096, kv 1024: 48 column blocks
// over the three segments), K = rank, M tokens over `groups` adapters.
CallShape lora_expand(int64_t m, int64_t rank, int64_t groups = 8) {
  CallShape s = shape(m, rank);
  s.m = m;
  s.n = 4096 + 2 * 1024;
  s.num_groups = groups;
  s.max_rows_per_group = m;
  s.split0 = 4096, s.split1 = 4096 + 1024, s.a_planes = true;  // 32 + 8 + 8 column blocks
  return s;
}

TEST(Sm90ShortK, TakesTheDecodeExpandWithAnEightTokenTile) {
  // 64 tokens, 8 adapters: 8-token tiles, 8 x 48 = 384 <= 4 x 132 CTAs.
  EXPECT_EQ(sm90_short_k_tile(h200(), lora_expand(64, 16), nullptr), 8u);
  EXPECT_EQ(sm90_short_k_tile(h200(), lora_expand(64, 128), nullptr), 8u);
  // Without the caller's bound on rows per group (0 = M) the average decides.
  CallShape unbounded = lora_expand(64, 16);
  unbounded.max_rows_per_group = 0;
  EXPECT_EQ(sm90_short_k_tile(h200(), unbounded, nullptr), 8u);
  // 16 rows per adapter on average: a 16-token tile; 32 or more: 32.
  EXPECT_EQ(sm90_short_k_tile(h200(), lora_expand(128, 16), nullptr), 16u);
  EXPECT_EQ(sm90_short_k_tile(h200(), lora_expand(256, 16), nullptr), 32u);
  EXPECT_EQ(sm90_short_k_tile(h200(), lora_expand(256, 16, 4), nullptr), 32u);
}

TEST(Sm90ShortK, TakesManyDecodeGroupsPastItsRoutingTable) {
  // The GPU cases short_k_256_groups and short_k_300_groups: groups of at
  // most 8 rows, N 120 (one column block), K 16. 256 and 300 tiles of 8
  // tokens fit the 528 CTAs; the kernel's routing table holds 256 groups,
  // so the second case walks global memory.
  for (int64_t groups : {256, 300}) {
    CallShape s = shape(8, 16);  // the largest group: 8 rows
    s.m = groups * 4 + 5;           // ~4.5 rows a group, then 5 unowned
    s.n = 120;
    s.num_groups = groups;
    EXPECT_EQ(sm90_short_k_tile(h200(), s, nullptr), 8u) << groups << " groups";
  }
}

TEST(Sm90ShortK, LeavesBandwidthBoundCallsToThePersistentKernel) {
  // M 1024: 8 adapters x 4 tiles of 32 x 48 = 1536 tiles, ~3 waves; M 4096: ~12.
  EXPECT_EQ(sm90_short_k_tile(h200(), lora_expand(1024, 16), nullptr), 0u);
  EXPECT_EQ(sm90_short_k_tile(h200(), lora_expand(4096, 16), nullptr), 0u);
  // Unless asked to take whatever it can run (the test request kWherePossible): then
  // the largest tile, 32.
  CallShape forced = lora_expand(4096, 16);
  forced.short_k_request = 1;
  EXPECT_EQ(sm90_short_k_tile(h200(), forced, nullptr), 32u);
  // At the bound: groups of 16 rows, one 16-token tile each by 48 column
  // blocks: 11 groups make 528 = 4 x 132 tiles and are taken; 12 make 576
  // and are not.
  CallShape at = lora_expand(11 * 16, 16, 11);
  at.max_rows_per_group = 16;
  EXPECT_EQ(sm90_short_k_tile(h200(), at, nullptr), 16u);
  at = lora_expand(12 * 16, 16, 12);
  at.max_rows_per_group = 16;
  EXPECT_EQ(sm90_short_k_tile(h200(), at, nullptr), 0u);
}

// A short-K rule, `rule(shape, override)`, takes `shape` but not with its
// weights stored [E, K, N], with a caller's config (it describes the
// persistent kernel), nor with the test request kNever.
void expect_refuses_mn_major_config_and_off(
    const std::function<uint32_t(const CallShape &, const ggemm_config *)> &rule, const CallShape &shape) {
  ASSERT_NE(rule(shape, nullptr), 0u);
  CallShape mn = shape;
  mn.transpose_b = false;
  EXPECT_EQ(rule(mn, nullptr), 0u);
  const ggemm_config o = blank_config();
  EXPECT_EQ(rule(shape, &o), 0u);
  CallShape never = shape;
  never.short_k_request = -1;
  EXPECT_EQ(rule(never, nullptr), 0u);
}

TEST(Sm90ShortK, OnlyWhereItCanRun) {
  // K past 128, weights stored [E, K, N], a caller's config, or
  // the test request kNever: never.
  EXPECT_EQ(sm90_short_k_tile(h200(), lora_expand(64, 136), nullptr), 0u);
  expect_refuses_mn_major_config_and_off(
      [](const CallShape &s, const ggemm_config *o) { return sm90_short_k_tile(h200(), s, o); },
      lora_expand(64, 16));
}

// A short-K kernel table against its rule: `names_for(a, c, &names)` adds
// the kernel the rule picks for each of its calls with operands `a` and
// outputs `c`; each must be in `table`, and each kernel of `table` must be
// some call's.
void expect_rule_and_table_agree(
    const std::set<std::string> &table,
    const std::function<void(ggemm_dtype, ggemm_dtype, std::vector<std::string> *)> &names_for) {
  std::set<std::string> reached;
  for (ggemm_dtype a : {GGEMM_DTYPE_BF16, GGEMM_DTYPE_FP16})
    for (ggemm_dtype c : {GGEMM_DTYPE_BF16, GGEMM_DTYPE_FP16, GGEMM_DTYPE_FP32}) {
      std::vector<std::string> names;
      names_for(a, c, &names);
      for (const std::string &name : names) {
        EXPECT_EQ(table.count(name), 1u) << "tile chosen but no kernel: " << name;
        reached.insert(name);
      }
    }
  for (const std::string &n : table) EXPECT_EQ(reached.count(n), 1u) << "kernel no call reaches: " << n;
}

#define GGEMM_TEST_COLLECT_SHORT_K_NAME(E, EN, O, ON, TM) \
  names.insert("ggemm_sm90_short_k_" GGEMM_TEST_STR(EN) "_" GGEMM_TEST_STR(ON) "_kmajor_m" GGEMM_TEST_STR(TM));

TEST(Sm90ShortK, EveryChosenTileHasAKernelAndEveryKernelIsReachable) {
  std::set<std::string> table;
  {
    std::set<std::string> &names = table;
    GGEMM_SM90_SHORT_K_KERNELS(GGEMM_TEST_COLLECT_SHORT_K_NAME)
  }
  expect_rule_and_table_agree(table, [](ggemm_dtype a, ggemm_dtype c, std::vector<std::string> *names) {
    for (int64_t m : {1, 8, 9, 64, 100, 128, 256, 8192})
      for (int64_t rank : {8, 16, 64, 128}) {
        CallShape s = lora_expand(m, rank);
        s.a_dtype = a, s.c_dtype = c, s.short_k_request = 1;
        const uint32_t tile_m = sm90_short_k_tile(h200(), s, nullptr);
        ASSERT_NE(tile_m, 0u);
        names->push_back(sm90_short_k_kernel_name(a, c, tile_m));
      }
  });
  // 2 operand dtypes x 3 output dtypes x tiles 8, 16, 32.
  EXPECT_EQ(table.size(), 18u);
}

// ---- the decode GEMV -----------------------------------------------------------

// Torch-style decode: `tokens` tokens routed top-8 over 128 experts, every
// expert's group listed; `max_rows` the caller's bound (0 = unknown: M).
CallShape moe_decode(int64_t tokens, int64_t max_rows, int64_t n = 1536, int64_t k = 2048) {
  CallShape s = shape(max_rows, k);
  s.m = 8 * tokens;
  s.n = n;
  s.num_groups = 128;
  return s;
}

uint32_t decode_gemv_tile(const DeviceProps &props, const CallShape &s, const ggemm_config *o) {
  return sm90_tile_if(KernelFamily::kDecodeGemv, props, s, o);
}

TEST(DecodeGemv, TakesDecodeCallsWithTheTileOfTheirLargestGroup) {
  EXPECT_EQ(decode_gemv_tile(h200(), moe_decode(1, 1), nullptr), 1u);
  EXPECT_EQ(decode_gemv_tile(h200(), moe_decode(4, 2), nullptr), 2u);
  EXPECT_EQ(decode_gemv_tile(h200(), moe_decode(4, 3), nullptr), 4u);  // the smallest tile holding the bound
  // Without the caller's bound a group is bounded by M, 8 at one token:
  // tiles of 4 (a group of one row still runs the one-row multiply).
  EXPECT_EQ(decode_gemv_tile(h200(), moe_decode(1, 0), nullptr), 4u);
  CallShape two = moe_decode(1, 0, 28672, 4096);
  two.m = 2, two.num_groups = 8;  // Mixtral's gate_up, M 2: tiles of 2
  EXPECT_EQ(decode_gemv_tile(h200(), two, nullptr), 2u);
  // Few groups, each of several rows (Mixtral-like: 8 experts, 32 rows):
  // the bound, 4.
  CallShape few = moe_decode(4, 4);
  few.num_groups = 8;
  EXPECT_EQ(decode_gemv_tile(h200(), few, nullptr), 4u);
  // The SwiGLU epilogue and gather on load run there too (the MoE layer's
  // gate_up at one token, its groups bounded by the one token).
  CallShape gate_up = moe_decode(1, 1);
  gate_up.epilogue = GGEMM_EPILOGUE_SWIGLU, gate_up.gather = true;
  EXPECT_EQ(decode_gemv_tile(h200(), gate_up, nullptr), 1u);
  CallShape down = moe_decode(1, 1, 4096, 1536);  // Qwen3-235B-A22B's down
  down.epilogue = GGEMM_EPILOGUE_ROW_SCALE;
  EXPECT_EQ(decode_gemv_tile(h200(), down, nullptr), 1u);
}

// The MoE layer's gate_up at decode as ggemm_moe_ffn describes it (M = T k
// slots, N = 2I, K = H, one group per local expert, bounded by T, SwiGLU,
// gather on load): the GPU layer cases that route in the GEMV's prologue
// (tests/test_gpu_moe.cpp, *DecodeRoutedInGemv*) must be planned on it, or
// they would test the routing launch instead.
CallShape layer_gate_up(int64_t tokens, int64_t top_k, int64_t hidden, int64_t inter, int64_t local) {
  CallShape s = shape(tokens, hidden);
  s.m = tokens * top_k, s.n = 2 * inter, s.num_groups = local;
  s.epilogue = GGEMM_EPILOGUE_SWIGLU, s.gather = true;
  return s;
}

TEST(DecodeGemv, TheLayersRoutedDecodeCasesArePlannedOnIt) {
  EXPECT_EQ(decode_gemv_tile(h200(), layer_gate_up(1, 8, 2048, 768, 16), nullptr), 1u);
  EXPECT_EQ(decode_gemv_tile(h200(), layer_gate_up(2, 8, 2048, 768, 16), nullptr), 2u);
  EXPECT_EQ(decode_gemv_tile(h200(), layer_gate_up(3, 8, 2048, 768, 16), nullptr), 4u);
  EXPECT_EQ(decode_gemv_tile(h200(), layer_gate_up(4, 8, 2048, 768, 16), nullptr), 4u);
  EXPECT_EQ(decode_gemv_tile(h200(), layer_gate_up(4, 6, 2048, 768, 16), nullptr), 4u);
  const CallShape four = layer_gate_up(1, 8, 1024, 1024, 16);
  EXPECT_EQ(decode_gemv_tile(h200(), four, nullptr), 1u);
  EXPECT_EQ(decode_gemv_waves(h200(), four, 1).ctas_per_sm, 4u);
  // The models' own: Qwen3-30B-A3B and Qwen3-235B-A22B at one token.
  EXPECT_EQ(decode_gemv_tile(h200(), layer_gate_up(1, 8, 2048, 768, 128), nullptr), 1u);
  EXPECT_EQ(decode_gemv_tile(h200(), layer_gate_up(1, 8, 4096, 1536, 128), nullptr), 1u);
}

// The layer's gate_up at decode runs the routed twin of the GEMV's plan
// (runtime/launch_grouped.cpp, routed_twin): one for every sm_90a GEMV
// kernel whose output dtype is its activations' (the layer's), none else.
TEST(DecodeGemv, EveryLayerTileHasARoutedTwin) {
  int routed = 0;
  for (const KernelEntry &e : kernel_table()) {
    if (e.family == KernelFamily::kDecodeGemvRouted) {
      ++routed;
      EXPECT_EQ(e.arch, Arch::kSm90a) << e.name;
      EXPECT_EQ(e.in, e.out) << e.name;
      EXPECT_NE(find_kernel(e.arch, KernelFamily::kDecodeGemv, e.in, e.out, e.kmajor, e.tile_m, e.cluster), nullptr)
          << e.name;
    } else if (e.family == KernelFamily::kDecodeGemv && e.arch == Arch::kSm90a && e.in == e.out) {
      EXPECT_NE(find_kernel(e.arch, KernelFamily::kDecodeGemvRouted, e.in, e.out, e.kmajor, e.tile_m, e.cluster),
                nullptr)
          << e.name;
    }
  }
  EXPECT_EQ(routed, 8);  // bf16 and fp16 x tiles 1 (three and four CTAs an SM), 2 and 4
}

TEST(DecodeGemv, TakesOnlyCallsWhoseGroupsFitOneTile) {
  // A bound past the largest tile (4 rows) would read a group's weights once
  // per tile: Mixtral at 16 tokens, 32 rows over 8 experts, groups of up to 6.
  CallShape mixtral = moe_decode(16, 6, 28672, 4096);
  mixtral.m = 32, mixtral.num_groups = 8;
  EXPECT_EQ(decode_gemv_tile(h200(), mixtral, nullptr), 0u);
  mixtral.max_rows_per_group = 4;
  EXPECT_EQ(decode_gemv_tile(h200(), mixtral, nullptr), 4u);
  // 8 tokens of top-8 over 128 experts, groups of up to 3 or 5.
  EXPECT_EQ(decode_gemv_tile(h200(), moe_decode(8, 3), nullptr), 4u);
  EXPECT_EQ(decode_gemv_tile(h200(), moe_decode(8, 5), nullptr), 0u);
  // Without a bound M bounds a group: 8 rows at one token, tiles of 4
  // (a group of 8 rows would take two), taken.
  EXPECT_EQ(decode_gemv_tile(h200(), moe_decode(1, 0), nullptr), 4u);
}

TEST(DecodeGemv, TakesOnlyCallsOfAtMost64Rows) {
  // 16 tokens of top-8 (M 128), groups of up to 3: the persistent kernel
  // streams the weights closer to the floor there (kDecodeGemvMaxCallRows).
  EXPECT_EQ(decode_gemv_tile(h200(), moe_decode(16, 3, 2048, 768), nullptr), 0u);
  EXPECT_EQ(decode_gemv_tile(h200(), moe_decode(8, 3, 2048, 768), nullptr), 4u);
  // Forced, it takes them.
  CallShape forced = moe_decode(16, 3, 2048, 768);
  forced.decode_gemv_request = 1;
  EXPECT_EQ(decode_gemv_tile(h200(), forced, nullptr), 4u);
}

TEST(DecodeGemv, TakesOnlyCallsWhoseTilesFillTheirWaves) {
  // 132 SMs: 396 CTAs at three an SM, 528 at four (tiles of 1 row only).
  // One token of top-8, a gate_up of N 3072 (Qwen3-235B-A22B's): 8 rows x
  // 96 tiles of 32 features, 768 tiles: 0.73 of two waves of 528, 0.97 of
  // two of 396. Three CTAs an SM: the kernel bounded to three.
  const CallShape gate_up = moe_decode(1, 1, 3072, 2048);
  EXPECT_EQ(decode_gemv_tile(h200(), gate_up, nullptr), 1u);
  EXPECT_EQ(decode_gemv_waves(h200(), gate_up, 1).ctas_per_sm, 3u);
  StatusOr<KernelPlan> gate_up_plan = plan_sm90(h200(), gate_up, nullptr, request_of(gate_up));
  ASSERT_TRUE(gate_up_plan.ok());
  EXPECT_EQ(gate_up_plan->kernel->cluster, 3u);
  EXPECT_STREQ(gate_up_plan->kernel->name, "ggemm_sm90_decode_gemv_bf16_bf16_kmajor_m1_c3");
  // Its down (N 2048): 512 tiles, 0.65 of two waves of 396, 0.97 of one of 528.
  const CallShape down = moe_decode(1, 1, 2048, 768);
  EXPECT_EQ(decode_gemv_tile(h200(), down, nullptr), 1u);
  EXPECT_EQ(decode_gemv_waves(h200(), down, 1).ctas_per_sm, 4u);
  StatusOr<KernelPlan> plan = plan_sm90(h200(), down, nullptr, request_of(down));
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->ctas_per_sm, 4u);
  EXPECT_STREQ(plan->kernel->name, "ggemm_sm90_decode_gemv_bf16_bf16_kmajor_m1_c4");  // bounded to four
  EXPECT_EQ(plan->max_clusters, 512);  // every tile a CTA, one wave
  // Tiles of 2 rows run three CTAs an SM only: at 4 tokens (32 rows, groups
  // of up to 2, tiles of 2) Qwen3-30B down is 32 x 64 = 2048 tiles, 0.86 of
  // six waves of 396.
  EXPECT_EQ(decode_gemv_waves(h200(), moe_decode(4, 2, 2048, 768), 2).ctas_per_sm, 3u);
  // Mixtral's down at one token (top-2 over 8 experts, N 4096): 2 x 128
  // tiles, 0.65 of one wave of 396, 0.48 of one of 528: neither fills.
  CallShape mixtral = moe_decode(1, 1, 4096, 14336);
  mixtral.m = 2, mixtral.num_groups = 8;
  EXPECT_EQ(decode_gemv_tile(h200(), mixtral, nullptr), 0u);
  // Its gate_up (N 28672): 1792 tiles, 0.91 of five waves of 396.
  mixtral.n = 28672, mixtral.k = 4096;
  EXPECT_EQ(decode_gemv_tile(h200(), mixtral, nullptr), 1u);
  EXPECT_EQ(decode_gemv_waves(h200(), mixtral, 1).ctas_per_sm, 3u);
  // Forced, the wave rule does not apply.
  CallShape forced = mixtral;
  forced.n = 4096, forced.k = 14336;
  forced.decode_gemv_request = 1;
  EXPECT_EQ(decode_gemv_tile(h200(), forced, nullptr), 1u);
}

TEST(DecodeGemv, LeavesLargerGroupsAndWhatItCannotRunToTheOthers) {
  EXPECT_EQ(decode_gemv_tile(h200(), moe_decode(2, 0), nullptr), 0u);   // 16 rows could be one group's
  EXPECT_EQ(decode_gemv_tile(h200(), moe_decode(16, 9), nullptr), 0u);  // past kDecodeGemvMaxRows
  EXPECT_EQ(decode_gemv_tile(h200(), shape(), nullptr), 0u);            // prefill
  CallShape mn = moe_decode(1, 1);
  mn.transpose_b = false;  // [E, K, N] weights: a row of N is not contiguous along K
  EXPECT_EQ(decode_gemv_tile(h200(), mn, nullptr), 0u);
  CallShape split = moe_decode(1, 1);
  split.split0 = 512, split.split1 = 1024;
  EXPECT_EQ(decode_gemv_tile(h200(), split, nullptr), 0u);
  CallShape planes = split;
  planes.a_planes = true;
  EXPECT_EQ(decode_gemv_tile(h200(), planes, nullptr), 0u);
  ggemm_config c = blank_config();
  EXPECT_EQ(decode_gemv_tile(h200(), moe_decode(1, 1), &c), 0u);  // a config describes the persistent kernel
  CallShape never = moe_decode(1, 1);
  never.decode_gemv_request = -1;
  EXPECT_EQ(decode_gemv_tile(h200(), never, nullptr), 0u);
  // Forced (the GPU suite's third run), it takes any call it can run, in tiles of 4.
  CallShape forced = shape();
  forced.decode_gemv_request = 1;
  EXPECT_EQ(decode_gemv_tile(h200(), forced, nullptr), 4u);
  // The short-K kernels' calls too (the decode_gemv_* GPU cases: 25 rows over
  // 7 groups of at most 8, N 72, K 264, which the split short-K kernel takes
  // when nothing is forced).
  CallShape short_k = shape(8, 264);
  short_k.m = 25, short_k.n = 72, short_k.num_groups = 7;
  EXPECT_EQ(decode_gemv_tile(h200(), short_k, nullptr), 0u);
  EXPECT_NE(sm90_short_k_split_tile(h200(), short_k, nullptr), 0u);
  short_k.decode_gemv_request = 1;
  EXPECT_EQ(decode_gemv_tile(h200(), short_k, nullptr), 4u);
}

TEST(PlanRequest, TheProcessWideRequestCarriesEveryField) {
  // The forced-plan GPU runs reach the plan through these two calls only.
  const PlanRequest before = plan_request_for_testing();
  PlanRequest r;
  r.sm90_short_k = PlanRequest::Sm90ShortK::kNever;
  r.decode_gemv = PlanRequest::DecodeGemv::kWherePossible;
  r.sm90_k_slices = 2;
  set_plan_request_for_testing(r);
  const PlanRequest got = plan_request_for_testing();
  set_plan_request_for_testing(before);
  EXPECT_EQ(got.sm90_short_k, r.sm90_short_k);
  EXPECT_EQ(got.decode_gemv, r.decode_gemv);
  EXPECT_EQ(got.sm90_k_slices, r.sm90_k_slices);
  r.sm90_token_major = PlanRequest::TokenMajor::kWherePossible;
  set_plan_request_for_testing(r);
  const PlanRequest got2 = plan_request_for_testing();
  set_plan_request_for_testing(before);
  EXPECT_EQ(got2.sm90_token_major, r.sm90_token_major);
}

// ---- the token-major kernel (ptx/sm90/token_major_gemm.cuh) -----------------

// Qwen3-30B-A3B's gate_up at 4096 tokens (torch's offs: every expert listed).
CallShape qwen3_gate_up_prefill() {
  CallShape s = shape(0, 2048);
  s.m = 32768, s.n = 1536, s.num_groups = 128;
  return s;
}

TEST(TokenMajor, PrefillStoreAndRowScaleCallsTakeIt) {
  for (ggemm_epilogue e : {GGEMM_EPILOGUE_STORE, GGEMM_EPILOGUE_ROW_SCALE}) {
    CallShape s = qwen3_gate_up_prefill();
    s.epilogue = e;
    StatusOr<KernelPlan> plan = plan_sm90(h200(), s, nullptr, request_of(s));
    ASSERT_TRUE(plan.ok());
    EXPECT_EQ(plan->family(), KernelFamily::kTokenMajor);
    EXPECT_STREQ(plan->kernel->name, "ggemm_sm90_token_major_bf16_bf16_kmajor_m128");
    EXPECT_EQ(plan->tile_m, 128u);
    EXPECT_EQ(plan->tile_n, 192u);
    EXPECT_EQ(plan->weights_box_rows, 192u);
    EXPECT_EQ(plan->out_box_tokens, 128u);
    EXPECT_EQ(plan->stages, 4u);
    EXPECT_EQ(plan->threads, 384u);
    EXPECT_EQ(plan->out_box_bytes, 128u);
    EXPECT_EQ(plan->smem_bytes, sm90::TokenMajorShape::smem_bytes(false));
    EXPECT_LE(plan->smem_bytes + 1024, uint32_t(h200().smem_optin));
    EXPECT_TRUE(plan->tma_pipeline());
    EXPECT_FALSE(plan->persistent());
    // One CTA an SM (a bound of 383 row blocks x 8 column blocks).
    EXPECT_EQ(plan->max_clusters, 132);
  }
  // N below a tile: the persistent kernel; forced, the weight box holds
  // N's rows, rounded up to 8.
  CallShape narrow = qwen3_gate_up_prefill();
  narrow.n = 184;
  StatusOr<KernelPlan> plan = plan_sm90(h200(), narrow, nullptr, request_of(narrow));
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->family(), KernelFamily::kPersistentStore);
  narrow.n = 100, narrow.token_major_request = 1;
  plan = plan_sm90(h200(), narrow, nullptr, request_of(narrow));
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->family(), KernelFamily::kTokenMajor);
  EXPECT_EQ(plan->weights_box_rows, 104u);
  narrow.n = 192, narrow.token_major_request = 0;
  plan = plan_sm90(h200(), narrow, nullptr, request_of(narrow));
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->family(), KernelFamily::kTokenMajor);
}

// The MoE layer's gate_up at prefill: 2I weight rows (gate | up), I outputs.
TEST(TokenMajor, PrefillSwigluCallsTakeItsSwigluKernel) {
  CallShape s = qwen3_gate_up_prefill();
  s.epilogue = GGEMM_EPILOGUE_SWIGLU;
  StatusOr<KernelPlan> plan = plan_sm90(h200(), s, nullptr, request_of(s));
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->family(), KernelFamily::kTokenMajorSwiglu);
  EXPECT_STREQ(plan->kernel->name, "ggemm_sm90_token_major_bf16_bf16_kmajor_m128_swiglu");
  EXPECT_EQ(plan->tile_m, 128u);
  EXPECT_EQ(plan->tile_n, 192u);  // weight rows: 96 output features
  // 12 whole octet pairs whatever N is; the output box is a 32-feature chunk.
  EXPECT_EQ(plan->weights_box_rows, 192u);
  EXPECT_EQ(plan->out_box_tokens, 128u);
  EXPECT_EQ(plan->out_box_bytes, 64u);
  EXPECT_EQ(plan->smem_bytes, sm90::TokenMajorShape::smem_bytes(true));
  EXPECT_GT(sm90::TokenMajorShape::smem_bytes(true), sm90::TokenMajorShape::smem_bytes(false));
  EXPECT_LE(plan->smem_bytes + 1024, uint32_t(h200().smem_optin));
  EXPECT_TRUE(plan->tma_pipeline());
  EXPECT_TRUE(plan->token_major());
  EXPECT_FALSE(plan->persistent());
  // Below 2I = 192 the persistent SwiGLU kernels; forced, 12 octet pairs
  // still (zeros past I).
  s.n = 160;
  plan = plan_sm90(h200(), s, nullptr, request_of(s));
  ASSERT_TRUE(plan.ok());
  EXPECT_NE(plan->family(), KernelFamily::kTokenMajorSwiglu);
  s.token_major_request = 1;
  plan = plan_sm90(h200(), s, nullptr, request_of(s));
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->family(), KernelFamily::kTokenMajorSwiglu);
  EXPECT_EQ(plan->weights_box_rows, 192u);
  // Groups of 64 rows, gather on load, the request never: not this kernel.
  s = qwen3_gate_up_prefill(), s.epilogue = GGEMM_EPILOGUE_SWIGLU, s.m = 128 * 64;
  plan = plan_sm90(h200(), s, nullptr, request_of(s));
  ASSERT_TRUE(plan.ok());
  EXPECT_NE(plan->family(), KernelFamily::kTokenMajorSwiglu);
  s = qwen3_gate_up_prefill(), s.epilogue = GGEMM_EPILOGUE_SWIGLU, s.gather = true;
  plan = plan_sm90(h200(), s, nullptr, request_of(s));
  ASSERT_TRUE(plan.ok());
  EXPECT_TRUE(plan->persistent());
  s = qwen3_gate_up_prefill(), s.epilogue = GGEMM_EPILOGUE_SWIGLU, s.token_major_request = -1;
  plan = plan_sm90(h200(), s, nullptr, request_of(s));
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->family(), KernelFamily::kPersistentSwiglu);
}

TEST(TokenMajor, TheRestStaysOnTheOtherKernels) {
  // (The store and accumulate epilogues without gather take the persistent
  // kernel's store-only and accumulate-only twins.)
  const auto family = [](const CallShape &s) {
    StatusOr<KernelPlan> plan = plan_sm90(h200(), s, nullptr, request_of(s));
    EXPECT_TRUE(plan.ok());
    return plan.ok() ? plan->family() : KernelFamily::kPersistent;
  };
  CallShape s = qwen3_gate_up_prefill();
  s.epilogue = GGEMM_EPILOGUE_ACCUMULATE;
  EXPECT_EQ(family(s), KernelFamily::kPersistentAccumulate);
  s = qwen3_gate_up_prefill(), s.c_dtype = GGEMM_DTYPE_FP32;
  EXPECT_EQ(family(s), KernelFamily::kPersistentStore);
  s = qwen3_gate_up_prefill(), s.transpose_b = false;
  EXPECT_EQ(family(s), KernelFamily::kPersistentStore);
  s = qwen3_gate_up_prefill(), s.gather = true;
  EXPECT_EQ(family(s), KernelFamily::kPersistent);
  s = qwen3_gate_up_prefill(), s.split0 = 512, s.split1 = 1024;
  EXPECT_EQ(family(s), KernelFamily::kPersistentStore);
  // Groups of 64 rows: the persistent kernel (measured level there).
  s = qwen3_gate_up_prefill(), s.m = 128 * 64;
  EXPECT_EQ(family(s), KernelFamily::kPersistentStore);
  // 128 rows a group, or a caller's bound below it.
  s.m = 128 * 128;
  EXPECT_EQ(family(s), KernelFamily::kTokenMajor);
  s.max_rows_per_group = 100;
  EXPECT_EQ(family(s), KernelFamily::kPersistentStore);
  // A config describes the persistent kernel.
  s = qwen3_gate_up_prefill();
  ggemm_config o = blank_config();
  o.stages = 3;
  StatusOr<KernelPlan> with_config = plan_sm90(h200(), s, &o, request_of(s));
  ASSERT_TRUE(with_config.ok());
  EXPECT_EQ(with_config->family(), KernelFamily::kPersistentStore);
  // The request: never, and wherever it can run (a decode-sized call too).
  s = qwen3_gate_up_prefill(), s.token_major_request = -1;
  EXPECT_EQ(family(s), KernelFamily::kPersistentStore);
  s = qwen3_gate_up_prefill(), s.m = 128 * 8, s.token_major_request = 1, s.decode_gemv_request = -1,
  s.short_k_request = -1;
  EXPECT_EQ(family(s), KernelFamily::kTokenMajor);
}

TEST(TokenMajor, EveryKernelIsReachable) {
  std::set<std::string> table, reached;
  for (const KernelEntry &e : kernel_table())
    if (e.family == KernelFamily::kTokenMajor || e.family == KernelFamily::kTokenMajorSwiglu) table.insert(e.name);
  for (ggemm_epilogue e : {GGEMM_EPILOGUE_STORE, GGEMM_EPILOGUE_SWIGLU})
    for (ggemm_dtype a : {GGEMM_DTYPE_BF16, GGEMM_DTYPE_FP16})
      for (ggemm_dtype c : {GGEMM_DTYPE_BF16, GGEMM_DTYPE_FP16}) {
        CallShape s = qwen3_gate_up_prefill();
        s.a_dtype = a, s.c_dtype = c, s.epilogue = e;
        StatusOr<KernelPlan> plan = plan_sm90(h200(), s, nullptr, request_of(s));
        ASSERT_TRUE(plan.ok());
        ASSERT_EQ(plan->family(),
                  e == GGEMM_EPILOGUE_SWIGLU ? KernelFamily::kTokenMajorSwiglu : KernelFamily::kTokenMajor);
        EXPECT_EQ(plan->kernel->in, a);
        EXPECT_EQ(plan->kernel->out, c);
        reached.insert(plan->kernel->name);
      }
  EXPECT_EQ(reached, table);
  EXPECT_EQ(table.size(), 8u);
}

TEST(DecodeGemv, EveryChosenTileHasAKernelAndEveryKernelIsReachable) {
  // The sm_90a entries of the registry (generated from the kernel table).
  std::set<std::string> table;
  for (const KernelEntry &e : kernel_table())
    if (e.arch == Arch::kSm90a && e.family == KernelFamily::kDecodeGemv) table.insert(e.name);
  expect_rule_and_table_agree(table, [](ggemm_dtype a, ggemm_dtype c, std::vector<std::string> *names) {
    for (int64_t rows : {0, 1, 2, 3, 4, 8}) {
      // 8 rows over 128 groups (tiles of 1 and 2; rows 0: tiles of 1 at four
      // CTAs an SM, TakesOnlyCallsWhoseTilesFillTheirWaves), then 32 over 8
      // (up to 4).
      CallShape s = rows == 0 ? moe_decode(1, 1, 2048, 768) : rows <= 2 ? moe_decode(1, rows) : moe_decode(4, rows);
      if (rows > 2) s.num_groups = 8;
      s.decode_gemv_request = 1;  // every tile, whatever its waves fill (TakesOnlyCallsWhoseTilesFillTheirWaves)
      s.a_dtype = a, s.c_dtype = c;
      StatusOr<KernelPlan> plan = plan_sm90(h200(), s, nullptr, request_of(s));
      ASSERT_TRUE(plan.ok());
      ASSERT_EQ(plan->family(), KernelFamily::kDecodeGemv);
      names->push_back(plan->kernel->name);
    }
  });
  // 2 operand dtypes x 3 output dtypes x tiles of 1 (three and four CTAs an
  // SM), 2 and 4.
  EXPECT_EQ(table.size(), 24u);
}

#define GGEMM_TEST_COLLECT_SHORT_K_SPLIT_NAME(E, EN, O, ON, TM)                                     \
  names.insert("ggemm_sm90_short_k_" GGEMM_TEST_STR(EN) "_" GGEMM_TEST_STR(ON) "_kmajor_m" GGEMM_TEST_STR(TM) \
               "_split8");

// The LoRA shrink of Llama-3-8B's Q/K/V (hidden 4096 = K, 3R = N), M
// tokens over `groups` adapters, as ggemm_lora_shrink_qkv plans it: its 3R
// columns cut into the Q, K and V views (segments the store spans).
CallShape lora_shrink(int64_t m, int64_t rank, int64_t groups = 8, int64_t k = 4096) {
  CallShape s = shape(m, k);
  s.m = m;
  s.n = 3 * rank;
  s.split0 = rank, s.split1 = 2 * rank;
  s.num_groups = groups;
  s.max_rows_per_group = m;
  return s;
}

// Its output segments keep the prefill shrink off the token-major kernel
// (one segment only), whatever N: at R 64 (N = 192, a token-major tile's
// width) the persistent kernel's store twin at tile_m 64 runs it. (Planned
// without the segments, as this file once did, it would take the
// token-major kernel: docs/performance.md, "Cold, against
// e409675".)
TEST(TokenMajor, TheLoraShrinkStaysOffIt) {
  for (int64_t rank : {16, 64, 128}) {
    CallShape s = lora_shrink(4096, rank);
    s.max_rows_per_group = 0;
    StatusOr<KernelPlan> plan = plan_sm90(h200(), s, nullptr, request_of(s));
    ASSERT_TRUE(plan.ok());
    EXPECT_EQ(plan->family(), KernelFamily::kPersistentStore) << rank;
    if (rank == 64) EXPECT_EQ(plan->tile_m, 64u);
    s.split0 = s.split1 = 0;
    plan = plan_sm90(h200(), s, nullptr, request_of(s));
    ASSERT_TRUE(plan.ok());
    EXPECT_EQ(plan->family() == KernelFamily::kTokenMajor, rank >= 64) << rank;
  }
}

TEST(Sm90ShortKSplit, TakesTheDecodeShrink) {
  // 64 tokens over 8 adapters, R 16: 8 tiles of 8 tokens x 48 rows, each
  // streaming K 4096 on one SM in the persistent kernel; split, 64 CTAs.
  CallShape s = lora_shrink(64, 16);
  s.max_rows_per_group = 8;
  EXPECT_EQ(sm90_short_k_tile(h200(), s, nullptr), 0u);  // K past 128
  EXPECT_EQ(sm90_short_k_split_tile(h200(), s, nullptr), 8u);
  // R 64 (192 rows: two column blocks, 16 tiles), 16 tokens an adapter.
  s = lora_shrink(128, 64);
  s.max_rows_per_group = 16;
  EXPECT_EQ(sm90_short_k_split_tile(h200(), s, nullptr), 16u);
  // K 136 (just past the unsplit kernel's 128) and 4096, the most it takes.
  EXPECT_EQ(sm90_short_k_split_tile(h200(), lora_shrink(64, 16, 8, 136), nullptr), 8u);
  EXPECT_EQ(sm90_short_k_split_tile(h200(), lora_shrink(64, 16, 8, 4096), nullptr), 8u);
}

TEST(Sm90ShortKSplit, TakesTheGpuTestsSplitCases) {
  // tests/test_gpu_grouped.cpp's short_k_split_* cases must reach the split
  // kernel under the automatic rule (5 unowned rows follow the groups).
  struct SplitCase {
    std::vector<int64_t> rows;
    int64_t n, k, split0, split1;  // planes where the splits are set
    uint32_t tile_m;
  };
  const SplitCase cases[] = {{{5, 0, 8, 3, 7}, 48, 1000, 0, 0, 8},
                             {{8, 2, 0, 6}, 104, 136, 0, 0, 8},
                             {{8, 5, 8, 1}, 192, 4096, 0, 0, 8},
                             {{16, 12, 9}, 136, 512, 0, 0, 16},
                             {{3, 8, 2}, 584, 512, 328, 456, 8}};  // planes: segments of 328, 128, 128
  for (const SplitCase &c : cases) {
    CallShape s = shape(*std::max_element(c.rows.begin(), c.rows.end()), c.k);
    s.m = std::accumulate(c.rows.begin(), c.rows.end(), int64_t(5));
    s.n = c.n;
    s.num_groups = int64_t(c.rows.size());
    s.split0 = c.split0, s.split1 = c.split1, s.a_planes = c.split0 != 0;
    EXPECT_EQ(sm90_short_k_tile(h200(), s, nullptr), 0u) << "K " << c.k;
    EXPECT_EQ(sm90_short_k_split_tile(h200(), s, nullptr), c.tile_m) << "K " << c.k << ", N " << c.n;
  }
}

TEST(Sm90ShortKSplit, LeavesEverythingElseToTheOtherKernels) {
  // K past 4096, K <= 128 (the unsplit kernel's), weights [E, K, N], a
  // config, or the test request kNever.
  EXPECT_EQ(sm90_short_k_split_tile(h200(), lora_shrink(64, 16, 8, 4104), nullptr), 0u);
  EXPECT_EQ(sm90_short_k_split_tile(h200(), lora_shrink(64, 16, 8, 128), nullptr), 0u);
  expect_refuses_mn_major_config_and_off(
      [](const CallShape &s, const ggemm_config *o) { return sm90_short_k_split_tile(h200(), s, o); },
      lora_shrink(64, 16));
  // Prefill: the M 4096 shrink (512 rows an adapter).
  EXPECT_EQ(sm90_short_k_split_tile(h200(), lora_shrink(4096, 16), nullptr), 0u);
  // Many tiles: 32 adapters x 2 column blocks (R 64) = 64 tiles, past a
  // quarter of 132 SMs; and the MoE decode rows (Qwen3: 128 experts x 12
  // column blocks, K 2048).
  CallShape many = lora_shrink(64, 64, 32);
  many.max_rows_per_group = 2;
  EXPECT_EQ(sm90_short_k_split_tile(h200(), many, nullptr), 0u);
  CallShape qwen3 = shape(4, 2048);
  qwen3.m = 512, qwen3.n = 1536, qwen3.num_groups = 128;
  EXPECT_EQ(sm90_short_k_split_tile(h200(), qwen3, nullptr), 0u);
  // Forced (the test request kWherePossible): any call it can run, tile 16 past 8 rows.
  CallShape forced = lora_shrink(4096, 16);
  forced.short_k_request = 1;
  EXPECT_EQ(sm90_short_k_split_tile(h200(), forced, nullptr), 16u);
  // Fewer SMs than a cluster: never.
  DeviceProps tiny = h200();
  tiny.sm_count = 4;
  forced.num_groups = 1;
  EXPECT_EQ(sm90_short_k_split_tile(tiny, forced, nullptr), 0u);
}

TEST(Sm90ShortKSplit, SliceLayoutAndOccupancy) {
  // K 4096 over 8 CTAs: slices of 512 (rows of 1040 bytes); K 1000: 128
  // (125 rounded up to 16); K 136: 32.
  EXPECT_EQ(sm90::short_k_slice(4096, 8), 512u);
  EXPECT_EQ(sm90::short_k_slice(1000, 8), 128u);
  EXPECT_EQ(sm90::short_k_slice(136, 8), 32u);
  EXPECT_EQ(sm90::short_k_slice(72, 1), 72u);
  const sm90::ShortKLayout l = sm90::make_short_k_layout(8, 4096, 2, 8);
  EXPECT_EQ(l.row_bytes, 1040u);
  // Operands, staging, routing table and the 4 warps' row blocks (to 145684
  // bytes), then at the next 16 bytes the 7 other ranks' slots (128 threads
  // x 2 x 1 x 4 floats each), then the three mbarriers.
  EXPECT_EQ(136u * 1040 + 8 * 272 + 513 * 4 + 4 * 4, 145684u);
  EXPECT_EQ(l.slots_offset(), 145696u);
  EXPECT_EQ(l.slot_offset(1), 145696u);
  EXPECT_EQ(l.slot_offset(7), 145696u + 6 * 4096);
  EXPECT_EQ(sm90::make_short_k_layout(16, 1000, 4, 8).slots_offset() % 16, 0u);
  EXPECT_EQ(l.barriers_offset(), 145696u + 7 * 4096);
  EXPECT_EQ(l.total_bytes(), l.barriers_offset() + 24);
  EXPECT_EQ(sm90::make_short_k_layout(16, 4096, 4, 8).partial_bytes, 8192u);
  EXPECT_EQ(sm90::make_short_k_layout(8, 72, 2).partial_bytes, 0u);  // unsplit: none
  // The largest split kernel (tiles of 16, fp32 out, K 4096) fits the
  // H200's 227 KB with the ~1 KB the SM reserves.
  EXPECT_LE(sm90::make_short_k_layout(16, 4096, 4, 8).total_bytes() + 1024, 232448u);
  // ~171 KB at K 4096: one CTA an SM; ~68 KB at K 1024: three.
  EXPECT_EQ(sm90_short_k_ctas_per_sm(h200(), 8, 4096, GGEMM_DTYPE_BF16, 8), 1u);
  EXPECT_EQ(sm90_short_k_ctas_per_sm(h200(), 8, 1024, GGEMM_DTYPE_BF16, 8), 3u);
}

TEST(Sm90ShortKSplit, SlicesCoverKOnceInMmaSteps) {
  // Every K the split kernels take (multiples of 8 past 128, up to 4096):
  // the 8 slices are multiples of 16 of at most 512, start where the one
  // before ends, and their valid parts add up to K with none past it.
  for (uint32_t k = 136; k <= sm90::kShortKSplitMaxK; k += 8) {
    const uint32_t slice = sm90::short_k_slice(k, sm90::kShortKSplit);
    ASSERT_EQ(slice % 16, 0u) << k;
    ASSERT_LE(slice, sm90::kShortKMaxSlice) << k;
    uint32_t covered = 0;
    for (uint32_t rank = 0; rank < sm90::kShortKSplit; ++rank) {
      const uint32_t start = sm90::short_k_slice_start(k, sm90::kShortKSplit, rank);
      const uint32_t valid = sm90::short_k_slice_valid(k, sm90::kShortKSplit, rank);
      ASSERT_EQ(start, rank * slice) << k;
      if (valid > 0) ASSERT_EQ(start, covered) << "K " << k << " rank " << rank;
      ASSERT_LE(valid, slice);
      ASSERT_EQ(valid % 8, 0u) << "whole 16-byte chunks, K " << k << " rank " << rank;
      covered += valid;
    }
    ASSERT_EQ(covered, k);
  }
  // Unsplit: one slice, all of K.
  EXPECT_EQ(sm90::short_k_slice_valid(72, 1, 0), 72u);
}

TEST(Sm90ShortKSplit, EveryChosenTileHasAKernelAndEveryKernelIsReachable) {
  std::set<std::string> table;
  {
    std::set<std::string> &names = table;
    GGEMM_SM90_SHORT_K_SPLIT_KERNELS(GGEMM_TEST_COLLECT_SHORT_K_SPLIT_NAME)
  }
  expect_rule_and_table_agree(table, [](ggemm_dtype a, ggemm_dtype c, std::vector<std::string> *names) {
    for (int64_t m : {1, 8, 9, 64, 128, 8192})
      for (int64_t k : {136, 1024, 4096}) {
        CallShape s = lora_shrink(m, 16, 8, k);
        s.a_dtype = a, s.c_dtype = c, s.short_k_request = 1;
        const uint32_t tile_m = sm90_short_k_split_tile(h200(), s, nullptr);
        ASSERT_NE(tile_m, 0u);
        names->push_back(sm90_short_k_kernel_name(a, c, tile_m, sm90::kShortKSplit));
      }
  });
  // 2 operand dtypes x 3 output dtypes x tiles 8, 16.
  EXPECT_EQ(table.size(), 12u);
}

TEST(Sm90ShortK, CtasPerSmByRegistersThenSharedMemory) {
  // Small tiles: the launch bounds' 4. Tile 32, K 128, fp32 outputs: 160
  // rows of 272 bytes + 32 staged rows of 544 + the 2052-byte routing table
  // = 62980 bytes, 3 beside the 1 KB reserve in 227 KB; and that call's wave
  // is 3 x 132 = 396 tiles.
  EXPECT_EQ(sm90_short_k_ctas_per_sm(h200(), 8, 16, GGEMM_DTYPE_BF16), 4u);
  EXPECT_EQ(sm90_short_k_ctas_per_sm(h200(), 32, 128, GGEMM_DTYPE_FP32), 3u);
  DeviceProps small = h200();
  small.smem_optin = 49152;
  EXPECT_EQ(sm90_short_k_ctas_per_sm(small, 32, 128, GGEMM_DTYPE_FP32), 1u);
  // 11 groups of 32 rows by 48 column blocks at fp32, K 128: 528 tiles, past
  // 396; at bf16 outputs (4 CTAs an SM) they fit.
  CallShape s = lora_expand(11 * 32, 128, 11);
  s.max_rows_per_group = 32;
  s.c_dtype = GGEMM_DTYPE_FP32;
  EXPECT_EQ(sm90_short_k_tile(h200(), s, nullptr), 0u);
  s.c_dtype = GGEMM_DTYPE_BF16;
  EXPECT_EQ(sm90_short_k_tile(h200(), s, nullptr), 32u);
}

TEST(Sm90ShortK, SharedMemoryLayout) {
  // Rows of K rounded up to 16, plus 16 bytes: K 16 -> 48, K 24 -> 80, K 128 -> 272.
  EXPECT_EQ(sm90::short_k_row_bytes(16), 48u);
  EXPECT_EQ(sm90::short_k_row_bytes(24), 80u);
  EXPECT_EQ(sm90::short_k_row_bytes(128), 272u);
  // 128 weight rows and 8 token rows of K 16, then 8 staged rows of 128 bf16 + 16.
  const sm90::ShortKLayout l = sm90::make_short_k_layout(8, 16, 2);
  EXPECT_EQ(l.tokens_offset(), 128u * 48);
  EXPECT_EQ(l.staging_offset(), 136u * 48);
  // Then the routing table: 257 offsets and 256 ids, 4 bytes each, and the
  // 4 warps' row-block sums.
  EXPECT_EQ(l.offsets_table_offset(), 136u * 48 + 8 * 272);
  EXPECT_EQ(l.ids_table_offset(), 136u * 48 + 8 * 272 + 257 * 4);
  EXPECT_EQ(l.warp_row_blocks_offset(), 136u * 48 + 8 * 272 + 513 * 4);
  EXPECT_EQ(l.total_bytes(), 136u * 48 + 8 * 272 + 513 * 4 + 16);
  // fp32 staging rows: 512 + 32 bytes.
  EXPECT_EQ(sm90::make_short_k_layout(32, 128, 4).total_bytes(), 160u * 272 + 32 * 544 + 513 * 4 + 16);
}

// ---- (d) sm_100a: stages, config choice, kernel names ----------------------------

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

DeviceProps b200() {
  DeviceProps p;
  p.ordinal = 0;
  p.cc_major = 10;
  p.cc_minor = 0;
  p.sm_count = 148;
  p.smem_optin = 232448;
  return p;
}

TEST(Sm100DecodeGemv, TakesTheSameCallsAsOnSm90) {
  // The same kernel built for sm_100a (never run on Blackwell hardware),
  // by the same rule.
  for (int64_t rows : {1, 2, 0}) {
    CallShape s = moe_decode(1, rows);
    StatusOr<KernelPlan> plan = plan_sm100(b200(), s, nullptr, request_of(s));
    ASSERT_TRUE(plan.ok());
    EXPECT_EQ(plan->family(), KernelFamily::kDecodeGemv) << rows;
    EXPECT_EQ(plan->kernel->arch, Arch::kSm100a);
    EXPECT_EQ(plan->tile_m, decode_gemv_tile(h200(), s, nullptr)) << rows;
  }
  StatusOr<KernelPlan> prefill = plan_sm100(b200(), shape(), nullptr, {});
  ASSERT_TRUE(prefill.ok());
  EXPECT_EQ(prefill->family(), KernelFamily::kPersistent);
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

// ---- (e) devices and the embedded fatbins ------------------------------------------

TEST(DeviceArch, OnlyComputeCapability90And100HaveKernels) {
  Arch arch = Arch::kSm90a;
  ASSERT_TRUE(arch_for_compute_capability(9, 0, &arch));
  EXPECT_EQ(arch, Arch::kSm90a);
  ASSERT_TRUE(arch_for_compute_capability(10, 0, &arch));
  EXPECT_EQ(arch, Arch::kSm100a);
  // 'a' code runs on its own compute capability only: not on B300 (10.3),
  // Thor (11.0), RTX Blackwell (12.0), nor on Ampere or Ada.
  for (auto cc : {std::pair<int, int>{8, 0}, {8, 6}, {8, 9}, {9, 1}, {10, 1}, {10, 3}, {11, 0}, {12, 0}, {12, 1}})
    EXPECT_FALSE(arch_for_compute_capability(cc.first, cc.second, &arch)) << cc.first << "." << cc.second;
  EXPECT_EQ(arch_number(Arch::kSm90a), 90u);
  EXPECT_EQ(arch_number(Arch::kSm100a), 100u);
  EXPECT_STREQ(arch_name(Arch::kSm90a), "sm_90a");
  EXPECT_STREQ(arch_name(Arch::kSm100a), "sm_100a");
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

// sm_90a's narrow tiles (one consumer warpgroup multiplying) against the
// H200's 132 SMs.
TEST(Sm90Plan, NarrowTilesWhereWideOnesLeaveHalfTheSmsIdle) {
  expect_narrow_tiles_rule(sm90_persistent_plan, h200(), [](const KernelPlan &p) {
    EXPECT_EQ(p.tile_n == 64, p.consumer_warpgroups == 1u) << "tile_n " << p.tile_n;
    return p.consumer_warpgroups == 1u;
  });
}

}  // namespace
}  // namespace ggemm

// The fatbin table libggemm embeds (cmake/fatbins.S.in); the internal tests
// link the same objects.
extern "C" const void *const ggemm_fatbin_table[];
extern "C" const uint32_t ggemm_fatbin_arch[];
extern "C" const uint32_t ggemm_fatbin_count;

namespace ggemm {
namespace {

TEST(EmbeddedFatbins, EachArchitectureHasItsOwnFatbins) {
  // One fatbin per operand dtype per architecture (sm_90a: three, the
  // store-only and accumulate-only persistent kernels apart:
  // kernels_store_<dtype>.cu, kernels_accumulate_<dtype>.cu), and one
  // of the MoE layer's routing and combine kernels (ptx/<arch>/
  // kernels_moe.cu), each tagged with the one architecture it holds, so a
  // device loads only its own.
  std::map<uint32_t, int> per_arch;
  for (uint32_t i = 0; i < ggemm_fatbin_count; ++i) {
    EXPECT_NE(ggemm_fatbin_table[i], nullptr);
    ++per_arch[ggemm_fatbin_arch[i]];
  }
  EXPECT_EQ(per_arch.size(), 2u);
  EXPECT_EQ(per_arch[arch_number(Arch::kSm90a)], 7);
  EXPECT_EQ(per_arch[arch_number(Arch::kSm100a)], 3);
}

// The fatbin wrapper's header (what nvcc -fatbin writes): magic, version,
// header size, then the size of what follows it.
struct FatbinHeader {
  uint32_t magic;  // 0xBA55ED50
  uint16_t version, header_bytes;
  uint64_t body_bytes;
};

// Whether `name`, NUL-terminated, is in an embedded fatbin of `arch` (each
// entry point's name is in its cubin's string table).
bool fatbin_names(Arch arch, const std::string &name) {
  const std::string needle = name + '\0';
  for (uint32_t i = 0; i < ggemm_fatbin_count; ++i) {
    if (ggemm_fatbin_arch[i] != arch_number(arch)) continue;
    const auto *header = static_cast<const FatbinHeader *>(ggemm_fatbin_table[i]);
    EXPECT_EQ(header->magic, 0xBA55ED50u);
    const char *begin = static_cast<const char *>(ggemm_fatbin_table[i]);
    const char *end = begin + header->header_bytes + header->body_bytes;
    if (std::search(begin, end, needle.begin(), needle.end()) != end) return true;
  }
  return false;
}

// The benchmark harness's params row launches an empty kernel with ggemm's
// parameter bytes (bench/harness_ptx.h), so its time is a launch's of this
// size.
static_assert(bench::kHarnessParamBytes == sizeof(Sm90GroupedParams),
              "bench/harness_ptx.h's GGEMM_HARNESS_PARAM_BYTES is sizeof(Sm90GroupedParams)");

TEST(KernelRegistry, OneEntryPerInstantiationEachInItsArchitecturesFatbins) {
  // The registry is generated from the kernel tables (runtime/kernel_registry.cpp):
  // every entry unique, named by its family, and present in the fatbins the
  // runtime loads for its architecture.
  std::set<std::string> names;
  std::map<std::pair<Arch, KernelFamily>, int> per_family;
  for (const KernelEntry &e : kernel_table()) {
    const std::string name = e.name;
    EXPECT_TRUE(names.insert(name).second) << name << " twice";
    ++per_family[{e.arch, e.family}];
    const bool sm90_persistent = e.family == KernelFamily::kPersistent || e.family == KernelFamily::kPersistentStore ||
                                 e.family == KernelFamily::kPersistentAccumulate ||
                                 e.family == KernelFamily::kPersistentSwiglu;
    const bool gemv = e.family == KernelFamily::kDecodeGemv;
    const char *prefix = e.arch == Arch::kSm100a ? (gemv ? "ggemm_sm100_decode_gemv_" : "ggemm_sm100_grouped_")
                         : sm90_persistent        ? "ggemm_sm90_grouped_"
                         : gemv                   ? "ggemm_sm90_decode_gemv_"
                         : e.family == KernelFamily::kDecodeGemvRouted ? "ggemm_sm90_decode_gemv_routed_"
                         : e.family == KernelFamily::kTokenMajor || e.family == KernelFamily::kTokenMajorSwiglu
                             ? "ggemm_sm90_token_major_"
                             : "ggemm_sm90_short_k_";
    const bool swiglu_family = e.family == KernelFamily::kPersistentSwiglu || e.family == KernelFamily::kTokenMajorSwiglu;
    EXPECT_EQ(swiglu_family, name.size() > 7 && name.substr(name.size() - 7) == "_swiglu") << name;
    EXPECT_EQ(name.rfind(prefix, 0), 0u) << name;
    EXPECT_EQ(e.family == KernelFamily::kShortKSplit, name.size() > 7 && name.substr(name.size() - 7) == "_split8")
        << name;
    EXPECT_EQ(e.family == KernelFamily::kPersistentStore, name.size() > 6 && name.substr(name.size() - 6) == "_store")
        << name;
    EXPECT_EQ(e.family == KernelFamily::kPersistentAccumulate,
              name.size() > 11 && name.substr(name.size() - 11) == "_accumulate")
        << name;
    EXPECT_TRUE(fatbin_names(e.arch, name)) << name << " is in no embedded " << arch_name(e.arch) << " fatbin";
  }
  // sm_90a: 76 persistent, their 76 store-only and 60 accumulate-only twins
  // (test above), 2 operand x 3 output dtypes x 3
  // short-K tiles, x 2 split tiles; sm_100a: 2 x 3 dtypes x 2 layouts x 9.
  EXPECT_EQ((per_family[{Arch::kSm90a, KernelFamily::kPersistent}]), 76);
  EXPECT_EQ((per_family[{Arch::kSm90a, KernelFamily::kPersistentStore}]), 76);
  EXPECT_EQ((per_family[{Arch::kSm90a, KernelFamily::kPersistentAccumulate}]), 60);
  EXPECT_EQ((per_family[{Arch::kSm90a, KernelFamily::kShortK}]), 18);
  EXPECT_EQ((per_family[{Arch::kSm90a, KernelFamily::kShortKSplit}]), 12);
  // SwiGLU-only: 2 operand x 2 16-bit output dtypes, tile_m 256.
  EXPECT_EQ((per_family[{Arch::kSm90a, KernelFamily::kPersistentSwiglu}]), 4);
  // Decode GEMV: 2 operand x 3 output dtypes x tiles 1 (at three and four
  // CTAs an SM), 2, 4, on each architecture.
  EXPECT_EQ((per_family[{Arch::kSm90a, KernelFamily::kDecodeGemv}]), 24);
  EXPECT_EQ((per_family[{Arch::kSm100a, KernelFamily::kDecodeGemv}]), 24);
  // The MoE layer's routed twins (sm_90a): 2 dtypes x the four tiles.
  EXPECT_EQ((per_family[{Arch::kSm90a, KernelFamily::kDecodeGemvRouted}]), 8);
  // Token-major: 2 operand x 2 16-bit output dtypes.
  EXPECT_EQ((per_family[{Arch::kSm90a, KernelFamily::kTokenMajor}]), 4);
  EXPECT_EQ((per_family[{Arch::kSm90a, KernelFamily::kTokenMajorSwiglu}]), 4);
  EXPECT_EQ((per_family[{Arch::kSm100a, KernelFamily::kPersistent}]), 108);
}


// The routing's chunks (runtime/launch_moe.cpp): kRouteThreads x a power of
// two slots (each scatter warp a whole run), at most kMaxChunkSlots (its
// 16-bit counters); one slot a scatter thread, so one chunk and one launch
// up to 512 slots, until there would be more than 128 chunks; then no more
// than 128 while a chunk can still grow; every slot in a chunk; and a
// workspace holding the count matrix, never empty.
TEST(MoeRouteChunks, WholeRunsFewChunksEverySlotCovered) {
  for (int64_t slots : std::initializer_list<int64_t>{0, 1, 33, 511, 512, 513, 4096, 32768, 65536, 65537, 2097152,
                                                      2097153, int64_t(1) << 30}) {
    SCOPED_TRACE("slots " + std::to_string(slots));
    const RouteChunks c = route_chunks(slots);
    const uint32_t per_thread = c.chunk_slots / moe::kRouteThreads;
    EXPECT_EQ(c.chunk_slots % moe::kRouteThreads, 0u);
    EXPECT_EQ(per_thread & (per_thread - 1), 0u);
    EXPECT_LE(c.chunk_slots, moe::kMaxChunkSlots);
    EXPECT_EQ(int64_t(c.num_chunks), (slots + c.chunk_slots - 1) / c.chunk_slots);
    if (slots <= 128 * int64_t(moe::kRouteThreads)) EXPECT_EQ(c.chunk_slots, moe::kRouteThreads);
    if (c.chunk_slots < moe::kMaxChunkSlots) EXPECT_LE(c.num_chunks, 128u);
    const RouteScratchLayout w = route_scratch_layout(slots, 128);
    EXPECT_GE(w.bytes, size_t(4) * 128 * std::max<uint32_t>(c.num_chunks, 1));
  }
}

}  // namespace
}  // namespace ggemm
