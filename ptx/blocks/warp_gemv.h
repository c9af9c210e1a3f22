// The pieces of a warp-wide GEMV shared by the sm_90a decode GEMV
// (ptx/sm90/decode_gemv.cuh) and the MoE layer's decode down projection
// (ptx/moe/decode_down.cuh): each lane multiplies its own 8-element stretches
// of a few weight rows, then the warp sums the lanes' partial sums.
#pragma once
#include <cstdint>

#include "../instr/arch.h"
#include "../instr/global_v4.h"
#include "out_convert.h"

#if defined(__CUDACC__)
namespace ggemm {

// A weight row's 16 bytes (8 elements), streamed past L1: L1 is left to the
// activations, which every warp reads again.
GGEMM_DEVICE uint4 load_streaming_16(const void *p) { return ptx::ld_global_nc_no_allocate_v4(p); }

// The 8 elements of a 16-byte vector of Elem (bf16 or fp16), widened to
// fp32 pairs, low half first.
template <typename Elem>
GGEMM_DEVICE void unpack8(const uint4 &v, float2 (&f)[4]) {
  const uint32_t words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int q = 0; q < 4; ++q) f[q] = OutConvert<Elem>::unpack2(words[q]);
}

// acc plus the products of a 16-byte vector of weights with 8 activations
// (already widened), in element order.
template <typename Elem>
GGEMM_DEVICE float dot8(const uint4 &w, const float2 (&x)[4], float acc) {
  float2 wf[4];
  unpack8<Elem>(w, wf);
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    acc = fmaf(wf[q].x, x[q].x, acc);
    acc = fmaf(wf[q].y, x[q].y, acc);
  }
  return acc;
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
