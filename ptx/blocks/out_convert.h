// fp32 <-> an output element (bf16, fp16 or fp32), rounding to nearest
// even: one at a time (from / to) for the epilogues that write outputs
// element by element (sm_100a's, from tensor memory; sm_90a's short-K
// kernel's staging), and for 16-bit outputs two at a time in one 32-bit
// register (pack2 / unpack2: low half first) for the sm_90a epilogue's
// stmatrix / ldmatrix fragments.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "../instr/arch.h"

#if defined(__CUDACC__)
namespace ggemm {

template <typename T>
struct OutConvert;
template <>
struct OutConvert<__nv_bfloat16> {
  GGEMM_DEVICE static __nv_bfloat16 from(float v) { return __float2bfloat16_rn(v); }
  GGEMM_DEVICE static float to(__nv_bfloat16 v) { return __bfloat162float(v); }
  GGEMM_DEVICE static uint32_t pack2(float lo, float hi) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t *>(&v);
  }
  GGEMM_DEVICE static float2 unpack2(uint32_t v) { return __bfloat1622float2(*reinterpret_cast<__nv_bfloat162 *>(&v)); }
};
template <>
struct OutConvert<__half> {
  GGEMM_DEVICE static __half from(float v) { return __float2half_rn(v); }
  GGEMM_DEVICE static float to(__half v) { return __half2float(v); }
  GGEMM_DEVICE static uint32_t pack2(float lo, float hi) {
    __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<uint32_t *>(&v);
  }
  GGEMM_DEVICE static float2 unpack2(uint32_t v) { return __half22float2(*reinterpret_cast<__half2 *>(&v)); }
};
template <>
struct OutConvert<float> {
  GGEMM_DEVICE static float from(float v) { return v; }
  GGEMM_DEVICE static float to(float v) { return v; }
};

}  // namespace ggemm
#endif
