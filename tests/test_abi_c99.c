/* The public header as a C99 program sees it (compiled with -std=c99
 * -pedantic -Werror): every type is used, the argument structs are filled
 * with designated initializers, and the C layout is reported so the C++ test
 * can compare it with its own. */
#include <stddef.h>
#include <stdint.h>

#include "ggemm.h"

/* The size-versioning scheme relies on struct_size being the first field. */
typedef char ggemm_c99_args_size_first[offsetof(ggemm_grouped_matmul_args, struct_size) == 0 ? 1 : -1];
typedef char ggemm_c99_config_size_first[offsetof(ggemm_config, struct_size) == 0 ? 1 : -1];

typedef char ggemm_c99_route_size_first[offsetof(ggemm_moe_route_args, struct_size) == 0 ? 1 : -1];
typedef char ggemm_c99_combine_size_first[offsetof(ggemm_moe_combine_args, struct_size) == 0 ? 1 : -1];
typedef char ggemm_c99_ffn_size_first[offsetof(ggemm_moe_ffn_args, struct_size) == 0 ? 1 : -1];

int ggemm_c99_abi_check(void);
void ggemm_c99_layout(size_t out[4]);
void ggemm_c99_moe_layout(size_t out[6]);

/* The MoE layer's structs, filled with designated initializers; each call
 * with valid arguments and no handle gets as far as the handle check, and
 * the workspace queries answer. */
static int ggemm_c99_moe_check(void) {
  const ggemm_moe_route_args route_query = {
      .struct_size = sizeof(ggemm_moe_route_args),
      .num_tokens = 16,
      .top_k = 2,
      .num_experts = 8,
      .first_expert = 0,
      .local_experts = 8,
  };
  size_t route_bytes = 0, ffn_bytes = 0;
  ggemm_moe_route_args route;
  ggemm_moe_combine_args combine;
  ggemm_moe_ffn_args ffn;
  if (ggemm_moe_route_workspace_size(&route_query, &route_bytes) != GGEMM_STATUS_SUCCESS || route_bytes == 0) return 1;
  route = route_query;
  route.topk_ids = (const int32_t *)(uintptr_t)0x1000;
  route.topk_weights = (const float *)(uintptr_t)0x2000;
  route.a_offsets = (uint32_t *)(uintptr_t)0x3000;
  route.expert_ids = (int32_t *)(uintptr_t)0x4000;
  route.expert_usage_stats = (uint32_t *)(uintptr_t)0x5000;
  route.row_token = (int32_t *)(uintptr_t)0x6000;
  route.row_slot = (int32_t *)(uintptr_t)0x7000;
  route.row_weight = (float *)(uintptr_t)0x8000;
  route.slot_row = (int32_t *)(uintptr_t)0x9000;
  route.workspace = (void *)(uintptr_t)0x10000;
  route.workspace_bytes = route_bytes;
  if (ggemm_moe_route(NULL, &route, NULL) != GGEMM_STATUS_INVALID_HANDLE) return 2;
  {
    const ggemm_moe_combine_args c = {
        .struct_size = sizeof(ggemm_moe_combine_args),
        .y_dtype = GGEMM_DTYPE_BF16,
        .out_dtype = GGEMM_DTYPE_FP32,
        .num_tokens = 16,
        .top_k = 2,
        .hidden = 64,
        .y_rows = 32,
        .y = (const void *)(uintptr_t)0x1000,
        .slot_row = (const int32_t *)(uintptr_t)0x2000,
        .out = (void *)(uintptr_t)0x3000,
        .accumulate = 1,
    };
    combine = c;
  }
  if (ggemm_moe_combine(NULL, &combine, NULL) != GGEMM_STATUS_INVALID_HANDLE) return 3;
  {
    const ggemm_moe_ffn_args f = {
        .struct_size = sizeof(ggemm_moe_ffn_args),
        .dtype = GGEMM_DTYPE_FP16,
        .num_tokens = 16,
        .hidden = 64,
        .intermediate = 32,
        .top_k = 2,
        .num_experts = 8,
        .first_expert = 4,
        .local_experts = 4,
        .x = (const void *)(uintptr_t)0x1000,
        .w_gate_up = (const void *)(uintptr_t)0x2000,
        .w_down = (const void *)(uintptr_t)0x3000,
        .topk_ids = (const int32_t *)(uintptr_t)0x4000,
        .topk_weights = (const float *)(uintptr_t)0x5000,
        .out = (void *)(uintptr_t)0x6000,
        .workspace = (void *)(uintptr_t)0x10000,
        .workspace_bytes = 0,
    };
    ffn = f;
  }
  if (ggemm_moe_ffn_workspace_size(&ffn, &ffn_bytes) != GGEMM_STATUS_SUCCESS || ffn_bytes == 0) return 4;
  ffn.workspace_bytes = ffn_bytes;
  if (ggemm_moe_ffn(NULL, &ffn, NULL) != GGEMM_STATUS_INVALID_HANDLE) return 5;
  if ((GGEMM_DEVICE_FAULT_INDEX_OUT_OF_RANGE & GGEMM_DEVICE_FAULT_WEIGHT_NOT_FINITE) != 0u) return 6;
  return GGEMM_EPILOGUE_SWIGLU == 3 ? 0 : 7;
}

int ggemm_c99_abi_check(void) {
  const ggemm_dtype operand = GGEMM_DTYPE_BF16;
  const ggemm_epilogue epilogue = GGEMM_EPILOGUE_ROW_SCALE;
  const ggemm_config config = {
      .struct_size = sizeof(ggemm_config),
      .tile_n = 128,
      .tile_m = 64,
      .tile_k = 64,
      .mma_m = 64,
      .mma_n = 64,
      .mma_k = 16,
      .cluster_m = 1,
      .cluster_n = 1,
      .cta_group = 1,
      .stages = 0,
      .a_swizzle = 128,
      .b_swizzle = 128,
  };
  /* Fake, aligned addresses: the NULL handle stops the call before any use. */
  const ggemm_grouped_matmul_args args = {
      .struct_size = sizeof(ggemm_grouped_matmul_args),
      .a_dtype = operand,
      .b_dtype = operand,
      .c_dtype = GGEMM_DTYPE_FP32,
      .m = 64,
      .n = 256,
      .k = 128,
      .num_experts = 8,
      .a = (const void *)(uintptr_t)0x1000,
      .b = (const void *)(uintptr_t)0x2000,
      .c = (void *)(uintptr_t)0x3000,
      .transpose_b = 1,
      .a_offsets = (const uint32_t *)(uintptr_t)0x4000,
      .expert_ids = (const int32_t *)(uintptr_t)0x5000,
      .expert_usage_stats = (const uint32_t *)(uintptr_t)0x6000,
      .num_groups = 4,
      .max_rows_per_group = 0,
      .a_plane_split0 = 0,
      .a_plane_split1 = 0,
      .epilogue = epilogue,
      .row_scale = (const float *)(uintptr_t)0x7000,
      .config = &config,
  };
  ggemm_handle_t handle = NULL;
  ggemm_stream_t stream = NULL;
  ggemm_status status;
  ggemm_status (*create)(ggemm_handle_t *, int) = ggemm_create;
  const char *name;

  if (ggemm_version() != GGEMM_VERSION) return 1;
  name = ggemm_status_string(GGEMM_STATUS_INVALID_HANDLE);
  if (name == NULL || name[0] != 'G') return 2;
  /* Valid arguments, no handle: validation passes, then the handle check fails. */
  status = ggemm_grouped_matmul(handle, &args, stream);
  if (status != GGEMM_STATUS_INVALID_HANDLE) return 3;
  if (ggemm_last_error_message()[0] == '\0') return 4;
  if (create(NULL, 0) != GGEMM_STATUS_NULL_POINTER) return 5;
  if (ggemm_destroy(handle) != GGEMM_STATUS_SUCCESS) return 6;
  if (ggemm_c99_moe_check() != 0) return 7;
  return 0;
}

/* sizeof and two field offsets as C lays the structs out. */
void ggemm_c99_layout(size_t out[4]) {
  out[0] = sizeof(ggemm_grouped_matmul_args);
  out[1] = sizeof(ggemm_config);
  out[2] = offsetof(ggemm_grouped_matmul_args, config);
  out[3] = offsetof(ggemm_config, b_swizzle);
}

/* The MoE structs' sizes and last fields' offsets as C lays them out. */
void ggemm_c99_moe_layout(size_t out[6]) {
  out[0] = sizeof(ggemm_moe_route_args);
  out[1] = offsetof(ggemm_moe_route_args, workspace_bytes);
  out[2] = sizeof(ggemm_moe_combine_args);
  out[3] = offsetof(ggemm_moe_combine_args, accumulate);
  out[4] = sizeof(ggemm_moe_ffn_args);
  out[5] = offsetof(ggemm_moe_ffn_args, workspace_bytes);
}
