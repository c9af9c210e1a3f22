#include "api/src/validate.h"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "api/src/errors.h"

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

ggemm_status check_operand_dtype(ggemm_dtype t, const char *name) {
  if (t != GGEMM_DTYPE_BF16 && t != GGEMM_DTYPE_FP16)
    return fail(GGEMM_STATUS_INVALID_DTYPE, "%s = %d: operands must be bf16 or fp16", name, int(t));
  return GGEMM_STATUS_SUCCESS;
}

ggemm_status check_output_dtype(ggemm_dtype t, const char *name) {
  if (t != GGEMM_DTYPE_BF16 && t != GGEMM_DTYPE_FP16 && t != GGEMM_DTYPE_FP32)
    return fail(GGEMM_STATUS_INVALID_DTYPE, "%s = %d: outputs must be bf16, fp16 or fp32", name, int(t));
  return GGEMM_STATUS_SUCCESS;
}

ggemm_status check_rows(int64_t m) {
  if (m < 0 || m >= kMaxDim)
    return fail(GGEMM_STATUS_INVALID_DIMENSION, "m = %lld: must be in [0, 2^31)", (long long)m);
  return GGEMM_STATUS_SUCCESS;
}

// m x n outputs of one launch: the kernels' tile walk counts a group's tiles
// in 32 bits, which holds up to max_output_elements().
ggemm_status check_output_elements(int64_t m, int64_t n, const char *n_name, int64_t n_value, const char *output) {
  if (m > 0 && uint64_t(m) * uint64_t(n) > max_output_elements())
    return fail(GGEMM_STATUS_INVALID_DIMENSION,
                "m = %lld and %s = %lld: %s would have %lld x %lld elements, more than the 2^42 (8 TiB of bf16) "
                "one call supports",
                (long long)m, n_name, (long long)n_value, output, (long long)m, (long long)n);
  return GGEMM_STATUS_SUCCESS;
}

// The routing arrays and bounds every grouped operation shares; pointers
// only when they will be read (m > 0).
ggemm_status check_groups(int64_t m, const uint32_t *a_offsets, const int32_t *ids, const char *ids_name,
                          const uint32_t *stats, int64_t num_groups, int64_t max_rows) {
  if (max_rows < 0)
    return fail(GGEMM_STATUS_INVALID_DIMENSION, "max_rows_per_group = %lld: must be >= 0 (0 = m)", (long long)max_rows);
  if (num_groups < 1 || num_groups > GGEMM_MAX_GROUPS)
    return fail(GGEMM_STATUS_INVALID_GROUP_COUNT, "num_groups = %lld: must be in [1, %d]", (long long)num_groups,
                GGEMM_MAX_GROUPS);
  if (m == 0) return GGEMM_STATUS_SUCCESS;
  GGEMM_TRY(check_index_array(a_offsets, "a_offsets"));
  GGEMM_TRY(check_index_array(ids, ids_name));
  GGEMM_TRY(check_index_array(stats, "expert_usage_stats"));
  return GGEMM_STATUS_SUCCESS;
}

// The LoRA operations' scale and accumulate flag.
ggemm_status check_scale_and_mode(float scale, int accumulate) {
  if (!std::isfinite(scale)) return fail(GGEMM_STATUS_INVALID_VALUE, "scale = %g: must be finite", double(scale));
  if (accumulate != 0 && accumulate != 1)
    return fail(GGEMM_STATUS_INVALID_VALUE, "accumulate = %d: must be 0 or 1", accumulate);
  return GGEMM_STATUS_SUCCESS;
}

// ggemm_grouped_matmul_args of 0.1.0: every field up to a_rows, no group_ends.
constexpr size_t kGroupedArgsSize010 = offsetof(ggemm_grouped_matmul_args, group_ends);

}  // namespace

ggemm_status check_config_size(const ggemm_config *config) {
  if (config && config->struct_size != sizeof(ggemm_config))
    return fail(GGEMM_STATUS_INVALID_VALUE, "config->struct_size is %zu; this library expects %zu",
                config->struct_size, sizeof(ggemm_config));
  return GGEMM_STATUS_SUCCESS;
}

ggemm_status validate_grouped_matmul_args(const ggemm_grouped_matmul_args *args, ggemm_grouped_matmul_args *full) {
  if (!args) return fail(GGEMM_STATUS_NULL_POINTER, "args is NULL");
  const size_t size = args->struct_size;
  if (size != sizeof(ggemm_grouped_matmul_args) && size != kGroupedArgsSize010)
    return fail(GGEMM_STATUS_INVALID_VALUE,
                "args->struct_size is %zu; this library expects %zu (or %zu, 0.1.0's struct without group_ends)", size,
                sizeof(ggemm_grouped_matmul_args), kGroupedArgsSize010);
  // Only the caller's bytes are read: the fields past them stay zero.
  std::memset(full, 0, sizeof *full);
  std::memcpy(full, args, size);
  const ggemm_grouped_matmul_args *a = full;

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
      a->epilogue != GGEMM_EPILOGUE_ROW_SCALE && a->epilogue != GGEMM_EPILOGUE_SWIGLU)
    return fail(GGEMM_STATUS_INVALID_VALUE, "epilogue = %d: not a ggemm_epilogue value", int(a->epilogue));

  const bool planes = a->a_plane_split0 != 0 || a->a_plane_split1 != 0;
  if (a->epilogue == GGEMM_EPILOGUE_SWIGLU) {
    if (!a->transpose_b)
      return fail(GGEMM_STATUS_INVALID_VALUE, "epilogue SWIGLU needs transpose_b = 1 (gate_up weights [E, 2I, K])");
    if (a->n % 16 != 0)
      return fail(GGEMM_STATUS_INVALID_DIMENSION, "n = %lld: epilogue SWIGLU needs n = 2I with I a multiple of 8",
                  (long long)a->n);
    if (a->c_dtype == GGEMM_DTYPE_FP32)
      return fail(GGEMM_STATUS_INVALID_DTYPE, "c_dtype = fp32: epilogue SWIGLU writes bf16 or fp16");
    if (planes) return fail(GGEMM_STATUS_INVALID_VALUE, "epilogue SWIGLU takes no plane splits");
  }
  if (a->a_offsets && a->group_ends)
    return fail(GGEMM_STATUS_INVALID_VALUE, "a_offsets and group_ends are both set: the groups come from one of them");
  if (a->a_row_index) {
    if (planes) return fail(GGEMM_STATUS_INVALID_VALUE, "a_row_index (gather) takes no plane splits");
    if (a->a_rows < 1 || a->a_rows >= kMaxDim)
      return fail(GGEMM_STATUS_INVALID_DIMENSION, "a_rows = %lld: with a_row_index must be in [1, 2^31)",
                  (long long)a->a_rows);
  }
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
  GGEMM_TRY(check_output_elements(a->m, a->n, "n", a->n, "C"));
  if (a->a_row_index && a->a_rows > (int64_t(1) << 61) / a->k)
    return fail(GGEMM_STATUS_INVALID_DIMENSION, "a_rows * k = %lld * %lld overflows", (long long)a->a_rows,
                (long long)a->k);
  // B's size in bytes must be addressable (E * N * K <= 2^61 elements).
  if (a->num_experts > (int64_t(1) << 61) / (a->n * a->k))
    return fail(GGEMM_STATUS_INVALID_DIMENSION, "num_experts * n * k = %lld * %lld * %lld overflows",
                (long long)a->num_experts, (long long)a->n, (long long)a->k);

  GGEMM_TRY(check_config_size(a->config));

  if (a->m == 0) return GGEMM_STATUS_SUCCESS;  // nothing will be read or written

  GGEMM_TRY(check_matrix(a->a, "a"));
  GGEMM_TRY(check_matrix(a->b, "b"));
  GGEMM_TRY(check_matrix(a->c, "c"));
  if (a->group_ends)
    GGEMM_TRY(check_index_array(a->group_ends, "group_ends"));
  else if (!a->a_offsets)
    return fail(GGEMM_STATUS_NULL_POINTER, "a_offsets is NULL and so is group_ends: the groups need one of them");
  else
    GGEMM_TRY(check_index_array(a->a_offsets, "a_offsets"));
  GGEMM_TRY(check_index_array(a->expert_ids, "expert_ids"));
  GGEMM_TRY(check_index_array(a->expert_usage_stats, "expert_usage_stats"));
  if (a->epilogue == GGEMM_EPILOGUE_ROW_SCALE) GGEMM_TRY(check_index_array(a->row_scale, "row_scale"));
  if (a->a_row_index) GGEMM_TRY(check_index_array(a->a_row_index, "a_row_index"));
  return GGEMM_STATUS_SUCCESS;
}

ggemm_status validate_lora_shrink_args(const ggemm_lora_shrink_qkv_args *a) {
  if (!a) return fail(GGEMM_STATUS_NULL_POINTER, "args is NULL");
  if (a->struct_size != sizeof(ggemm_lora_shrink_qkv_args))
    return fail(GGEMM_STATUS_INVALID_VALUE, "args->struct_size is %zu; this library expects %zu", a->struct_size,
                sizeof(ggemm_lora_shrink_qkv_args));
  GGEMM_TRY(check_operand_dtype(a->x_dtype, "x_dtype"));
  GGEMM_TRY(check_output_dtype(a->p_dtype, "p_dtype"));
  GGEMM_TRY(check_rows(a->m));
  GGEMM_TRY(check_dim(a->k, "k", true));
  GGEMM_TRY(check_dim(a->rank, "rank", true));
  GGEMM_TRY(check_dim(a->num_adapters, "num_adapters", false));
  if (3 * a->rank >= kMaxDim)
    return fail(GGEMM_STATUS_INVALID_DIMENSION, "rank = %lld: 3 * rank must be below 2^31", (long long)a->rank);
  if (a->num_adapters > (int64_t(1) << 61) / (3 * a->rank * a->k))
    return fail(GGEMM_STATUS_INVALID_DIMENSION, "num_adapters * 3 * rank * k overflows");
  GGEMM_TRY(check_output_elements(a->m, 3 * a->rank, "rank", a->rank, "P"));
  GGEMM_TRY(check_scale_and_mode(a->scale, a->accumulate));
  GGEMM_TRY(check_config_size(a->config));
  GGEMM_TRY(check_groups(a->m, a->a_offsets, a->adapter_ids, "adapter_ids", a->expert_usage_stats, a->num_groups,
                         a->max_rows_per_group));
  if (a->m == 0) return GGEMM_STATUS_SUCCESS;
  GGEMM_TRY(check_matrix(a->x, "x"));
  GGEMM_TRY(check_matrix(a->lora_a, "lora_a"));
  GGEMM_TRY(check_matrix(a->p, "p"));
  return GGEMM_STATUS_SUCCESS;
}

ggemm_status validate_lora_expand_args(const ggemm_lora_expand_qkv_args *a) {
  if (!a) return fail(GGEMM_STATUS_NULL_POINTER, "args is NULL");
  if (a->struct_size != sizeof(ggemm_lora_expand_qkv_args))
    return fail(GGEMM_STATUS_INVALID_VALUE, "args->struct_size is %zu; this library expects %zu", a->struct_size,
                sizeof(ggemm_lora_expand_qkv_args));
  GGEMM_TRY(check_operand_dtype(a->p_dtype, "p_dtype"));
  GGEMM_TRY(check_output_dtype(a->out_dtype, "out_dtype"));
  GGEMM_TRY(check_rows(a->m));
  if (3 * a->m >= kMaxDim)
    return fail(GGEMM_STATUS_INVALID_DIMENSION, "m = %lld: P has 3 * m rows, past 2^31", (long long)a->m);
  GGEMM_TRY(check_dim(a->rank, "rank", true));
  GGEMM_TRY(check_dim(a->q_dim, "q_dim", true));
  GGEMM_TRY(check_dim(a->kv_dim, "kv_dim", true));
  GGEMM_TRY(check_dim(a->num_adapters, "num_adapters", false));
  const int64_t n = a->q_dim + 2 * a->kv_dim;
  if (n >= kMaxDim)
    return fail(GGEMM_STATUS_INVALID_DIMENSION, "q_dim + 2 * kv_dim = %lld: must be below 2^31", (long long)n);
  if (a->num_adapters > (int64_t(1) << 61) / (n * a->rank))
    return fail(GGEMM_STATUS_INVALID_DIMENSION, "num_adapters * (q_dim + 2 * kv_dim) * rank overflows");
  GGEMM_TRY(check_output_elements(a->m, n, "q_dim + 2 * kv_dim", n, "the Q/K/V outputs"));
  GGEMM_TRY(check_scale_and_mode(a->scale, a->accumulate));
  GGEMM_TRY(check_config_size(a->config));
  GGEMM_TRY(check_groups(a->m, a->a_offsets, a->adapter_ids, "adapter_ids", a->expert_usage_stats, a->num_groups,
                         a->max_rows_per_group));
  if (a->m == 0) return GGEMM_STATUS_SUCCESS;
  GGEMM_TRY(check_matrix(a->p, "p"));
  GGEMM_TRY(check_matrix(a->lora_b, "lora_b"));
  GGEMM_TRY(check_matrix(a->q_out, "q_out"));
  GGEMM_TRY(check_matrix(a->kv_out, "kv_out"));
  return GGEMM_STATUS_SUCCESS;
}

}  // namespace ggemm
