// mma.sync: warp-level tensor-core multiplies, m16n8k16 with fp32
// accumulators (PTX ISA 9.7.14.5.14 "mma.sync m16n8k16"; the fragments come
// from ldmatrix.h and cp_async.h). The short-K kernel
// (ptx/sm90/short_k_gemm.cuh) runs on these: its tiles are one multiply deep,
// so warp-synchronous MMAs without descriptors or barriers serve it best.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

#include "arch.h"

#if defined(__CUDACC__)
namespace ggemm::ptx {

// d += a * b for one m16n8k16 block, 16-bit operands (bf16 or fp16, as
// Elem), fp32 accumulators. a: the row-major 16x16 A fragment (a[0..3] as
// ldmatrix_x4 returns rows 0-7 / 8-15 at k 0-7, then at k 8-15); b: the
// column-major 16x8 B fragment (k 0-7, then k 8-15); d[0..1]: row lane / 4,
// columns 2 * (lane % 4) and + 1; d[2..3]: the same, row + 8.
template <typename Elem>
GGEMM_DEVICE void mma_m16n8k16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
#if GGEMM_SM90A || GGEMM_SM100A
  if constexpr (std::is_same_v<Elem, __nv_bfloat16>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
#else
  GGEMM_ARCH_TRAP("mma.sync");
#endif
}

}  // namespace ggemm::ptx
#endif
