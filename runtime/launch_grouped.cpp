#include "runtime/launch_grouped.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "ptx/grouped_params.h"
#include "ptx/sm90/smem_layout.h"
#include "runtime/debug.h"
#include "runtime/heuristics.h"
#include "runtime/tensor_map.h"

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
  auto blocks = [](int64_t width) { return (width + sm90::kTileN - 1) / sm90::kTileN; };
  const int64_t col_blocks = blocks(seg_end0) + blocks(seg_end1 - seg_end0) + blocks(a.n - seg_end1);

  const GroupedShape shape{a.in_dtype,   a.out_dtype,          a.m,        a.n, a.k, a.transpose_b,
                           a.num_groups, a.max_rows_per_group, a.epilogue, col_blocks};
  Sm90Config cfg;
  GGEMM_TRY(choose_sm90_config(dev.props(), shape, a.config, &cfg));
  const uint32_t tile_k = cfg.swizzle_bytes / 2;
  const uint32_t in_bytes = dtype_bytes(a.in_dtype), out_bytes = dtype_bytes(a.out_dtype);

  GroupedGemmParams p{};
  GGEMM_TRY(encode_tensor_map(drv,
                              {"activations", a.a, tma_dtype(a.in_dtype), in_bytes, 2,
                               {uint64_t(a.k), uint64_t(a.a_rows), 0}, {tile_k, cfg.tile_m, 0},
                               tma_swizzle_for_bytes(cfg.swizzle_bytes)},
                              &p.tmap_tokens));
  if (a.transpose_b) {
    GGEMM_TRY(encode_tensor_map(drv,
                                {"weights", a.b, tma_dtype(a.in_dtype), in_bytes, 3,
                                 {uint64_t(a.k), uint64_t(a.n), uint64_t(a.num_experts)}, {tile_k, cfg.tile_n, 1},
                                 tma_swizzle_for_bytes(cfg.swizzle_bytes)},
                                &p.tmap_weights));
  } else {
    // [E, K, N]: boxes of tile_k rows of K by 64 features (one 128-byte row).
    GGEMM_TRY(encode_tensor_map(drv,
                                {"weights", a.b, tma_dtype(a.in_dtype), in_bytes, 3,
                                 {uint64_t(a.n), uint64_t(a.k), uint64_t(a.num_experts)},
                                 {cfg.tile_n / sm90::kConsumerWarpgroups, tile_k, 1}, CU_TENSOR_MAP_SWIZZLE_128B},
                                &p.tmap_weights));
  }
  static const char *const kViewNames[3] = {"output segment 0", "output segment 1", "output segment 2"};
  for (int v = 0; v < 3; ++v) {
    const OutputViewDesc &view = a.views[v];
    GGEMM_TRY(encode_tensor_map(
        drv,
        {kViewNames[v], view.base, tma_dtype(a.out_dtype), out_bytes, 2, {uint64_t(view.width), uint64_t(view.rows), 0},
         {128 / out_bytes, sm90::sm90_epilogue_stage_tokens(cfg.tile_m), 0}, CU_TENSOR_MAP_SWIZZLE_128B, uint64_t(view.ld)},
        &p.tmap_out[v]));
    p.out[v] = OutputView{view.base, uint32_t(view.ld), uint32_t(view.col_offset)};
  }
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
  p.stages = cfg.stages;
  p.staging_buffers = cfg.staging_buffers;
  p.swizzle_bytes = cfg.swizzle_bytes;

  // Persistent grid: one CTA per SM, fewer when the host's bound on the
  // tile count (from max_rows_per_group) is smaller. The device-side counts
  // decide the actual work; an underestimate only costs parallelism.
  const int64_t rows = a.max_rows_per_group > 0 ? std::min<int64_t>(a.max_rows_per_group, a.m) : a.m;
  const int64_t row_blocks_per_group = (rows + cfg.tile_m - 1) / cfg.tile_m;
  const int64_t row_blocks = std::min<int64_t>(a.num_groups * row_blocks_per_group,
                                               (a.m + cfg.tile_m - 1) / cfg.tile_m + a.num_groups);
  const int64_t grid = std::max<int64_t>(1, std::min<int64_t>(dev.props().sm_count, row_blocks * col_blocks));

  const sm90::SmemLayout layout =
      sm90::make_smem_layout(cfg.tile_m, cfg.swizzle_bytes, out_bytes, cfg.stages, cfg.staging_buffers);
  const std::string name = sm90_kernel_name(a.in_dtype, a.out_dtype, a.transpose_b, cfg.tile_m);
  CUkernel kernel = nullptr;
  GGEMM_TRY(dev.kernel(name, &kernel));

  if (debug_enabled()) {
    std::fprintf(stderr,
                 "[ggemm] %s m=%lld n=%lld k=%lld E=%lld groups=%lld %s->%s %s segments (%lld, %lld)%s | "
                 "kernel %s | tile %ux%ux%u stages %u swizzle %uB staging x%u | grid %lld x %u threads, %u B smem\n",
                 a.op, (long long)a.m, (long long)a.n, (long long)a.k, (long long)a.num_experts,
                 (long long)a.num_groups, dtype_name(a.in_dtype), dtype_name(a.out_dtype),
                 a.transpose_b ? "B[E,N,K]" : "B[E,K,N]", (long long)a.split0, (long long)a.split1,
                 a.a_planes ? " planes" : "", name.c_str(), cfg.tile_m, cfg.tile_n, tile_k, cfg.stages,
                 cfg.swizzle_bytes, cfg.staging_buffers, (long long)grid, sm90::kThreads, layout.total_bytes());
  }

  CUlaunchConfig lc{};
  lc.gridDimX = uint32_t(grid);
  lc.gridDimY = lc.gridDimZ = 1;
  lc.blockDimX = sm90::kThreads;
  lc.blockDimY = lc.blockDimZ = 1;
  lc.sharedMemBytes = layout.total_bytes();
  lc.hStream = stream;
  lc.attrs = nullptr;
  lc.numAttrs = 0;
  void *params[] = {&p};
  Device::ScopedContext ctx(dev);
  GGEMM_TRY(ctx.status());
  GGEMM_CU(drv, cuLaunchKernelEx(&lc, reinterpret_cast<CUfunction>(kernel), params, nullptr));
  return GGEMM_STATUS_SUCCESS;
}

}  // namespace ggemm
