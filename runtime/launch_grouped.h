// Enqueues one launch of a grouped GEMM kernel. Every public operation
// (grouped_matmul, lora_shrink_qkv, lora_expand_qkv) is described as a
// GroupedLaunch: the same kernels, differing only in which activation plane a
// segment reads and where a segment's outputs go.
#pragma once
#include "ggemm.h"
#include "ptx/moe/moe_params.h"
#include "runtime/device.h"
#include "runtime/plan.h"

namespace ggemm {

// Where segment s's outputs go: output (m, n) is element
// m * ld + (n - col_offset) of base; the view is rows x width elements.
struct OutputViewDesc {
  void *base;
  int64_t ld, col_offset, rows, width;
};

struct GroupedLaunch {
  const char *op;      // for GGEMM_DEBUG
  GroupedShape shape;  // what the plan is made from
  int64_t num_experts;
  const void *a;
  int64_t a_rows;                // M, 3 * M with activation planes, or the gather's source rows
  const int32_t *a_row_index;    // gather on load: [M] source rows of A (shape.gather); null = row m
  const void *b;
  OutputViewDesc views[3];
  const uint32_t *a_offsets;     // [0] is never read (group 0 starts at row 0)
  bool first_offset_implicit;    // a_offsets = group_ends - 1: [0] is not the call's memory
  const int32_t *expert_ids;
  const uint32_t *usage_stats;
  uint32_t *device_status;  // checked mode (ggemm_set_device_status); null = off
  const float *row_scale;
  float alpha;
  const ggemm_config *config;  // validated by the API layer; null = automatic
  // The MoE layer's routing, made by the kernel in its prologue instead of
  // read from a_offsets, expert_ids, usage_stats and a_row_index (which its
  // CTA 0 writes): the decode GEMV only (routes_in_prologue). Null = off.
  const moe::MoeRouteParams *route = nullptr;
};

// `l` describes validated arguments with m > 0.
Status launch_grouped(Device &dev, const GroupedLaunch &l, CUstream stream);

// Whether plan `k`'s kernel can run launch `l`: a store-only or
// accumulate-only twin only its epilogue without gather
// (KernelPlan::serves), and a gather index exactly when the shape gathers.
// INTERNAL_ERROR otherwise: the planner never makes such a pair, and every
// launch checks before it fills the kernel's parameters.
Status check_kernel_serves(const GroupedLaunch &l, const KernelPlan &k);

// Whether the call's plan runs it on the decode GEMV, which can route the
// MoE layer's slots in its prologue (GroupedLaunch::route) when they fit one
// warp (runtime/launch_moe.h, routes_in_one_warp).
StatusOr<bool> routes_in_prologue(const Device &dev, const GroupedLaunch &l);

}  // namespace ggemm
