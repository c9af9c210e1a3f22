// prefetch.global.L1 / .L2: a hint that brings the line holding an address
// into this SM's L1, or into L2 (PTX ISA 9.7.9.15 "prefetch"); nothing waits
// for it and no register receives anything.
#pragma once
#include <cstdint>

#include "arch.h"

#if defined(__CUDACC__)
namespace ggemm::ptx {

GGEMM_DEVICE void prefetch_l1(const void *address) {
  asm volatile("prefetch.global.L1 [%0];" ::"l"(reinterpret_cast<uint64_t>(address)));
}

// Into L2 only, the GPU's point of coherence: a line brought there early
// is never stale, whatever a running kernel writes to it later, so this is
// the one way a kernel may touch its inputs before wait_prior_grids.
GGEMM_DEVICE void prefetch_l2(const void *address) {
  asm volatile("prefetch.global.L2 [%0];" ::"l"(reinterpret_cast<uint64_t>(address)));
}

// A relaxed load at GPU scope (SASS LDG.E.STRONG.GPU: served by L2, never
// allocated in L1, so it leaves no line in L1 that a later plain load could
// find stale). For reads made before wait_prior_grids: the kernel that
// writes the value stores it with plain (weak) stores, so such a read may
// race with it and see any value, old or new; it must be used only as a
// hint (the address of an L2 prefetch), bounded whatever it reads.
GGEMM_DEVICE int32_t ld_relaxed_gpu_s32(const int32_t *p) {
  int32_t v;
  asm volatile("ld.relaxed.gpu.global.s32 %0, [%1];" : "=r"(v) : "l"(p));
  return v;
}
GGEMM_DEVICE float ld_relaxed_gpu_f32(const float *p) {
  float v;
  asm volatile("ld.relaxed.gpu.global.f32 %0, [%1];" : "=f"(v) : "l"(p));
  return v;
}

}  // namespace ggemm::ptx
#endif
