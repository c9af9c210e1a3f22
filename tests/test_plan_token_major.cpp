// The sm_90a token-major kernel (ptx/sm90/token_major_gemm.cuh): the prefill
// calls it takes (store, row scale, SwiGLU), its tile and shared memory, what
// stays on the other kernels (the LoRA shrink included), and its names.
#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <string>

#include "plan_test_support.h"
#include "ptx/sm90/token_major_layout.h"

namespace ggemm::testing {
namespace {

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

// Its output segments keep the prefill shrink off the token-major kernel
// (one segment only), whatever N: at R 64 (N = 192, a token-major tile's
// width) the persistent kernel's store twin at tile_m 64 runs it. (Planned
// without the segments, as the plan tests once did, it would take the
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

}  // namespace
}  // namespace ggemm::testing
