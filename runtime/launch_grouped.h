// Enqueues a validated grouped matmul on the device.
#pragma once
#include "ggemm.h"
#include "runtime/device.h"

namespace ggemm {

// `args` has passed validate_grouped_matmul_args(); m > 0.
ggemm_status launch_grouped_matmul(Device &dev, const ggemm_grouped_matmul_args &args, CUstream stream);

}  // namespace ggemm
