// The C ABI of the MoE layer (ggemm.h, "The MoE layer"): validate, carve the
// workspace, launch; never throw (every entry point runs guarded).
#include <cstdint>

#include "api/src/handle.h"
#include "api/src/validate_moe.h"
#include "ggemm.h"
#include "runtime/launch_grouped.h"
#include "runtime/launch_moe.h"
#include "runtime/plan.h"

namespace {

using ggemm::api::check_handle;
using ggemm::api::checked_mode_word;
using ggemm::api::guarded;

size_t route_workspace_bytes(const ggemm_moe_route_args &a) {
  return ggemm::route_scratch_layout(a.num_tokens * a.top_k, a.local_experts).bytes;
}

ggemm::FfnWorkspaceLayout ffn_layout(const ggemm_moe_ffn_args &a) {
  return ggemm::ffn_workspace_layout(a.num_tokens, a.top_k, a.hidden, a.intermediate, a.local_experts, a.dtype);
}

template <typename T>
T *at(void *base, size_t offset) {
  return reinterpret_cast<T *>(static_cast<char *>(base) + offset);
}

ggemm_status check_bytes_out(size_t *bytes) {
  if (!bytes) return ggemm::fail(GGEMM_STATUS_NULL_POINTER, "bytes is NULL");
  return GGEMM_STATUS_SUCCESS;
}

// Up to this many tokens the layer bounds each group by num_tokens
// (ffn_matmul): the decode GEMV's largest group (kDecodeGemvMaxRows), where
// the bound picks its tile. Above, the bound would only narrow the
// persistent kernel's token tile: measured on the H200 at 16 and 64 tokens,
// level sustained and up to 1.5% slower cold, so it is left unsaid.
constexpr int64_t kLayerGroupBoundTokens = 8;

// The grouped matmuls' shared fields: routing from ggemm_moe_route, one
// group per local expert, weights [local_experts, N, K], no config.
ggemm::GroupedLaunch ffn_matmul(const char *op, const ggemm_moe_ffn_args &a, const ggemm::MoeRouteLaunch &route,
                                ggemm_handle_t handle) {
  ggemm::GroupedLaunch l{};
  l.op = op;
  l.shape.a_dtype = l.shape.c_dtype = a.dtype;
  l.shape.m = a.num_tokens * a.top_k;
  l.shape.transpose_b = true;
  l.shape.num_groups = a.local_experts;
  // A group holds at most one row per token (a token's top-k naming an
  // expert twice costs speed, never correctness: ggemm.h). Said up to
  // kLayerGroupBoundTokens; above, besides, the plan would read a bound
  // E / k times the average group as skewed routing and halve the tile.
  l.shape.max_rows_per_group = a.num_tokens <= kLayerGroupBoundTokens ? a.num_tokens : 0;
  l.num_experts = a.local_experts;
  l.a_offsets = route.a_offsets;
  l.expert_ids = route.expert_ids;
  l.usage_stats = route.usage_stats;
  l.device_status = checked_mode_word(handle);
  l.alpha = 1.f;
  l.config = nullptr;
  return l;
}

}  // namespace

extern "C" ggemm_status ggemm_moe_route_workspace_size(const ggemm_moe_route_args *args, size_t *bytes) {
  return guarded([&] {
    GGEMM_TRY(ggemm::validate_moe_route_dims(args));
    GGEMM_TRY(check_bytes_out(bytes));
    *bytes = route_workspace_bytes(*args);
    return GGEMM_STATUS_SUCCESS;
  });
}

extern "C" ggemm_status ggemm_moe_ffn_workspace_size(const ggemm_moe_ffn_args *args, size_t *bytes) {
  return guarded([&] {
    GGEMM_TRY(ggemm::validate_moe_ffn_dims(args));
    GGEMM_TRY(check_bytes_out(bytes));
    *bytes = ffn_layout(*args).bytes;
    return GGEMM_STATUS_SUCCESS;
  });
}

extern "C" ggemm_status ggemm_moe_route(ggemm_handle_t handle, const ggemm_moe_route_args *args,
                                        ggemm_stream_t stream) {
  return guarded([&] {
    // The dims first: the workspace's size is computed from them.
    GGEMM_TRY(ggemm::validate_moe_route_dims(args));
    GGEMM_TRY(ggemm::validate_moe_route_args(args, route_workspace_bytes(*args)));
    GGEMM_TRY(check_handle(handle));
    const ggemm_moe_route_args &a = *args;
    ggemm::MoeRouteLaunch l{};
    l.num_tokens = a.num_tokens, l.top_k = a.top_k;
    l.num_experts = a.num_experts, l.first_expert = a.first_expert, l.local_experts = a.local_experts;
    l.topk_ids = a.topk_ids, l.topk_weights = a.topk_weights;
    l.a_offsets = a.a_offsets, l.expert_ids = a.expert_ids, l.usage_stats = a.expert_usage_stats;
    l.row_token = a.row_token, l.row_slot = a.row_slot, l.row_weight = a.row_weight, l.slot_row = a.slot_row;
    l.workspace = a.workspace;
    l.device_status = checked_mode_word(handle);
    return ggemm::report(ggemm::launch_moe_route(*handle->device, l, reinterpret_cast<CUstream>(stream)));
  });
}

extern "C" ggemm_status ggemm_moe_combine(ggemm_handle_t handle, const ggemm_moe_combine_args *args,
                                          ggemm_stream_t stream) {
  return guarded([&] {
    GGEMM_TRY(ggemm::validate_moe_combine_args(args));
    GGEMM_TRY(check_handle(handle));
    const ggemm_moe_combine_args &a = *args;
    if (a.num_tokens == 0) return GGEMM_STATUS_SUCCESS;
    ggemm::MoeCombineLaunch l{};
    l.y_dtype = a.y_dtype, l.out_dtype = a.out_dtype;
    l.num_tokens = a.num_tokens, l.top_k = a.top_k, l.hidden = a.hidden, l.y_rows = a.y_rows;
    l.y = a.y, l.slot_row = a.slot_row, l.out = a.out;
    l.accumulate = a.accumulate != 0;
    l.device_status = checked_mode_word(handle);
    return ggemm::report(ggemm::launch_moe_combine(*handle->device, l, reinterpret_cast<CUstream>(stream)));
  });
}

// Routed rows up to which ggemm_moe_ffn gathers x inside the gate_up GEMM
// (one-row TMA boxes, a cost per box: per row, per stage, per column tile)
// rather than copying the rows first (the expand copy, a launch and ~2.5
// us at these sizes): up to kDecodeMaxRows always; up to
// kGatherMaxSparseRows where the rows average at most
// kGatherMaxRowsPerExpert an expert. Measured on the H200 (the layer,
// sustained, same call, docs/performance.md): at 64 rows gathering is
// 0.982-0.993x the copy on Qwen3-30B, Qwen3-235B (64 rows on 128 experts:
// 0.5 an expert) and DeepSeek-V3 EP8 (64 on 32: 2), level at 128 rows; at
// Mixtral's 8 experts the boxes a weight byte are many times more (128
// rows, 16 an expert: 1.4x slower), so not there.
constexpr int64_t kDecodeMaxRows = 32;
constexpr int64_t kGatherMaxSparseRows = 64;
constexpr int64_t kGatherMaxRowsPerExpert = 2;

static bool gathers_in_gate_up(int64_t rows, int64_t local_experts) {
  return rows <= kDecodeMaxRows || (rows <= kGatherMaxSparseRows && rows <= kGatherMaxRowsPerExpert * local_experts);
}
// Tokens up to which, at decode, the down projection and the combine are
// one kernel (ptx/moe/decode_down.cuh). Its tiles are a token's columns, so
// an expert that two tokens share is read once per token: the tokens of a
// column block run side by side and the second read mostly hits L2.
// Measured on the H200 (sustained, layer against the sorted down GEMV and
// the combine, docs/performance.md): 1-4 tokens 0.92-1.0x on Qwen3-30B-
// A3B, Qwen3-235B-A22B and Mixtral, 0.99-1.015x on DeepSeek-V3 EP8; at 16
// tokens Mixtral's 32 slots on 8 experts read each expert's rows ~4 times,
// and a first version of the kernel took 1.85x there.
constexpr int64_t kDecodeDownMaxTokens = 4;

// Prefill: route -> expand (x copied to sorted rows; one launch with the
// routing up to one CTA's 512 slots) -> gate_up (SwiGLU) -> h -> down
// (scaled by row_weight) -> y in sorted rows -> combine (each token's k
// rows by slot_row) -> out. The down product writes sorted rows
// and the combine gathers them, rather than the GEMM scattering rows to
// token order: the same bytes move, the sum's order is fixed
// (deterministic), and the GEMM keeps its contiguous TMA stores.
//
// Decode (gathers_in_gate_up: at most kDecodeMaxRows rows, or a few an
// expert up to kGatherMaxSparseRows): route (inside gate_up's GEMV where
// the slots fit one warp, else a launch of its own) -> gate_up (gathering
// x by row_token, SwiGLU) -> h -> down -> combine, where up to
// kDecodeDownMaxTokens tokens of at most 32 slots the down projection sums
// each token's slots itself (ptx/moe/decode_down.cuh) -> out: two to four
// launches where prefill makes five, each after the first a dependent
// kernel that waits for the one before it.
extern "C" ggemm_status ggemm_moe_ffn(ggemm_handle_t handle, const ggemm_moe_ffn_args *args, ggemm_stream_t stream) {
  return guarded([&] {
    GGEMM_TRY(ggemm::validate_moe_ffn_dims(args));
    GGEMM_TRY(ggemm::validate_moe_ffn_args(args, ffn_layout(*args).bytes));
    GGEMM_TRY(check_handle(handle));
    const ggemm_moe_ffn_args &a = *args;
    if (a.num_tokens == 0) return GGEMM_STATUS_SUCCESS;
    const ggemm::FfnWorkspaceLayout w = ffn_layout(a);
    void *ws = a.workspace;
    const int64_t rows = a.num_tokens * a.top_k, inter = a.intermediate, hidden = a.hidden;
    CUstream s = reinterpret_cast<CUstream>(stream);

    ggemm::MoeRouteLaunch route{};
    route.num_tokens = a.num_tokens, route.top_k = a.top_k;
    route.num_experts = a.num_experts, route.first_expert = a.first_expert, route.local_experts = a.local_experts;
    route.topk_ids = a.topk_ids, route.topk_weights = a.topk_weights;
    route.a_offsets = at<uint32_t>(ws, w.a_offsets);
    route.expert_ids = at<int32_t>(ws, w.expert_ids);
    route.usage_stats = at<uint32_t>(ws, w.usage_stats);
    route.row_token = at<int32_t>(ws, w.row_token);
    route.row_slot = at<int32_t>(ws, w.row_slot);
    route.row_weight = at<float>(ws, w.row_weight);
    route.slot_row = at<int32_t>(ws, w.slot_row);
    route.workspace = at<void>(ws, w.route_scratch);
    route.device_status = checked_mode_word(handle);

    // gate_up: h [T * k, I] = SwiGLU of the gathered tokens times the
    // expert's [2I, H] gate and up rows. The gather is fused into the GEMM's
    // loads (one-row TMA boxes) for decode-sized calls only
    // (gathers_in_gate_up): its boxes cost per box, not per byte, and past
    // those sizes a plain copy of the
    // rows at copy bandwidth (the expand copy, ptx/moe/expand_rows.cuh: each
    // token's row to its k sorted rows, into y's space, which the down
    // product overwrites later) and the ungathered GEMM are much faster
    // (docs/performance.md, "the MoE layer").
    void *h = at<void>(ws, w.h);
    void *y = at<void>(ws, w.y);
    const bool decode = gathers_in_gate_up(rows, a.local_experts);
    ggemm::GroupedLaunch gate_up = ffn_matmul("moe_ffn gate_up", a, route, handle);
    gate_up.shape.n = 2 * inter, gate_up.shape.k = hidden;
    gate_up.shape.epilogue = GGEMM_EPILOGUE_SWIGLU;
    gate_up.shape.gather = decode;
    gate_up.a = decode ? a.x : y;
    gate_up.a_rows = decode ? a.num_tokens : rows;
    gate_up.a_row_index = decode ? route.row_token : nullptr;
    gate_up.b = a.w_gate_up;
    for (auto &v : gate_up.views) v = ggemm::OutputViewDesc{h, inter, 0, rows, inter};

    // Routing: at decode, where the slots fit one warp and gate_up runs on
    // the decode GEMV, the GEMV routes them in its prologue (each CTA for
    // itself, CTA 0 into the routing arrays: ptx/sm90/decode_gemv.cuh), one
    // launch fewer; else a routing launch of its own first.
    bool route_in_gate_up = false;
    if (decode && ggemm::routes_in_one_warp(route)) {
      ggemm::StatusOr<bool> gemv = ggemm::routes_in_prologue(*handle->device, gate_up);
      GGEMM_TRY(ggemm::report(gemv.status()));
      route_in_gate_up = gemv.value();
    }
    // Past decode the tokens are copied to their sorted rows first (the
    // expand copy), in the routing's launch where it routes in one CTA
    // (each CTA routes for itself, then copies: one dependent launch fewer).
    ggemm::MoeExpandLaunch expand{};
    expand.num_tokens = a.num_tokens, expand.top_k = a.top_k, expand.out_rows = rows;
    expand.row_bytes = hidden * ggemm::dtype_bytes(a.dtype);
    expand.x = a.x, expand.slot_row = route.slot_row, expand.out = y;
    expand.routed_rows = route.a_offsets + a.local_experts;
    expand.device_status = checked_mode_word(handle);
    const ggemm::moe::MoeRouteParams route_params = ggemm::route_params(route);
    if (route_in_gate_up) {
      gate_up.route = &route_params;
    } else if (!decode && ggemm::routes_in_one_cta(route)) {
      GGEMM_TRY(ggemm::report(ggemm::launch_moe_route_expand(*handle->device, route, expand, s)));
    } else {
      GGEMM_TRY(ggemm::report(ggemm::launch_moe_route(*handle->device, route, s)));
      if (!decode) GGEMM_TRY(ggemm::report(ggemm::launch_moe_expand_rows(*handle->device, expand, s)));
    }
    GGEMM_TRY(ggemm::api::launch(handle, gate_up, stream));

    // (The decode down gives each of a token's slots a lane: top_k <= 32.)
    if (decode && a.num_tokens <= kDecodeDownMaxTokens && a.top_k <= int64_t(ggemm::moe::kDecodeDownMaxTopK)) {
      ggemm::MoeDecodeDownLaunch down{};
      down.dtype = a.dtype;
      down.num_tokens = a.num_tokens, down.top_k = a.top_k, down.hidden = hidden, down.intermediate = inter;
      down.h_rows = rows;
      down.num_experts = a.num_experts, down.first_expert = a.first_expert, down.local_experts = a.local_experts;
      down.h = h, down.w_down = a.w_down;
      down.topk_ids = a.topk_ids, down.topk_weights = a.topk_weights, down.slot_row = route.slot_row;
      down.out = a.out;
      return ggemm::report(ggemm::launch_moe_decode_down(*handle->device, down, s));
    }

    // down: y [T * k, H] = row_weight * (h times the expert's [H, I]), in
    // sorted rows.
    ggemm::GroupedLaunch down = ffn_matmul("moe_ffn down", a, route, handle);
    down.shape.n = hidden, down.shape.k = inter;
    down.shape.epilogue = GGEMM_EPILOGUE_ROW_SCALE;
    down.a = h;
    down.a_rows = rows;
    down.a_row_index = nullptr;
    down.b = a.w_down;
    down.row_scale = route.row_weight;
    for (auto &v : down.views) v = ggemm::OutputViewDesc{y, hidden, 0, rows, hidden};
    GGEMM_TRY(ggemm::api::launch(handle, down, stream));

    ggemm::MoeCombineLaunch combine{};
    combine.y_dtype = combine.out_dtype = a.dtype;
    combine.num_tokens = a.num_tokens, combine.top_k = a.top_k, combine.hidden = hidden, combine.y_rows = rows;
    combine.y = y, combine.slot_row = route.slot_row, combine.out = a.out;
    combine.accumulate = false;
    combine.device_status = checked_mode_word(handle);
    return ggemm::report(ggemm::launch_moe_combine(*handle->device, combine, s));
  });
}
