// sm_90a's short-K kernels: when the plan takes a call (K up to 128 unsplit;
// the split kernel, K over 8 CTAs of a cluster, up to 4096), its tile, its
// shared-memory layout and occupancy, and its names in the kernel tables.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "plan_test_support.h"
#include "ptx/sm90/kernel_table.h"
#include "ptx/sm90/short_k_layout.h"

namespace ggemm::testing {
namespace {

// The short-K kernel's tile for the call, else 0.
uint32_t sm90_short_k_tile(const DeviceProps &props, const CallShape &s, const ggemm_config *o) {
  return sm90_tile_if(KernelFamily::kShortK, props, s, o);
}

// A short-K kernel's name in the registry (registry_name).
std::string sm90_short_k_kernel_name(ggemm_dtype a, ggemm_dtype c, uint32_t tile_m, uint32_t splits = 1) {
  return registry_name(Arch::kSm90a, splits > 1 ? KernelFamily::kShortKSplit : KernelFamily::kShortK, a, c, true,
                       tile_m, splits);
}

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

#define GGEMM_TEST_COLLECT_SHORT_K_SPLIT_NAME(E, EN, O, ON, TM)                                     \
  names.insert("ggemm_sm90_short_k_" GGEMM_TEST_STR(EN) "_" GGEMM_TEST_STR(ON) "_kmajor_m" GGEMM_TEST_STR(TM) \
               "_split8");

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

}  // namespace
}  // namespace ggemm::testing
