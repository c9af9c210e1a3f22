// The one table of sm_100a grouped-GEMM instantiations. The kernels files
// expand it into extern "C" entry points named
//   ggemm_sm100_grouped_<in>_<out>_<kmajor|mnmajor>_m<tile_m>
// (with _cta2 appended for cta_group 2), and the runtime into its registry of
// the same entry points (runtime/kernel_registry.cpp), both through
// GGEMM_SM100_KERNEL_NAME.
//
// X(elem, elem_name, out, out_name, layout, layout_name, tile_m, cta_group, suffix)
// where suffix is empty for cta_group 1 and _cta2 for cta_group 2.
//
// Every tile_m 16..256 for every output dtype and epilogue: the epilogue
// reads the accumulators from tensor memory 8 columns at a time, so neither
// fp32 output nor accumulate runs out of registers at 256 (unlike sm_90a,
// GGEMM_SM90_MAX_TILE_M). cta_group 2 splits the tokens between the two CTAs
// of a pair, so it starts at tile_m 32 (16 tokens each).
#pragma once

#define GGEMM_SM100_KERNEL_NAME(EN, ON, LN, TM, SUF) ggemm_sm100_grouped_##EN##_##ON##_##LN##_m##TM##SUF

#define GGEMM_SM100_FOR_TILE_M(X, E, EN, O, ON, L, LN) \
  X(E, EN, O, ON, L, LN, 16, 1, )                      \
  X(E, EN, O, ON, L, LN, 32, 1, )                      \
  X(E, EN, O, ON, L, LN, 64, 1, )                      \
  X(E, EN, O, ON, L, LN, 128, 1, )                     \
  X(E, EN, O, ON, L, LN, 256, 1, )                     \
  X(E, EN, O, ON, L, LN, 32, 2, _cta2)                 \
  X(E, EN, O, ON, L, LN, 64, 2, _cta2)                 \
  X(E, EN, O, ON, L, LN, 128, 2, _cta2)                \
  X(E, EN, O, ON, L, LN, 256, 2, _cta2)

#define GGEMM_SM100_FOR_LAYOUT(X, E, EN, O, ON)                                 \
  GGEMM_SM100_FOR_TILE_M(X, E, EN, O, ON, ggemm::WeightLayout::kKMajor, kmajor) \
  GGEMM_SM100_FOR_TILE_M(X, E, EN, O, ON, ggemm::WeightLayout::kMNMajor, mnmajor)

#define GGEMM_SM100_FOR_OUT(X, E, EN)                          \
  GGEMM_SM100_FOR_LAYOUT(X, E, EN, __nv_bfloat16, bf16)        \
  GGEMM_SM100_FOR_LAYOUT(X, E, EN, __half, fp16)               \
  GGEMM_SM100_FOR_LAYOUT(X, E, EN, float, fp32)

// Split by operand dtype so the two halves compile in parallel.
#define GGEMM_SM100_KERNELS_BF16(X) GGEMM_SM100_FOR_OUT(X, __nv_bfloat16, bf16)
#define GGEMM_SM100_KERNELS_FP16(X) GGEMM_SM100_FOR_OUT(X, __half, fp16)
#define GGEMM_SM100_KERNELS(X) GGEMM_SM100_KERNELS_BF16(X) GGEMM_SM100_KERNELS_FP16(X)

// The decode GEMV (ptx/sm90/decode_gemv.cuh, plain CUDA with no sm_90a
// instruction), built for sm_100a too: the same instantiations as sm_90a's
// (GGEMM_SM90_DECODE_GEMV_KERNELS), named ggemm_sm100_decode_gemv_*.
#define GGEMM_SM100_DECODE_GEMV_KERNEL_NAME(EN, ON, TM, CTAS) ggemm_sm100_decode_gemv_##EN##_##ON##_kmajor_m##TM##_c##CTAS

// The smallest tile_m instantiated for a cta_group.
#define GGEMM_SM100_MIN_TILE_M(cta_group) ((cta_group) == 2 ? 32 : 16)
