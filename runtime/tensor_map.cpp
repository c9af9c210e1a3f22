#include "runtime/tensor_map.h"

#include <cstdint>
#include <cstdio>

#include "runtime/debug.h"

namespace ggemm {

CUtensorMapSwizzle tma_swizzle_for_bytes(uint32_t bytes) {
  switch (bytes) {
    case 128: return CU_TENSOR_MAP_SWIZZLE_128B;
    case 64: return CU_TENSOR_MAP_SWIZZLE_64B;
    case 32: return CU_TENSOR_MAP_SWIZZLE_32B;
    default: return CU_TENSOR_MAP_SWIZZLE_NONE;
  }
}

Status encode_tensor_map(const Driver &drv, const TensorMapSpec &s, CUtensorMap *out) {
  cuuint64_t dims[5];
  cuuint64_t strides[4];  // bytes, for dims 1.. (dim 0 is contiguous)
  cuuint32_t box[5], elem_strides[5] = {1, 1, 1, 1, 1};
  const bool explicit_strides = s.strides[0] != 0;
  uint64_t stride = s.elem_bytes;
  for (uint32_t i = 0; i < s.rank; ++i) {
    dims[i] = s.dims[i];
    box[i] = s.box[i];
    if (i > 0) strides[i - 1] = explicit_strides ? s.strides[i - 1] : stride;
    stride *= (i == 0 && s.row_pitch) ? s.row_pitch : s.dims[i];
  }
  auto dim = [&](uint32_t i) { return (unsigned long long)(i < s.rank ? s.dims[i] : 1); };
  auto box_dim = [&](uint32_t i) { return i < s.rank ? s.box[i] : 1u; };
  CUresult r = drv.cuTensorMapEncodeTiled(out, s.dtype, s.rank, const_cast<void *>(s.base), dims, strides, box,
                                          elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, s.swizzle,
                                          CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    const char *name = "?";
    drv.cuGetErrorName(r, &name);
    return error(GGEMM_STATUS_DRIVER_ERROR,
                 "cuTensorMapEncodeTiled(%s: rank %u, dims {%llu, %llu, %llu, %llu, %llu}, box {%u, %u, %u, %u, %u}) "
                 "returned %s",
                 s.what, s.rank, dim(0), dim(1), dim(2), dim(3), dim(4), box_dim(0), box_dim(1), box_dim(2), box_dim(3),
                 box_dim(4), name);
  }
  if (debug_enabled()) {
    std::fprintf(stderr,
                 "[ggemm]   tensor map %-16s base %p dims {%llu, %llu, %llu, %llu} row pitch %llu B box {%u, %u, %u, %u} "
                 "swizzle %s%s\n",
                 s.what, s.base, dim(0), dim(1), dim(2), dim(3), (unsigned long long)(s.rank > 1 ? strides[0] : 0),
                 box_dim(0), box_dim(1), box_dim(2), box_dim(3),
                 s.swizzle == CU_TENSOR_MAP_SWIZZLE_128B  ? "128B"
                 : s.swizzle == CU_TENSOR_MAP_SWIZZLE_64B ? "64B"
                 : s.swizzle == CU_TENSOR_MAP_SWIZZLE_32B ? "32B"
                                                          : "none",
                 explicit_strides ? " (K-sliced view)" : "");
  }
  return OkStatus();
}

bool sliced_views_supported(const Driver &drv) {
  static const bool supported = [&drv] {
    // bf16 [128 rows, 256 columns] seen as {64, rows, 4 slices}: a row is
    // 512 bytes, a slice 128. The address is never read.
    const cuuint64_t dims[3] = {64, 128, 4};
    const cuuint64_t strides[2] = {512, 128};
    const cuuint32_t box[3] = {64, 16, 4}, elem_strides[3] = {1, 1, 1};
    CUtensorMap map;
    return drv.cuTensorMapEncodeTiled(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 3, reinterpret_cast<void *>(uintptr_t(1) << 20),
                                      dims, strides, box, elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                      CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                                      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
  }();
  return supported;
}

}  // namespace ggemm
