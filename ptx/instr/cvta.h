// cvta: generic -> shared-state-space addresses (PTX ISA 9.7.9, data
// movement and conversion, "cvta"), the 32-bit form every shared-memory
// operand of the other wrappers takes.
#pragma once
#include "arch.h"

#if defined(__CUDACC__)
namespace ggemm::ptx {

// cvta.to.shared — the shared::cta address of `p`, which points into this
// CTA's shared memory.
GGEMM_DEVICE uint32_t smem_addr(const void *p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

}  // namespace ggemm::ptx
#endif
