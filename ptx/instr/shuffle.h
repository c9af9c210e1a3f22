// shfl.sync.idx with a source lane that is a constant plus bits of the
// caller's own lane (PTX ISA 9.7.9.6, "shfl.sync": the c operand's segment
// mask selects the lane bits kept from the caller).
#pragma once
#include "arch.h"

#if defined(__CUDACC__)
namespace ggemm::ptx {

// Every lane of the (full) warp receives `v` of lane
// (laneid & KeepBits) | (lane & ~KeepBits). With `lane` a constant after
// unrolling, ptxas encodes both lane and mask as immediates: no lane index
// is computed (__shfl_sync(v, c + laneid % 4) rebuilds laneid % 4 from
// %tid.x for every shuffle when registers are short).
template <uint32_t KeepBits>
GGEMM_DEVICE float shfl_idx_keep_lane_bits(float v, uint32_t lane) {
  static_assert(KeepBits < 32, "a 5-bit lane mask");
  float r;
  asm("shfl.sync.idx.b32 %0, %1, %2, %3, 0xffffffff;" : "=f"(r) : "f"(v), "r"(lane), "n"((KeepBits << 8) | 0x1f));
  return r;
}

}  // namespace ggemm::ptx
#endif
