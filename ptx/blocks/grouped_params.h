// Kernel parameters of the grouped GEMM, shared by the runtime (which fills
// them) and the kernels (which read them as one __grid_constant__ argument):
// what every architecture's kernels read. An architecture's own fields are in
// a struct that extends this one (ptx/sm90/params.h); the sm_100a kernels
// take this one as it is.
#pragma once
#include <cuda.h>

#include <cstddef>
#include <cstdint>

#include "tile_scheduler.h"

namespace ggemm {

// Weight layouts: K-major is B[E, N, K] (transpose_b), MN-major is B[E, K, N].
enum class WeightLayout { kKMajor, kMNMajor };

// Epilogue codes as the kernels see them (the C ABI's ggemm_epilogue values).
enum : uint32_t { kEpilogueStore = 0, kEpilogueAccumulate = 1, kEpilogueRowScale = 2, kEpilogueSwiglu = 3 };

// The SwiGLU epilogue's weight tile: kTileN weight rows, interleaved by the
// weights' 5-D tensor map as 8 gate rows, then the 8 up rows of the same
// features, and so on (an octet pair per 16 rows), so that in the wgmma
// fragment each thread holds the gate and the up value of one feature
// (rows r and r + 8 of its warp's 16). A tile's kTileN rows make
// kTileN / 2 output features.
constexpr uint32_t kSwigluOctet = 8;

// Where a segment's outputs live: output (m, n) of segment s is element
// m * ld + (n - col_offset) of base. One view per segment lets a single launch
// route Q/K/V to different tensors (LoRA expand) or permute columns into
// planes (LoRA shrink); a plain grouped matmul has three views of one C.
struct OutputView {
  void *base;
  uint32_t ld;          // elements between rows
  uint32_t col_offset;  // the segment's first column
};

struct GroupedGemmParams {
  CUtensorMap tmap_tokens;   // activations [planes * M, K], box {tile_k, tile_m}
  CUtensorMap tmap_weights;  // weights, 3-D: {K, N, E} (K-major) or {N, K, E}
  OutputView out[3];         // per segment, for the masked edge stores
  const float *row_scale;    // [M], kEpilogueRowScale only
  // Gather on load: row m reads activation row a_row_index[m] of
  // gather_rows (one-row token boxes of tmap_tokens); null = row m.
  const int32_t *a_row_index;
  uint32_t gather_rows;
  // 1: the call gave group ends (a_offsets = group_ends - 1), so a_offsets[0]
  // is not memory of the call's; only checked mode, which would report a
  // nonzero a_offsets[0], needs to know. In the padding before a_offsets: a
  // field that moved the ones after it changes the code of the tile_m 256
  // kernels enough to make them spill.
  uint32_t first_offset_implicit;
  const uint32_t *a_offsets;    // [num_groups + 1]; [0] is never read (tile_scheduler.h)
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
  uint32_t swizzle_bytes;  // 128, 64 or 32: one K-major smem row; tile_k = swizzle_bytes / 2
  // K-major weights: rows of each TMA box, 128, or N rounded up to 8 when N
  // is narrower (LoRA shrink: 3R rows), so no stage moves rows past N (the
  // MMA rows past the box read stale shared memory into accumulator rows
  // that are never stored). MN-major weights: 128.
  uint32_t weights_box_rows;
  // Operands small enough to stage in L2 at kernel start (activations,
  // weights; null / 0 = not prefetched; which: l2_prefetch_worthwhile):
  // each CTA prefetches its 1 / gridDim share (ptx/blocks/l2_prefetch.h).
  // Latency-bound calls (decode, LoRA) otherwise wait one DRAM round trip
  // per tile for operands that could have been on their way since the
  // launch.
  const void *l2_prefetch[2];
  uint64_t l2_prefetch_bytes[2];
  // The persistent and token-major kernels' tile walker: 1, its warp's lanes
  // cross groups together, 32 a step (GroupedTileScheduler::next_warp); 0,
  // lane 0 alone, kWalkBatch a step (next). runtime/plan_rules.h,
  // walk_by_lanes, says which pays.
  uint32_t walk_lanes;
#if GGEMM_TRACE
  uint64_t *trace;  // diagnostic builds only: the event buffer (ptx/blocks/trace.h), null = off
#endif
};

static_assert(offsetof(GroupedGemmParams, a_offsets) == offsetof(GroupedGemmParams, first_offset_implicit) + 4,
              "first_offset_implicit must fill the padding after gather_rows and move no other field");

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
