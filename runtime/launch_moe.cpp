#include "runtime/launch_moe.h"

#include <algorithm>
#include <cstdio>

#include "ptx/moe/moe_params.h"
#include "runtime/debug.h"
#include "runtime/launch_config.h"
#include "runtime/moe_kernel_names.h"
#include "runtime/plan.h"

namespace ggemm {
namespace {

using moe::kMaxChunkSlots;
using moe::kOneWarpMaxSlots;
using moe::kRouteThreads;

// Chunks of one slot a scatter thread while there are at most this many
// (about one an SM on an H200), else longer chunks. A scatter CTA's stores
// of the routed rows land at scattered rows (three 4-byte stores a slot,
// each warp store touching up to 32 lines), so its time grows with its
// slots: one CTA of 4096 slots took ~20 us, one of 512 ~5 us, launch and
// all (H200). Each scatter CTA also reads the whole count matrix, which
// bounds the chunk count.
constexpr int64_t kTargetChunks = 128;
// Warps the expand copy wants at once (32 an SM on an H200's 132).
constexpr int64_t kExpandWarpsWanted = 4096;
// Experts up to which a call of at most kOneWarpMaxSlots slots routes in one
// warp: its 32 lanes write every expert's group entries (32 rounds at 1024).
constexpr int64_t kOneWarpMaxExperts = 1024;

size_t align_up(size_t v) { return (v + kMoeWorkspaceAlign - 1) / kMoeWorkspaceAlign * kMoeWorkspaceAlign; }

// Appends `bytes` to a layout being built and returns where they start.
size_t take(size_t *end, size_t bytes) {
  const size_t at = *end;
  *end = align_up(at + bytes);
  return at;
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// One launch of an MoE kernel by name (driver API, every call checked),
// with programmatic dependent launch.
Status launch_kernel(Device &dev, const char *name, uint32_t grid, uint32_t threads, uint32_t smem_bytes, void *params,
                     CUstream stream, uint32_t grid_y = 1) {
  const Driver &drv = dev.driver();
  CUkernel kernel = nullptr;
  GGEMM_ASSIGN_OR_RETURN(kernel, dev.kernel(name));
  LaunchConfig lc(threads, smem_bytes, stream);
  lc.set_grid(grid, grid_y);
  Device::ScopedContext ctx(dev);
  GGEMM_RETURN_IF_ERROR(ctx.status());
  void *args[] = {params};
  GGEMM_CU(drv, cuLaunchKernelEx(lc.get(), reinterpret_cast<CUfunction>(kernel), args, nullptr));
  if (debug_enabled())
    std::fprintf(stderr, "[ggemm] moe kernel %s grid %ux%u threads %u smem %u\n", name, grid, grid_y, threads,
                 smem_bytes);
  return OkStatus();
}

}  // namespace

RouteChunks route_chunks(int64_t num_slots) {
  int64_t chunk = kRouteThreads;
  while (chunk < kMaxChunkSlots && ceil_div(num_slots, chunk) > kTargetChunks) chunk *= 2;
  return {uint32_t(chunk), uint32_t(ceil_div(std::max<int64_t>(num_slots, 0), chunk))};
}

RouteScratchLayout route_scratch_layout(int64_t num_slots, int64_t local_experts) {
  const RouteChunks c = route_chunks(num_slots);
  RouteScratchLayout s{};
  size_t end = 0;
  // At least one row, so the workspace is never empty (it is a required
  // argument even when T = 0).
  s.chunk_counts = take(&end, sizeof(uint32_t) * size_t(local_experts) * std::max<uint32_t>(c.num_chunks, 1));
  s.bytes = end;
  return s;
}

FfnWorkspaceLayout ffn_workspace_layout(int64_t num_tokens, int64_t top_k, int64_t hidden, int64_t intermediate,
                                        int64_t local_experts, ggemm_dtype dtype) {
  const size_t slots = size_t(num_tokens) * size_t(top_k), elem = dtype_bytes(dtype);
  FfnWorkspaceLayout w{};
  size_t end = 0;
  w.a_offsets = take(&end, sizeof(uint32_t) * size_t(local_experts + 1));
  w.expert_ids = take(&end, sizeof(int32_t) * size_t(local_experts));
  w.usage_stats = take(&end, 2 * sizeof(uint32_t));
  w.row_token = take(&end, sizeof(int32_t) * slots);
  w.row_slot = take(&end, sizeof(int32_t) * slots);
  w.row_weight = take(&end, sizeof(float) * slots);
  w.slot_row = take(&end, sizeof(int32_t) * slots);
  w.route_scratch = take(&end, route_scratch_layout(int64_t(slots), local_experts).bytes);
  w.h = take(&end, slots * size_t(intermediate) * elem);
  w.y = take(&end, slots * size_t(hidden) * elem);
  w.bytes = end;
  return w;
}

moe::MoeRouteParams route_params(const MoeRouteLaunch &l) {
  const int64_t slots = l.num_tokens * l.top_k;
  const RouteChunks chunks = route_chunks(slots);
  const RouteScratchLayout layout = route_scratch_layout(slots, l.local_experts);
  char *ws = static_cast<char *>(l.workspace);
  moe::MoeRouteParams p{};
  p.topk_ids = l.topk_ids;
  p.topk_weights = l.topk_weights;
  p.a_offsets = l.a_offsets;
  p.expert_ids = l.expert_ids;
  p.usage_stats = l.usage_stats;
  p.row_token = l.row_token;
  p.row_slot = l.row_slot;
  p.row_weight = l.row_weight;
  p.slot_row = l.slot_row;
  p.chunk_counts = reinterpret_cast<uint32_t *>(ws + layout.chunk_counts);
  p.device_status = l.device_status;
  p.num_slots = uint32_t(slots);
  p.top_k = uint32_t(l.top_k);
  p.num_experts = int32_t(l.num_experts);
  p.first_expert = int32_t(l.first_expert);
  p.local_experts = uint32_t(l.local_experts);
  p.chunk_slots = chunks.chunk_slots;
  p.num_chunks = chunks.num_chunks;
  return p;
}

bool routes_in_one_warp(const MoeRouteLaunch &l) {
  return l.num_tokens * l.top_k <= int64_t(kOneWarpMaxSlots) && l.local_experts <= kOneWarpMaxExperts;
}

bool routes_in_one_cta(const MoeRouteLaunch &l) {
  return l.num_tokens * l.top_k <= int64_t(kRouteThreads) && l.local_experts <= int64_t(moe::kOneCtaMaxExperts);
}

Status launch_moe_route(Device &dev, const MoeRouteLaunch &l, CUstream stream) {
  moe::MoeRouteParams p = route_params(l);

  // Decode: a lane a slot, one warp (ptx/moe/route.cuh, route_one_warp).
  if (routes_in_one_warp(l))
    return launch_kernel(dev, moe_kernel::kRouteOneWarp, 1, 32, 0, &p, stream);
  // One chunk of few experts: a thread a slot, one CTA (route_one_cta.cuh).
  if (routes_in_one_cta(l))
    return launch_kernel(dev, moe_kernel::kRouteOneCta, 1, kRouteThreads,
                         uint32_t(l.local_experts) * moe::kOneCtaBytesPerExpert, &p, stream);
  // More than one chunk: the count pass first, a CTA a chunk.
  if (p.num_chunks > 1)
    GGEMM_RETURN_IF_ERROR(launch_kernel(dev, moe_kernel::kRouteCount, p.num_chunks, kRouteThreads,
                                        uint32_t((l.local_experts + 1) / 2 * 4), &p, stream));
  // The scatter pass, a CTA a chunk (one CTA for T = 0: it writes the
  // empty routing).
  const uint32_t window = uint32_t(std::min<int64_t>(l.local_experts, moe::kRouteWindowExperts));
  return launch_kernel(dev, moe_kernel::kRouteScatter, std::max<uint32_t>(p.num_chunks, 1), kRouteThreads,
                       window * moe::kRouteBytesPerWindowExpert, &p, stream);
}

namespace {

// The expand copy's parameters, and the warps it wants (its items).
moe::MoeExpandParams expand_params(const MoeExpandLaunch &l, int64_t *items) {
  moe::MoeExpandParams p{};
  p.x = l.x;
  p.slot_row = l.slot_row;
  p.out = l.out;
  p.routed_rows = l.routed_rows;
  p.device_status = l.device_status;
  p.num_tokens = uint32_t(l.num_tokens);
  p.top_k = uint32_t(l.top_k);
  p.out_rows = uint32_t(l.out_rows);
  p.row_vectors = uint32_t(l.row_bytes / 16);
  // A warp an item (a token's stretch of 32 x kExpandVectorsInFlight
  // vectors, or a part of its slots), a CTA's warps consecutive items, at
  // most 2^16 CTAs (the kernel strides over the rest). Where the tokens'
  // stretches are fewer than kExpandWarpsWanted, the slots split over up to
  // top_k warps: Qwen3-30B at 512 tokens (512 stretches) took 10.1 us
  // unsplit against 5.8 for a warp a row (H200).
  const int64_t stretch = 32 * int64_t(moe::kExpandVectorsInFlight);
  const int64_t stretches = l.num_tokens * ceil_div(p.row_vectors, stretch);
  p.slot_parts = uint32_t(std::clamp<int64_t>(ceil_div(kExpandWarpsWanted, std::max<int64_t>(stretches, 1)), 1, l.top_k));
  *items = stretches * p.slot_parts;
  return p;
}

}  // namespace

Status launch_moe_expand_rows(Device &dev, const MoeExpandLaunch &l, CUstream stream) {
  int64_t items = 0;
  moe::MoeExpandParams p = expand_params(l, &items);
  const int64_t ctas = std::clamp<int64_t>(ceil_div(items, moe::kExpandThreads / 32), 1, int64_t(1) << 16);
  return launch_kernel(dev, moe_kernel::kExpandRows, uint32_t(ctas), moe::kExpandThreads, 0, &p, stream);
}

Status launch_moe_route_expand(Device &dev, const MoeRouteLaunch &route, const MoeExpandLaunch &expand,
                               CUstream stream) {
  // What the kernel assumes (ggemm_moe_ffn meets it): the copy's slots are
  // the routing's, one CTA's worth, each with a row of out.
  const int64_t slots = route.num_tokens * route.top_k;
  if (!routes_in_one_cta(route) || expand.num_tokens != route.num_tokens || expand.top_k != route.top_k ||
      expand.out_rows < slots || expand.row_bytes % 16 != 0)
    return error(GGEMM_STATUS_INTERNAL_ERROR, "routing with the token copy: T %lld, top_k %lld, out rows %lld",
                 static_cast<long long>(route.num_tokens), static_cast<long long>(route.top_k),
                 static_cast<long long>(expand.out_rows));
  moe::MoeRouteExpandParams p{};
  p.route = route_params(route);
  int64_t items = 0;
  p.expand = expand_params(expand, &items);
  // Every CTA routes the slots before it copies, so the CTAs are at most
  // the SMs (one wave; a CTA of a second wave would route again first).
  const int64_t sms = std::max(dev.props().sm_count, 1);
  const int64_t ctas = std::clamp<int64_t>(ceil_div(items, kRouteThreads / 32), 1, sms);
  return launch_kernel(dev, moe_kernel::kRouteExpand, uint32_t(ctas), kRouteThreads,
                       uint32_t(route.local_experts) * moe::kOneCtaBytesPerExpert, &p, stream);
}

Status launch_moe_decode_down(Device &dev, const MoeDecodeDownLaunch &l, CUstream stream) {
  // What the kernel assumes (ggemm_moe_ffn's decode calls meet it): slots
  // a lane each, whole 4-column tiles, 16-byte rows, tiles counted in 31 bits.
  const bool dtype_ok = l.dtype == GGEMM_DTYPE_BF16 || l.dtype == GGEMM_DTYPE_FP16;
  if (!dtype_ok || l.num_tokens <= 0 || l.top_k <= 0 || l.top_k > int64_t(moe::kDecodeDownMaxTopK) ||
      l.hidden % moe::kDecodeDownCols != 0 || l.intermediate % 8 != 0 ||
      l.num_tokens * (l.hidden / moe::kDecodeDownCols) >= (int64_t(1) << 31))
    return error(GGEMM_STATUS_INTERNAL_ERROR, "decode down projection: T %lld, top_k %lld, hidden %lld, I %lld",
                 static_cast<long long>(l.num_tokens), static_cast<long long>(l.top_k),
                 static_cast<long long>(l.hidden), static_cast<long long>(l.intermediate));
  moe::MoeDecodeDownParams p{};
  p.h = l.h;
  p.w_down = l.w_down;
  p.topk_ids = l.topk_ids;
  p.topk_weights = l.topk_weights;
  p.slot_row = l.slot_row;
  p.out = l.out;
  p.num_tokens = uint32_t(l.num_tokens);
  p.top_k = uint32_t(l.top_k);
  p.hidden = uint32_t(l.hidden);
  p.inter = uint32_t(l.intermediate);
  p.h_rows = uint32_t(l.h_rows);
  p.num_experts = int32_t(l.num_experts);
  p.first_expert = int32_t(l.first_expert);
  p.local_experts = uint32_t(l.local_experts);
  // A CTA a tile while they fit one wave of four an SM, else that wave
  // striding over them.
  const int64_t tiles = l.num_tokens * (l.hidden / moe::kDecodeDownCols);
  const int64_t ctas = std::min<int64_t>(tiles, int64_t(dev.props().sm_count) * moe::kDecodeDownCtasPerSm);
  const char *name = l.dtype == GGEMM_DTYPE_BF16 ? moe_kernel::kDecodeDownBf16 : moe_kernel::kDecodeDownFp16;
  return launch_kernel(dev, name, uint32_t(ctas), moe::kDecodeDownThreads, 0, &p, stream);
}

uint32_t combine_team_threads(int64_t hidden) {
  const int64_t vectors = hidden / 8;
  uint32_t team = moe::kMinCombineTeam;
  while (team < moe::kCombineThreads && team < vectors) team *= 2;
  return team;
}

Status launch_moe_combine(Device &dev, const MoeCombineLaunch &l, CUstream stream) {
  moe::MoeCombineParams p{};
  p.y = l.y;
  p.slot_row = l.slot_row;
  p.out = l.out;
  p.device_status = l.device_status;
  p.num_tokens = uint32_t(l.num_tokens);
  p.top_k = uint32_t(l.top_k);
  p.hidden = uint32_t(l.hidden);
  p.y_rows = uint32_t(l.y_rows);
  p.team_threads = combine_team_threads(l.hidden);
  p.accumulate = l.accumulate ? 1 : 0;
  const bool fp32_out = l.out_dtype == GGEMM_DTYPE_FP32;
  const char *name = l.y_dtype == GGEMM_DTYPE_BF16 ? (fp32_out ? moe_kernel::kCombineBf16Fp32 : moe_kernel::kCombineBf16Bf16)
                                                   : (fp32_out ? moe_kernel::kCombineFp16Fp32 : moe_kernel::kCombineFp16Fp16);
  const int64_t tokens_per_cta = moe::kCombineThreads / p.team_threads;
  const int64_t ctas = ceil_div(l.num_tokens, tokens_per_cta);
  // Few tokens (decode): the columns split over more CTAs (grid y), so the
  // rows' reads spread over the SMs instead of one CTA's few loads in
  // flight (one token of DeepSeek-V3, 8 rows of 14 KB: 13.5 us on one CTA).
  const int64_t column_steps = ceil_div(l.hidden / 8, p.team_threads);
  const int64_t splits = std::clamp<int64_t>(ceil_div(dev.props().sm_count, ctas), 1, column_steps);
  return launch_kernel(dev, name, uint32_t(ctas), moe::kCombineThreads, 0, &p, stream, uint32_t(splits));
}

}  // namespace ggemm
