// elect.sync: one leader lane of a warp (PTX ISA 9.7.13, parallel
// synchronization and communication, "elect.sync").
#pragma once
#include "arch.h"

#if defined(__CUDACC__)
namespace ggemm::ptx {

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

}  // namespace ggemm::ptx
#endif
