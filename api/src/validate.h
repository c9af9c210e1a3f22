// Host-side validation of a grouped matmul's arguments: everything checkable
// without touching the device. Each failure has its own status and names the
// argument.
#pragma once
#include "ggemm.h"
#include "runtime/device.h"
#include "runtime/plan.h"

namespace ggemm {

// The struct as this library's (*full): a caller's struct of an earlier
// version (a smaller struct_size, ggemm.h) is copied with the fields it lacks
// zero. Then every check; `full` is filled whenever struct_size is known.
ggemm_status validate_grouped_matmul_args(const ggemm_grouped_matmul_args *args, ggemm_grouped_matmul_args *full);
ggemm_status validate_lora_shrink_args(const ggemm_lora_shrink_qkv_args *args);
ggemm_status validate_lora_expand_args(const ggemm_lora_expand_qkv_args *args);

// The config's struct_size (NULL passes), which needs no device: the
// argument checks above make it, before the handle and whatever m, and
// validate_config before it reads the fields.
ggemm_status check_config_size(const ggemm_config *config);

// The optional config override (NULL passes) against the kernels the
// device's architecture has (api/src/validate_config.cpp).
ggemm_status validate_config(const ggemm_config *config, Arch arch, const DeviceProps &props,
                             const GroupedShape &shape);

}  // namespace ggemm
