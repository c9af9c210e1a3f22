// cuTensorMapEncodeTiled for row-major 16-/32-bit matrices, with the box and
// swizzle the kernels expect. A map is encoded per call from the call's own
// pointers: nothing is cached by shape, so a new pointer never meets a stale map.
#pragma once
#include <cuda.h>

#include <cstdint>

#include "runtime/driver.h"

namespace ggemm {

// A tensor of up to 3 dimensions, innermost first (dims[0] contiguous).
struct TensorMapSpec {
  const char *what;  // for error messages ("activations", "weights", "C")
  const void *base;
  CUtensorMapDataType dtype;
  uint32_t elem_bytes;
  uint32_t rank;
  uint64_t dims[3];
  uint32_t box[3];
  CUtensorMapSwizzle swizzle;
  uint64_t row_pitch = 0;  // elements between consecutive rows (dim 1); 0 = dims[0] (packed)
};

ggemm_status encode_tensor_map(const Driver &drv, const TensorMapSpec &spec, CUtensorMap *out);

CUtensorMapSwizzle tma_swizzle_for_bytes(uint32_t bytes);

}  // namespace ggemm
