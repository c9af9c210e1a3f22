// Host-side validation of the MoE layer's arguments (ggemm_moe_route,
// ggemm_moe_combine, ggemm_moe_ffn and the workspace queries): everything
// checkable without the device, each failure with its own status and a
// message naming the field, in the style of api/src/validate.cpp.
#pragma once
#include <cstddef>

#include "ggemm.h"

namespace ggemm {

// The dims and enums of a call (what its workspace size depends on); the
// workspace queries check only these.
ggemm_status validate_moe_route_dims(const ggemm_moe_route_args *args);
ggemm_status validate_moe_ffn_dims(const ggemm_moe_ffn_args *args);

// A whole call: the dims, then the pointers, then the workspace's size
// (`needed_workspace` bytes, from runtime/launch_moe.h).
ggemm_status validate_moe_route_args(const ggemm_moe_route_args *args, size_t needed_workspace);
ggemm_status validate_moe_combine_args(const ggemm_moe_combine_args *args);
ggemm_status validate_moe_ffn_args(const ggemm_moe_ffn_args *args, size_t needed_workspace);

}  // namespace ggemm
