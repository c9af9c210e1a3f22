// Which local expert a (token, slot) pair goes to, and what checked mode
// reports about it: one function for the count pass, the scatter pass and
// the CPU tests, so the two passes can never disagree on a slot.
#pragma once
#include <cstdint>
#include <cstring>

#include "../blocks/routing_check.h"
#include "moe_params.h"

namespace ggemm::moe {

// The GGEMM_DEVICE_FAULT_* bits the routing reports (ggemm.h).
constexpr uint32_t kFaultWeightNotFinite = 0x20u;

// The local expert of slot (id, weight), or kNoExpert; ORs into *faults an
// id outside [-1, num_experts) (acts as -1) and a weight that is NaN or
// infinite on a slot that would otherwise be routed here (the slot is
// dropped). Weights of slots with no local expert are never looked at: they
// are padding (-1) or another rank's to check.
GGEMM_HOST_DEVICE inline uint32_t route_key(int32_t id, float weight, int32_t num_experts, int32_t first_expert,
                                            uint32_t local_experts, uint32_t *faults) {
  if (id < -1 || id >= num_experts) {
    *faults |= kFaultIdOutOfRange;
    return kNoExpert;
  }
  const int64_t local = int64_t(id) - int64_t(first_expert);
  if (id < 0 || local < 0 || local >= int64_t(local_experts)) return kNoExpert;
  uint32_t bits;
  memcpy(&bits, &weight, sizeof bits);
  if ((bits & 0x7f800000u) == 0x7f800000u) {  // exponent all ones: infinity or NaN
    *faults |= kFaultWeightNotFinite;
    return kNoExpert;
  }
  return uint32_t(local);
}

}  // namespace ggemm::moe
