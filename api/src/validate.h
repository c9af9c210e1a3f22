// Host-side validation of a grouped matmul's arguments: everything checkable
// without touching the device. Each failure has its own status and names the
// argument.
#pragma once
#include "ggemm.h"

namespace ggemm {

ggemm_status validate_grouped_matmul_args(const ggemm_grouped_matmul_args *args);
ggemm_status validate_lora_shrink_args(const ggemm_lora_shrink_qkv_args *args);
ggemm_status validate_lora_expand_args(const ggemm_lora_expand_qkv_args *args);

}  // namespace ggemm
