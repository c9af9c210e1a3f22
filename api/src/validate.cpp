#include "api/src/validate.h"

#include <cstdint>

#include "runtime/status.h"

namespace ggemm {
namespace {

// TMA global dimensions are 32-bit, and the kernels index rows with 32 bits.
constexpr int64_t kMaxDim = int64_t(1) << 31;

bool aligned(const void *p, uintptr_t a) { return (reinterpret_cast<uintptr_t>(p) & (a - 1)) == 0; }

ggemm_status check_matrix(const void *p, const char *name) {
  if (!p) return fail(GGEMM_STATUS_NULL_POINTER, "%s is NULL", name);
  if (!aligned(p, 16))
    return fail(GGEMM_STATUS_MISALIGNED_POINTER,
                "%s = %p is not 16-byte aligned (the tensor-memory accelerator needs 16)", name, p);
  return GGEMM_STATUS_SUCCESS;
}

ggemm_status check_index_array(const void *p, const char *name) {
  if (!p) return fail(GGEMM_STATUS_NULL_POINTER, "%s is NULL", name);
  if (!aligned(p, 4)) return fail(GGEMM_STATUS_MISALIGNED_POINTER, "%s = %p is not 4-byte aligned", name, p);
  return GGEMM_STATUS_SUCCESS;
}

ggemm_status check_dim(int64_t v, const char *name, bool multiple_of_8) {
  if (v <= 0 || v >= kMaxDim)
    return fail(GGEMM_STATUS_INVALID_DIMENSION, "%s = %lld: must be in [1, 2^31)", name, (long long)v);
  if (multiple_of_8 && v % 8 != 0)
    return fail(GGEMM_STATUS_INVALID_DIMENSION,
                "%s = %lld: must be a multiple of 8 (rows must be 16-byte aligned for the tensor-memory "
                "accelerator)",
                name, (long long)v);
  return GGEMM_STATUS_SUCCESS;
}

}  // namespace

ggemm_status validate_grouped_matmul_args(const ggemm_grouped_matmul_args *a) {
  if (!a) return fail(GGEMM_STATUS_NULL_POINTER, "args is NULL");
  if (a->struct_size != sizeof(ggemm_grouped_matmul_args))
    return fail(GGEMM_STATUS_INVALID_VALUE, "args->struct_size is %zu; this library expects %zu", a->struct_size,
                sizeof(ggemm_grouped_matmul_args));

  if (a->a_dtype != GGEMM_DTYPE_BF16 && a->a_dtype != GGEMM_DTYPE_FP16)
    return fail(GGEMM_STATUS_INVALID_DTYPE, "a_dtype = %d: operands must be bf16 or fp16", int(a->a_dtype));
  if (a->b_dtype != a->a_dtype)
    return fail(GGEMM_STATUS_INVALID_DTYPE, "b_dtype = %d differs from a_dtype = %d: both operands share one dtype",
                int(a->b_dtype), int(a->a_dtype));
  if (a->c_dtype != GGEMM_DTYPE_BF16 && a->c_dtype != GGEMM_DTYPE_FP16 && a->c_dtype != GGEMM_DTYPE_FP32)
    return fail(GGEMM_STATUS_INVALID_DTYPE, "c_dtype = %d: output must be bf16, fp16 or fp32", int(a->c_dtype));

  if (a->m < 0 || a->m >= kMaxDim)
    return fail(GGEMM_STATUS_INVALID_DIMENSION, "m = %lld: must be in [0, 2^31)", (long long)a->m);
  GGEMM_TRY(check_dim(a->n, "n", true));
  GGEMM_TRY(check_dim(a->k, "k", true));
  GGEMM_TRY(check_dim(a->num_experts, "num_experts", false));
  if (a->max_rows_per_group < 0)
    return fail(GGEMM_STATUS_INVALID_DIMENSION, "max_rows_per_group = %lld: must be >= 0 (0 = m)",
                (long long)a->max_rows_per_group);
  if (a->num_groups < 1 || a->num_groups > GGEMM_MAX_GROUPS)
    return fail(GGEMM_STATUS_INVALID_GROUP_COUNT, "num_groups = %lld: must be in [1, %d]", (long long)a->num_groups,
                GGEMM_MAX_GROUPS);
  if (a->transpose_b != 0 && a->transpose_b != 1)
    return fail(GGEMM_STATUS_INVALID_VALUE, "transpose_b = %d: must be 0 or 1", a->transpose_b);
  if (a->epilogue != GGEMM_EPILOGUE_STORE && a->epilogue != GGEMM_EPILOGUE_ACCUMULATE &&
      a->epilogue != GGEMM_EPILOGUE_ROW_SCALE)
    return fail(GGEMM_STATUS_INVALID_VALUE, "epilogue = %d: not a ggemm_epilogue value", int(a->epilogue));

  const bool planes = a->a_plane_split0 != 0 || a->a_plane_split1 != 0;
  if (planes) {
    if (a->a_plane_split0 <= 0 || a->a_plane_split1 < a->a_plane_split0 || a->a_plane_split1 > a->n)
      return fail(GGEMM_STATUS_INVALID_VALUE,
                  "a_plane_split0/1 = (%lld, %lld): need 0 < split0 <= split1 <= n (%lld), or both 0",
                  (long long)a->a_plane_split0, (long long)a->a_plane_split1, (long long)a->n);
    if (a->a_plane_split0 % 8 != 0 || a->a_plane_split1 % 8 != 0)
      return fail(GGEMM_STATUS_INVALID_VALUE, "a_plane_split0/1 = (%lld, %lld): must be multiples of 8",
                  (long long)a->a_plane_split0, (long long)a->a_plane_split1);
    if (3 * a->m >= kMaxDim)
      return fail(GGEMM_STATUS_INVALID_DIMENSION, "m = %lld: with plane splits A has 3 * m rows, past 2^31",
                  (long long)a->m);
  }
  // B's size in bytes must be addressable (E * N * K <= 2^61 elements).
  if (a->num_experts > (int64_t(1) << 61) / (a->n * a->k))
    return fail(GGEMM_STATUS_INVALID_DIMENSION, "num_experts * n * k = %lld * %lld * %lld overflows",
                (long long)a->num_experts, (long long)a->n, (long long)a->k);

  if (a->m == 0) return GGEMM_STATUS_SUCCESS;  // nothing will be read or written

  GGEMM_TRY(check_matrix(a->a, "a"));
  GGEMM_TRY(check_matrix(a->b, "b"));
  GGEMM_TRY(check_matrix(a->c, "c"));
  GGEMM_TRY(check_index_array(a->a_offsets, "a_offsets"));
  GGEMM_TRY(check_index_array(a->expert_ids, "expert_ids"));
  GGEMM_TRY(check_index_array(a->expert_usage_stats, "expert_usage_stats"));
  if (a->epilogue == GGEMM_EPILOGUE_ROW_SCALE) GGEMM_TRY(check_index_array(a->row_scale, "row_scale"));
  return GGEMM_STATUS_SUCCESS;
}

}  // namespace ggemm
