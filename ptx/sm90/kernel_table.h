// The one table of sm_90a grouped-GEMM instantiations. The kernels files
// expand it into extern "C" entry points (kernels_entry.cuh) and the runtime
// into its registry of the same entry points (runtime/kernel_registry.cpp),
// both naming each one with the macros below; a CPU test checks that every
// plan the rules make names a kernel of this table and that every kernel is
// reachable.
//
// X(elem, elem_name, out, out_name, layout, layout_name, tile_m, cluster_m, suffix)
#pragma once

// The entry points' names.
#define GGEMM_SM90_KERNEL_NAME(EN, ON, LN, TM, SUF) ggemm_sm90_grouped_##EN##_##ON##_##LN##_m##TM##SUF
#define GGEMM_SM90_STORE_KERNEL_NAME(EN, ON, LN, TM, SUF) GGEMM_SM90_KERNEL_NAME(EN, ON, LN, TM, SUF##_store)
#define GGEMM_SM90_ACCUMULATE_KERNEL_NAME(EN, ON, LN, TM, SUF) GGEMM_SM90_KERNEL_NAME(EN, ON, LN, TM, SUF##_accumulate)
#define GGEMM_SM90_SWIGLU_KERNEL_NAME(EN, ON, TM) ggemm_sm90_grouped_##EN##_##ON##_kmajor_m##TM##_swiglu
#define GGEMM_SM90_SHORT_K_KERNEL_NAME(EN, ON, TM) ggemm_sm90_short_k_##EN##_##ON##_kmajor_m##TM
#define GGEMM_SM90_SHORT_K_SPLIT_KERNEL_NAME(EN, ON, TM) ggemm_sm90_short_k_##EN##_##ON##_kmajor_m##TM##_split8
#define GGEMM_SM90_DECODE_GEMV_KERNEL_NAME(EN, ON, TM, CTAS) ggemm_sm90_decode_gemv_##EN##_##ON##_kmajor_m##TM##_c##CTAS
#define GGEMM_SM90_DECODE_GEMV_ROUTED_KERNEL_NAME(EN, ON, TM, CTAS) \
  ggemm_sm90_decode_gemv_routed_##EN##_##ON##_kmajor_m##TM##_c##CTAS
#define GGEMM_SM90_TOKEN_MAJOR_KERNEL_NAME(EN, ON) ggemm_sm90_token_major_##EN##_##ON##_kmajor_m128
#define GGEMM_SM90_TOKEN_MAJOR_SWIGLU_KERNEL_NAME(EN, ON) ggemm_sm90_token_major_##EN##_##ON##_kmajor_m128_swiglu

// tile_m 16..128 for every output dtype; 256 only for 16-bit outputs (fp32
// staging of 256 tokens x 128 features is 128 KB and the m256 fp32 epilogue
// spills registers). Clusters of two (cluster_m 2, suffix _cl2: the pair
// shares the token tile through TMA multicast) for the prefill tiles, 128
// and 256, where the token tile is the larger operand.
#define GGEMM_SM90_FOR_TILE_M_TO_128(X, E, EN, O, ON, L, LN) \
  X(E, EN, O, ON, L, LN, 16, 1, )                            \
  X(E, EN, O, ON, L, LN, 32, 1, )                            \
  X(E, EN, O, ON, L, LN, 64, 1, )                            \
  X(E, EN, O, ON, L, LN, 128, 1, )                           \
  X(E, EN, O, ON, L, LN, 128, 2, _cl2)
#define GGEMM_SM90_FOR_TILE_M_TO_256(X, E, EN, O, ON, L, LN) \
  GGEMM_SM90_FOR_TILE_M_TO_128(X, E, EN, O, ON, L, LN)       \
  X(E, EN, O, ON, L, LN, 256, 1, )                           \
  X(E, EN, O, ON, L, LN, 256, 2, _cl2)

#define GGEMM_SM90_FOR_LAYOUT(X, TILES, E, EN, O, ON)       \
  TILES(X, E, EN, O, ON, ggemm::WeightLayout::kKMajor, kmajor)     \
  TILES(X, E, EN, O, ON, ggemm::WeightLayout::kMNMajor, mnmajor)

// Every output dtype: the 16-bit ones with the tiles TILES16 lists, fp32 up
// to 128.
#define GGEMM_SM90_FOR_OUT_WITH(X, TILES16, E, EN)                          \
  GGEMM_SM90_FOR_LAYOUT(X, TILES16, E, EN, __nv_bfloat16, bf16)             \
  GGEMM_SM90_FOR_LAYOUT(X, TILES16, E, EN, __half, fp16)                    \
  GGEMM_SM90_FOR_LAYOUT(X, GGEMM_SM90_FOR_TILE_M_TO_128, E, EN, float, fp32)
#define GGEMM_SM90_FOR_OUT(X, E, EN) GGEMM_SM90_FOR_OUT_WITH(X, GGEMM_SM90_FOR_TILE_M_TO_256, E, EN)

// Each entry of these tables is two kernels, three up to tile_m 128
// (grouped_gemm.cuh, Sm90Epilogues): one serving every epilogue and gather
// on load (the MoE calls), named as above; one compiled for the store
// epilogue alone (suffix _store: plain grouped GEMMs, the LoRA shrink and
// expand) and one for the accumulate epilogue alone (suffix _accumulate,
// the tiles that have it: the LoRA expand adding into the base
// projection), whose short calls the other paths' code slows. The runtime
// takes the _store or _accumulate kernel for a call with that epilogue and
// no gather.
// Split by operand dtype so the halves compile in parallel (the _store and
// _accumulate kernels in fatbins of their own, kernels_store_<dtype>.cu,
// kernels_accumulate_<dtype>.cu).
#define GGEMM_SM90_KERNELS_BF16(X) GGEMM_SM90_FOR_OUT(X, __nv_bfloat16, bf16)
#define GGEMM_SM90_KERNELS_FP16(X) GGEMM_SM90_FOR_OUT(X, __half, fp16)
#define GGEMM_SM90_KERNELS(X) GGEMM_SM90_KERNELS_BF16(X) GGEMM_SM90_KERNELS_FP16(X)
// The tiles with the accumulate epilogue (GGEMM_SM90_TILE_M_SUPPORTS_ACCUMULATE).
#define GGEMM_SM90_ACCUMULATE_KERNELS_BF16(X) \
  GGEMM_SM90_FOR_OUT_WITH(X, GGEMM_SM90_FOR_TILE_M_TO_128, __nv_bfloat16, bf16)
#define GGEMM_SM90_ACCUMULATE_KERNELS_FP16(X) GGEMM_SM90_FOR_OUT_WITH(X, GGEMM_SM90_FOR_TILE_M_TO_128, __half, fp16)
#define GGEMM_SM90_ACCUMULATE_KERNELS(X) GGEMM_SM90_ACCUMULATE_KERNELS_BF16(X) GGEMM_SM90_ACCUMULATE_KERNELS_FP16(X)

// The persistent kernels with their epilogue fixed to SwiGLU (suffix
// _swiglu): tile_m 256, K-major weights, 16-bit outputs, no cluster. The
// general tile_m 256 kernels have no SwiGLU path (even a trivial extra
// epilogue path spills them), and the MoE gate_up projection of prefill
// wants tile_m 256.
// W(elem, elem_name, out, out_name, tile_m)
#define GGEMM_SM90_SWIGLU_FOR_OUT(W, E, EN) \
  W(E, EN, __nv_bfloat16, bf16, 256)        \
  W(E, EN, __half, fp16, 256)
#define GGEMM_SM90_SWIGLU_KERNELS_BF16(W) GGEMM_SM90_SWIGLU_FOR_OUT(W, __nv_bfloat16, bf16)
#define GGEMM_SM90_SWIGLU_KERNELS_FP16(W) GGEMM_SM90_SWIGLU_FOR_OUT(W, __half, fp16)
#define GGEMM_SM90_SWIGLU_KERNELS(W) GGEMM_SM90_SWIGLU_KERNELS_BF16(W) GGEMM_SM90_SWIGLU_KERNELS_FP16(W)

// The short-K kernels (short_k_gemm.cuh): K-major weights, every output
// dtype, token tiles of 8 to 32 (ptx/sm90/short_k_layout.h; at 64 the
// accumulators spill under the launch bounds).
// Y(elem, elem_name, out, out_name, tile_m)
#define GGEMM_SM90_SHORT_K_FOR_TILE_M(Y, E, EN, O, ON) \
  Y(E, EN, O, ON, 8)                                    \
  Y(E, EN, O, ON, 16)                                   \
  Y(E, EN, O, ON, 32)
// The split short-K kernels (a cluster of kShortKSplit CTAs a tile, each a
// slice of K; decode calls with K up to kShortKSplitMaxK): token tiles of 8
// and 16. Name suffix _split8.
#define GGEMM_SM90_SHORT_K_SPLIT_FOR_TILE_M(Y, E, EN, O, ON) \
  Y(E, EN, O, ON, 8)                                          \
  Y(E, EN, O, ON, 16)
// Every output dtype, each with the token tiles TILES lists.
#define GGEMM_SM90_SHORT_K_FOR_OUT(Y, TILES, E, EN) \
  TILES(Y, E, EN, __nv_bfloat16, bf16)              \
  TILES(Y, E, EN, __half, fp16)                     \
  TILES(Y, E, EN, float, fp32)
#define GGEMM_SM90_SHORT_K_KERNELS_BF16(Y) \
  GGEMM_SM90_SHORT_K_FOR_OUT(Y, GGEMM_SM90_SHORT_K_FOR_TILE_M, __nv_bfloat16, bf16)
#define GGEMM_SM90_SHORT_K_KERNELS_FP16(Y) GGEMM_SM90_SHORT_K_FOR_OUT(Y, GGEMM_SM90_SHORT_K_FOR_TILE_M, __half, fp16)
#define GGEMM_SM90_SHORT_K_KERNELS(Y) GGEMM_SM90_SHORT_K_KERNELS_BF16(Y) GGEMM_SM90_SHORT_K_KERNELS_FP16(Y)
#define GGEMM_SM90_SHORT_K_SPLIT_KERNELS_BF16(Y) \
  GGEMM_SM90_SHORT_K_FOR_OUT(Y, GGEMM_SM90_SHORT_K_SPLIT_FOR_TILE_M, __nv_bfloat16, bf16)
#define GGEMM_SM90_SHORT_K_SPLIT_KERNELS_FP16(Y) \
  GGEMM_SM90_SHORT_K_FOR_OUT(Y, GGEMM_SM90_SHORT_K_SPLIT_FOR_TILE_M, __half, fp16)
#define GGEMM_SM90_SHORT_K_SPLIT_KERNELS(Y) \
  GGEMM_SM90_SHORT_K_SPLIT_KERNELS_BF16(Y) GGEMM_SM90_SHORT_K_SPLIT_KERNELS_FP16(Y)

// The decode GEMV kernels (decode_gemv.cuh): K-major weights, every output
// dtype, tiles of 1, 2 and 4 rows (kDecodeGemvMaxTileM), each with launch
// bounds of three CTAs an SM, and tiles of 1 row with four as well
// (decode_gemv_layout.h says why both).
// Y(elem, elem_name, out, out_name, tile_m, ctas_per_sm)
#define GGEMM_SM90_DECODE_GEMV_FOR_TILE_M(Y, E, EN, O, ON) \
  Y(E, EN, O, ON, 1, 3)                                    \
  Y(E, EN, O, ON, 1, 4)                                    \
  Y(E, EN, O, ON, 2, 3)                                    \
  Y(E, EN, O, ON, 4, 3)
#define GGEMM_SM90_DECODE_GEMV_KERNELS_BF16(Y) \
  GGEMM_SM90_SHORT_K_FOR_OUT(Y, GGEMM_SM90_DECODE_GEMV_FOR_TILE_M, __nv_bfloat16, bf16)
#define GGEMM_SM90_DECODE_GEMV_KERNELS_FP16(Y) \
  GGEMM_SM90_SHORT_K_FOR_OUT(Y, GGEMM_SM90_DECODE_GEMV_FOR_TILE_M, __half, fp16)
#define GGEMM_SM90_DECODE_GEMV_KERNELS(Y) GGEMM_SM90_DECODE_GEMV_KERNELS_BF16(Y) GGEMM_SM90_DECODE_GEMV_KERNELS_FP16(Y)
// The same tiles routing the MoE layer's slots in their prologue (the
// layer's gate_up at decode: its output dtype is its activations'), sm_90a
// only.
#define GGEMM_SM90_DECODE_GEMV_ROUTED_KERNELS_BF16(Y) \
  GGEMM_SM90_DECODE_GEMV_FOR_TILE_M(Y, __nv_bfloat16, bf16, __nv_bfloat16, bf16)
#define GGEMM_SM90_DECODE_GEMV_ROUTED_KERNELS_FP16(Y) GGEMM_SM90_DECODE_GEMV_FOR_TILE_M(Y, __half, fp16, __half, fp16)
#define GGEMM_SM90_DECODE_GEMV_ROUTED_KERNELS(Y) \
  GGEMM_SM90_DECODE_GEMV_ROUTED_KERNELS_BF16(Y) GGEMM_SM90_DECODE_GEMV_ROUTED_KERNELS_FP16(Y)

// The token-major ping-pong kernels (token_major_gemm.cuh): K-major
// weights, 16-bit outputs, tiles of 128 tokens x 192 features; the same
// list makes the store / row-scale kernels and the SwiGLU ones.
// T(elem, elem_name, out, out_name)
#define GGEMM_SM90_TOKEN_MAJOR_FOR_OUT(T, E, EN) \
  T(E, EN, __nv_bfloat16, bf16)                 \
  T(E, EN, __half, fp16)
#define GGEMM_SM90_TOKEN_MAJOR_KERNELS_BF16(T) GGEMM_SM90_TOKEN_MAJOR_FOR_OUT(T, __nv_bfloat16, bf16)
#define GGEMM_SM90_TOKEN_MAJOR_KERNELS_FP16(T) GGEMM_SM90_TOKEN_MAJOR_FOR_OUT(T, __half, fp16)
#define GGEMM_SM90_TOKEN_MAJOR_KERNELS(T) GGEMM_SM90_TOKEN_MAJOR_KERNELS_BF16(T) GGEMM_SM90_TOKEN_MAJOR_KERNELS_FP16(T)

// Whether a tile_m offers GGEMM_EPILOGUE_ACCUMULATE (256 has no registers left for it).
#define GGEMM_SM90_TILE_M_SUPPORTS_ACCUMULATE(tile_m) ((tile_m) < 256)

// Largest tile_m instantiated for an output of `out_bytes` bytes per element.
#define GGEMM_SM90_MAX_TILE_M(out_bytes) ((out_bytes) == 4 ? 128 : 256)

// The smallest tile_m with a cluster_m 2 kernel.
#define GGEMM_SM90_MIN_CLUSTER_TILE_M 128
