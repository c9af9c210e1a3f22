#include "runtime/launch_grouped.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "ptx/blocks/grouped_params.h"
#include "ptx/blocks/l2_prefetch.h"
#include "ptx/sm100/smem_layout.h"
#include "ptx/sm90/short_k_layout.h"
#include "ptx/sm90/smem_layout.h"
#include "runtime/debug.h"
#include "runtime/heuristics.h"
#include "runtime/tensor_map.h"
#include "runtime/trace.h"

namespace ggemm {
namespace {

CUtensorMapDataType tma_dtype(ggemm_dtype t) {
  switch (t) {
    case GGEMM_DTYPE_BF16: return CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
    case GGEMM_DTYPE_FP16: return CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
    case GGEMM_DTYPE_FP32: return CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
  }
  return CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
}

// What differs between the architectures' launches: the kernel, its block,
// its shared memory and its config. Everything else (tensor maps, routing,
// views, grid) is filled alike: both kernels take the same GroupedGemmParams.
struct ArchKernel {
  const char *arch = "";  // "sm_90a", "sm_100a"
  std::string name;       // the entry point
  uint32_t tile_m = 0, tile_n = 0, swizzle_bytes = 0, stages = 0;
  uint32_t staging_buffers = 1;  // sm_90a's epilogue buffers; 1 (unused) on sm_100a
  uint32_t threads = 0;
  uint32_t smem_bytes = 0;      // dynamic shared memory
  uint32_t out_box_tokens = 0;  // rows of the output views' TMA box
  // CTAs per cluster: sm_100a's cta_group, sm_90a's cluster_m (a pair
  // sharing its token tile). A cluster walks pair tiles of 256 weight rows,
  // and each of its CTAs loads tile_m / cluster_size of the token rows.
  uint32_t cluster_size = 1;
  uint32_t k_slices = 1;  // sm_90a K-sliced stages (GroupedGemmParams::k_slices); 1 on sm_100a
  uint32_t consumer_warpgroups = 2;  // sm_90a multiplying warpgroups (GroupedGemmParams::consumer_warpgroups)
  // K-major weight rows per TMA box (GroupedGemmParams::weights_box_rows):
  // on sm_90a the value the config sized its stages by, so the boxes and the
  // shared-memory layout cannot disagree.
  uint32_t weights_box_rows = 0;
  // sm_90a's short-K kernel (ptx/sm90/short_k_gemm.cuh): no tensor maps, no
  // pipeline; ctas_per_sm CTAs on each SM walk the tiles.
  bool short_k = false;
  uint32_t ctas_per_sm = 1;
};

// GGEMM_K_SLICES=1, 2 or 4 forces sm_90a's slices of K per stage where the
// K-sliced views allow them (experiments: A/B on one binary); unset or
// anything else = the config rules' choice. Read once per process.
uint32_t k_slices_request() {
  static const uint32_t request = [] {
    const char *v = std::getenv("GGEMM_K_SLICES");
    return v && (v[0] == '1' || v[0] == '2' || v[0] == '4') && v[1] == 0 ? uint32_t(v[0] - '0') : 0u;
  }();
  return request;
}

ggemm_status plan_sm90(const DeviceProps &props, const GroupedShape &shape, const GroupedLaunch &a, ArchKernel *k) {
  Sm90Config cfg;
  GGEMM_TRY(choose_sm90_config(props, shape, a.config, &cfg));
  k->arch = "sm_90a";
  k->name = sm90_kernel_name(a.in_dtype, a.out_dtype, a.transpose_b, cfg.tile_m, cfg.cluster_m);
  k->tile_m = cfg.tile_m;
  k->tile_n = cfg.tile_n;
  k->swizzle_bytes = cfg.swizzle_bytes;
  k->stages = cfg.stages;
  k->staging_buffers = cfg.staging_buffers;
  k->threads = sm90::kThreads;
  k->k_slices = cfg.k_slices;
  k->weights_box_rows = cfg.weights_box_rows;
  k->consumer_warpgroups = cfg.consumer_warpgroups;
  k->smem_bytes = sm90::make_smem_layout(cfg.tile_m, cfg.swizzle_bytes, dtype_bytes(a.out_dtype), cfg.stages,
                                         cfg.staging_buffers, cfg.k_slices, cfg.weights_box_rows,
                                         cfg.consumer_warpgroups)
                      .total_bytes();
  k->out_box_tokens = sm90::sm90_epilogue_stage_tokens(cfg.tile_m);
  k->cluster_size = cfg.cluster_m;
  return GGEMM_STATUS_SUCCESS;
}

// GGEMM_SM90_SHORT_K=0 keeps every call on the persistent sm_90a kernel, =1
// sends every call the short-K kernel can run to it (experiments, and the
// GPU tests of both kernels); unset or anything else = the rule. Read once
// per process.
int short_k_request() {
  static const int request = [] {
    const char *v = std::getenv("GGEMM_SM90_SHORT_K");
    return v && (v[0] == '0' || v[0] == '1') && v[1] == 0 ? (v[0] == '1' ? 1 : -1) : 0;
  }();
  return request;
}

// GGEMM_SM90_NARROW_TOKEN_BOXES=0 keeps every sm_90a tile on the whole
// tile's token box (experiments: A/B of GroupedGemmParams::
// narrow_token_boxes on one binary); unset or anything else = on. Read
// once per process.
bool narrow_token_boxes_allowed() {
  static const bool allowed = [] {
    const char *v = std::getenv("GGEMM_SM90_NARROW_TOKEN_BOXES");
    return !(v && v[0] == '0' && v[1] == 0);
  }();
  return allowed;
}

// `splits`: 1, or kShortKSplit (the split kernel: a cluster of that many
// CTAs a tile).
void plan_sm90_short_k(const DeviceProps &props, const GroupedLaunch &a, uint32_t tile_m, uint32_t splits,
                       ArchKernel *k) {
  k->arch = "sm_90a";
  k->name = sm90_short_k_kernel_name(a.in_dtype, a.out_dtype, tile_m, splits);
  k->tile_m = tile_m;
  k->tile_n = sm90::kTileN;
  k->threads = sm90::kShortKThreads;
  k->smem_bytes =
      sm90::make_short_k_layout(tile_m, uint32_t(a.k), dtype_bytes(a.out_dtype), splits).total_bytes();
  k->short_k = true;
  k->cluster_size = splits;
  k->ctas_per_sm = sm90_short_k_ctas_per_sm(props, tile_m, a.k, a.out_dtype, splits);
}

ggemm_status plan_sm100(const DeviceProps &props, const GroupedShape &shape, const GroupedLaunch &a, ArchKernel *k) {
  Sm100Config cfg;
  GGEMM_TRY(choose_sm100_config(props, shape, a.config, &cfg));
  k->arch = "sm_100a";
  k->name = sm100_kernel_name(a.in_dtype, a.out_dtype, a.transpose_b, cfg.tile_m, cfg.cta_group);
  k->tile_m = cfg.tile_m;
  k->tile_n = sm100::kTileN;  // each CTA's weight rows (and TMA box), whatever the cta_group
  k->cluster_size = cfg.cta_group;
  k->weights_box_rows = kmajor_box_rows(a.transpose_b, k->cluster_size, a.n, k->tile_n);
  k->swizzle_bytes = cfg.swizzle_bytes;
  k->stages = cfg.stages;
  k->staging_buffers = 1;
  k->threads = sm100::kThreads;
  // At least half the opt-in shared memory, so one CTA runs per SM: each
  // allocates up to all 512 tensor-memory columns (two tile_m 256
  // accumulators), and a second CTA on the SM would wait for the first to
  // finish.
  k->smem_bytes = std::max<uint32_t>(
      sm100::make_smem_layout(cfg.tile_m, cfg.swizzle_bytes, cfg.stages, cfg.cta_group).total_bytes(),
      uint32_t(props.smem_optin) / 2 + 1);
  // The sm_100a epilogue stores from registers and never reads tmap_out; the
  // maps are encoded as for sm_90a all the same, so the params mean one thing.
  k->out_box_tokens = sm90::sm90_epilogue_stage_tokens(cfg.tile_m);
  return GGEMM_STATUS_SUCCESS;
}

// K-sliced views (GroupedGemmParams::k_slices): the slice index is a
// dimension of its own, 128 bytes apart, so one box carries k_slices
// 64-wide slices of K, each landing as the usual 128B-swizzled tile.
ggemm_status encode_sliced_operands(const Driver &drv, const GroupedLaunch &a, const ArchKernel &k,
                                    GroupedGemmParams *p) {
  const uint32_t tile_k = k.swizzle_bytes / 2, in_bytes = dtype_bytes(a.in_dtype);
  const uint64_t slices = uint64_t(a.k) / tile_k, row_bytes = uint64_t(a.k) * in_bytes;
  TensorMapSpec tokens{"activations", a.a, tma_dtype(a.in_dtype), in_bytes, 3,
                       {tile_k, uint64_t(a.a_rows), slices, 0}, {tile_k, k.tile_m, k.k_slices, 0},
                       tma_swizzle_for_bytes(k.swizzle_bytes)};
  tokens.strides[0] = row_bytes, tokens.strides[1] = tile_k * in_bytes;
  GGEMM_TRY(encode_tensor_map(drv, tokens, &p->tmap_tokens));
  TensorMapSpec weights{"weights", a.b, tma_dtype(a.in_dtype), in_bytes, 4,
                        {tile_k, uint64_t(a.n), slices, uint64_t(a.num_experts)},
                        {tile_k, k.weights_box_rows, k.k_slices, 1}, tma_swizzle_for_bytes(k.swizzle_bytes)};
  weights.strides[0] = row_bytes, weights.strides[1] = tile_k * in_bytes, weights.strides[2] = row_bytes * a.n;
  return encode_tensor_map(drv, weights, &p->tmap_weights);
}

// The tensor maps of the call's own pointers (never cached): operands and
// output views.
ggemm_status encode_tensor_maps(const Driver &drv, const GroupedLaunch &a, const ArchKernel &k,
                                GroupedGemmParams *p) {
  const uint32_t tile_k = k.swizzle_bytes / 2;
  const uint32_t in_bytes = dtype_bytes(a.in_dtype), out_bytes = dtype_bytes(a.out_dtype);
  // K-major weights narrower than a tile (LoRA shrink's 3R rows) load only
  // their rows (k.weights_box_rows).
  if (k.k_slices > 1) {
    GGEMM_TRY(encode_sliced_operands(drv, a, k, p));
  } else {
    // The activations in boxes of `box_rows` token rows.
    auto encode_tokens = [&](uint32_t box_rows, CUtensorMap *out) {
      return encode_tensor_map(drv,
                               {"activations", a.a, tma_dtype(a.in_dtype), in_bytes, 2,
                                {uint64_t(a.k), uint64_t(a.a_rows), 0}, {tile_k, box_rows, 0},
                                tma_swizzle_for_bytes(k.swizzle_bytes)},
                               out);
    };
    GGEMM_TRY(encode_tokens(k.tile_m / k.cluster_size, &p->tmap_tokens));
    // sm_90a without a cluster: the same activations in boxes of each MMA
    // width below tile_m (GroupedGemmParams::tmap_tokens_narrow).
    if (std::strcmp(k.arch, "sm_90a") == 0 && k.cluster_size == 1 && narrow_token_boxes_allowed()) {
      for (uint32_t i = 0; narrow_token_map_exists(i, k.tile_m); ++i)
        GGEMM_TRY(encode_tokens(16u << i, &p->tmap_tokens_narrow[i]));
      p->narrow_token_boxes = 1;
    }
    if (a.transpose_b) {
      GGEMM_TRY(encode_tensor_map(drv,
                                  {"weights", a.b, tma_dtype(a.in_dtype), in_bytes, 3,
                                   {uint64_t(a.k), uint64_t(a.n), uint64_t(a.num_experts)},
                                   {tile_k, k.weights_box_rows, 1}, tma_swizzle_for_bytes(k.swizzle_bytes)},
                                  &p->tmap_weights));
    } else {
      // [E, K, N]: boxes of tile_k rows of K by one 128-byte row of features
      // (64 of 16 bits), 128B-swizzled; a weight tile is two such boxes.
      GGEMM_TRY(encode_tensor_map(drv,
                                  {"weights", a.b, tma_dtype(a.in_dtype), in_bytes, 3,
                                   {uint64_t(a.n), uint64_t(a.k), uint64_t(a.num_experts)},
                                   {128 / in_bytes, tile_k, 1}, CU_TENSOR_MAP_SWIZZLE_128B},
                                  &p->tmap_weights));
    }
  }
  static const char *const kViewNames[3] = {"output segment 0", "output segment 1", "output segment 2"};
  for (int v = 0; v < 3; ++v) {
    const OutputViewDesc &view = a.views[v];
    GGEMM_TRY(encode_tensor_map(
        drv,
        {kViewNames[v], view.base, tma_dtype(a.out_dtype), out_bytes, 2, {uint64_t(view.width), uint64_t(view.rows), 0},
         {128 / out_bytes, k.out_box_tokens, 0}, CU_TENSOR_MAP_SWIZZLE_128B, uint64_t(view.ld)},
        &p->tmap_out[v]));
  }
  return GGEMM_STATUS_SUCCESS;
}

// The kernel parameters: the tensor maps (none for the short-K kernel, which
// loads through the pointers: they stay zero), the output views, the routing
// arrays and the config.
ggemm_status fill_params(const Driver &drv, const GroupedLaunch &a, const ArchKernel &k, bool span_segments,
                         GroupedGemmParams *out) {
  GroupedGemmParams p{};
  if (!k.short_k) GGEMM_TRY(encode_tensor_maps(drv, a, k, &p));
  for (int v = 0; v < 3; ++v)
    p.out[v] = OutputView{a.views[v].base, uint32_t(a.views[v].ld), uint32_t(a.views[v].col_offset)};
  p.tokens = a.a;
  p.weights = a.b;
  p.row_scale = a.row_scale;
  p.a_offsets = a.a_offsets;
  p.expert_ids = a.expert_ids;
  p.usage_stats = a.usage_stats;
  p.device_status = a.device_status;
  p.num_groups = uint32_t(a.num_groups);
  p.m = uint32_t(a.m);
  p.n = uint32_t(a.n);
  p.k = uint32_t(a.k);
  p.num_experts = uint32_t(a.num_experts);
  p.split0 = uint32_t(a.split0);
  p.split1 = uint32_t(a.split1);
  p.span_segments = span_segments ? 1 : 0;
  p.a_planes = a.a_planes ? 1 : 0;
  p.alpha = a.alpha;
  p.epilogue = uint32_t(a.epilogue);
  p.stages = k.stages;
  p.staging_buffers = k.staging_buffers;
  p.swizzle_bytes = k.swizzle_bytes;
  p.weights_box_rows = k.weights_box_rows;
  p.k_slices = k.k_slices;
  p.consumer_warpgroups = k.consumer_warpgroups;
  *out = p;
  return GGEMM_STATUS_SUCCESS;
}

// Small operands staged in L2 at kernel start (ptx/blocks/l2_prefetch.h; which
// ones: l2_prefetch_worthwhile).
void set_l2_prefetch(const GroupedLaunch &a, int64_t grid, GroupedGemmParams *p) {
  const uint64_t in_bytes = dtype_bytes(a.in_dtype);
  const uint64_t operand_bytes[2] = {uint64_t(a.a_rows) * uint64_t(a.k) * in_bytes,
                                     uint64_t(a.num_experts) * uint64_t(a.n) * uint64_t(a.k) * in_bytes};
  const void *const operands[2] = {a.a, a.b};
  for (int i = 0; i < 2; ++i) {
    const bool prefetch = l2_prefetch_worthwhile(operand_bytes[i], uint32_t(grid));
    p->l2_prefetch[i] = prefetch ? operands[i] : nullptr;
    p->l2_prefetch_bytes[i] = prefetch ? operand_bytes[i] : 0;
  }
}

}  // namespace

ggemm_status launch_grouped(Device &dev, const GroupedLaunch &a, CUstream stream) {
  const Driver &drv = dev.driver();
  // Tiles may cross the splits when the segments only route outputs (no
  // activation planes: LoRA shrink), so the shared activations are read once
  // per tile instead of once per segment. Not with accumulate: its TMA load
  // of the old outputs takes one segment's view per tile.
  const bool splits = a.split0 != 0 || a.split1 != 0;
  const bool span_segments = splits && !a.a_planes && a.epilogue != GGEMM_EPILOGUE_ACCUMULATE;
  // Column blocks over all segments (each tiled from its own start), or over
  // N when tiles span them.
  const int64_t seg_end0 = splits && !span_segments ? a.split0 : a.n;
  const int64_t seg_end1 = splits && !span_segments ? a.split1 : a.n;
  auto blocks = [](int64_t width) { return (width + kGroupedTileN - 1) / kGroupedTileN; };
  const int64_t col_blocks = blocks(seg_end0) + blocks(seg_end1 - seg_end0) + blocks(a.n - seg_end1);

  GroupedShape shape{a.in_dtype,   a.out_dtype,          a.m,        a.n, a.k, a.transpose_b,
                     a.num_groups, a.max_rows_per_group, a.epilogue, col_blocks};
  // Without a driver that encodes the K-sliced views, one slice per stage.
  shape.k_slices_request = sliced_views_supported(drv) ? k_slices_request() : 1;
  shape.short_k_request = short_k_request();
  ArchKernel k;
  switch (dev.arch()) {
    case Arch::kSm90a:
      if (const uint32_t tile_m = choose_sm90_short_k(dev.props(), shape, a.config)) {
        plan_sm90_short_k(dev.props(), a, tile_m, 1, &k);
      } else if (const uint32_t split_tile_m = choose_sm90_short_k_split(dev.props(), shape, a.config)) {
        plan_sm90_short_k(dev.props(), a, split_tile_m, sm90::kShortKSplit, &k);
      } else {
        GGEMM_TRY(plan_sm90(dev.props(), shape, a, &k));
      }
      break;
    case Arch::kSm100a: GGEMM_TRY(plan_sm100(dev.props(), shape, a, &k)); break;
  }
  GroupedGemmParams p;
  GGEMM_TRY(fill_params(drv, a, k, span_segments, &p));

  CUkernel kernel = nullptr;
  GGEMM_TRY(dev.kernel(k.name, &kernel));
  const CUfunction function = reinterpret_cast<CUfunction>(kernel);

  CUlaunchConfig lc{};
  lc.gridDimY = lc.gridDimZ = 1;
  lc.blockDimX = k.threads;
  lc.blockDimY = lc.blockDimZ = 1;
  lc.sharedMemBytes = k.smem_bytes;
  lc.hStream = stream;
  CUlaunchAttribute cluster{};
  cluster.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
  cluster.value.clusterDim.x = k.cluster_size;
  cluster.value.clusterDim.y = cluster.value.clusterDim.z = 1;
  lc.attrs = k.cluster_size > 1 ? &cluster : nullptr;
  lc.numAttrs = k.cluster_size > 1 ? 1 : 0;
  Device::ScopedContext ctx(dev);
  GGEMM_TRY(ctx.status());

  // Persistent grid: one CTA per SM, fewer when the host's bound on the
  // tile count (row_block_bound) is smaller. Clusters walk pair tiles of 256
  // weight rows, so the bound counts those, in whole clusters; and not every
  // SM finds a partner (the GPCs hold different numbers of SMs), so the grid
  // has no more clusters than run at once — a persistent cluster launched
  // after the others would double the tail.
  const int64_t row_blocks = row_block_bound(shape, k.tile_m);
  const int64_t pair_col_blocks =
      !k.short_k && k.cluster_size == 2 ? (col_blocks + 1) / 2 + 2 : col_blocks;  // + 2: segment ends
  // The short-K kernels: ctas_per_sm CTAs an SM, none without a tile.
  int64_t max_clusters = int64_t(dev.props().sm_count) * (k.short_k ? k.ctas_per_sm : 1) / k.cluster_size;
  if (k.cluster_size > 1) {
    lc.gridDimX = uint32_t(max_clusters * k.cluster_size);
    int resident = 0;
    GGEMM_CU(drv, cuOccupancyMaxActiveClusters(&resident, function, &lc));
    if (resident > 0) max_clusters = std::min<int64_t>(max_clusters, resident);
  }
  const int64_t clusters = std::max<int64_t>(1, std::min<int64_t>(max_clusters, row_blocks * pair_col_blocks));
  const int64_t grid = clusters * k.cluster_size;
  lc.gridDimX = uint32_t(grid);
  if (!k.short_k) set_l2_prefetch(a, grid, &p);  // the short-K kernel prefetches nothing

  if (debug_enabled()) {
    // The config part: the persistent kernels' pipeline, or the short-K
    // kernel's tile (it has no stages, swizzle or staging ring).
    char config[192];
    if (k.short_k) {
      std::snprintf(config, sizeof config, "tile %ux%u, %s, no pipeline, up to %u CTAs an SM", k.tile_m, k.tile_n,
                    k.cluster_size > 1 ? "K split over the cluster, a slice a CTA" : "whole K", k.ctas_per_sm);
    } else {
      std::snprintf(config, sizeof config,
                    "tile %ux%ux%u stages %u (%u K slice%s each) swizzle %uB staging x%u consumers %u", k.tile_m,
                    k.tile_n, k.swizzle_bytes / 2, k.stages, k.k_slices, k.k_slices > 1 ? "s" : "", k.swizzle_bytes,
                    k.staging_buffers, k.consumer_warpgroups);
    }
    std::fprintf(stderr,
                 "[ggemm] %s m=%lld n=%lld k=%lld E=%lld groups=%lld %s->%s %s segments (%lld, %lld)%s | "
                 "%s kernel %s | %s | grid %lld x %u threads (clusters of %u), %u B smem | L2 prefetch: "
                 "activations %llu B, weights %llu B\n",
                 a.op, (long long)a.m, (long long)a.n, (long long)a.k, (long long)a.num_experts,
                 (long long)a.num_groups, dtype_name(a.in_dtype), dtype_name(a.out_dtype),
                 a.transpose_b ? "B[E,N,K]" : "B[E,K,N]", (long long)a.split0, (long long)a.split1,
                 a.a_planes ? " planes" : "", k.arch, k.name.c_str(), config, (long long)grid, k.threads,
                 k.cluster_size, k.smem_bytes, (unsigned long long)p.l2_prefetch_bytes[0],
                 (unsigned long long)p.l2_prefetch_bytes[1]);
  }

#if GGEMM_TRACE
  LaunchTrace trace;
  GGEMM_TRY(trace.begin(drv, stream, lc.gridDimX, &p));
#endif
  void *params[] = {&p};
  GGEMM_CU(drv, cuLaunchKernelEx(&lc, function, params, nullptr));
#if GGEMM_TRACE
  TraceFileHeader header{};
  std::memcpy(header.magic, "GGTRACE1", 8);
  std::snprintf(header.kernel, sizeof header.kernel, "%s", k.name.c_str());
  header.grid = lc.gridDimX, header.roles = kTraceRoles, header.events = kTraceEvents;
  header.tile_m = k.tile_m, header.tile_n = k.tile_n, header.stages = k.stages;
  header.k = uint32_t(a.k), header.swizzle_bytes = k.swizzle_bytes;
  GGEMM_TRY(trace.end(drv, stream, header));
#endif
  return GGEMM_STATUS_SUCCESS;
}

}  // namespace ggemm
