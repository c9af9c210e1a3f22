// The MoE layer's own launches (routing, the token copy, the decode down
// projection, combine) and the layout of the workspaces that ggemm_moe_route
// and ggemm_moe_ffn carve their scratch and intermediates from. The grouped
// matmuls between them are GroupedLaunches (runtime/launch_grouped.h).
#pragma once
#include <cstddef>
#include <cstdint>

#include "ggemm.h"
#include "ptx/moe/moe_params.h"
#include "runtime/device.h"
#include "runtime/status.h"

namespace ggemm {

// Every piece of a workspace starts on this boundary (the matrices need 16
// bytes for TMA; 256 keeps each piece on its own cache lines).
constexpr size_t kMoeWorkspaceAlign = 256;

// How the routing splits the T * k slots: chunks of chunk_slots
// (kRouteThreads x a power of two, up to kMaxChunkSlots): one slot a
// scatter thread (one chunk, one launch, up to 512 slots), longer chunks
// only past 128 of them, so each scatter CTA's read of the whole
// [num_chunks][local_experts] count matrix stays short.
struct RouteChunks {
  uint32_t chunk_slots;
  uint32_t num_chunks;
};
RouteChunks route_chunks(int64_t num_slots);

// The routing's scratch, as byte offsets from the workspace's start.
struct RouteScratchLayout {
  size_t chunk_counts;
  size_t bytes;  // what ggemm_moe_route_workspace_size reports
};
RouteScratchLayout route_scratch_layout(int64_t num_slots, int64_t local_experts);

// ggemm_moe_ffn's workspace: the routing's outputs, its scratch, then the
// intermediates h [T * k, I] and y [T * k, H] (dtype), as byte offsets.
struct FfnWorkspaceLayout {
  size_t a_offsets, expert_ids, usage_stats, row_token, row_slot, row_weight, slot_row;
  size_t route_scratch;  // a RouteScratchLayout from here
  size_t h, y;
  size_t bytes;  // what ggemm_moe_ffn_workspace_size reports
};
FfnWorkspaceLayout ffn_workspace_layout(int64_t num_tokens, int64_t top_k, int64_t hidden, int64_t intermediate,
                                        int64_t local_experts, ggemm_dtype dtype);

// One routing call; the arguments have passed validation.
struct MoeRouteLaunch {
  int64_t num_tokens, top_k, num_experts, first_expert, local_experts;
  const int32_t *topk_ids;
  const float *topk_weights;
  uint32_t *a_offsets;
  int32_t *expert_ids;
  uint32_t *usage_stats;
  int32_t *row_token, *row_slot;
  float *row_weight;
  int32_t *slot_row;
  void *workspace;           // route_scratch_layout(...).bytes, 16-byte aligned
  uint32_t *device_status;   // checked mode; null = off
};
// One launch up to 32 slots (one warp), or up to one chunk of slots (one
// CTA: a thread a slot where the local experts are at most
// moe::kOneCtaMaxExperts, ptx/moe/route_one_cta.cuh, else the scatter pass
// alone), else two: the count pass, then the scatter pass
// (ptx/moe/route.cuh).
Status launch_moe_route(Device &dev, const MoeRouteLaunch &l, CUstream stream);

// The routing kernels' parameters for a call (scratch carved from
// l.workspace), and whether it routes in one warp, a lane a slot
// (ptx/moe/route.cuh, route_one_warp): what the decode GEMV can do in its
// prologue instead of a launch of its own (GroupedLaunch::route).
moe::MoeRouteParams route_params(const MoeRouteLaunch &l);
bool routes_in_one_warp(const MoeRouteLaunch &l);
// Whether it routes in one CTA, a thread a slot (ptx/moe/route_one_cta.cuh):
// what launch_moe_route_expand needs.
bool routes_in_one_cta(const MoeRouteLaunch &l);

// One combine call; the arguments have passed validation and T > 0.
struct MoeCombineLaunch {
  ggemm_dtype y_dtype, out_dtype;
  int64_t num_tokens, top_k, hidden, y_rows;
  const void *y;
  const int32_t *slot_row;
  void *out;
  bool accumulate;
  uint32_t *device_status;
};
Status launch_moe_combine(Device &dev, const MoeCombineLaunch &l, CUstream stream);

// One expand copy (ggemm_moe_ffn past its fused gather): out[slot_row[t *
// top_k + j], :] = x[t, :] for each slot with a row; rows of row_bytes (a
// multiple of 16).
struct MoeExpandLaunch {
  int64_t num_tokens, top_k, out_rows, row_bytes;
  const void *x;
  const int32_t *slot_row;
  void *out;
  const uint32_t *routed_rows;  // device word: the routing's row count (rows past it get zeros)
  uint32_t *device_status;
};
Status launch_moe_expand_rows(Device &dev, const MoeExpandLaunch &l, CUstream stream);

// The routing and the expand copy in one launch, for a call that
// routes_in_one_cta (ptx/moe/route_one_cta.cuh, route_expand): each CTA
// routes the slots for itself, one writes the routing arrays, all copy. The
// copy's slot_row and routed_rows are the routing's own arrays (not read).
Status launch_moe_route_expand(Device &dev, const MoeRouteLaunch &route, const MoeExpandLaunch &expand,
                               CUstream stream);

// One decode down projection with the combine (ggemm_moe_ffn at decode,
// ptx/moe/decode_down.cuh): out[t] = the sum over t's routed slots of
// weight * (w_down[expert] times h[slot_row]); T > 0, top_k <=
// moe::kDecodeDownMaxTopK, hidden a multiple of moe::kDecodeDownCols.
struct MoeDecodeDownLaunch {
  ggemm_dtype dtype;  // bf16 or fp16: h, w_down, out
  int64_t num_tokens, top_k, hidden, intermediate, h_rows;
  int64_t num_experts, first_expert, local_experts;
  const void *h, *w_down;
  const int32_t *topk_ids;
  const float *topk_weights;
  const int32_t *slot_row;
  void *out;
};
Status launch_moe_decode_down(Device &dev, const MoeDecodeDownLaunch &l, CUstream stream);

// Threads that sum one token's row (a power of two, 8..128): one per
// 16-byte vector of the row where the row is short.
uint32_t combine_team_threads(int64_t hidden);

}  // namespace ggemm
