// Which sm_90a persistent kernel a plan names: every accepted config has a
// kernel in ptx/sm90/kernel_table.h and every kernel is reached; the
// store-only and accumulate-only twins take their calls and serve nothing
// else (and the launch refuses a call its kernel does not serve); SwiGLU
// takes its own kernel at tile_m 256.
#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <string>

#include "plan_test_support.h"
#include "ptx/sm90/kernel_table.h"
#include "runtime/launch_grouped.h"

namespace ggemm::testing {
namespace {

// Every name the table instantiates. Only the *_name and tile_m tokens are
// used; the type arguments (__nv_bfloat16, WeightLayout::...) are dropped, so
// no CUDA header is needed.
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

}  // namespace
}  // namespace ggemm::testing
