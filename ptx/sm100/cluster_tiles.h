// How the sm_100a kernel's CTAs share the grouped tile walk (issue 5; the
// kernel itself is not written yet, this is its schedule).
//
// With cta_group 2 a cluster of two CTAs issues one tcgen05.mma.cta_group::2
// over a 256-row weight tile (the MMA's M side): each CTA loads and owns 128
// of those rows (output columns) in its tensor memory and epilogue, and both
// load halves of the shared token tile. So the cluster, not the CTA, walks
// GroupedTileScheduler with tile_n = 128 * cta_group, both CTAs computing the
// same sequence of pair tiles; CTA `rank` then owns the share
// [col0 + 128 * rank, +128) of each, which may be empty at a segment's end
// (it still takes part in the pair's MMA and writes nothing).
// With cta_group 1 this is exactly the sm_90a walk.
#pragma once
#include <cstdint>

#include "../tile_scheduler.h"

namespace ggemm::sm100 {

constexpr uint32_t kRowsPerCta = 128;  // weight rows (output columns) per CTA

// The linear tile indices of cluster blockIdx.x / cta_group: start, then +stride.
struct ClusterWalk {
  uint64_t first;
  uint64_t stride;
};

GGEMM_HOST_DEVICE constexpr ClusterWalk cluster_walk(uint32_t block, uint32_t grid, uint32_t cta_group) {
  return ClusterWalk{block / cta_group, grid / cta_group};
}

// The part of a pair tile that CTA `rank` owns; cols is 0 when the tile ends
// before the rank's rows begin.
GGEMM_HOST_DEVICE constexpr GroupedTile cta_share(const GroupedTile &pair, uint32_t rank) {
  GroupedTile share = pair;
  const uint32_t offset = rank * kRowsPerCta;
  share.col0 = pair.col0 + offset;
  share.cols = pair.cols > offset ? (pair.cols - offset < kRowsPerCta ? pair.cols - offset : kRowsPerCta) : 0;
  return share;
}

}  // namespace ggemm::sm100
