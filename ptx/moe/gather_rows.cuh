// The MoE layer's gather copy (ggemm_moe_ffn past the fused gather's rows):
// out[m, :] = x[row_index[m], :], the routed rows in expert order for the
// ungathered gate_up GEMM; a row whose index is -1 (past the routed rows)
// gets zeros. Memory bound (each token's row is read k times, mostly from
// L2; every routed row is written once), so each warp copies a row with
// kGatherVectorsInFlight 16-byte loads in flight a lane before it stores
// any: the combine kernel at k = 1, which this replaced, kept one.
#pragma once
#include <cstdint>

#include "../blocks/routing_check.h"
#include "moe_params.h"

namespace ggemm::moe {

#if defined(__CUDACC__)

GGEMM_DEVICE uint4 load_vector(const uint4 *at) {
  uint4 v;
  asm volatile("ld.global.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(at));
  return v;
}

// Streaming (evict-first in L2): the copies, larger than L2 at prefill,
// would otherwise evict the token rows that the other k - 1 copies of each
// token still read.
GGEMM_DEVICE void store_vector(uint4 *at, const uint4 &v) {
  asm volatile("st.global.cs.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(at), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");
}

GGEMM_DEVICE void gather_rows(const MoeGatherParams &p) {
  const uint32_t lane = threadIdx.x % 32;
  const uint32_t warps = gridDim.x * (blockDim.x / 32);
  uint32_t faults = 0;
  for (uint32_t m = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32; m < p.rows; m += warps) {
    // An index outside [-1, x_rows) reads nothing and is reported.
    const int32_t r = p.row_index[m];
    const bool inside = r >= 0 && uint32_t(r) < p.x_rows;
    if (!inside && r != -1) faults |= kFaultIndexOutOfRange;
    const uint4 *src = static_cast<const uint4 *>(p.x) + size_t(inside ? r : 0) * p.row_vectors;
    uint4 *dst = static_cast<uint4 *>(p.out) + size_t(m) * p.row_vectors;
    for (uint32_t v0 = lane; v0 < p.row_vectors; v0 += 32 * kGatherVectorsInFlight) {
      // All of a lane's loads in flight before its first store. Plain
      // (coherent) loads: ptxas may not move a store above a load that might
      // read what it writes; with __ldg's non-coherent loads, or left to
      // itself, it interleaved them, two or three loads in flight.
      uint4 v[kGatherVectorsInFlight];
#pragma unroll
      for (uint32_t i = 0; i < kGatherVectorsInFlight; ++i) {
        const uint32_t at = v0 + 32 * i;
        v[i] = make_uint4(0, 0, 0, 0);
        if (inside && at < p.row_vectors) v[i] = load_vector(src + at);
      }
#pragma unroll
      for (uint32_t i = 0; i < kGatherVectorsInFlight; ++i)
        if (v0 + 32 * i < p.row_vectors) store_vector(dst + v0 + 32 * i, v[i]);
    }
  }
  faults = __reduce_or_sync(0xffffffffu, faults);
  if (p.device_status && faults && lane == 0) atomicOr(p.device_status, faults);
}

#endif  // __CUDACC__

}  // namespace ggemm::moe
