#include "api/src/validate_moe.h"

#include <cstdint>

#include "api/src/errors.h"
#include "runtime/plan.h"

namespace ggemm {
namespace {

// Row indices and slot numbers are int32 on the device, and the grouped
// matmuls' dimensions 32-bit (api/src/validate.cpp).
constexpr int64_t kMaxDim = int64_t(1) << 31;
constexpr int64_t kMaxTopK = 64;

bool aligned(const void *p, uintptr_t a) { return (reinterpret_cast<uintptr_t>(p) & (a - 1)) == 0; }

ggemm_status check_struct_size(size_t got, size_t want) {
  if (got != want)
    return fail(GGEMM_STATUS_INVALID_VALUE, "args->struct_size is %zu; this library expects %zu", got, want);
  return GGEMM_STATUS_SUCCESS;
}

// A matrix or the workspace: the tensor-memory accelerator needs 16 bytes,
// the combine's vector loads too.
ggemm_status check_matrix(const void *p, const char *name) {
  if (!p) return fail(GGEMM_STATUS_NULL_POINTER, "%s is NULL", name);
  if (!aligned(p, 16))
    return fail(GGEMM_STATUS_MISALIGNED_POINTER, "%s = %p is not 16-byte aligned", name, p);
  return GGEMM_STATUS_SUCCESS;
}

// An index or weight array (int32, uint32, float).
ggemm_status check_array(const void *p, const char *name) {
  if (!p) return fail(GGEMM_STATUS_NULL_POINTER, "%s is NULL", name);
  if (!aligned(p, 4)) return fail(GGEMM_STATUS_MISALIGNED_POINTER, "%s = %p is not 4-byte aligned", name, p);
  return GGEMM_STATUS_SUCCESS;
}

ggemm_status check_tokens(int64_t t) {
  if (t < 0 || t >= kMaxDim)
    return fail(GGEMM_STATUS_INVALID_DIMENSION, "num_tokens = %lld: must be in [0, 2^31)", (long long)t);
  return GGEMM_STATUS_SUCCESS;
}

// top_k in [1, 64], and T * k slots numbered in 31 bits.
ggemm_status check_top_k(int64_t t, int64_t k) {
  if (k < 1 || k > kMaxTopK)
    return fail(GGEMM_STATUS_INVALID_DIMENSION, "top_k = %lld: must be in [1, %lld]", (long long)k,
                (long long)kMaxTopK);
  if (t * k >= kMaxDim)
    return fail(GGEMM_STATUS_INVALID_DIMENSION,
                "num_tokens * top_k = %lld * %lld: the routed rows must number below 2^31", (long long)t,
                (long long)k);
  return GGEMM_STATUS_SUCCESS;
}

// A width: in [1, 2^31), a multiple of 8 (16-byte rows).
ggemm_status check_width(int64_t v, const char *name) {
  if (v <= 0 || v >= kMaxDim)
    return fail(GGEMM_STATUS_INVALID_DIMENSION, "%s = %lld: must be in [1, 2^31)", name, (long long)v);
  if (v % 8 != 0)
    return fail(GGEMM_STATUS_INVALID_DIMENSION, "%s = %lld: must be a multiple of 8 (rows of 16 bytes)", name,
                (long long)v);
  return GGEMM_STATUS_SUCCESS;
}

// The experts of this rank: [first_expert, first_expert + local_experts) of
// num_experts.
ggemm_status check_experts(int64_t num_experts, int64_t first_expert, int64_t local_experts) {
  if (num_experts < 1 || num_experts >= kMaxDim)
    return fail(GGEMM_STATUS_INVALID_DIMENSION, "num_experts = %lld: must be in [1, 2^31)", (long long)num_experts);
  if (local_experts < 1 || local_experts > GGEMM_MAX_GROUPS)
    return fail(GGEMM_STATUS_INVALID_GROUP_COUNT, "local_experts = %lld: must be in [1, %d]",
                (long long)local_experts, GGEMM_MAX_GROUPS);
  if (first_expert < 0)
    return fail(GGEMM_STATUS_INVALID_VALUE, "first_expert = %lld: must be >= 0", (long long)first_expert);
  if (first_expert > num_experts - local_experts)  // (no overflow: both are below 2^31 here)
    return fail(GGEMM_STATUS_INVALID_VALUE,
                "first_expert + local_experts = %lld + %lld: past num_experts = %lld (a rank's experts are a "
                "range of the global ones)",
                (long long)first_expert, (long long)local_experts, (long long)num_experts);
  return GGEMM_STATUS_SUCCESS;
}

ggemm_status check_workspace(const void *workspace, size_t bytes, size_t needed) {
  GGEMM_TRY(check_matrix(workspace, "workspace"));
  if (bytes < needed)
    return fail(GGEMM_STATUS_INVALID_VALUE,
                "workspace_bytes = %zu: this call needs %zu (ggemm_moe_*_workspace_size reports it)", bytes, needed);
  return GGEMM_STATUS_SUCCESS;
}

}  // namespace

ggemm_status validate_moe_route_dims(const ggemm_moe_route_args *a) {
  if (!a) return fail(GGEMM_STATUS_NULL_POINTER, "args is NULL");
  GGEMM_TRY(check_struct_size(a->struct_size, sizeof(ggemm_moe_route_args)));
  GGEMM_TRY(check_tokens(a->num_tokens));
  GGEMM_TRY(check_top_k(a->num_tokens, a->top_k));
  return check_experts(a->num_experts, a->first_expert, a->local_experts);
}

ggemm_status validate_moe_route_args(const ggemm_moe_route_args *a, size_t needed_workspace) {
  GGEMM_TRY(validate_moe_route_dims(a));
  // The groups are written even for T = 0 (empty routing), so their arrays
  // and the workspace (the count matrix) always are needed.
  GGEMM_TRY(check_array(a->a_offsets, "a_offsets"));
  GGEMM_TRY(check_array(a->expert_ids, "expert_ids"));
  GGEMM_TRY(check_array(a->expert_usage_stats, "expert_usage_stats"));
  if (a->num_tokens > 0) {
    GGEMM_TRY(check_array(a->topk_ids, "topk_ids"));
    GGEMM_TRY(check_array(a->topk_weights, "topk_weights"));
    GGEMM_TRY(check_array(a->row_token, "row_token"));
    GGEMM_TRY(check_array(a->row_slot, "row_slot"));
    GGEMM_TRY(check_array(a->row_weight, "row_weight"));
    GGEMM_TRY(check_array(a->slot_row, "slot_row"));
  }
  return check_workspace(a->workspace, a->workspace_bytes, needed_workspace);
}

ggemm_status validate_moe_combine_args(const ggemm_moe_combine_args *a) {
  if (!a) return fail(GGEMM_STATUS_NULL_POINTER, "args is NULL");
  GGEMM_TRY(check_struct_size(a->struct_size, sizeof(ggemm_moe_combine_args)));
  if (a->y_dtype != GGEMM_DTYPE_BF16 && a->y_dtype != GGEMM_DTYPE_FP16)
    return fail(GGEMM_STATUS_INVALID_DTYPE, "y_dtype = %d: must be bf16 or fp16", int(a->y_dtype));
  if (a->out_dtype != a->y_dtype && a->out_dtype != GGEMM_DTYPE_FP32)
    return fail(GGEMM_STATUS_INVALID_DTYPE, "out_dtype = %d: must be y_dtype (%d) or fp32", int(a->out_dtype),
                int(a->y_dtype));
  GGEMM_TRY(check_tokens(a->num_tokens));
  GGEMM_TRY(check_top_k(a->num_tokens, a->top_k));
  GGEMM_TRY(check_width(a->hidden, "hidden"));
  if (a->y_rows < 0 || a->y_rows >= kMaxDim)
    return fail(GGEMM_STATUS_INVALID_DIMENSION, "y_rows = %lld: must be in [0, 2^31)", (long long)a->y_rows);
  if (a->accumulate != 0 && a->accumulate != 1)
    return fail(GGEMM_STATUS_INVALID_VALUE, "accumulate = %d: must be 0 or 1", a->accumulate);
  if (a->accumulate && a->out_dtype != GGEMM_DTYPE_FP32)
    return fail(GGEMM_STATUS_INVALID_VALUE,
                "accumulate = 1 needs an fp32 out (out_dtype = %d): a bf16 or fp16 out would round at every call",
                int(a->out_dtype));
  if (a->num_tokens == 0) return GGEMM_STATUS_SUCCESS;
  GGEMM_TRY(check_matrix(a->y, "y"));
  GGEMM_TRY(check_array(a->slot_row, "slot_row"));
  return check_matrix(a->out, "out");
}

ggemm_status validate_moe_ffn_dims(const ggemm_moe_ffn_args *a) {
  if (!a) return fail(GGEMM_STATUS_NULL_POINTER, "args is NULL");
  GGEMM_TRY(check_struct_size(a->struct_size, sizeof(ggemm_moe_ffn_args)));
  if (a->dtype != GGEMM_DTYPE_BF16 && a->dtype != GGEMM_DTYPE_FP16)
    return fail(GGEMM_STATUS_INVALID_DTYPE, "dtype = %d: must be bf16 or fp16", int(a->dtype));
  GGEMM_TRY(check_tokens(a->num_tokens));
  GGEMM_TRY(check_width(a->hidden, "hidden"));
  GGEMM_TRY(check_width(a->intermediate, "intermediate"));
  // The gate_up product has 2I columns, a 32-bit dimension.
  if (2 * a->intermediate >= kMaxDim)
    return fail(GGEMM_STATUS_INVALID_DIMENSION, "intermediate = %lld: 2 * intermediate must be below 2^31",
                (long long)a->intermediate);
  GGEMM_TRY(check_top_k(a->num_tokens, a->top_k));
  GGEMM_TRY(check_experts(a->num_experts, a->first_expert, a->local_experts));
  // The grouped matmuls' outputs (T * k rows of 2I, then of H) within what
  // one call's tile walk counts.
  const uint64_t rows = uint64_t(a->num_tokens) * uint64_t(a->top_k);
  const uint64_t widest = uint64_t(a->hidden > 2 * a->intermediate ? a->hidden : 2 * a->intermediate);
  if (rows * widest > max_output_elements())
    return fail(GGEMM_STATUS_INVALID_DIMENSION,
                "num_tokens * top_k = %llu rows of max(hidden, 2 * intermediate) = %llu: more than the 2^42 outputs "
                "one grouped matmul supports",
                (unsigned long long)rows, (unsigned long long)widest);
  // Each weight tensor's byte size must be addressable.
  if (a->local_experts > (int64_t(1) << 60) / (a->hidden * a->intermediate))
    return fail(GGEMM_STATUS_INVALID_DIMENSION, "local_experts * 2 * intermediate * hidden overflows");
  return GGEMM_STATUS_SUCCESS;
}

ggemm_status validate_moe_ffn_args(const ggemm_moe_ffn_args *a, size_t needed_workspace) {
  GGEMM_TRY(validate_moe_ffn_dims(a));
  if (a->num_tokens == 0) return GGEMM_STATUS_SUCCESS;  // a no-op: nothing is read or written
  GGEMM_TRY(check_matrix(a->x, "x"));
  GGEMM_TRY(check_matrix(a->w_gate_up, "w_gate_up"));
  GGEMM_TRY(check_matrix(a->w_down, "w_down"));
  GGEMM_TRY(check_array(a->topk_ids, "topk_ids"));
  GGEMM_TRY(check_array(a->topk_weights, "topk_weights"));
  GGEMM_TRY(check_matrix(a->out, "out"));
  return check_workspace(a->workspace, a->workspace_bytes, needed_workspace);
}

}  // namespace ggemm
