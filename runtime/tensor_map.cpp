#include "runtime/tensor_map.h"

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

ggemm_status encode_tensor_map(const Driver &drv, const TensorMapSpec &s, CUtensorMap *out) {
  cuuint64_t dims[3];
  cuuint64_t strides[2];  // bytes, for dims 1.. (dim 0 is contiguous)
  cuuint32_t box[3], elem_strides[3] = {1, 1, 1};
  uint64_t stride = s.elem_bytes;
  for (uint32_t i = 0; i < s.rank; ++i) {
    dims[i] = s.dims[i];
    box[i] = s.box[i];
    if (i > 0) strides[i - 1] = stride;
    stride *= (i == 0 && s.row_pitch) ? s.row_pitch : s.dims[i];
  }
  CUresult r = drv.cuTensorMapEncodeTiled(out, s.dtype, s.rank, const_cast<void *>(s.base), dims, strides, box,
                                          elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, s.swizzle,
                                          CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    const char *name = "?";
    drv.cuGetErrorName(r, &name);
    return fail(GGEMM_STATUS_DRIVER_ERROR,
                "cuTensorMapEncodeTiled(%s: rank %u, dims {%llu, %llu, %llu}, box {%u, %u, %u}) returned %s",
                s.what, s.rank, (unsigned long long)s.dims[0], (unsigned long long)(s.rank > 1 ? s.dims[1] : 0),
                (unsigned long long)(s.rank > 2 ? s.dims[2] : 0), s.box[0], s.rank > 1 ? s.box[1] : 0,
                s.rank > 2 ? s.box[2] : 0, name);
  }
  if (debug_enabled()) {
    std::fprintf(stderr,
                 "[ggemm]   tensor map %-16s base %p dims {%llu, %llu, %llu} row pitch %llu B box {%u, %u, %u} "
                 "swizzle %s\n",
                 s.what, s.base, (unsigned long long)s.dims[0], (unsigned long long)(s.rank > 1 ? s.dims[1] : 1),
                 (unsigned long long)(s.rank > 2 ? s.dims[2] : 1), (unsigned long long)(s.rank > 1 ? strides[0] : 0),
                 s.box[0], s.rank > 1 ? s.box[1] : 1, s.rank > 2 ? s.box[2] : 1,
                 s.swizzle == CU_TENSOR_MAP_SWIZZLE_128B  ? "128B"
                 : s.swizzle == CU_TENSOR_MAP_SWIZZLE_64B ? "64B"
                 : s.swizzle == CU_TENSOR_MAP_SWIZZLE_32B ? "32B"
                                                          : "none");
  }
  return GGEMM_STATUS_SUCCESS;
}

}  // namespace ggemm
