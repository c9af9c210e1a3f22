// ldmatrix: warp-wide loads of 8x8 b16 matrices into mma fragment layout
// (PTX ISA 9.7.14.5.15 "ldmatrix"; the stores are in stmatrix.h).
#pragma once
#include "arch.h"

#if defined(__CUDACC__)
namespace ggemm::ptx {

// ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 — the inverse of
// stmatrix_x4_trans: with the same lane addresses it returns the fragments
// that stmatrix_x4_trans would have stored there. One whole warp.
GGEMM_DEVICE void ldmatrix_x4_trans(uint32_t smem_row_addr, uint32_t &r0, uint32_t &r1, uint32_t &r2,
                                    uint32_t &r3) {
#if GGEMM_SM90A || GGEMM_SM100A
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(smem_row_addr)
               : "memory");
#else
  GGEMM_ARCH_TRAP("ldmatrix");
#endif
}

// ldmatrix.sync.aligned.m8n8.x4.shared.b16: lane l gives the address of row
// l % 8 of matrix l / 8; register r_i receives this lane's fragment of matrix
// i (row lane / 4, columns 2 * (lane % 4) and + 1). One whole warp.
GGEMM_DEVICE void ldmatrix_x4(uint32_t smem_row_addr, uint32_t &r0, uint32_t &r1, uint32_t &r2, uint32_t &r3) {
#if GGEMM_SM90A || GGEMM_SM100A
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(smem_row_addr)
               : "memory");
#else
  GGEMM_ARCH_TRAP("ldmatrix");
#endif
}

// The same for two matrices (lanes 0..15 give the addresses).
GGEMM_DEVICE void ldmatrix_x2(uint32_t smem_row_addr, uint32_t &r0, uint32_t &r1) {
#if GGEMM_SM90A || GGEMM_SM100A
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];"
               : "=r"(r0), "=r"(r1)
               : "r"(smem_row_addr)
               : "memory");
#else
  GGEMM_ARCH_TRAP("ldmatrix");
#endif
}

}  // namespace ggemm::ptx
#endif
