// prefetch.global.L1: a hint that brings the line holding an address into
// this SM's L1 (PTX ISA 9.7.9.15 "prefetch"); nothing waits for it and no
// register receives anything.
#pragma once
#include "arch.h"

#if defined(__CUDACC__)
namespace ggemm::ptx {

GGEMM_DEVICE void prefetch_l1(const void *address) {
  asm volatile("prefetch.global.L1 [%0];" ::"l"(reinterpret_cast<uint64_t>(address)));
}

}  // namespace ggemm::ptx
#endif
