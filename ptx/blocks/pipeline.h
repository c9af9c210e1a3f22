// The position in a ring of mbarrier-guarded slots (pipeline stages, tensor
// memory accumulators): the slot, and the parity of the phase a waiter waits
// for there, which flips each time the ring wraps.
#pragma once
#include <cstdint>

#include "../instr/arch.h"

namespace ggemm {

struct RingPosition {
  uint32_t stage = 0, phase = 0;
  GGEMM_HOST_DEVICE void advance(uint32_t slots) {
    if (++stage == slots) {
      stage = 0;
      phase ^= 1;
    }
  }
};

}  // namespace ggemm
