// The decode GEMV: which calls it takes (groups that fit one tile, calls of
// at most 64 rows whose tiles fill their waves), its tile and CTAs an SM, the
// MoE layer's routed twins, its names in the registry, and the same rule on
// sm_100a.
#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "plan_test_support.h"
#include "runtime/plan_rules.h"

namespace ggemm::testing {
namespace {

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

}  // namespace
}  // namespace ggemm::testing
