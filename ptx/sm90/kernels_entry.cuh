// Expands the kernel table into extern "C" __global__ entry points. Included
// by one .cu per operand dtype (kernels_bf16.cu, kernels_fp16.cu), which are
// compiled to device code only and embedded as fatbins in libggemm.
#pragma once
#include "decode_gemv.cuh"
#include "grouped_gemm.cuh"
#include "kernel_table.h"
#include "short_k_gemm.cuh"
#include "token_major_gemm.cuh"

// A persistent kernel's entry point NAME, compiled for EPILOGUES
// (Sm90Epilogues).
#define GGEMM_SM90_DEFINE_PERSISTENT(NAME, E, O, L, TM, CL, EPILOGUES)                            \
  extern "C" __global__ void __launch_bounds__(ggemm::sm90::kThreads, 1)                          \
      NAME(const __grid_constant__ ggemm::Sm90GroupedParams p) {                                  \
    ggemm::sm90::GroupedGemmSm90<E, O, TM, L, CL, ggemm::sm90::Sm90Epilogues::EPILOGUES>::run(p); \
  }

// The general persistent kernels and their store-only and accumulate-only
// twins (kernel_table.h).
#define GGEMM_SM90_DEFINE_KERNEL(E, EN, O, ON, L, LN, TM, CL, SUF) \
  GGEMM_SM90_DEFINE_PERSISTENT(GGEMM_SM90_KERNEL_NAME(EN, ON, LN, TM, SUF), E, O, L, TM, CL, kAny)
#define GGEMM_SM90_DEFINE_STORE_KERNEL(E, EN, O, ON, L, LN, TM, CL, SUF) \
  GGEMM_SM90_DEFINE_PERSISTENT(GGEMM_SM90_STORE_KERNEL_NAME(EN, ON, LN, TM, SUF), E, O, L, TM, CL, kStoreOnly)
#define GGEMM_SM90_DEFINE_ACCUMULATE_KERNEL(E, EN, O, ON, L, LN, TM, CL, SUF)                                    \
  GGEMM_SM90_DEFINE_PERSISTENT(GGEMM_SM90_ACCUMULATE_KERNEL_NAME(EN, ON, LN, TM, SUF), E, O, L, TM, CL, \
                               kAccumulateOnly)

// The SwiGLU-only persistent kernels (kernel_table.h).
#define GGEMM_SM90_DEFINE_SWIGLU_KERNEL(E, EN, O, ON, TM)                                                  \
  GGEMM_SM90_DEFINE_PERSISTENT(GGEMM_SM90_SWIGLU_KERNEL_NAME(EN, ON, TM), E, O, ggemm::WeightLayout::kKMajor, TM, 1, \
                               kSwigluOnly)

// Short-K kernels: up to kShortKMinBlocksPerSm CTAs an SM by registers (the
// runtime sizes the grid by it, runtime/launch_grouped.cpp).
#define GGEMM_SM90_DEFINE_SHORT_K_KERNEL(E, EN, O, ON, TM)                                                   \
  extern "C" __global__ void __launch_bounds__(ggemm::sm90::kShortKThreads, ggemm::sm90::kShortKMinBlocksPerSm) \
      GGEMM_SM90_SHORT_K_KERNEL_NAME(EN, ON, TM)(const __grid_constant__ ggemm::Sm90GroupedParams p) {     \
    ggemm::sm90::ShortKGroupedGemmSm90<E, O, TM>::run(p);                                                   \
  }
#define GGEMM_SM90_DEFINE_SHORT_K_SPLIT_KERNEL(E, EN, O, ON, TM)                                             \
  extern "C" __global__ void __launch_bounds__(ggemm::sm90::kShortKThreads, ggemm::sm90::kShortKMinBlocksPerSm) \
      GGEMM_SM90_SHORT_K_SPLIT_KERNEL_NAME(EN, ON, TM)(const __grid_constant__ ggemm::Sm90GroupedParams p) { \
    static_assert(ggemm::sm90::kShortKSplit == 8, "the entry points' names say _split8");                       \
    ggemm::sm90::ShortKGroupedGemmSm90<E, O, TM, ggemm::sm90::kShortKSplit>::run(p);                             \
  }

// Decode GEMV kernels: CTAS CTAs an SM by registers (the launch bounds).
#define GGEMM_SM90_DEFINE_DECODE_GEMV_KERNEL(E, EN, O, ON, TM, CTAS)                                            \
  extern "C" __global__ void __launch_bounds__(ggemm::sm90::kDecodeGemvThreads, CTAS)                           \
      GGEMM_SM90_DECODE_GEMV_KERNEL_NAME(EN, ON, TM, CTAS)(const __grid_constant__ ggemm::Sm90GroupedParams p) { \
    ggemm::sm90::DecodeGemvSm90<E, O, TM>::run(p);                                                               \
  }
#define GGEMM_SM90_DEFINE_DECODE_GEMV_ROUTED_KERNEL(E, EN, O, ON, TM, CTAS)                                  \
  extern "C" __global__ void __launch_bounds__(ggemm::sm90::kDecodeGemvThreads, CTAS)                        \
      GGEMM_SM90_DECODE_GEMV_ROUTED_KERNEL_NAME(EN, ON, TM, CTAS)(                                           \
          const __grid_constant__ ggemm::Sm90GroupedParams p) {                                              \
    ggemm::sm90::DecodeGemvSm90<E, O, TM, true>::run(p);                                                      \
  }

// Token-major ping-pong kernels.
#define GGEMM_SM90_DEFINE_TOKEN_MAJOR_KERNEL(E, EN, O, ON)                                                  \
  extern "C" __global__ void __launch_bounds__(ggemm::sm90::TokenMajorShape::kThreads, 1)                   \
      GGEMM_SM90_TOKEN_MAJOR_KERNEL_NAME(EN, ON)(const __grid_constant__ ggemm::Sm90GroupedParams p) {      \
    ggemm::sm90::TokenMajorGemmSm90<E, O, false>::run(p);                                                   \
  }
#define GGEMM_SM90_DEFINE_TOKEN_MAJOR_SWIGLU_KERNEL(E, EN, O, ON)                                           \
  extern "C" __global__ void __launch_bounds__(ggemm::sm90::TokenMajorShape::kThreads, 1)                   \
      GGEMM_SM90_TOKEN_MAJOR_SWIGLU_KERNEL_NAME(EN, ON)(const __grid_constant__ ggemm::Sm90GroupedParams p) { \
    ggemm::sm90::TokenMajorGemmSm90<E, O, true>::run(p);                                                    \
  }
