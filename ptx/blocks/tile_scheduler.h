// The grouped tile scheduler: maps a persistent CTA's linear tile index to an
// output tile of one group. __host__ __device__, so the CPU tests simulate
// whole persistent launches with exactly the code the kernels run.
//
// Work is enumerated group by group (groups in order, active ones only:
// g < min(expert_usage_stats[1], num_groups)). A group of R rows owns
// ceil(R / tile_m) row blocks times the feature blocks of N. N is cut into
// up to three segments at the splits, [0, s0), [s0, s1), [s1, N), each tiled
// by tile_n from its own start, so no tile straddles a segment boundary (a
// tile's last block may be partial). A segment can select an activation
// plane (LoRA expand's Q/K/V planes) and has its own output view (Q/K/V
// routing, planar permute).
//
// With span_segments set, the segments only route outputs: N is tiled as one
// range, a tile may cross a split, and the epilogue picks each 8-column
// chunk's view. LoRA shrink uses this: its segments read the same
// activations, so one tile covering all 3R columns reads them once instead
// of three times.
//
// Order within a group: bands of kBandRowBlocks row blocks (the last band
// takes a remainder of up to half a band: last_band_of); inside a band the
// row block varies fastest, then the column block. CTAs running side by side
// then cover a compact patch (8 row blocks x ~16 column blocks for 132 SMs),
// so the patch's activations and weights are each read from L2 about once,
// where a plain row-block-fastest order over a long group re-reads them
// several times.
//
// Offsets are clamped into [0, M] and made non-decreasing as they are read,
// so even malformed device arrays never produce a tile outside C. The walk
// reads only the group ends, a_offsets[g + 1]: group 0 starts at row 0 and
// group g > 0 where group g - 1 ended (what a_offsets[g] says, once clamped),
// so a_offsets[0] is never read. A call that gives group ends alone
// (torch._grouped_mm's offs) passes a_offsets = group_ends - 1.
#pragma once
#include <cstdint>

#include "../instr/arch.h"

namespace ggemm {

struct GroupedTile {
  uint32_t group;      // index into a_offsets / expert_ids
  int32_t expert;      // expert id (-1 or out of range: inactive, rows zeroed)
  uint32_t row0;       // first output row of the tile
  uint32_t rows;       // valid rows, 1..tile_m
  uint32_t col0;       // first output column (feature) of the tile
  uint32_t cols;       // valid columns, 1..tile_n
  uint32_t segment;    // segment (0..2) of every column of the tile; 0 with span_segments
};

struct GroupedProblem {
  const uint32_t *a_offsets;  // [num_groups + 1]; [0] is never read (group 0 starts at row 0)
  const int32_t *expert_ids;  // [num_groups]
  uint32_t num_active;        // already min(stats[1], num_groups)
  uint32_t m;                 // rows of C
  uint32_t n;                 // columns of C
  uint32_t num_experts;
  uint32_t split0, split1;    // segment splits; both 0 = one segment
  uint32_t span_segments = 0;  // 1: tiles cover [0, N) across the splits (segment = 0)
};

// The number of groups a launch walks: the device-side active count, never
// past the arrays' capacity (a wrong count must not read past them).
GGEMM_HOST_DEVICE constexpr uint32_t active_groups(uint32_t usage_stats_active, uint32_t num_groups) {
  return usage_stats_active < num_groups ? usage_stats_active : num_groups;
}

GGEMM_HOST_DEVICE constexpr uint32_t min_u32(uint32_t a, uint32_t b) { return a < b ? a : b; }

GGEMM_HOST_DEVICE constexpr uint32_t ceil_div(uint32_t a, uint32_t b) { return (a + b - 1) / b; }

// At most how many row blocks of tile_m the walk (GroupedTileScheduler)
// makes of group rows [lo, hi) of a_offsets, from the group's own two
// offsets (lo = 0 for group 0): the walk starts the group where the
// previous one ended, which is never before min(lo, M), and ends it at
// min(hi, M) or its start. Exactly the walk's count when the offsets are
// well formed (non-decreasing, within M); an upper bound otherwise, so a sum
// of these over the groups never cuts a tile off.
GGEMM_HOST_DEVICE constexpr uint32_t group_row_blocks_bound(uint32_t lo, uint32_t hi, uint32_t m, uint32_t tile_m) {
  return min_u32(hi, m) > min_u32(lo, m) ? ceil_div(min_u32(hi, m) - min_u32(lo, m), tile_m) : 0u;
}

// The host refuses calls whose output has more elements than this (the C
// ABI's validation), so one group's tiles number fewer than 2^32 and the walk
// divides in 32 bits: a group of r <= M rows has at most
// (r / 16 + 1) (N / 128 + 1) <= M N / 2048 + M / 16 + N / 128 + 1 < 2^32
// tiles for M, N < 2^31. (A 64-bit division is a called subroutine whose
// return address ptxas may have to keep on the stack.) 2^42 elements are
// 8 TiB of bf16, far past any GPU's memory. Tiles of 64 features (which
// would double that count) are planned only where N <= 64 or the whole call
// has a few hundred tiles whatever its routing (runtime/plan_rules.h,
// narrow_tiles).
constexpr uint64_t kMaxOutputElements = uint64_t(1) << 42;

#if defined(__CUDA_ARCH__)
// The lane operations of GroupedTileScheduler::next_lanes, by the warp's own
// instructions: every lane of a converged warp calls each one.
struct WarpLanes {
  GGEMM_DEVICE uint32_t id() const { return threadIdx.x % 32; }
  template <typename T>
  GGEMM_DEVICE T shfl_up(T v, uint32_t delta) const {  // lane i gets lane i - delta's (its own below delta)
    return __shfl_up_sync(~0u, v, delta);
  }
  template <typename T>
  GGEMM_DEVICE T shfl(T v, uint32_t from) const {
    return __shfl_sync(~0u, v, from);
  }
  GGEMM_DEVICE uint32_t ballot(bool p) const { return __ballot_sync(~0u, p); }
  GGEMM_DEVICE uint32_t first_lane(uint32_t mask) const { return uint32_t(__ffs(mask)) - 1; }  // mask != 0
};
#endif

class GroupedTileScheduler {
 public:
  static constexpr uint32_t kBandRowBlocks = 8;
  static constexpr uint32_t kWalkBatch = 4;  // groups whose ends a walk step loads at once

  GGEMM_HOST_DEVICE GroupedTileScheduler(const GroupedProblem &p, uint32_t tile_m, uint32_t tile_n)
      : p_(p), tile_m_(tile_m), tile_n_(tile_n) {
    const bool split = (p.split0 != 0 || p.split1 != 0) && !p.span_segments;
    end0_ = split ? p.split0 : p.n;  // one segment when the splits are off
    end1_ = split ? p.split1 : p.n;
    blocks0_ = ceil_div(end0_, tile_n);
    blocks1_ = ceil_div(end1_ - end0_, tile_n);
    col_blocks_ = blocks0_ + blocks1_ + ceil_div(p.n - end1_, tile_n);
    if (p.num_active > 0) set_group(0, p.a_offsets[1]);  // else group_ 0 is past the last
  }

  // Column blocks per group (the same for every group).
  GGEMM_HOST_DEVICE uint32_t col_blocks() const { return col_blocks_; }

  // The index of a group's last band: bands of kBandRowBlocks row blocks,
  // the last one holding what is left. A remainder of at most half a band
  // joins the band before it (8 + r row blocks) rather than forming its own:
  // a band of its own walks every column block again, long after the band
  // before it read the expert's weights, and so reads them from DRAM a
  // second time (about 1024 random rows an expert make 8 row blocks of 128
  // and a ragged ninth half the time; docs/performance.md,
  // "The tile walk's remainder band").
  // A larger remainder keeps its own band, as the band before it would
  // otherwise span far more than a wave of CTAs.
  GGEMM_HOST_DEVICE static constexpr uint32_t last_band_of(uint32_t row_blocks) {
    const uint32_t full = row_blocks / kBandRowBlocks, rest = row_blocks % kBandRowBlocks;
    if (rest == 0) return full > 0 ? full - 1 : 0u;
    return rest <= kBandRowBlocks / 2 && full > 0 ? full - 1 : full;
  }

  // Finds the tile with linear index `t`. Calls must come with non-decreasing
  // t (the persistent loop's iter * gridDim.x + blockIdx.x); the cursor only
  // moves forward, so a CTA walks the offsets once in all. Returns false past
  // the last tile.
  GGEMM_HOST_DEVICE bool next(uint64_t t, GroupedTile *out) {
    while (!holds(t)) {
      tiles_before_ += group_tiles();
      skip_groups(t);
    }
    return tile_at(t, out);
  }

  // The same walk by a whole warp: all 32 lanes, converged, with the same t,
  // each left with the same scheduler and tile. Crossing groups, the lanes
  // load 32 groups' ends in one coalesced load and find t's group among them
  // by scans over the lanes, where next() loads kWalkBatch ends a step. A
  // decode call listing every expert (torch's offs: 128 groups, 8 of them
  // routed) then crosses the empty groups in 4 steps instead of 32.
  // `lanes` gives the lane operations: the warp's own on the device
  // (WarpLanes, next_warp), 32 threads standing in for the lanes in the CPU
  // tests (tests/lane_threads.h), which so run this very code.
  template <class Lanes>
  GGEMM_HOST_DEVICE bool next_lanes(uint64_t t, GroupedTile *out, const Lanes &lanes) {
    while (!holds(t)) {
      tiles_before_ += group_tiles();
      skip_groups_lanes(t, lanes);
    }
    return tile_at(t, out);
  }

#if defined(__CUDA_ARCH__)
  GGEMM_DEVICE bool next_warp(uint64_t t, GroupedTile *out) { return next_lanes(t, out, WarpLanes{}); }
#endif

 private:
  // Past the last group, or the current group's tiles hold t.
  GGEMM_HOST_DEVICE bool holds(uint64_t t) const {
    return group_ >= p_.num_active || t < tiles_before_ + group_tiles();
  }
  GGEMM_HOST_DEVICE uint64_t group_tiles() const { return uint64_t(row_blocks_) * col_blocks_; }

  // Tile t of the current group (holds(t)), or false past the last group.
  GGEMM_HOST_DEVICE bool tile_at(uint64_t t, GroupedTile *out) const {
    if (group_ >= p_.num_active) return false;
    const uint32_t local = uint32_t(t - tiles_before_);  // < this group's tiles < 2^32 (kMaxOutputElements)
    const uint32_t band_tiles = kBandRowBlocks * col_blocks_;
    const uint32_t last_band = last_band_of(row_blocks_);
    const uint32_t band = min_u32(local / band_tiles, last_band);
    const uint32_t band_rb0 = band * kBandRowBlocks;
    const uint32_t band_rows = band == last_band ? row_blocks_ - band_rb0 : kBandRowBlocks;
    const uint32_t in_band = local - band * band_tiles;
    const uint32_t rb = band_rb0 + in_band % band_rows;
    uint32_t cb = in_band / band_rows;
    // Segment of the column block (scalars, not an indexed array: device
    // code would put an array in local memory).
    uint32_t seg = 0, seg_start = 0, seg_end = end0_;
    if (cb >= blocks0_ + blocks1_) {
      seg = 2, cb -= blocks0_ + blocks1_, seg_start = end1_, seg_end = p_.n;
    } else if (cb >= blocks0_) {
      seg = 1, cb -= blocks0_, seg_start = end0_, seg_end = end1_;
    }
    out->group = group_;
    int32_t e = p_.expert_ids[group_];
    out->expert = (e >= 0 && uint32_t(e) < p_.num_experts) ? e : -1;
    out->row0 = row_start_ + rb * tile_m_;
    uint32_t rows_left = row_end_ - out->row0;
    out->rows = rows_left < tile_m_ ? rows_left : tile_m_;
    out->col0 = seg_start + cb * tile_n_;
    uint32_t cols_left = seg_end - out->col0;
    out->cols = cols_left < tile_n_ ? cols_left : tile_n_;
    out->segment = seg;
    return true;
  }

  // Moves to the next group and on, up to kWalkBatch groups, stopping at the
  // first whose tiles hold t (or past the last group); the caller checks the
  // group it stops at. The groups' ends are loaded together, all in flight
  // at once: a decode call that lists every expert (torch's offs) has mostly
  // empty groups, and one dependent load per group made the walk ~0.12 us a
  // group (8 rows over 128 listed experts: 23.5 us against 8.9 with the
  // routed groups only, H200). The same walk as one group at a time
  // (tests/test_scheduler.cpp compares them). It serves single-thread walks:
  // the short-K kernels', and the persistent kernels' walker where a step
  // crosses few groups (GroupedGemmParams::walk_lanes; elsewhere its lanes
  // cross them by skip_groups_lanes). 4, not 8: 8 spilled the
  // tile_m 256 kernel when its 40-register walker was one thread.
  GGEMM_HOST_DEVICE void skip_groups(uint64_t t) {
    const uint32_t g0 = group_ + 1;
    uint32_t hi[kWalkBatch];
    GGEMM_UNROLL
    for (uint32_t i = 0; i < kWalkBatch; ++i) hi[i] = g0 + i < p_.num_active ? p_.a_offsets[g0 + i + 1] : 0u;
    GGEMM_UNROLL
    for (uint32_t i = 0; i < kWalkBatch; ++i) {
      if (g0 + i >= p_.num_active) {
        group_ = g0 + i;
        return;
      }
      set_group(g0 + i, hi[i]);
      if (i + 1 == kWalkBatch || holds(t)) return;
      tiles_before_ += group_tiles();
    }
  }

  // skip_groups by the lanes of a warp: lane i takes group g0 + i (g0 = the
  // current group + 1). Its clamped end is the running maximum of
  // min(a_offsets[g + 1], M) from the current group's end on (set_group's
  // clamp, as a scan), its start the previous lane's end; a scan of the tile
  // counts gives each group's first tile. The walk stops at the first lane
  // whose tiles hold t or that lies past the last group; with none, at lane
  // 31, and next_lanes goes on from there.
  template <class Lanes>
  GGEMM_HOST_DEVICE void skip_groups_lanes(uint64_t t, const Lanes &lanes) {
    const uint32_t lane = lanes.id();
    const uint32_t g = group_ + 1 + lane;
    const bool listed = g < p_.num_active;
    uint32_t end = listed ? min_u32(p_.a_offsets[g + 1], p_.m) : 0u;
    end = end > row_end_ ? end : row_end_;
    GGEMM_UNROLL
    for (uint32_t d = 1; d < 32; d *= 2) {
      const uint32_t e = lanes.shfl_up(end, d);
      if (lane >= d && e > end) end = e;
    }
    uint32_t start = lanes.shfl_up(end, 1);
    if (lane == 0) start = row_end_;
    const uint32_t blocks = listed ? ceil_div(end - start, tile_m_) : 0u;
    const uint32_t tiles = blocks * col_blocks_;  // one group's: < 2^32 (kMaxOutputElements)
    uint64_t through = tiles;                     // tiles of lanes 0..lane
    GGEMM_UNROLL
    for (uint32_t d = 1; d < 32; d *= 2) {
      const uint64_t s = lanes.shfl_up(through, d);
      if (lane >= d) through += s;
    }
    const uint32_t stop = lanes.ballot(!listed || t < tiles_before_ + through);
    const uint32_t f = stop ? lanes.first_lane(stop) : 31u;
    group_ = lanes.shfl(g, f);
    row_start_ = lanes.shfl(start, f);
    row_end_ = lanes.shfl(end, f);
    row_blocks_ = lanes.shfl(blocks, f);
    tiles_before_ += lanes.shfl(through - tiles, f);
  }

  // Group g (< num_active), a_offsets[g + 1] = hi. Groups come in order (0
  // from the constructor, then g + 1), so row_end_ is group g - 1's end (0
  // before group 0), and clamping a_offsets[g] into [that end, M] would give
  // that end again: only a_offsets[g + 1] is read.
  GGEMM_HOST_DEVICE void set_group(uint32_t g, uint32_t hi) {
    group_ = g;
    // Clamp: rows [start, end) with prev_end = start <= end <= M.
    row_start_ = row_end_;
    row_end_ = hi < row_start_ ? row_start_ : (hi > p_.m ? p_.m : hi);
    row_blocks_ = (row_end_ - row_start_ + tile_m_ - 1) / tile_m_;
  }

  GroupedProblem p_;
  uint32_t tile_m_, tile_n_;
  uint32_t end0_, end1_;        // segment ends; the last segment ends at N
  uint32_t blocks0_, blocks1_;  // column blocks of segments 0 and 1
  uint32_t col_blocks_;
  uint32_t group_ = 0;
  uint64_t tiles_before_ = 0;
  uint32_t row_start_ = 0, row_end_ = 0, row_blocks_ = 0;
};

}  // namespace ggemm
