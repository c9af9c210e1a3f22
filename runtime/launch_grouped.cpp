#include "runtime/launch_grouped.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>

#include "ptx/blocks/grouped_params.h"
#include "ptx/blocks/l2_prefetch.h"
#include "ptx/sm90/params.h"
#include "runtime/debug.h"
#include "runtime/launch_config.h"
#include "runtime/plan_rules.h"
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

// K-sliced views (Sm90GroupedParams::k_slices): the slice index is a
// dimension of its own, 128 bytes apart, so one box carries k_slices
// 64-wide slices of K, each landing as the usual 128B-swizzled tile.
Status encode_sliced_operands(const Driver &drv, const GroupedLaunch &a, const KernelPlan &k,
                              GroupedGemmParams *p) {
  const GroupedShape &s = a.shape;
  const uint32_t tile_k = k.swizzle_bytes / 2, in_bytes = dtype_bytes(s.a_dtype);
  const uint64_t slices = uint64_t(s.k) / tile_k, row_bytes = uint64_t(s.k) * in_bytes;
  TensorMapSpec tokens{"activations", a.a, tma_dtype(s.a_dtype), in_bytes, 3,
                       {tile_k, uint64_t(a.a_rows), slices, 0}, {tile_k, k.tile_m, k.k_slices, 0},
                       tma_swizzle_for_bytes(k.swizzle_bytes)};
  tokens.strides[0] = row_bytes, tokens.strides[1] = tile_k * in_bytes;
  GGEMM_RETURN_IF_ERROR(encode_tensor_map(drv, tokens, &p->tmap_tokens));
  TensorMapSpec weights{"weights", a.b, tma_dtype(s.a_dtype), in_bytes, 4,
                        {tile_k, uint64_t(s.n), slices, uint64_t(a.num_experts)},
                        {tile_k, k.weights_box_rows, k.k_slices, 1}, tma_swizzle_for_bytes(k.swizzle_bytes)};
  weights.strides[0] = row_bytes, weights.strides[1] = tile_k * in_bytes, weights.strides[2] = row_bytes * s.n;
  return encode_tensor_map(drv, weights, &p->tmap_weights);
}

// The activations in boxes of `box_rows` token rows by one swizzle span of K.
Status encode_token_map(const Driver &drv, const GroupedLaunch &a, const KernelPlan &k, uint32_t box_rows,
                        CUtensorMap *out) {
  const GroupedShape &s = a.shape;
  return encode_tensor_map(drv,
                           {"activations", a.a, tma_dtype(s.a_dtype), dtype_bytes(s.a_dtype), 2,
                            {uint64_t(s.k), uint64_t(a.a_rows), 0}, {k.swizzle_bytes / 2, box_rows, 0},
                            tma_swizzle_for_bytes(k.swizzle_bytes)},
                           out);
}

// The SwiGLU epilogue's gate_up weights [E, 2I, K] as a 5-D view {K, 8
// rows, gate | up, I / 8 feature octets, E}: one box {tile_k, 8, 2, 8, 1}
// lands as 128 rows interleaving 8 gate rows with the 8 up rows of the same
// features (kSwigluOctet), so a tile's gate and up values meet in each
// thread's wgmma fragment; a narrow tile's box {tile_k, 8, 2, 4, 1} (64
// weights_box_rows) lands 4 such octet pairs.
Status encode_swiglu_weights(const Driver &drv, const GroupedLaunch &a, const KernelPlan &k, GroupedGemmParams *p) {
  const GroupedShape &s = a.shape;
  const uint32_t in_bytes = dtype_bytes(s.a_dtype);
  const uint64_t row_bytes = uint64_t(s.k) * in_bytes, half = uint64_t(s.n) / 2;
  TensorMapSpec weights{"swiglu weights", a.b, tma_dtype(s.a_dtype), in_bytes, 5,
                        {uint64_t(s.k), kSwigluOctet, 2, half / kSwigluOctet, uint64_t(a.num_experts)},
                        {k.swizzle_bytes / 2, kSwigluOctet, 2, k.weights_box_rows / (2 * kSwigluOctet), 1},
                        tma_swizzle_for_bytes(k.swizzle_bytes)};
  weights.strides[0] = row_bytes;                        // a row
  weights.strides[1] = half * row_bytes;                 // gate -> up
  weights.strides[2] = kSwigluOctet * row_bytes;         // the next octet of features
  weights.strides[3] = uint64_t(s.n) * row_bytes;        // the next expert
  return encode_tensor_map(drv, weights, &p->tmap_weights);
}

// The operands' tensor maps, of the call's own pointers (never cached).
Status encode_operand_maps(const Driver &drv, const GroupedLaunch &a, const KernelPlan &k, GroupedGemmParams *p) {
  const GroupedShape &s = a.shape;
  const uint32_t tile_k = k.swizzle_bytes / 2, in_bytes = dtype_bytes(s.a_dtype);
  // K-major weights narrower than a tile (LoRA shrink's 3R rows) load only
  // their rows (k.weights_box_rows).
  if (k.k_slices > 1) {
    GGEMM_RETURN_IF_ERROR(encode_sliced_operands(drv, a, k, p));
  } else {
    // Gathered rows load one row a box (ptx/sm90/producer.cuh).
    const uint32_t token_box_rows = s.gather ? 1 : k.tile_m / k.cluster_size;
    GGEMM_RETURN_IF_ERROR(encode_token_map(drv, a, k, token_box_rows, &p->tmap_tokens));
    if (s.epilogue == GGEMM_EPILOGUE_SWIGLU) {
      GGEMM_RETURN_IF_ERROR(encode_swiglu_weights(drv, a, k, p));
    } else if (s.transpose_b) {
      GGEMM_RETURN_IF_ERROR(encode_tensor_map(drv,
                                              {"weights", a.b, tma_dtype(s.a_dtype), in_bytes, 3,
                                               {uint64_t(s.k), uint64_t(s.n), uint64_t(a.num_experts)},
                                               {tile_k, k.weights_box_rows, 1}, tma_swizzle_for_bytes(k.swizzle_bytes)},
                                              &p->tmap_weights));
    } else {
      // [E, K, N]: boxes of tile_k rows of K by one 128-byte row of features
      // (64 of 16 bits), 128B-swizzled; a weight tile is two such boxes.
      GGEMM_RETURN_IF_ERROR(encode_tensor_map(drv,
                                              {"weights", a.b, tma_dtype(s.a_dtype), in_bytes, 3,
                                               {uint64_t(s.n), uint64_t(s.k), uint64_t(a.num_experts)},
                                               {128 / in_bytes, tile_k, 1}, CU_TENSOR_MAP_SWIZZLE_128B},
                                              &p->tmap_weights));
    }
  }
  return OkStatus();
}

// The sm_90a persistent kernel's own maps: the activations in boxes of each
// MMA width below tile_m (Sm90GroupedParams::tmap_tokens_narrow), and the
// output views its epilogue stores through.
Status encode_sm90_maps(const Driver &drv, const GroupedLaunch &a, const KernelPlan &k, Sm90GroupedParams *p) {
  const GroupedShape &s = a.shape;
  if (k.narrow_token_boxes) {
    for (uint32_t i = 0; narrow_token_map_exists(i, k.tile_m); ++i)
      GGEMM_RETURN_IF_ERROR(encode_token_map(drv, a, k, 16u << i, &p->tmap_tokens_narrow[i]));
    p->narrow_token_boxes = 1;
  }
  const uint32_t out_bytes = dtype_bytes(s.c_dtype);
  static const char *const kViewNames[3] = {"output segment 0", "output segment 1", "output segment 2"};
  for (int v = 0; v < 3; ++v) {
    const OutputViewDesc &view = a.views[v];
    GGEMM_RETURN_IF_ERROR(encode_tensor_map(
        drv,
        {kViewNames[v], view.base, tma_dtype(s.c_dtype), out_bytes, 2, {uint64_t(view.width), uint64_t(view.rows), 0},
         {k.out_box_bytes / out_bytes, k.out_box_tokens, 0}, tma_swizzle_for_bytes(k.out_box_bytes), uint64_t(view.ld)},
        &p->tmap_out[v]));
  }
  return OkStatus();
}

// Small operands staged in L2 at kernel start (ptx/l2_prefetch.h; which
// ones: l2_prefetch_worthwhile). The short-K kernels prefetch nothing.
void set_l2_prefetch(const GroupedLaunch &a, int64_t grid, GroupedGemmParams *p) {
  const GroupedShape &s = a.shape;
  const uint64_t in_bytes = dtype_bytes(s.a_dtype);
  const uint64_t operand_bytes[2] = {uint64_t(a.a_rows) * uint64_t(s.k) * in_bytes,
                                     uint64_t(a.num_experts) * uint64_t(s.n) * uint64_t(s.k) * in_bytes};
  const void *const operands[2] = {a.a, a.b};
  for (int i = 0; i < 2; ++i) {
    const bool prefetch = l2_prefetch_worthwhile(operand_bytes[i], uint32_t(grid));
    p->l2_prefetch[i] = prefetch ? operands[i] : nullptr;
    p->l2_prefetch_bytes[i] = prefetch ? operand_bytes[i] : 0;
  }
}

}  // namespace

// A store-only or accumulate-only kernel has no other epilogue and no gather
// compiled in: it would compute another call wrong (never outside C).
Status check_kernel_serves(const GroupedLaunch &a, const KernelPlan &k) {
  if (!k.serves(a.shape) || (a.a_row_index != nullptr) != a.shape.gather)
    return error(GGEMM_STATUS_INTERNAL_ERROR, "%s does not serve this call's epilogue or gather", k.kernel->name);
  return OkStatus();
}

namespace {

// The kernel parameters: the tensor maps (none for the short-K kernels,
// which load through the pointers: they stay zero), the output views, the
// routing arrays and the plan's pipeline; the sm_90a kernels' own fields
// only for them (an sm_100a kernel is passed the GroupedGemmParams part).
Status fill_params(const Driver &drv, const GroupedLaunch &a, const KernelPlan &k, int64_t grid,
                   Sm90GroupedParams *out) {
  const GroupedShape &s = a.shape;
  GGEMM_RETURN_IF_ERROR(check_kernel_serves(a, k));
  Sm90GroupedParams p{};
  if (k.tma_pipeline()) GGEMM_RETURN_IF_ERROR(encode_operand_maps(drv, a, k, &p));
  if (k.persistent()) set_l2_prefetch(a, grid, &p);  // (the token-major kernel prefetches nothing)
  for (int v = 0; v < 3; ++v)
    p.out[v] = OutputView{a.views[v].base, uint32_t(a.views[v].ld), uint32_t(a.views[v].col_offset)};
  p.row_scale = a.row_scale;
  p.a_row_index = a.a_row_index;
  p.gather_rows = s.gather ? uint32_t(a.a_rows) : 0;
  p.a_offsets = a.a_offsets;
  p.first_offset_implicit = a.first_offset_implicit ? 1 : 0;
  p.expert_ids = a.expert_ids;
  p.usage_stats = a.usage_stats;
  p.device_status = a.device_status;
  p.num_groups = uint32_t(s.num_groups);
  p.m = uint32_t(s.m);
  p.n = uint32_t(s.n);
  p.k = uint32_t(s.k);
  p.num_experts = uint32_t(a.num_experts);
  p.split0 = uint32_t(s.split0);
  p.split1 = uint32_t(s.split1);
  p.span_segments = spans_segments(s) ? 1 : 0;
  p.a_planes = s.a_planes ? 1 : 0;
  p.alpha = a.alpha;
  p.epilogue = uint32_t(s.epilogue);
  p.stages = k.stages;
  p.swizzle_bytes = k.swizzle_bytes;
  p.weights_box_rows = k.weights_box_rows;
  p.walk_lanes = k.tma_pipeline() && walk_by_lanes(k, s, grid) ? 1 : 0;
  // The sm_90a kernels' own fields, and the decode GEMV's on either
  // architecture (it takes the sm_90a parameters).
  if (k.kernel->arch == Arch::kSm90a || k.family() == KernelFamily::kDecodeGemv) {
    if (k.kernel->arch == Arch::kSm90a && k.tma_pipeline()) GGEMM_RETURN_IF_ERROR(encode_sm90_maps(drv, a, k, &p));
    p.tokens = a.a;
    p.weights = a.b;
    p.staging_buffers = k.staging_buffers;
    p.k_slices = k.k_slices;
    p.consumer_warpgroups = k.consumer_warpgroups;
  }
  if (a.route) p.route = *a.route;  // the routed GEMV's (routed_twin)
  *out = p;
  return OkStatus();
}

// GGEMM_DEBUG: the call, the plan and the launch, one line.
void print_launch(const GroupedLaunch &a, const KernelPlan &k, int64_t grid, const GroupedGemmParams &p) {
  const GroupedShape &s = a.shape;
  // The persistent kernels' pipeline, or the short-K kernels' tile (they
  // have no stages, swizzle or staging ring).
  char config[192];
  if (k.persistent()) {
    std::snprintf(config, sizeof config,
                  "tile %ux%ux%u stages %u (%u K slice%s each) swizzle %uB staging x%u consumers %u", k.tile_m,
                  k.tile_n, k.swizzle_bytes / 2, k.stages, k.k_slices, k.k_slices > 1 ? "s" : "", k.swizzle_bytes,
                  k.staging_buffers, k.consumer_warpgroups);
  } else if (k.token_major()) {
    std::snprintf(config, sizeof config,
                  "tile %u tokens x %u features x %u a consumer warpgroup, stages %u, token-major ping-pong%s", k.tile_m,
                  k.tile_n, k.swizzle_bytes / 2, k.stages,
                  k.family() == KernelFamily::kTokenMajorSwiglu ? ", SwiGLU" : "");
  } else if (k.family() == KernelFamily::kDecodeGemv) {
    std::snprintf(config, sizeof config, "tile %ux%u, decode GEMV (weight rows by 16-byte loads), up to %u CTAs an SM",
                  k.tile_m, k.tile_n, k.ctas_per_sm);
  } else if (k.family() == KernelFamily::kDecodeGemvRouted) {
    std::snprintf(config, sizeof config,
                  "tile %ux%u, decode GEMV routing the MoE layer's %u slots in its prologue, up to %u CTAs an SM",
                  k.tile_m, k.tile_n, a.route ? a.route->num_slots : 0u, k.ctas_per_sm);
  } else {
    std::snprintf(config, sizeof config, "tile %ux%u, %s, no pipeline, up to %u CTAs an SM", k.tile_m, k.tile_n,
                  k.cluster_size > 1 ? "K split over the cluster, a slice a CTA" : "whole K", k.ctas_per_sm);
  }
  std::fprintf(stderr,
               "[ggemm] %s m=%lld n=%lld k=%lld E=%lld groups=%lld%s %s->%s %s segments (%lld, %lld)%s | %s kernel "
               "%s | %s | grid %lld x %u threads (clusters of %u), %u B smem | L2 prefetch: activations %llu B, "
               "weights %llu B%s\n",
               a.op, (long long)s.m, (long long)s.n, (long long)s.k, (long long)a.num_experts,
               (long long)s.num_groups, a.first_offset_implicit ? " (group ends)" : "", dtype_name(s.a_dtype),
               dtype_name(s.c_dtype),
               s.transpose_b ? "B[E,N,K]" : "B[E,K,N]", (long long)s.split0, (long long)s.split1,
               s.a_planes ? " planes" : "", arch_name(k.kernel->arch), k.kernel->name, config, (long long)grid,
               k.threads, k.cluster_size, k.smem_bytes, (unsigned long long)p.l2_prefetch_bytes[0],
               (unsigned long long)p.l2_prefetch_bytes[1], p.walk_lanes ? " | tile walk by the warp's lanes" : "");
}

// The kernel of a decode GEMV plan that routes the MoE layer's slots in its
// prologue (the same tile and CTAs an SM), or null where there is none (not
// the decode GEMV, not sm_90a, an output dtype the layer never asks for).
const KernelEntry *routed_twin(const KernelPlan &k) {
  if (k.family() != KernelFamily::kDecodeGemv) return nullptr;
  const KernelEntry &e = *k.kernel;
  return find_kernel(e.arch, KernelFamily::kDecodeGemvRouted, e.in, e.out, e.kmajor, e.tile_m, e.cluster);
}

}  // namespace

StatusOr<bool> routes_in_prologue(const Device &dev, const GroupedLaunch &l) {
  KernelPlan k;
  GGEMM_ASSIGN_OR_RETURN(k, plan_for(dev.props(), dev.arch(), l.shape, l.config));
  return routed_twin(k) != nullptr;
}

Status launch_grouped(Device &dev, const GroupedLaunch &a, CUstream stream) {
  const Driver &drv = dev.driver();
  KernelPlan k;
  GGEMM_ASSIGN_OR_RETURN(k, plan_for(dev.props(), dev.arch(), a.shape, a.config));
  if (a.route) {
    k.kernel = routed_twin(k);
    if (!k.kernel)
      return error(GGEMM_STATUS_INTERNAL_ERROR, "%s: routing in the prologue asked of a plan without a routed kernel",
                   a.op);
  }
  CUkernel kernel = nullptr;
  GGEMM_ASSIGN_OR_RETURN(kernel, dev.kernel(k.kernel->name));
  const CUfunction function = reinterpret_cast<CUfunction>(kernel);

  LaunchConfig lc(k.threads, k.smem_bytes, stream, k.cluster_size);
  Device::ScopedContext ctx(dev);
  GGEMM_RETURN_IF_ERROR(ctx.status());

  // Not every SM finds a partner for a cluster (the GPCs hold different
  // numbers of SMs), so the grid has no more clusters than run at once: a
  // persistent cluster launched after the others would double the tail.
  int64_t clusters = k.max_clusters;
  if (k.cluster_size > 1) {
    lc.set_grid(uint32_t(int64_t(dev.props().sm_count) * k.ctas_per_sm / k.cluster_size * k.cluster_size));
    int resident = 0;
    const CUlaunchConfig cluster_only = lc.cluster_only();
    GGEMM_CU(drv, cuOccupancyMaxActiveClusters(&resident, function, &cluster_only));
    if (resident > 0) clusters = std::min<int64_t>(clusters, resident);
  }
  const int64_t grid = clusters * k.cluster_size;
  lc.set_grid(uint32_t(grid));
  Sm90GroupedParams p;
  GGEMM_RETURN_IF_ERROR(fill_params(drv, a, k, grid, &p));
  if (debug_enabled()) print_launch(a, k, grid, p);

#if GGEMM_TRACE
  LaunchTrace trace;
  GGEMM_RETURN_IF_ERROR(trace.begin(drv, stream, lc.grid_x(), &p));
#endif
  const bool sm90_params = k.kernel->arch == Arch::kSm90a || k.family() == KernelFamily::kDecodeGemv;
  void *params[] = {sm90_params ? static_cast<void *>(&p)
                                : static_cast<void *>(static_cast<GroupedGemmParams *>(&p))};
  GGEMM_CU(drv, cuLaunchKernelEx(lc.get(), function, params, nullptr));
#if GGEMM_TRACE
  TraceFileHeader header{};
  std::memcpy(header.magic, "GGTRACE1", 8);
  std::snprintf(header.kernel, sizeof header.kernel, "%s", k.kernel->name);
  header.grid = lc.grid_x(), header.roles = kTraceRoles, header.events = kTraceEvents;
  header.tile_m = k.tile_m, header.tile_n = k.tile_n, header.stages = k.stages;
  header.k = uint32_t(a.shape.k), header.swizzle_bytes = k.swizzle_bytes;
  GGEMM_RETURN_IF_ERROR(trace.end(drv, stream, header));
#endif
  return OkStatus();
}

}  // namespace ggemm
