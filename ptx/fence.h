// Fences and barriers (PTX ISA 9.7.13 "Parallel synchronization and
// communication instructions").
#pragma once
#include "arch.h"

#if defined(__CUDACC__)
namespace ggemm::ptx {

// fence.proxy.async.shared::cta — makes this thread's generic-proxy writes to
// shared memory (st.shared, stmatrix) visible to the async proxy (TMA, wgmma).
GGEMM_DEVICE void fence_proxy_async_shared_cta() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

// bar.sync id, count — named barrier over `count` threads (a multiple of 32).
// Every participating warp must execute it with the same id and count.
GGEMM_DEVICE void bar_sync(uint32_t id, uint32_t count) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(count) : "memory");
}

// elect.sync — true in exactly one lane of the calling (full) warp.
GGEMM_DEVICE bool elect_one_sync() {
#if GGEMM_SM90A || GGEMM_SM100A
  uint32_t elected = 0;
  asm volatile(
      "{\n.reg .pred p;\nelect.sync _|p, 0xffffffff;\nselp.u32 %0, 1, 0, p;\n}\n"
      : "=r"(elected));
  return elected != 0;
#else
  return (threadIdx.x % 32) == 0;
#endif
}

// setmaxnreg.{inc,dec}.sync.aligned.u32 — moves the register budget of the
// calling warpgroup (PTX ISA 9.7.17.1); all warps of the warpgroup execute it.
template <uint32_t Regs>
GGEMM_DEVICE void setmaxnreg_inc() {
  static_assert(Regs % 8 == 0 && Regs >= 24 && Regs <= 256, "setmaxnreg takes 24..256, step 8");
#if GGEMM_SM90A || GGEMM_SM100A
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(Regs));
#else
  GGEMM_ARCH_TRAP("setmaxnreg");
#endif
}
template <uint32_t Regs>
GGEMM_DEVICE void setmaxnreg_dec() {
  static_assert(Regs % 8 == 0 && Regs >= 24 && Regs <= 256, "setmaxnreg takes 24..256, step 8");
#if GGEMM_SM90A || GGEMM_SM100A
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(Regs));
#else
  GGEMM_ARCH_TRAP("setmaxnreg");
#endif
}

GGEMM_DEVICE uint32_t smem_addr(const void *p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

}  // namespace ggemm::ptx
#endif
