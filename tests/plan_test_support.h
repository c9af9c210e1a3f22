// plan_test_support.h: what the plan tests (tests/test_plan_*.cpp) share:
// the call as they describe it (CallShape, and the plan's test request it
// carries), the plans as the C ABI would report them (sm_90a's persistent
// kernel, sm_100a's, the tile of a family), the devices (H200, B200) and
// the calls they plan (shape(), the LoRA shrink), the sm_90a stage count
// written from the documented shared-memory layout, and the checks more
// than one file makes (refused overrides, a kernel table against its rule,
// every accepted config).
#pragma once
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <set>
#include <string>
#include <vector>

#include "api/src/errors.h"
#include "api/src/validate.h"
#include "ggemm.h"
#include "ptx/sm90/smem_layout.h"
#include "runtime/device.h"
#include "runtime/kernel_registry.h"
#include "runtime/plan.h"

// A macro argument as a string literal (the kernel tables' names).
#define GGEMM_TEST_STR2(x) #x
#define GGEMM_TEST_STR(x) GGEMM_TEST_STR2(x)

namespace ggemm::testing {

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

inline PlanRequest request_of(const CallShape &s) {
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
inline ggemm_status take_plan(const StatusOr<KernelPlan> &plan, KernelPlan *out) {
  if (!plan.ok()) return report(plan.status());
  *out = plan.value();
  return GGEMM_STATUS_SUCCESS;
}

// The sm_90a persistent kernel's plan (short-K kernels, the decode GEMV and
// the token-major kernel ruled out).
inline ggemm_status sm90_persistent_plan(const DeviceProps &props, const CallShape &s, const ggemm_config *o,
                                         KernelPlan *out) {
  GGEMM_TRY(validate_config(o, Arch::kSm90a, props, s));
  PlanRequest r = request_of(s);
  r.sm90_short_k = PlanRequest::Sm90ShortK::kNever;
  r.decode_gemv = PlanRequest::DecodeGemv::kNever;
  r.sm90_token_major = PlanRequest::TokenMajor::kNever;
  return take_plan(plan_sm90(props, s, o, r), out);
}

// The sm_100a persistent kernel's plan (the decode GEMV ruled out).
inline ggemm_status sm100_plan(const DeviceProps &props, const CallShape &s, const ggemm_config *o, KernelPlan *out) {
  GGEMM_TRY(validate_config(o, Arch::kSm100a, props, s));
  PlanRequest r;
  r.decode_gemv = PlanRequest::DecodeGemv::kNever;
  return take_plan(plan_sm100(props, s, o, r), out);
}

// The tile of the sm_90a plan when it is of `family`, else 0.
inline uint32_t sm90_tile_if(KernelFamily family, const DeviceProps &props, const CallShape &s, const ggemm_config *o) {
  StatusOr<KernelPlan> plan = plan_sm90(props, s, o, request_of(s));
  return plan.ok() && plan->family() == family ? plan->tile_m : 0u;
}
inline uint32_t sm90_short_k_split_tile(const DeviceProps &props, const CallShape &s, const ggemm_config *o) {
  return sm90_tile_if(KernelFamily::kShortKSplit, props, s, o);
}

// A kernel's name in the registry, or "" when it has none.
inline std::string registry_name(Arch arch, KernelFamily family, ggemm_dtype a, ggemm_dtype c, bool kmajor,
                                 uint32_t tile_m, uint32_t cluster) {
  const KernelEntry *e = find_kernel(arch, family, a, c, kmajor, tile_m, cluster);
  return e ? e->name : "";
}

// ---- devices and calls -------------------------------------------------------

inline DeviceProps h200() {
  DeviceProps p;
  p.ordinal = 0;
  p.cc_major = 9;
  p.cc_minor = 0;
  p.sm_count = 132;
  p.smem_optin = 232448;
  return p;
}

inline DeviceProps b200() {
  DeviceProps p;
  p.ordinal = 0;
  p.cc_major = 10;
  p.cc_minor = 0;
  p.sm_count = 148;
  p.smem_optin = 232448;
  return p;
}

inline CallShape shape(int64_t max_rows = 4096, int64_t k = 4096, bool transpose_b = true,
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

inline ggemm_config blank_config() {
  ggemm_config c{};
  c.struct_size = sizeof(ggemm_config);
  return c;
}

// The LoRA shrink of Llama-3-8B's Q/K/V (hidden 4096 = K, 3R = N), M
// tokens over `groups` adapters, as ggemm_lora_shrink_qkv plans it: its 3R
// columns cut into the Q, K and V views (segments the store spans).
inline CallShape lora_shrink(int64_t m, int64_t rank, int64_t groups = 8, int64_t k = 4096) {
  CallShape s = shape(m, k);
  s.m = m;
  s.n = 3 * rank;
  s.split0 = rank, s.split1 = 2 * rank;
  s.num_groups = groups;
  s.max_rows_per_group = m;
  return s;
}

// ---- sm_90a stages from shared memory, as documented -----------------------------

inline constexpr uint32_t kSmemSizes[] = {232448 /* H200 */, 166912 /* A100-like */, 101376, 49152, 0};
inline constexpr uint32_t kTileMs[] = {16, 32, 64, 128, 256};
inline constexpr uint32_t kSwizzles[] = {128, 64, 32};

// Written from the documented layout, not from smem_layout.h: per stage a
// 128-row weight tile and a tile_m-row token tile, each row one swizzle span,
// plus two 8-byte barriers (full, empty); once, the epilogue staging (two
// warpgroups of min(tile_m, 128) x 64 outputs), the accumulate epilogue's 4
// full and 4 empty 8-byte barriers, and 1024 bytes to align the dynamic base. The staging
// (128B-swizzled) starts on a 1024-byte boundary after the stages.
// With k_slices > 1 a stage holds k_slices slices of K: the weight box's
// slices packed at box_rows rows apiece plus the (128 - box_rows) rows a
// 128-row tile reaches past the last one, and k_slices token tiles.
inline uint64_t bytes_for(uint64_t stages, uint64_t tile_m, uint64_t swizzle, uint64_t out_bytes, uint64_t buffers = 1,
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
inline constexpr uint64_t kHandoffBytes = 8 * (2 * 8 + 32);
inline uint64_t sm90_static_bytes(uint64_t tile_m) {
  return kHandoffBytes + (tile_m > 128 ? tile_m * 4 + 2 * 8 : 0);
}

inline uint32_t expected_stages(uint32_t tile_m, uint32_t swizzle, uint32_t out_bytes, uint32_t smem, uint32_t buffers = 1,
                                uint32_t k_slices = 1, uint32_t box_rows = 128) {
  uint32_t s = 0;
  while (s < sm90::kMaxStages &&
         bytes_for(s + 1, tile_m, swizzle, out_bytes, buffers, k_slices, box_rows) + sm90_static_bytes(tile_m) <= smem)
    ++s;
  return s;
}

// ---- checks more than one file makes ----------------------------------------------

// Runs choose_sm90_config with `o` and expects `status` and a message naming
// every string in `names`.
inline void expect_refused(const ggemm_config &o, const CallShape &s, ggemm_status status,
                           std::vector<std::string> names) {
  clear_error();
  KernelPlan cfg;
  EXPECT_EQ(sm90_persistent_plan(h200(), s, &o, &cfg), status);
  const std::string msg = ggemm_last_error_message();
  for (const std::string &n : names) EXPECT_NE(msg.find(n), std::string::npos) << "message \"" << msg << "\" lacks \"" << n << "\"";
}

// A short-K kernel table against its rule: `names_for(a, c, &names)` adds
// the kernel the rule picks for each of its calls with operands `a` and
// outputs `c`; each must be in `table`, and each kernel of `table` must be
// some call's.
inline void expect_rule_and_table_agree(
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

// The table's *_name token for each dtype.
inline const char *label(ggemm_dtype t) {
  return t == GGEMM_DTYPE_BF16 ? "bf16" : t == GGEMM_DTYPE_FP16 ? "fp16" : "fp32";
}

// Every config a caller can ask for on a 4096 x 4096 call, over operand and
// output dtypes, weight layouts, `epilogues`, tile_m and cluster size (the
// config field `cluster` points at: cluster_m or cta_group), passed to
// `each` with the call's shape when `plan` accepts it.
inline void for_each_accepted_config(std::initializer_list<ggemm_epilogue> epilogues, int ggemm_config::*cluster,
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

}  // namespace ggemm::testing
