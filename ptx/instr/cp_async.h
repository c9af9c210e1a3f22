// cp.async: 16- and 4-byte copies from global into shared memory without passing
// through registers, with zero fill (PTX ISA 9.7.9.25 "cp.async").
#pragma once
#include "arch.h"

#if defined(__CUDACC__)
namespace ggemm::ptx {

// cp.async.cg.shared.global, 16 bytes: copies `src` to `smem_addr` without
// passing through registers, or writes 16 zero bytes when `valid` is false
// (src-size 0: nothing is read; src must still be a mapped address).
GGEMM_DEVICE void cp_async_16(uint32_t smem_addr, const void *src, bool valid) {
#if GGEMM_SM90A || GGEMM_SM100A
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(smem_addr), "l"(src), "r"(valid ? 16 : 0)
               : "memory");
#else
  GGEMM_ARCH_TRAP("cp.async");
#endif
}

// cp.async.ca.shared.global, 4 bytes (the 4- and 8-byte forms exist only
// with .ca): one float or index into shared memory, or 4 zero bytes when
// `valid` is false (src-size 0: nothing is read).
GGEMM_DEVICE void cp_async_4(uint32_t smem_addr, const void *src, bool valid) {
#if GGEMM_SM90A || GGEMM_SM100A
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(smem_addr), "l"(src), "r"(valid ? 4 : 0)
               : "memory");
#else
  GGEMM_ARCH_TRAP("cp.async");
#endif
}

// Waits until every cp.async this thread issued has landed (other threads'
// copies need a barrier after it).
GGEMM_DEVICE void cp_async_wait_all() {
#if GGEMM_SM90A || GGEMM_SM100A
  asm volatile("cp.async.wait_all;" ::: "memory");
#else
  GGEMM_ARCH_TRAP("cp.async");
#endif
}

}  // namespace ggemm::ptx
#endif
