// Kernel parameters of the grouped GEMM, shared by the runtime (which fills
// them) and the kernels (which read them as one __grid_constant__ argument).
#pragma once
#include <cuda.h>

#include <cstdint>

#include "tile_scheduler.h"

namespace ggemm {

// Weight layouts: K-major is B[E, N, K] (transpose_b), MN-major is B[E, K, N].
enum class WeightLayout { kKMajor, kMNMajor };

// Epilogue codes as the kernels see them (the C ABI's ggemm_epilogue values).
enum : uint32_t { kEpilogueStore = 0, kEpilogueAccumulate = 1, kEpilogueRowScale = 2 };

// Where a segment's outputs live: output (m, n) of segment s is element
// m * ld + (n - col_offset) of base. One view per segment lets a single launch
// route Q/K/V to different tensors (LoRA expand) or permute columns into
// planes (LoRA shrink); a plain grouped matmul has three views of one C.
struct OutputView {
  void *base;
  uint32_t ld;          // elements between rows
  uint32_t col_offset;  // the segment's first column
};

// The narrow MMA widths below tile_m that have a token box of their own:
// 16, 32, 64 and 128 rows (GroupedGemmParams::tmap_tokens_narrow).
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

struct GroupedGemmParams {
  CUtensorMap tmap_tokens;   // activations [planes * M, K], box {tile_k, tile_m}
  CUtensorMap tmap_weights;  // weights, 3-D: {K, N, E} (K-major) or {N, K, E}
  CUtensorMap tmap_out[3];   // per segment: [rows, width], box {128 bytes, staged tokens}
  // sm_90a, one K slice a stage, no cluster (narrow_token_boxes = 1): the
  // activations again with boxes of 16 << i rows, for the tiles whose MMA
  // is narrower than tile_m (a group's last row block; narrow_mma_width):
  // such a tile loads only the token rows its MMA reads. Entries for widths
  // of tile_m or more stay zero.
  CUtensorMap tmap_tokens_narrow[kNarrowTokenMaps];
  OutputView out[3];         // per segment, for the masked edge stores
  // The operands' own pointers: activations [planes * M, K] and weights, for
  // the kernels that load without tensor maps (ptx/sm90/short_k_gemm.cuh).
  const void *tokens;
  const void *weights;
  const float *row_scale;    // [M], kEpilogueRowScale only
  const uint32_t *a_offsets;
  const int32_t *expert_ids;
  const uint32_t *usage_stats;  // [1] = active groups
  uint32_t *device_status;      // checked mode: fault bits (routing_check.h) ORed here; null = off
  uint32_t num_groups;
  uint32_t m, n, k;
  uint32_t num_experts;
  uint32_t split0, split1;  // segment splits (0, 0 = one segment)
  uint32_t span_segments;   // 1: tiles cross the splits, outputs routed per 8-column chunk (store epilogues only)
  uint32_t a_planes;        // 1: segment s reads activation rows m + s * M
  float alpha;              // multiplies every result (LoRA scale; 1 otherwise)
  uint32_t epilogue;
  uint32_t stages;
  uint32_t staging_buffers;  // epilogue buffers per consumer warpgroup (1 or 2; accumulate: 2 to 4)
  uint32_t swizzle_bytes;  // 128, 64 or 32: one K-major smem row; tile_k = swizzle_bytes / 2
  // K-major weights: rows of each TMA box, 128, or N rounded up to 8 when N
  // is narrower (LoRA shrink: 3R rows), so no stage moves rows past N (the
  // MMA rows past the box read stale shared memory into accumulator rows
  // that are never stored). MN-major weights: 128.
  uint32_t weights_box_rows;
  // Slices of K (tile_k wide) per pipeline stage: 1, or with K-sliced views
  // (K-major weights, no cluster, K a multiple of tile_k, the 128-byte
  // swizzle) 2 or 4 — one TMA
  // box per operand carries them all: tmap_tokens is then 3-D {tile_k, rows,
  // K / tile_k} and tmap_weights 4-D {tile_k, N, K / tile_k, E}, both with
  // the slice dimension 128 bytes apart (a narrow stage costs per box, not
  // per byte, so fewer, larger boxes are faster).
  uint32_t k_slices;
  uint32_t narrow_token_boxes;  // 1: tmap_tokens_narrow is encoded (sm_90a, k_slices 1, no cluster)
  // sm_90a: the consumer warpgroups that multiply, 2, or 1 when N <= 64
  // (K-major weights, no cluster): the second one's 64 weight rows would all
  // lie past N, so it takes no tiles, and the stage's weight slot ends 64
  // rows past the last slice's box instead of 128 (weights_stage_rows:
  // deeper pipelines for the LoRA shrink). sm_100a: unused.
  uint32_t consumer_warpgroups;
  // Operands small enough to stage in L2 at kernel start (activations,
  // weights; null / 0 = not prefetched; which: l2_prefetch_worthwhile):
  // each CTA prefetches its 1 / gridDim share (ptx/blocks/l2_prefetch.h).
  // Latency-bound calls (decode, LoRA) otherwise wait one DRAM round trip
  // per tile for operands that could have been on their way since the
  // launch.
  const void *l2_prefetch[2];
  uint64_t l2_prefetch_bytes[2];
#if GGEMM_TRACE
  uint64_t *trace;  // diagnostic builds only: the event buffer (ptx/blocks/trace.h), null = off
#endif
};

// K-major weight rows one stage loads (the TMA box): N rounded up to 8 when
// N is narrower than a tile (LoRA shrink's 3R rows), else the tile's rows;
// each CTA of a pair loads a whole tile (its share may lie past N).
GGEMM_HOST_DEVICE constexpr uint32_t kmajor_box_rows(bool kmajor, uint32_t cluster_size, int64_t n, uint32_t tile_n) {
  return kmajor && cluster_size == 1 && n < int64_t(tile_n) ? uint32_t((n + 7) / 8 * 8) : tile_n;
}

// The trace buffer of a launch; null outside trace builds.
GGEMM_HOST_DEVICE inline uint64_t *trace_buffer(const GroupedGemmParams &p) {
#if GGEMM_TRACE
  return p.trace;
#else
  (void)p;
  return nullptr;
#endif
}

// The scheduler's view of a launch, as every kernel builds it: the device
// active count capped at the arrays' capacity.
GGEMM_HOST_DEVICE inline GroupedProblem grouped_problem(const GroupedGemmParams &p) {
  return GroupedProblem{p.a_offsets, p.expert_ids, active_groups(p.usage_stats[1], p.num_groups),
                        p.m,         p.n,          p.num_experts,
                        p.split0,    p.split1,     p.span_segments};
}

// The segment (output view) of column c: how many splits lie at or below it.
GGEMM_HOST_DEVICE inline uint32_t output_segment(const GroupedGemmParams &p, uint32_t c) {
  if (p.split0 == 0 && p.split1 == 0) return 0;
  return uint32_t(c >= p.split0) + uint32_t(c >= p.split1);
}

}  // namespace ggemm
