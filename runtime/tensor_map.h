// cuTensorMapEncodeTiled for row-major 16-/32-bit matrices, with the box and
// swizzle the kernels expect. A map is encoded per call from the call's own
// pointers: nothing is cached by shape, so a new pointer never meets a stale map.
#pragma once
#include <cuda.h>

#include <cstdint>

#include "runtime/driver.h"

namespace ggemm {

// A tensor of up to 5 dimensions, innermost first (dims[0] contiguous).
struct TensorMapSpec {
  const char *what;  // for error messages ("activations", "weights", "C")
  const void *base;
  CUtensorMapDataType dtype;
  uint32_t elem_bytes;
  uint32_t rank;            // 1..5
  uint64_t dims[5];
  uint32_t box[5];
  CUtensorMapSwizzle swizzle;
  uint64_t row_pitch = 0;  // elements between consecutive rows (dim 1); 0 = dims[0] (packed)
  // Bytes between steps of dims 1..rank-1, when the view is not packed in
  // dimension order (K-sliced views: a row, then 128 bytes); all 0 = packed
  // (with row_pitch).
  uint64_t strides[4] = {0, 0, 0, 0};
};

Status encode_tensor_map(const Driver &drv, const TensorMapSpec &spec, CUtensorMap *out);

// Whether this driver encodes K-sliced views (a dimension whose stride is
// smaller than the one before it: Sm90GroupedParams::k_slices). Asked once
// per process with a dummy address; the launch plans one slice per stage
// when not.
bool sliced_views_supported(const Driver &drv);

CUtensorMapSwizzle tma_swizzle_for_bytes(uint32_t bytes);

}  // namespace ggemm
