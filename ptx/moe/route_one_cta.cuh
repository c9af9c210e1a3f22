// The MoE routing of one chunk in one CTA, a thread a slot (at most
// kRouteThreads slots and kOneCtaMaxExperts local experts): the stable
// counting sort of route.cuh with one load of the slots, five barriers and
// no second walk. Used by the routing launch of such calls
// (ggemm_moe_route_one_cta) and by the layer's routing fused with its token
// copy (ggemm_moe_route_expand: every CTA routes the slots for itself, CTA 0
// writes the routing arrays, then all copy).
//
//   1. Thread s loads slot s's id and weight and makes its key; meanwhile
//      the table is cleared.
//   2. Each warp's match.any groups its lanes by expert; a group's lowest
//      lane stores the group's lane mask at masks[warp][expert]: no
//      atomics, one writer a word.
//   3. A thread an expert: its rows are the popcounts of its 16 masks; one
//      block scan over the experts of (rows, has rows) packed in one word
//      gives each expert's first sorted row and group.
//   4. Slot s's row = its expert's first row + its expert's lanes in the
//      warps before its own (their masks' popcounts) + its lanes below it in
//      its own warp (the stable order).
//
// The scatter pass (route.cuh) at one chunk made two walks of the slots
// through 16-bit counters, a 16-warp prefix a thread an expert, two block
// scans and a block maximum: ~10 barriers, ~5.5 us of the layer's call at
// 64 tokens of top-8 (H200, docs/performance.md).
#pragma once
#include <cstdint>

#include "expand_rows.cuh"
#include "route.cuh"

namespace ggemm::moe {

#if defined(__CUDACC__)

// Routes the call's slots (p.num_slots <= kRouteThreads, p.local_experts <=
// kOneCtaMaxExperts) with the CTA's kRouteThreads threads. Dynamic shared
// memory: kOneCtaBytesPerExpert an expert. Where `writes`, the routing
// arrays and checked mode's faults are written (one CTA of the grid).
// Returns this thread's slot's sorted row (-1: no row, or no slot) and sets
// *routed_rows to the call's routed rows.
GGEMM_DEVICE int32_t route_one_cta(const MoeRouteParams &p, bool writes, uint32_t *routed_rows) {
  extern __shared__ __align__(16) uint32_t one_cta_smem[];
  __shared__ uint32_t scratch[kRouteWarps];
  __shared__ uint32_t most_rows;
  const uint32_t tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const uint32_t experts = p.local_experts;
  uint32_t *masks = one_cta_smem;                                 // [kRouteWarps][experts]
  uint32_t *first_row = one_cta_smem + kRouteWarps * experts;     // [experts]

  // 1. The slot's id and weight in flight while the table is cleared.
  const bool has_slot = tid < p.num_slots;
  const int32_t id = has_slot ? p.topk_ids[tid] : -1;
  const float weight = has_slot ? p.topk_weights[tid] : 0.f;
  for (uint32_t i = tid; i < kRouteWarps * experts / 4; i += blockDim.x)
    reinterpret_cast<uint4 *>(masks)[i] = make_uint4(0, 0, 0, 0);
  if (tid == 0) most_rows = 0;
  uint32_t faults = 0;
  const uint32_t e = route_key(id, weight, p.num_experts, p.first_expert, experts, &faults);
  __syncthreads();

  // 2. The warp's groups of lanes by expert.
  const uint32_t peers = __match_any_sync(0xffffffffu, e);
  if (e != kNoExpert && lane == uint32_t(__ffs(peers) - 1)) masks[warp * experts + e] = peers;
  if (writes) report_warp_faults(p.device_status, faults);
  __syncthreads();

  // 3. A thread an expert: its rows, then the scan of (rows, has rows).
  uint32_t rows = 0;
  if (tid < experts) {
#pragma unroll
    for (uint32_t w = 0; w < kRouteWarps; ++w) rows += __popc(masks[w * experts + tid]);
  }
  const uint32_t warp_most = __reduce_max_sync(0xffffffffu, rows);
  if (lane == 0 && warp_most > 0) atomicMax(&most_rows, warp_most);
  // Rows and groups each stay below 2^16 (at most kRouteThreads).
  uint32_t sums = 0;
  const uint32_t before = cta_exclusive_scan(rows | (rows > 0 ? 1u << 16 : 0u), scratch, &sums);
  if (tid < experts) {
    first_row[tid] = before & 0xffffu;
    if (writes && rows > 0) {
      p.a_offsets[before >> 16] = before & 0xffffu;
      p.expert_ids[before >> 16] = int32_t(tid);
    }
  }
  __syncthreads();

  // 4. The slot's sorted row.
  int32_t row = -1;
  if (e != kNoExpert) {
    uint32_t earlier = __popc(peers & ((1u << lane) - 1u));
    for (uint32_t w = 0; w < warp; ++w) earlier += __popc(masks[w * experts + e]);
    row = int32_t(first_row[e] + earlier);
    if (writes) {
      p.row_token[row] = int32_t(tid / p.top_k);
      p.row_slot[row] = int32_t(tid);
      p.row_weight[row] = weight;
    }
  }
  if (writes && has_slot) p.slot_row[tid] = row;
  const RouteTotals totals{sums & 0xffffu, sums >> 16, most_rows};
  if (writes) fill_past_routed(p, totals, tid, blockDim.x);
  *routed_rows = totals.rows;
  return row;
}

// The routing launch of a one-CTA call.
GGEMM_DEVICE void route_one_cta_only(const MoeRouteParams &p) {
  uint32_t routed_rows;
  route_one_cta(p, true, &routed_rows);
}

// The layer's routing and token copy in one launch (a one-CTA call): every
// CTA routes the slots into shared memory, CTA 0 also into the routing
// arrays; then the CTAs copy each token's row to its sorted rows
// (expand_rows.cuh's copy, reading the rows from shared memory). The
// e.routed_rows and e.slot_row arrays are not read: CTA 0 is still writing
// them.
GGEMM_DEVICE void route_expand(const MoeRouteParams &r, const MoeExpandParams &e) {
  __shared__ int32_t slot_rows[kRouteThreads];
  uint32_t routed_rows;
  slot_rows[threadIdx.x] = route_one_cta(r, blockIdx.x == 0, &routed_rows);
  __syncthreads();
  copy_token_rows(
      e, [&](size_t slot) { return slot_rows[slot]; }, [&] { return min(routed_rows, e.out_rows); });
}

#endif  // __CUDACC__

}  // namespace ggemm::moe
