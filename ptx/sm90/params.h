// The sm_90a kernels' parameters: the shared ones (ptx/blocks/grouped_params.h)
// and what only these kernels read. The runtime fills one per sm_90a launch.
#pragma once
#include "../blocks/grouped_params.h"
#include "../moe/moe_params.h"

namespace ggemm {

// The narrow MMA widths below tile_m that have a token box of their own:
// 16, 32, 64 and 128 rows (Sm90GroupedParams::tmap_tokens_narrow).
constexpr uint32_t kNarrowTokenMaps = 4;

// The narrowest MMA width (tile_m, tile_m / 2, ..., 16) that covers `rows`:
// the wgmma N the sm_90a consumers run a tile with (a group's last, partial
// row block costs only the width it needs), and the rows of its token box.
GGEMM_HOST_DEVICE constexpr uint32_t narrow_mma_width(uint32_t rows, uint32_t tile_m) {
  uint32_t n = tile_m;
  while (n > 16 && rows <= n / 2) n /= 2;
  return n;
}

// The tmap_tokens_narrow entry of a width below tile_m (16 << index).
GGEMM_HOST_DEVICE constexpr uint32_t narrow_token_map_index(uint32_t width) {
  return width <= 16 ? 0u : width <= 32 ? 1u : width <= 64 ? 2u : 3u;
}

// Whether entry `index` (boxes of 16 << index rows) exists for tile_m: only
// widths below tile_m get one. The runtime encodes exactly these and the
// kernel prefetches exactly these.
GGEMM_HOST_DEVICE constexpr bool narrow_token_map_exists(uint32_t index, uint32_t tile_m) {
  return index < kNarrowTokenMaps && (16u << index) < tile_m;
}

struct Sm90GroupedParams : GroupedGemmParams {
  CUtensorMap tmap_out[3];  // per segment: [rows, width], box {128 bytes, staged tokens}
  // One K slice a stage, no cluster (narrow_token_boxes = 1): the
  // activations again with boxes of 16 << i rows, for the tiles whose MMA
  // is narrower than tile_m (a group's last row block; narrow_mma_width):
  // such a tile loads only the token rows its MMA reads. Entries for widths
  // of tile_m or more stay zero.
  CUtensorMap tmap_tokens_narrow[kNarrowTokenMaps];
  // The operands' own pointers: activations [planes * M, K] and weights, for
  // the kernels that load without tensor maps (ptx/sm90/short_k_gemm.cuh).
  const void *tokens;
  const void *weights;
  uint32_t staging_buffers;  // epilogue buffers per consumer warpgroup (1 or 2; accumulate: 2 to 4)
  // Slices of K (tile_k wide) per pipeline stage: 1, or with K-sliced views
  // (K-major weights, no cluster, K a multiple of tile_k, the 128-byte
  // swizzle) 2 or 4 — one TMA
  // box per operand carries them all: tmap_tokens is then 3-D {tile_k, rows,
  // K / tile_k} and tmap_weights 4-D {tile_k, N, K / tile_k, E}, both with
  // the slice dimension 128 bytes apart (a narrow stage costs per box, not
  // per byte, so fewer, larger boxes are faster).
  uint32_t k_slices;
  uint32_t narrow_token_boxes;  // 1: tmap_tokens_narrow is encoded (sm_90a, k_slices 1, no cluster)
  // sm_90a: the consumer warpgroups that multiply, 2, or 1 (K-major
  // weights, no cluster) with tiles of 64 features (runtime/plan_rules.h,
  // narrow_tiles: N <= 64, wide tiles leaving half the SMs idle, or a
  // decode call's falling short of a wave or leaving half the SMs idle in
  // their last). The second warpgroup then takes no tiles, and the stage's
  // weight slot ends 64 rows past the last slice's box instead of 128
  // (weights_stage_rows: deeper pipelines for the LoRA shrink).
  uint32_t consumer_warpgroups;
  // The MoE layer at decode (ggemm_moe_ffn, at most kOneWarpMaxSlots
  // slots), read by the routed decode GEMV kernels only: they route the
  // layer's top-k slots themselves (ptx/sm90/decode_gemv.cuh,
  // route_into_table) instead of reading a_offsets, expert_ids, usage_stats
  // and a_row_index, which no launch before them has written; their CTA 0
  // writes those, and the rest of the routing's outputs, for the down
  // projection and the combine.
  moe::MoeRouteParams route;
};

}  // namespace ggemm
