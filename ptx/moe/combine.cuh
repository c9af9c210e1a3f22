// The MoE combine (ggemm_moe_combine): out[t, :] = the fp32 sum, in slot
// order, of the rows y[slot_row[t * k + j], :], rounded once (or added to an
// fp32 out). Memory bound: a team of threads per token reads the token's k
// rows in 16-byte vectors (8 elements), each thread a few vectors, all its
// rows' loads issued before they are summed.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "../blocks/out_convert.h"
#include "../blocks/routing_check.h"
#include "moe_params.h"

namespace ggemm::moe {

#if defined(__CUDACC__)

// Eight 16-bit elements of a 16-byte vector, widened to fp32 and added to
// acc, and back (OutConvert's two-at-a-time conversions: low half first).
template <typename Y>
struct Vec8 {
  GGEMM_DEVICE static void add(const uint4 &v, float *acc) {
    const uint32_t words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float2 f = OutConvert<Y>::unpack2(words[i]);
      acc[2 * i] += f.x, acc[2 * i + 1] += f.y;
    }
  }
  GGEMM_DEVICE static uint4 pack(const float *acc) {
    return make_uint4(OutConvert<Y>::pack2(acc[0], acc[1]), OutConvert<Y>::pack2(acc[2], acc[3]),
                      OutConvert<Y>::pack2(acc[4], acc[5]), OutConvert<Y>::pack2(acc[6], acc[7]));
  }
};

// Stores eight fp32 sums into `out` (element offset `at`): rounded once to
// the y dtype, or as fp32, added to what is there when accumulating.
template <typename Y>
GGEMM_DEVICE void store_sum(void *out, size_t at, const float *acc, bool accumulate, Y *) {
  *reinterpret_cast<uint4 *>(static_cast<Y *>(out) + at) = Vec8<Y>::pack(acc);
}
GGEMM_DEVICE void store_sum(void *out, size_t at, const float *acc, bool accumulate, float *) {
  float4 *o = reinterpret_cast<float4 *>(static_cast<float *>(out) + at);
  float4 lo = make_float4(acc[0], acc[1], acc[2], acc[3]), hi = make_float4(acc[4], acc[5], acc[6], acc[7]);
  if (accumulate) {
    const float4 old_lo = o[0], old_hi = o[1];
    lo = make_float4(old_lo.x + lo.x, old_lo.y + lo.y, old_lo.z + lo.z, old_lo.w + lo.w);
    hi = make_float4(old_hi.x + hi.x, old_hi.y + hi.y, old_hi.z + hi.z, old_hi.w + hi.w);
  }
  o[0] = lo, o[1] = hi;
}

// Loads in flight per thread before they are summed (rows of one vector).
constexpr uint32_t kCombineRowsInFlight = 4;

template <typename Y, typename Out>
GGEMM_DEVICE void combine(const MoeCombineParams &p) {
  __shared__ int32_t rows[kCombineThreads / kMinCombineTeam][kMaxTopK];
  const uint32_t team = p.team_threads, teams = kCombineThreads / team;
  const uint32_t member = threadIdx.x % team, slot_team = threadIdx.x / team;
  const uint32_t token = blockIdx.x * teams + slot_team;
  const bool live = token < p.num_tokens;
  // The token's rows, each checked once: an index outside [-1, y_rows) reads
  // nothing and is reported.
  uint32_t faults = 0;
  if (live) {
    for (uint32_t j = member; j < p.top_k; j += team) {
      const int32_t r = p.slot_row[size_t(token) * p.top_k + j];
      const bool inside = r >= 0 && uint32_t(r) < p.y_rows;
      if (!inside && r != -1) faults |= kFaultIndexOutOfRange;
      rows[slot_team][j] = inside ? r : -1;
    }
  }
  report_warp_faults(p.device_status, faults);
  __syncthreads();
  if (!live) return;
  const uint32_t vectors = p.hidden / 8;
  const Y *y = static_cast<const Y *>(p.y);
  // CTA y of gridDim.y takes every gridDim.y-th step of team vectors.
  for (uint32_t v = member + blockIdx.y * team; v < vectors; v += team * gridDim.y) {
    float acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
    for (uint32_t j0 = 0; j0 < p.top_k; j0 += kCombineRowsInFlight) {
      uint4 loaded[kCombineRowsInFlight];
#pragma unroll
      for (uint32_t i = 0; i < kCombineRowsInFlight; ++i) {
        const int32_t r = j0 + i < p.top_k ? rows[slot_team][j0 + i] : -1;
        loaded[i] = r >= 0 ? __ldg(reinterpret_cast<const uint4 *>(y + size_t(r) * p.hidden) + v) : make_uint4(0, 0, 0, 0);
      }
      // Summed in slot order, from +0 (as the reference does).
#pragma unroll
      for (uint32_t i = 0; i < kCombineRowsInFlight; ++i)
        if (j0 + i < p.top_k && rows[slot_team][j0 + i] >= 0) Vec8<Y>::add(loaded[i], acc);
    }
    store_sum(p.out, size_t(token) * p.hidden + size_t(v) * 8, acc, p.accumulate != 0, static_cast<Out *>(nullptr));
  }
}

#endif  // __CUDACC__

}  // namespace ggemm::moe
