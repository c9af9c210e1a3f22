// Checked mode (ggemm_set_device_status): the kernels look at the device-side
// routing arrays the host cannot see without a synchronisation and report
// what is malformed as bits of one device word. The kernels compute safely
// whatever the arrays hold (the scheduler clamps offsets and treats ids out
// of range as inactive); checked mode only makes such input visible.
#pragma once
#include <cstdint>

#include "../instr/arch.h"
#include "tile_scheduler.h"

namespace ggemm {

// The bits, equal to the C ABI's GGEMM_DEVICE_FAULT_* values.
enum : uint32_t {
  kFaultOffsetsNotMonotone = 1u,  // a_offsets[0] != 0 or a_offsets[g + 1] < a_offsets[g]
  kFaultOffsetPastM = 2u,         // a_offsets[g + 1] > M
  kFaultIdOutOfRange = 4u,        // an active group's id < -1 or >= the expert (adapter) count
  kFaultActiveCount = 8u,         // expert_usage_stats[1] > num_groups
  kFaultIndexOutOfRange = 16u,    // a gather (a_row_index) or combine index outside its rows
  kFaultWeightNotFinite = 32u,    // a routing weight is NaN or infinite
};

// The faults of active group g (g < the walked group count). One group's
// check reads a_offsets[g], a_offsets[g + 1] and ids[g] only, so a warp can
// check groups side by side; host-device, so the CPU tests run it too.
// first_offset_implicit: a_offsets[0] is not there (the call gave group
// ends) and counts as 0.
GGEMM_HOST_DEVICE inline uint32_t group_faults(const uint32_t *a_offsets, const int32_t *ids, uint32_t g,
                                               uint32_t m, uint32_t num_experts, bool first_offset_implicit = false) {
  const uint32_t lo = g == 0 && first_offset_implicit ? 0u : a_offsets[g], hi = a_offsets[g + 1];
  uint32_t f = 0;
  if ((g == 0 && lo != 0) || hi < lo) f |= kFaultOffsetsNotMonotone;
  if (hi > m) f |= kFaultOffsetPastM;
  const int32_t id = ids[g];
  if (id < -1 || (id >= 0 && uint32_t(id) >= num_experts)) f |= kFaultIdOutOfRange;
  return f;
}

// The fault of the active count itself.
GGEMM_HOST_DEVICE constexpr uint32_t active_count_faults(uint32_t usage_stats_active, uint32_t num_groups) {
  return usage_stats_active > num_groups ? kFaultActiveCount : 0u;
}

#if defined(__CUDACC__)
// ORs a warp's faults into the checked-mode word: one atomic a warp, by its
// first lane, none when there is nothing to report or checked mode is off
// (device_status null). Every lane of the warp calls it, converged.
GGEMM_DEVICE void report_warp_faults(uint32_t *device_status, uint32_t faults) {
  faults = __reduce_or_sync(0xffffffffu, faults);
  if (device_status && faults && threadIdx.x % 32 == 0) atomicOr(device_status, faults);
}

// Gather on load: one warp of each CTA checks its share of the grouped rows'
// source indices (rows [0, the walked groups' end), as far as M; rows in no
// group are never read). A few loads per lane on a full GPU.
template <typename Params>
GGEMM_DEVICE void check_gather_warp(const Params &p) {
  const uint32_t lane = threadIdx.x % 32;
  const uint32_t walked = active_groups(p.usage_stats[1], p.num_groups);
  // The walk's rows end where the largest stated end does, clamped to M
  // (its clamp keeps the ends non-decreasing): with decreasing offsets the
  // last group's end would leave rows it reads unchecked. a_offsets[0] is
  // never read.
  uint32_t end = 0;
  for (uint32_t g = lane; g < walked; g += 32) end = max(end, p.a_offsets[g + 1]);
  end = __reduce_max_sync(0xffffffffu, end);
  const uint32_t grouped = end < p.m ? end : p.m;
  uint32_t f = 0;
  for (uint32_t r = blockIdx.x * 32 + lane; r < grouped; r += gridDim.x * 32)
    if (uint32_t(p.a_row_index[r]) >= p.gather_rows) f = kFaultIndexOutOfRange;
  f = __reduce_or_sync(0xffffffffu, f);
  if (lane == 0 && f) atomicOr(p.device_status, f);
}

// One warp checks every walked group and ORs the faults it found into
// *p.device_status (once, by lane 0; nothing is written when all is well).
// Four groups per lane are in flight at once: 128 groups cost about one
// memory latency.
template <typename Params>
GGEMM_DEVICE void check_routing_warp(const Params &p) {
  const uint32_t lane = threadIdx.x % 32;
  const uint32_t stated = p.usage_stats[1];
  const uint32_t walked = stated < p.num_groups ? stated : p.num_groups;
  uint32_t f = lane == 0 ? active_count_faults(stated, p.num_groups) : 0u;
#pragma unroll 4
  for (uint32_t g = lane; g < walked; g += 32)
    f |= group_faults(p.a_offsets, p.expert_ids, g, p.m, p.num_experts, p.first_offset_implicit != 0);
  f = __reduce_or_sync(0xffffffffu, f);
  if (lane == 0 && f) atomicOr(p.device_status, f);
}
#endif

}  // namespace ggemm
