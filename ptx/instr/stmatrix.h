// stmatrix: warp-wide stores of 8x8 b16 matrices from mma fragment layout
// (PTX ISA 9.7.14.5.16 "stmatrix"; the loads are in ldmatrix.h).
#pragma once
#include "arch.h"

#if defined(__CUDACC__)
namespace ggemm::ptx {

// stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 — one whole warp. Register
// r_i holds this lane's fragment of matrix i (two b16: row lane/4, columns
// 2*(lane%4) and +1); lane l gives the shared address of row l%8 of matrix
// l/8. `.trans` stores each matrix transposed: address row j receives
// fragment column j.
GGEMM_DEVICE void stmatrix_x4_trans(uint32_t smem_row_addr, uint32_t r0, uint32_t r1, uint32_t r2,
                                    uint32_t r3) {
#if GGEMM_SM90A || GGEMM_SM100A
  asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};" ::"r"(
                   smem_row_addr),
               "r"(r0), "r"(r1), "r"(r2), "r"(r3)
               : "memory");
#else
  GGEMM_ARCH_TRAP("stmatrix");
#endif
}

// stmatrix.sync.aligned.m8n8.x4.shared.b16 — as stmatrix_x4_trans, but
// each matrix stored as it is: address row j receives fragment row j (the
// token-major kernel, whose accumulator rows are output rows).
GGEMM_DEVICE void stmatrix_x4(uint32_t smem_row_addr, uint32_t r0, uint32_t r1, uint32_t r2, uint32_t r3) {
#if GGEMM_SM90A || GGEMM_SM100A
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};" ::"r"(smem_row_addr), "r"(r0),
               "r"(r1), "r"(r2), "r"(r3)
               : "memory");
#else
  GGEMM_ARCH_TRAP("stmatrix");
#endif
}

}  // namespace ggemm::ptx
#endif
