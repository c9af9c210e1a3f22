/*
 * ggemm.h — the stable C ABI of ggemm: grouped matrix products for
 * Mixture-of-Experts layers and multi-adapter LoRA on NVIDIA Hopper
 * (sm_90a) and Blackwell (sm_100a). docs/design.md explains the contract.
 *
 * Compiles as C99 and as C++. Nothing here needs a CUDA header: streams are
 * the driver's `struct CUstream_st *`, the same type as `cudaStream_t` and
 * `CUstream`, so either can be passed directly.
 *
 * Conventions
 * - Every function returns a ggemm_status. On failure, a message naming the
 *   offending argument is kept per host thread; read it with
 *   ggemm_last_error_message(). Nothing is launched when a call fails its
 *   host-side checks.
 * - Sizes are int64_t, but each dimension (and each count: experts,
 *   adapters, tokens x top_k) must be below 2^31, and each operand's
 *   element count at most 2^61; outputs of one call are capped at 2^42
 *   elements (the fields below say where less holds). Past a bound the call
 *   returns INVALID_DIMENSION naming the field.
 * - Argument structs begin with `struct_size`; set it to sizeof(the struct)
 *   so that later versions can grow the struct without breaking callers:
 *   a struct grows only at its end, and the library accepts the size of each
 *   earlier version of it, taking the fields past that size as zero (NULL).
 *   ggemm_grouped_matmul_args has two: without group_ends (0.1.0, up to
 *   a_rows) and with it (0.2.0).
 * - All matrices are row-major and densely packed (leading dimension equal to
 *   the row length). Device pointers are plain CUDA device addresses of the
 *   handle's device, in the handle's context (the device's primary context).
 * - No call synchronises with the host: counts are read on the device, so a
 *   call may be captured in a CUDA graph and replayed with new counts.
 * - Argument structs (and a config) are read only during the call; device
 *   arrays and matrices must stay valid until the enqueued work completes. A
 *   captured graph keeps the host-side values (dims, pointers) of the call.
 * - Device arrays of a grouped call (a_offsets or group_ends, expert_ids /
 *   adapter_ids, expert_usage_stats) are trusted to follow the contract:
 *   offsets non-decreasing from 0 with a_offsets[active] <= m, ids in [0, E)
 *   or -1, expert_usage_stats[1] <= num_groups. The kernels stay inside the
 *   matrices whatever they hold (group 0 starts at row 0 and group g > 0
 *   where group g - 1 ended, so a_offsets[0] is never read; each group's end
 *   is clamped into [its start, m]; the active count is capped at
 *   num_groups; an id outside [0, E) acts as -1), but malformed arrays give
 *   meaningless results. expert_usage_stats[0] and max_rows_per_group only
 *   size the launch: an underestimate costs speed, never correctness.
 */
#ifndef GGEMM_H
#define GGEMM_H

#include <stddef.h>
#include <stdint.h>

#if defined(_WIN32)
#define GGEMM_API __declspec(dllexport)
#else
#define GGEMM_API __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* 0.2.0 has everything this header declares: group_ends, gather on load,
 * the SwiGLU epilogue and the MoE layer (ggemm_moe_*). A library that
 * reports 0.1.0 (ggemm_version() < 200) was built while these were being
 * added and may lack any of them; its grouped-matmul struct may end at a_rows. */
#define GGEMM_VERSION_MAJOR 0
#define GGEMM_VERSION_MINOR 2
#define GGEMM_VERSION_PATCH 0
/* The version this header describes, as major * 10000 + minor * 100 + patch. */
#define GGEMM_VERSION \
  (GGEMM_VERSION_MAJOR * 10000 + GGEMM_VERSION_MINOR * 100 + GGEMM_VERSION_PATCH)

/* In C++ the enums below have int as their underlying type (what C gives
 * them), so any int a C caller stores in one is a valid value to check and
 * reject, not undefined behaviour. */
#ifdef __cplusplus
#define GGEMM_ENUM_BASE : int
#else
#define GGEMM_ENUM_BASE
#endif

/* A driver stream (cudaStream_t / CUstream). NULL is the legacy default stream. */
typedef struct CUstream_st *ggemm_stream_t;

typedef enum ggemm_status GGEMM_ENUM_BASE {
  GGEMM_STATUS_SUCCESS = 0,
  /* A required pointer argument is NULL. */
  GGEMM_STATUS_NULL_POINTER = 1,
  /* A pointer is not aligned as required (16 bytes for matrices, which the
   * tensor-memory accelerator needs; 4 bytes for index arrays and row_scale). */
  GGEMM_STATUS_MISALIGNED_POINTER = 2,
  /* A dimension is zero, negative, too large, or not a multiple it must be. */
  GGEMM_STATUS_INVALID_DIMENSION = 3,
  /* An unsupported dtype or an unsupported combination of dtypes. */
  GGEMM_STATUS_INVALID_DTYPE = 4,
  /* num_groups is zero or past GGEMM_MAX_GROUPS. */
  GGEMM_STATUS_INVALID_GROUP_COUNT = 5,
  /* A config override the kernels or the hardware cannot run. */
  GGEMM_STATUS_INVALID_CONFIG = 6,
  /* Any other argument out of its range (an enum value, plane splits, a
   * struct_size this library does not know). */
  GGEMM_STATUS_INVALID_VALUE = 7,
  /* The handle is NULL or was not made by ggemm_create. */
  GGEMM_STATUS_INVALID_HANDLE = 8,
  /* No NVIDIA driver could be loaded (libcuda.so.1 is absent). */
  GGEMM_STATUS_DRIVER_NOT_FOUND = 9,
  /* The driver is there but no device with the given ordinal is. */
  GGEMM_STATUS_NO_DEVICE = 10,
  /* The device is not one ggemm has kernels for: compute capability 9.0
     (sm_90a: H100, H200) and 10.0 (sm_100a: B200, GB200) only. */
  GGEMM_STATUS_UNSUPPORTED_DEVICE = 11,
  /* A driver call failed; the message holds the driver's error name. */
  GGEMM_STATUS_DRIVER_ERROR = 12,
  /* Host memory could not be allocated. */
  GGEMM_STATUS_OUT_OF_MEMORY = 13,
  /* A bug in ggemm; please report the message. */
  GGEMM_STATUS_INTERNAL_ERROR = 14
} ggemm_status;

typedef enum ggemm_dtype GGEMM_ENUM_BASE {
  GGEMM_DTYPE_BF16 = 1,
  GGEMM_DTYPE_FP16 = 2,
  GGEMM_DTYPE_FP32 = 3
} ggemm_dtype;

typedef enum ggemm_epilogue GGEMM_ENUM_BASE {
  /* C[m, n] = result. */
  GGEMM_EPILOGUE_STORE = 0,
  /* C[m, n] += result: the old value is added to the fp32 result and the sum
   * rounded once to C's dtype. Rows of inactive groups (expert id -1) are
   * left as they were (+= 0). */
  GGEMM_EPILOGUE_ACCUMULATE = 1,
  /* C[m, n] = row_scale[m] * result (the MoE routing weight); row_scale is a
   * device float array of M entries. */
  GGEMM_EPILOGUE_ROW_SCALE = 2,
  /* The MoE gate_up projection's SwiGLU: the N weight rows are gate rows
   * [0, N/2) then up rows [N/2, N) (the [E, 2I, H] layout of Hugging Face
   * and vLLM checkpoints) and C is [M, N/2]:
   *   C[m, j] = silu(r[m, j]) * r[m, N/2 + j],  silu(g) = g / (1 + exp(-g)),
   * with r the fp32 result, rounded once. Needs transpose_b = 1, N a
   * multiple of 16, a bf16 or fp16 C, no plane splits. */
  GGEMM_EPILOGUE_SWIGLU = 3
} ggemm_epilogue;

/* Upper bound on num_groups. */
#define GGEMM_MAX_GROUPS 65536

/*
 * Config override. Zero in any field means "choose automatically"; a config
 * the kernels cannot run is refused with GGEMM_STATUS_INVALID_CONFIG and a
 * message that names the field. ggemm swaps A and B as the MMA sees them:
 * the weights are the MMA's M side and the tokens its N side, so
 *   tile_n = output columns per tile = weight rows     = the MMA's M (BM),
 *   tile_m = output rows per tile    = tokens          = the MMA's N (BN),
 *   tile_k = reduction depth per pipeline stage        = BK.
 * A config describes the pipelined kernel these fields name. With config
 * NULL, sm_90a may instead run a short-K kernel (weights [E, N, K], few
 * tiles; K <= 128: the decode LoRA expand, or K split over a cluster of 8
 * CTAs, 128 < K <= 4096: the decode LoRA shrink) that has no pipeline and
 * none of these fields; passing a config keeps the call on the pipelined
 * kernel.
 */
typedef struct ggemm_config {
  size_t struct_size; /* sizeof(ggemm_config) */
  int tile_n;         /* 128 */
  int tile_m;         /* 16, 32, 64, 128 or 256 (sm_90a: 256 not with fp32
                         output, the accumulate epilogue, or gather on
                         load) */
  int tile_k;         /* must equal swizzle bytes / 2 (64, 32 or 16) */
  int mma_m;          /* sm_90a: 64 (each consumer warpgroup's wgmma M);
                         sm_100a: 128 (tcgen05.mma M) */
  int mma_n;          /* equal to tile_m; set alone (tile_m 0) it fixes
                         tile_m, with tile_m's limits */
  int mma_k;          /* 16 */
  int cluster_m;      /* 0 = automatic (1); 2 = two CTAs along the weight rows
                         sharing one token tile: on sm_100a the cta_group 2
                         pair (cta_group 2 implies it; cluster_m 2 needs
                         cta_group 2 set), on sm_90a a pair loading the
                         tokens once by TMA multicast (tile_m 128 or 256).
                         Neither pair with gather on load or SwiGLU */
  int cluster_n;      /* 1 */
  int cta_group;      /* 1; 2 (a cluster of two SMs sharing each MMA over 256
                         weight rows, tile_m 32 or more) is sm_100a only;
                         automatic = 1 */
  int stages;         /* pipeline depth; 0 = as many as shared memory holds
                         (sm_90a: when the whole K fits in the ring, at most
                         8 or two tiles' k-steps; each stage costs barrier
                         setup at kernel entry; with the accumulate epilogue
                         the 2 to 4 staging slots that read the old outputs
                         ahead take their share first); otherwise 2 or
                         more */
  int a_swizzle;      /* bytes: 128, 64 or 32 (activations); 128 with
                         gather on load (a_row_index) or weights
                         [E, K, N] (transpose_b = 0), whatever K */
  int b_swizzle;      /* bytes: 128, 64 or 32 (weights); equal to a_swizzle */
} ggemm_config;

/*
 * Arguments of ggemm_grouped_matmul (docs/design.md, section 1.1).
 *
 * For row m of group g and column n:
 *   C[m, n] = sum_k A[m + plane(n) * M, k] * W[expert_ids[g]][n, k]
 * where W[e][n, k] = B[e, n, k] if transpose_b, else B[e, k, n], and
 * plane(n) = (n >= a_plane_split0) + (n >= a_plane_split1) when the splits
 * are enabled, else 0.
 */
typedef struct ggemm_grouped_matmul_args {
  size_t struct_size; /* sizeof(ggemm_grouped_matmul_args) */

  ggemm_dtype a_dtype; /* bf16 or fp16 */
  ggemm_dtype b_dtype; /* equal to a_dtype */
  ggemm_dtype c_dtype; /* bf16, fp16 or fp32 */

  int64_t m;           /* rows of C (tokens); 0 is a no-op (matrices may then be NULL) */
  int64_t n;           /* columns of C; a multiple of 8. m, n, k < 2^31 and
                          m * n <= 2^42 (INVALID_DIMENSION otherwise) */
  int64_t k;           /* reduction depth; a multiple of 8 */
  int64_t num_experts; /* E, the first dimension of B */

  const void *a; /* [M, K], or [3 * M, K] when plane splits are enabled */
  const void *b; /* [E, N, K] when transpose_b, else [E, K, N] */
  void *c;       /* [M, N] */
  int transpose_b;     /* 1: B is [E, N, K] (K-major); 0: B is [E, K, N] */

  /* Device arrays (docs/design.md, section 1.1). The groups come from
   * a_offsets or from group_ends (at the end of the struct): exactly one of
   * the two is set. */
  const uint32_t *a_offsets;          /* [num_groups + 1], prefix sums, [0] == 0; or NULL */
  const int32_t *expert_ids;          /* [num_groups], -1 = inactive (rows zeroed) */
  const uint32_t *expert_usage_stats; /* [2]: max rows in a group, active groups */
  int64_t num_groups;         /* capacity of the arrays, 1..GGEMM_MAX_GROUPS */
  int64_t max_rows_per_group; /* upper bound on rows in a group (sizing only); 0 = M */

  /* Activation planes: 0 < split0 <= split1 <= N, multiples of 8, or both 0. */
  int64_t a_plane_split0;
  int64_t a_plane_split1;

  ggemm_epilogue epilogue;
  const float *row_scale; /* [M] device array, 4-byte aligned; GGEMM_EPILOGUE_ROW_SCALE only */

  const ggemm_config *config; /* NULL = automatic */

  /* Gather on load (the MoE layer's tokens stay in token order): row m of
   * the product reads activation row a_row_index[m] of A, which then has
   * a_rows rows ([a_rows, K]); NULL = row m of A ([M, K]). An index outside
   * [0, a_rows) reads zeros (checked mode reports it). No plane splits. */
  const int32_t *a_row_index; /* [M] device array, 4-byte aligned, or NULL */
  int64_t a_rows;             /* rows of A when a_row_index is set, >= 1 */

  /* Group ends instead of a_offsets: torch._grouped_mm's `offs` as it is
   * (int32 values read as uint32), with no leading zero to prepend. Group g
   * is rows [group_ends[g - 1], group_ends[g]), group 0 rows
   * [0, group_ends[0]): what a_offsets = [0, group_ends...] says. Exactly one
   * of a_offsets and group_ends is set (INVALID_VALUE for both, NULL_POINTER
   * for neither when m > 0). Checked mode reports as for a_offsets. */
  const uint32_t *group_ends; /* [num_groups] device array, 4-byte aligned, or NULL */
} ggemm_grouped_matmul_args;

/*
 * Arguments of ggemm_lora_shrink_qkv (docs/design.md, section 1.3): the LoRA-A
 * down-projection of Q, K and V in one launch, written planar.
 *
 * For row m of group g (adapter a = adapter_ids[g]) and fused column
 * c in [0, 3R):  P[c / R, m, c % R] (op)= scale * sum_k X[m, k] * A[a][c, k]
 * where (op) is = or += (accumulate). Rows of inactive groups (adapter -1)
 * are written as zeros (or left unchanged when accumulating); rows in no
 * group are never written.
 */
typedef struct ggemm_lora_shrink_qkv_args {
  size_t struct_size; /* sizeof(ggemm_lora_shrink_qkv_args) */

  ggemm_dtype x_dtype; /* bf16 or fp16; lora_a has the same dtype */
  ggemm_dtype p_dtype; /* bf16, fp16 or fp32 */

  int64_t m;            /* tokens; 0 is a no-op */
  int64_t k;            /* hidden size; a multiple of 8 */
  int64_t rank;         /* R; a multiple of 8; m * 3R <= 2^42 */
  int64_t num_adapters; /* G, the first dimension of lora_a */

  const void *x;      /* [M, K] */
  const void *lora_a; /* [G, 3 * R, K]: rows [0, R) q, [R, 2R) k, [2R, 3R) v */
  void *p;            /* [3, M, R] */

  const uint32_t *a_offsets;          /* [num_groups + 1], as in grouped_matmul */
  const int32_t *adapter_ids;         /* [num_groups], -1 = no adapter */
  const uint32_t *expert_usage_stats; /* [2]: max rows in a group, active groups */
  int64_t num_groups;
  int64_t max_rows_per_group; /* 0 = M */

  float scale;    /* multiplies the result (1.0f for none); finite */
  int accumulate; /* 0: P = result; 1: P += result (one rounding) */

  const ggemm_config *config; /* NULL = automatic */
} ggemm_lora_shrink_qkv_args;

/*
 * Arguments of ggemm_lora_expand_qkv (docs/design.md, section 1.2): the LoRA-B
 * up-projection of Q, K and V (grouped-query attention: q_dim != kv_dim
 * allowed) in one launch.
 *
 * For row m of group g (adapter a) and fused column j in [0, q_dim + 2 kv_dim):
 *   j < q_dim:               q_out[m, j]                    (op)= scale * P[0, m, :] . B[a][j, :]
 *   j < q_dim + kv_dim:      kv_out[m, j - q_dim]           (op)= scale * P[1, m, :] . B[a][j, :]
 *   otherwise:               kv_out[M + m, j - q_dim - kv_dim] (op)= scale * P[2, m, :] . B[a][j, :]
 * K goes to rows [0, M) of kv_out and V to rows [M, 2M). Inactive groups and
 * rows in no group are handled as in ggemm_lora_shrink_qkv.
 */
typedef struct ggemm_lora_expand_qkv_args {
  size_t struct_size; /* sizeof(ggemm_lora_expand_qkv_args) */

  ggemm_dtype p_dtype;   /* bf16 or fp16; lora_b has the same dtype */
  ggemm_dtype out_dtype; /* bf16, fp16 or fp32: q_out and kv_out */

  int64_t m;            /* tokens; 0 is a no-op */
  int64_t rank;         /* R; a multiple of 8 */
  int64_t q_dim;        /* a multiple of 8 */
  int64_t kv_dim;       /* a multiple of 8; m * (q_dim + 2 kv_dim) <= 2^42 */
  int64_t num_adapters; /* G, the first dimension of lora_b */

  const void *p;      /* [3, M, R], as ggemm_lora_shrink_qkv writes it */
  const void *lora_b; /* [G, q_dim + 2 * kv_dim, R] */
  void *q_out;        /* [M, q_dim] */
  void *kv_out;       /* [2 * M, kv_dim] */

  const uint32_t *a_offsets;
  const int32_t *adapter_ids;
  const uint32_t *expert_usage_stats;
  int64_t num_groups;
  int64_t max_rows_per_group;

  float scale;    /* multiplies the result (e.g. alpha / rank; 1.0f for none); finite */
  int accumulate; /* 1: q_out/kv_out += result, so the LoRA delta adds into the
                     base projection's outputs without another pass */

  const ggemm_config *config; /* NULL = automatic */
} ggemm_lora_expand_qkv_args;

/* Opaque per-device handle. Safe to share between host threads. */
typedef struct ggemm_handle_st *ggemm_handle_t;

/* The library's version (GGEMM_VERSION's encoding). Never fails. */
GGEMM_API int ggemm_version(void);

/* A static, human-readable name for a status. Never NULL. */
GGEMM_API const char *ggemm_status_string(ggemm_status status);

/* The message of this host thread's last ggemm call: why it failed, or "" if
 * it succeeded (every call but this one and the two string/version queries
 * clears it on entry). The pointer stays valid until this thread's next
 * ggemm call. */
GGEMM_API const char *ggemm_last_error_message(void);

/*
 * Creates a handle on CUDA device `device_ordinal` (the driver's ordinal, i.e.
 * after CUDA_VISIBLE_DEVICES): loads the driver, retains the device's primary
 * context and loads the kernels. On failure *handle is NULL.
 * Returns SUCCESS, NULL_POINTER (handle), DRIVER_NOT_FOUND, NO_DEVICE (also
 * for a negative or out-of-range ordinal), UNSUPPORTED_DEVICE, DRIVER_ERROR
 * (among them kernels the driver cannot load: a driver of an older CUDA
 * major version than the toolkit that built them, the message says, with
 * both versions),
 * OUT_OF_MEMORY, INTERNAL_ERROR.
 */
GGEMM_API ggemm_status ggemm_create(ggemm_handle_t *handle, int device_ordinal);

/* Releases a handle and unloads its kernels: work enqueued through it must
 * have completed. NULL is accepted; destroying a handle twice is undefined.
 * Returns SUCCESS or INVALID_HANDLE (a handle ggemm_create did not make). */
GGEMM_API ggemm_status ggemm_destroy(ggemm_handle_t handle);

/*
 * Enqueues one grouped matrix product on `stream`, which must belong to the
 * handle's device (its primary context). Asynchronous; the host never waits
 * for the device. The arguments (and a config's struct_size) are checked
 * before the handle, so a wrong argument is reported even with a NULL
 * handle; a config's fields are checked against the device's kernels after
 * it, when m > 0 (m = 0 enqueues nothing). Nothing is enqueued on any
 * failure.
 * Returns SUCCESS, INVALID_HANDLE, NULL_POINTER, MISALIGNED_POINTER,
 * INVALID_DIMENSION, INVALID_DTYPE, INVALID_GROUP_COUNT, INVALID_CONFIG
 * (a config the kernels cannot run; INVALID_VALUE for a wrong
 * config->struct_size), INVALID_VALUE, DRIVER_ERROR, OUT_OF_MEMORY,
 * INTERNAL_ERROR.
 */
GGEMM_API ggemm_status ggemm_grouped_matmul(ggemm_handle_t handle,
                                            const ggemm_grouped_matmul_args *args,
                                            ggemm_stream_t stream);

/*
 * Enqueues the LoRA-A shrink of Q, K and V (one launch). Asynchronous.
 * Returns the statuses of ggemm_grouped_matmul; the message names the
 * offending field of ggemm_lora_shrink_qkv_args.
 */
GGEMM_API ggemm_status ggemm_lora_shrink_qkv(ggemm_handle_t handle, const ggemm_lora_shrink_qkv_args *args,
                                             ggemm_stream_t stream);

/*
 * Enqueues the LoRA-B expand of Q, K and V into q_out and kv_out (one
 * launch). Asynchronous. Returns the statuses of ggemm_grouped_matmul; the
 * message names the offending field of ggemm_lora_expand_qkv_args.
 */
GGEMM_API ggemm_status ggemm_lora_expand_qkv(ggemm_handle_t handle, const ggemm_lora_expand_qkv_args *args,
                                             ggemm_stream_t stream);

/*
 * Checked mode. The routing arrays live on the device, so the host cannot
 * check them without a synchronisation; the kernels always compute safely
 * whatever they hold (offsets are clamped into [0, M] and made
 * non-decreasing, ids out of range make their group inactive, the active
 * count is capped at num_groups), so malformed arrays never cause a read or
 * write outside the buffers. Checked mode also reports them: every launch
 * enqueued through `handle` after this call ORs into the device word
 * *device_status the GGEMM_DEVICE_FAULT_* bits of what it found (and writes
 * nothing when all is well), for every group it walks
 * (g < min(expert_usage_stats[1], num_groups)). The caller zeroes the word,
 * keeps it alive while such launches may run, and reads it after they
 * finish. The check is one warp's read of the arrays at the start of each
 * launch (about one memory latency per 128 groups, on one CTA). NULL turns
 * checked mode
 * off. Launches captured in a CUDA graph keep the word they were captured
 * with, and check the arrays again at every replay.
 * Returns SUCCESS, INVALID_HANDLE, MISALIGNED_POINTER (not 4-byte aligned).
 */
#define GGEMM_DEVICE_FAULT_OFFSETS_NOT_MONOTONE 0x1u /* a_offsets[0] != 0 or a_offsets[g + 1] < a_offsets[g]
                                                        (group_ends[g] < group_ends[g - 1]) */
#define GGEMM_DEVICE_FAULT_OFFSET_PAST_M 0x2u        /* a_offsets[g + 1] (group_ends[g]) > M */
#define GGEMM_DEVICE_FAULT_ID_OUT_OF_RANGE 0x4u      /* an expert (adapter) id < -1 or >= E (G) */
#define GGEMM_DEVICE_FAULT_ACTIVE_COUNT 0x8u         /* expert_usage_stats[1] > num_groups */
#define GGEMM_DEVICE_FAULT_INDEX_OUT_OF_RANGE 0x10u   /* a gather index (a_row_index) or a combine index outside its rows */
#define GGEMM_DEVICE_FAULT_WEIGHT_NOT_FINITE 0x20u     /* a routing weight is NaN or infinite (its slot is dropped) */
GGEMM_API ggemm_status ggemm_set_device_status(ggemm_handle_t handle, uint32_t *device_status);

/*
 * The MoE layer (docs/design.md, section 1.4):
 *   out[t] = sum_j w[t, j] * down_e(silu(gate_e(x[t])) * up_e(x[t])),  e = ids[t, j]
 * in three steps that ggemm_moe_ffn runs as one call: ggemm_moe_route sorts
 * the (token, slot) pairs by expert; the gate_up grouped matmul gathers
 * their tokens (a_row_index; past 32 routed rows, or 64 at up to 2 an expert,
 * ggemm_moe_ffn copies them in expert order first, one more launch) and
 * applies SwiGLU; the down grouped matmul
 * scales each row by its routing weight (GGEMM_EPILOGUE_ROW_SCALE) and
 * writes it in sorted order; ggemm_moe_combine sums each token's k rows.
 *
 * Expert parallelism: a rank holds experts [first_expert, first_expert +
 * local_experts) of num_experts; a slot whose id is outside that range (or
 * -1) has no expert here and contributes nothing.
 */

/* Arguments of ggemm_moe_route. Sorted row m is the m-th (token, slot) pair
 * with a local expert, ordered by expert, then by t * top_k + slot (stable:
 * the same routing always gives the same rows). The routed row count R is
 * a_offsets[expert_usage_stats[1]]. */
typedef struct ggemm_moe_route_args {
  size_t struct_size; /* sizeof(ggemm_moe_route_args) */

  int64_t num_tokens;    /* T; 0 writes empty routing (no groups): a_offsets,
                            expert_ids, expert_usage_stats and the workspace
                            are still needed, the [T * k] arrays not */
  int64_t top_k;         /* k, 1..64 */
  int64_t num_experts;   /* global expert count; ids in [0, num_experts) name one */
  int64_t first_expert;  /* first local expert, 0 without expert parallelism;
                            INVALID_VALUE when the range leaves num_experts */
  int64_t local_experts; /* 1..GGEMM_MAX_GROUPS (else INVALID_GROUP_COUNT);
                            first + local <= num_experts */

  const int32_t *topk_ids;  /* [T, k]; -1 = no expert. Other ids outside [0, num_experts)
                               are treated as -1 and reported by checked mode */
  const float *topk_weights; /* [T, k]; a NaN or infinite weight drops its slot (checked
                                mode reports it) */

  /* Outputs, device arrays (the grouped matmuls' routing): one group per
   * local expert that has rows, in expert order. */
  uint32_t *a_offsets;          /* [local_experts + 1]; entries past the active count = R */
  int32_t *expert_ids;          /* [local_experts]: the local expert (weights' first index)
                                   of group g; -1 past the active count */
  uint32_t *expert_usage_stats; /* [2]: most rows in a group, active groups */
  int32_t *row_token;           /* [T * k]: token of sorted row m (the gather index); -1 for m >= R */
  int32_t *row_slot;            /* [T * k]: t * k + slot of sorted row m; -1 for m >= R */
  float *row_weight;            /* [T * k]: routing weight of sorted row m; 0 for m >= R */
  int32_t *slot_row;            /* [T * k]: sorted row of (t, slot), -1 = no local expert */

  void *workspace;        /* device scratch of ggemm_moe_route_workspace_size bytes, 16-byte aligned */
  size_t workspace_bytes; /* at least that size (else INVALID_VALUE) */
} ggemm_moe_route_args;

/* Arguments of ggemm_moe_combine: out[t, :] = sum over slots j with
 * slot_row[t * k + j] >= 0 of y[slot_row[t * k + j], :], summed in fp32 in
 * slot order and rounded once (bitwise reproducible). */
typedef struct ggemm_moe_combine_args {
  size_t struct_size; /* sizeof(ggemm_moe_combine_args) */

  ggemm_dtype y_dtype;   /* bf16 or fp16 */
  ggemm_dtype out_dtype; /* bf16, fp16 (= y_dtype) or fp32 */

  int64_t num_tokens; /* T; 0 is a no-op */
  int64_t top_k;      /* k, 1..64 */
  int64_t hidden;     /* columns of y and out; a multiple of 8 */
  int64_t y_rows;     /* rows of y; a slot_row entry >= y_rows reads nothing
                         (checked mode reports it) */

  const void *y;          /* [y_rows, hidden]: the weighted down projection, sorted rows;
                             16-byte aligned and not NULL when T > 0, even with y_rows 0 */
  const int32_t *slot_row; /* [T, k], as ggemm_moe_route writes it */
  void *out;              /* [T, hidden] */
  int accumulate;         /* 1: out += the sum (fp32 out only, else INVALID_VALUE): out
                             accumulates over calls */
} ggemm_moe_combine_args;

/* Arguments of ggemm_moe_ffn: the whole layer in one call. */
typedef struct ggemm_moe_ffn_args {
  size_t struct_size; /* sizeof(ggemm_moe_ffn_args) */

  ggemm_dtype dtype; /* bf16 or fp16: x, weights, out; fp32 accumulation throughout */

  int64_t num_tokens;    /* T; 0 is a no-op */
  int64_t hidden;        /* H; a multiple of 8 */
  int64_t intermediate;  /* I, the moe ffn size; a multiple of 8 */
  int64_t top_k;         /* k, 1..64 */
  int64_t num_experts;   /* as in ggemm_moe_route_args */
  int64_t first_expert;
  int64_t local_experts;

  const void *x;              /* [T, H], in token order */
  const void *w_gate_up;      /* [local_experts, 2I, H]: rows [0, I) gate, [I, 2I) up */
  const void *w_down;         /* [local_experts, H, I] */
  const int32_t *topk_ids;    /* [T, k] */
  const float *topk_weights;  /* [T, k] */
  void *out;                  /* [T, H] */

  void *workspace;        /* device scratch of ggemm_moe_ffn_workspace_size bytes, 16-byte aligned */
  size_t workspace_bytes; /* at least that size (else INVALID_VALUE) */
} ggemm_moe_ffn_args;

/* The device workspace a call with these arguments needs (it depends on
 * T, k, H, I, local_experts and dtype only; pointers may be NULL here).
 * Returns the argument statuses of the call itself. */
GGEMM_API ggemm_status ggemm_moe_route_workspace_size(const ggemm_moe_route_args *args, size_t *bytes);
GGEMM_API ggemm_status ggemm_moe_ffn_workspace_size(const ggemm_moe_ffn_args *args, size_t *bytes);

/* Enqueues the routing (at most two launches). Asynchronous, graph-safe. */
GGEMM_API ggemm_status ggemm_moe_route(ggemm_handle_t handle, const ggemm_moe_route_args *args,
                                       ggemm_stream_t stream);

/* Enqueues the top-k sum (one launch). Asynchronous, graph-safe. */
GGEMM_API ggemm_status ggemm_moe_combine(ggemm_handle_t handle, const ggemm_moe_combine_args *args,
                                         ggemm_stream_t stream);

/* Enqueues the whole layer: route, gate_up (gather, SwiGLU), down (row
 * scale), combine, every intermediate in the workspace. Asynchronous,
 * graph-safe (a captured call replays with new x, ids and weights). Every
 * argument is checked before anything is enqueued; the two products are
 * planned as they are launched, after the routing, so an INTERNAL_ERROR
 * there (a kernel missing from this build) can follow enqueued work. */
GGEMM_API ggemm_status ggemm_moe_ffn(ggemm_handle_t handle, const ggemm_moe_ffn_args *args, ggemm_stream_t stream);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* GGEMM_H */
