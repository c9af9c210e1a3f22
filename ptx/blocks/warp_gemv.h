// The pieces of a warp-wide GEMV shared by the sm_90a decode GEMV
// (ptx/sm90/decode_gemv.cuh) and the MoE layer's decode down projection
// (ptx/moe/decode_down.cuh): each lane multiplies its own 8-element stretches
// of a few weight rows, then the warp sums the lanes' partial sums.
#pragma once
#include <cstdint>

#include "../instr/arch.h"

#if defined(__CUDACC__)
namespace ggemm {

// A 16-byte load that leaves L1 to the activations (every weight byte is
// read once).
GGEMM_DEVICE uint4 load_streaming_16(const void *p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

// Sums V values (a power of two) over the warp's 32 lanes: each step (lane
// bit Off, from 16 down) halves the N values a lane holds, keeping the half
// its lane bit selects and adding the partner's copy of it; once one is
// left, the remaining steps add it across the lanes. Lane l then holds in
// v[0 .. V/32) the sums of value indices (l >> (5 - log2 V)) for V <= 32,
// or V/32 * l + j for V > 32. (Recursive, so every count is a constant and
// v stays in registers.)
template <int N = 0, int Off = 16, int V>
GGEMM_DEVICE void warp_reduce_scatter(float (&v)[V], uint32_t lane) {
  constexpr int kHeld = N == 0 ? V : N;
  if constexpr (Off >= 1) {
    if constexpr (kHeld > 1) {
      const bool upper = (lane & uint32_t(Off)) != 0;
#pragma unroll
      for (int i = 0; i < kHeld / 2; ++i) {
        const float send = upper ? v[i] : v[i + kHeld / 2];
        const float keep = upper ? v[i + kHeld / 2] : v[i];
        v[i] = keep + __shfl_xor_sync(0xffffffffu, send, Off);
      }
      warp_reduce_scatter<kHeld / 2, Off / 2>(v, lane);
    } else {
      v[0] += __shfl_xor_sync(0xffffffffu, v[0], Off);
      warp_reduce_scatter<1, Off / 2>(v, lane);
    }
  }
}

}  // namespace ggemm
#endif
