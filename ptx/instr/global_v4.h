// 16-byte global loads and stores with explicit cache and coherence
// qualifiers (PTX ISA 9.7.9.8 "ld", 9.7.9.10 "st"), for the plain-CUDA
// kernels that stream rows: the decode GEMV and the MoE layer's copies.
#pragma once
#include <cstdint>

#include "arch.h"

#if defined(__CUDACC__)
namespace ggemm::ptx {

// ld.global.nc.L1::no_allocate: read-only data read once (streamed weights),
// past L1 so L1 keeps what is read again. Non-coherent: only for data no
// kernel running at the same time writes.
GGEMM_DEVICE uint4 ld_global_nc_no_allocate_v4(const void *p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

// ld.global.L1::no_allocate: a coherent load past L1. ptxas may not move a
// store above a coherent load that might read what it writes, so a thread's
// loads issued before its stores all stay in flight before the first store
// (the MoE expand copy; with .nc loads ptxas interleaves them with stores).
GGEMM_DEVICE uint4 ld_global_no_allocate_v4(const void *p) {
  uint4 v;
  asm volatile("ld.global.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

GGEMM_DEVICE void st_global_v4(void *p, const uint4 &v) {
  asm volatile("st.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
               : "memory");
}

}  // namespace ggemm::ptx
#endif
