#include "runtime/launch_moe.h"

#include <algorithm>

#include "ptx/moe/moe_params.h"
#include "runtime/launch_config.h"
#include "runtime/plan.h"

namespace ggemm {
namespace {

using moe::kMaxChunkSlots;
using moe::kOneWarpMaxSlots;
using moe::kMaxRouteScatterCtas;
using moe::kRouteThreads;

constexpr uint32_t kMinChunkSlots = 2048;
// Chunks the count pass aims at (about four CTAs an SM on an H200), and the
// most count-matrix entries worth trading chunks for (32 MiB of counts).
constexpr int64_t kTargetChunks = 512;
constexpr int64_t kMaxCountEntries = int64_t(1) << 23;
// Experts one scatter CTA scans in phase A before the grid grows by a CTA.
constexpr int64_t kExpertsPerScanCta = 64;
// Experts up to which a one-chunk call routes in one CTA: its shared memory
// holds 6 bytes an expert (24 KB at 4096), under the 48 KB a launch gets
// without opting in.
constexpr int64_t kOneCtaMaxExperts = 4096;
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

// Both routing kernels keep two 16-bit counters a shared word per expert pair.
uint32_t route_counter_bytes(int64_t local_experts) { return uint32_t((local_experts + 1) / 2 * 4); }

// One launch of an MoE kernel by name (driver API, every call checked).
Status launch_kernel(Device &dev, const char *name, uint32_t grid, uint32_t threads, uint32_t smem_bytes,
                     bool cooperative, void *params, CUstream stream, uint32_t grid_y = 1) {
  const Driver &drv = dev.driver();
  CUkernel kernel = nullptr;
  GGEMM_ASSIGN_OR_RETURN(kernel, dev.kernel(name));
  // Cooperative: the scatter pass's CTAs wait for each other; it starts
  // after the kernel before it, as a plain launch does.
  LaunchConfig lc(threads, smem_bytes, stream, cooperative ? LaunchOrder::kCooperative : LaunchOrder::kProgrammatic);
  lc.set_grid(grid, grid_y);
  Device::ScopedContext ctx(dev);
  GGEMM_RETURN_IF_ERROR(ctx.status());
  void *args[] = {params};
  GGEMM_CU(drv, cuLaunchKernelEx(lc.get(), reinterpret_cast<CUfunction>(kernel), args, nullptr));
  return OkStatus();
}

}  // namespace

RouteChunks route_chunks(int64_t num_slots, int64_t local_experts) {
  if (num_slots <= 0) return {kMinChunkSlots, 0};
  int64_t chunk = kMinChunkSlots;
  while (chunk < kMaxChunkSlots && (ceil_div(num_slots, chunk) > kTargetChunks ||
                                    local_experts * ceil_div(num_slots, chunk) > kMaxCountEntries))
    chunk *= 2;
  return {uint32_t(chunk), uint32_t(ceil_div(num_slots, chunk))};
}

RouteScratchLayout route_scratch_layout(int64_t num_slots, int64_t local_experts) {
  const RouteChunks c = route_chunks(num_slots, local_experts);
  RouteScratchLayout s{};
  size_t end = 0;
  s.grid_arrivals = take(&end, sizeof(uint32_t));
  s.cta_totals = take(&end, 3 * sizeof(uint32_t) * kMaxRouteScatterCtas);
  s.expert_rows = take(&end, sizeof(uint32_t) * size_t(local_experts));
  s.chunk_counts = take(&end, sizeof(uint32_t) * size_t(local_experts) * c.num_chunks);
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
  const RouteChunks chunks = route_chunks(slots, l.local_experts);
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
  p.expert_rows = reinterpret_cast<uint32_t *>(ws + layout.expert_rows);
  p.cta_totals = reinterpret_cast<uint32_t *>(ws + layout.cta_totals);
  p.grid_arrivals = reinterpret_cast<uint32_t *>(ws + layout.grid_arrivals);
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

Status launch_moe_route(Device &dev, const MoeRouteLaunch &l, CUstream stream) {
  moe::MoeRouteParams p = route_params(l);

  // Decode: a lane a slot, one warp (ptx/moe/route.cuh, route_one_warp).
  if (routes_in_one_warp(l))
    return launch_kernel(dev, "ggemm_moe_route_one_warp", 1, 32, 0, false, &p, stream);
  const uint32_t smem = route_counter_bytes(l.local_experts);
  // One chunk (decode, small prefill): the whole sort in one CTA and one
  // launch, its counts in shared memory (ptx/moe/route.cuh).
  if (p.num_chunks <= 1 && l.local_experts <= kOneCtaMaxExperts)
    return launch_kernel(dev, "ggemm_moe_route_one_cta", 1, kRouteThreads,
                         smem + uint32_t(sizeof(uint32_t) * l.local_experts), false, &p, stream);
  // The count pass has one CTA even with no chunk: it zeroes the barrier.
  GGEMM_RETURN_IF_ERROR(launch_kernel(dev, "ggemm_moe_route_count", std::max<uint32_t>(p.num_chunks, 1),
                                      kRouteThreads, smem, false, &p, stream));
  // No more scatter CTAs than SMs (one each, all resident) nor than there is
  // work for: chunks to scatter, or experts to scan.
  const int64_t wanted = std::max<int64_t>({1, int64_t(p.num_chunks), ceil_div(l.local_experts, kExpertsPerScanCta)});
  const uint32_t ctas = uint32_t(std::min<int64_t>({wanted, dev.props().sm_count, kMaxRouteScatterCtas}));
  return launch_kernel(dev, "ggemm_moe_route_scatter", ctas, kRouteThreads, smem, true, &p, stream);
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
  const char *name = l.y_dtype == GGEMM_DTYPE_BF16 ? (fp32_out ? "ggemm_moe_combine_bf16_fp32" : "ggemm_moe_combine_bf16_bf16")
                                                   : (fp32_out ? "ggemm_moe_combine_fp16_fp32" : "ggemm_moe_combine_fp16_fp16");
  const int64_t tokens_per_cta = moe::kCombineThreads / p.team_threads;
  const int64_t ctas = ceil_div(l.num_tokens, tokens_per_cta);
  // Few tokens (decode): the columns split over more CTAs (grid y), so the
  // rows' reads spread over the SMs instead of one CTA's few loads in
  // flight (one token of DeepSeek-V3, 8 rows of 14 KB: 13.5 us on one CTA).
  const int64_t column_steps = ceil_div(l.hidden / 8, p.team_threads);
  const int64_t splits = std::clamp<int64_t>(ceil_div(dev.props().sm_count, ctas), 1, column_steps);
  return launch_kernel(dev, name, uint32_t(ctas), moe::kCombineThreads, 0, false, &p, stream, uint32_t(splits));
}

}  // namespace ggemm
