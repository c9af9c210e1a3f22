// fp32 <-> an output element (bf16, fp16 or fp32), one at a time, rounding
// to nearest even: for the epilogues that write outputs element by element
// (sm_100a's, from tensor memory; sm_90a's short-K kernel's staging).
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
};
template <>
struct OutConvert<__half> {
  GGEMM_DEVICE static __half from(float v) { return __float2half_rn(v); }
  GGEMM_DEVICE static float to(__half v) { return __half2float(v); }
};
template <>
struct OutConvert<float> {
  GGEMM_DEVICE static float from(float v) { return v; }
  GGEMM_DEVICE static float to(float v) { return v; }
};

}  // namespace ggemm
#endif
