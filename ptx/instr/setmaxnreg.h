// setmaxnreg: moves register budget between warpgroups (PTX ISA 9.7.17.1
// "setmaxnreg").
#pragma once
#include "arch.h"

#if defined(__CUDACC__)
namespace ggemm::ptx {

// setmaxnreg.{inc,dec}.sync.aligned.u32 — sets the register budget of the
// calling warpgroup; all warps of the warpgroup execute it.
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

}  // namespace ggemm::ptx
#endif
