// moe_reference.h — CPU reference of the MoE layer (ggemm.h, "The MoE layer";
// docs/design.md §1.4). Every pointer in the args is HOST memory. Written
// from the contract alone (no code shared with the kernels), so the GPU
// tests compare two independent readings of it.
#ifndef GGEMM_MOE_REFERENCE_H
#define GGEMM_MOE_REFERENCE_H

#include <cstdint>

#include "ggemm.h"

namespace ggemm::ref {

// The local expert of a (token, slot) pair, or -1: ids outside
// [0, num_experts) act as -1 (and report GGEMM_DEVICE_FAULT_ID_OUT_OF_RANGE
// when not -1 itself); an id outside this rank's range has no expert here;
// a NaN or infinite weight drops a slot that has one (and reports
// GGEMM_DEVICE_FAULT_WEIGHT_NOT_FINITE). *faults gets the bits ORed in.
int64_t moe_local_expert(int32_t id, float weight, int64_t num_experts, int64_t first_expert,
                         int64_t local_experts, uint32_t *faults);

// ggemm_moe_route: writes every output array in full (a_offsets,
// expert_ids, expert_usage_stats, row_token, row_slot, row_weight,
// slot_row; the workspace is not touched) and returns the fault bits
// checked mode reports. Sorted row m is the m-th routed pair in the order
// (local expert, t * top_k + slot).
uint32_t moe_route(const ggemm_moe_route_args &args);

// ggemm_moe_combine: out[t, :] (op)= round(sum over j in slot order, from
// +0, of y[slot_row[t * k + j], :] in fp32) where rows outside [0, y_rows)
// add nothing; returns the fault bits (an index < -1 or >= y_rows).
uint32_t moe_combine(const ggemm_moe_combine_args &args);

// ggemm_moe_ffn, the whole layer in fp32 with the intermediate roundings
// the GPU makes: for each routed pair (t, j) of local expert e,
//   h = round(silu(x[t] . Wg[e][i]) * (x[t] . Wu[e][i]))       (SwiGLU epilogue)
//   y = round((h . Wd[e][n]) * weight)                          (row-scale epilogue)
// and out[t] = round(fp32 sum of its y rows in slot order, from +0); a token
// with no local expert gets zeros. round() is to the layer's dtype. The
// workspace is not used. Returns the fault bits of the routing.
uint32_t moe_ffn(const ggemm_moe_ffn_args &args);

}  // namespace ggemm::ref

#endif  // GGEMM_MOE_REFERENCE_H
