// Expands the sm_100a kernel table into extern "C" __global__ entry points.
// Included by one .cu per operand dtype (kernels_bf16.cu, kernels_fp16.cu),
// compiled for sm_100a only and embedded as fatbins in libggemm; the runtime
// loads them on compute capability 10.0 devices.
#pragma once
#include "../sm90/decode_gemv.cuh"
#include "../sm90/kernel_table.h"
#include "grouped_gemm.cuh"
#include "kernel_table.h"

#define GGEMM_SM100_DEFINE_KERNEL(E, EN, O, ON, L, LN, TM, CG, SUFFIX)                                  \
  extern "C" __global__ void __launch_bounds__(ggemm::sm100::kThreads, 1)                                 \
      GGEMM_SM100_KERNEL_NAME(EN, ON, LN, TM, SUFFIX)(const __grid_constant__ ggemm::GroupedGemmParams p) { \
    ggemm::sm100::GroupedGemmSm100<E, O, TM, L, CG>::run(p);                                              \
  }

// The decode GEMV (its parameters are the sm_90a kernels', a superset of
// GroupedGemmParams: it reads the operands through their pointers).
#define GGEMM_SM100_DEFINE_DECODE_GEMV_KERNEL(E, EN, O, ON, TM, CTAS)                                           \
  extern "C" __global__ void __launch_bounds__(ggemm::sm90::kDecodeGemvThreads, CTAS)                           \
      GGEMM_SM100_DECODE_GEMV_KERNEL_NAME(EN, ON, TM, CTAS)(const __grid_constant__ ggemm::Sm90GroupedParams p) { \
    ggemm::sm90::DecodeGemvSm90<E, O, TM>::run(p);                                                               \
  }
