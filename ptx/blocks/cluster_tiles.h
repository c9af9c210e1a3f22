// How the CTAs of a cluster share the grouped tile walk, on both
// architectures.
//
// A cluster of two CTAs works on pair tiles of 256 weight rows (output
// columns) and one token tile: on sm_100a (cta_group 2) the pair issues one
// tcgen05.mma.cta_group::2 over all 256 rows; on sm_90a (cluster_m 2) each CTA
// runs its own wgmmas over its 128 rows and the pair shares the token tile
// through TMA multicast (each CTA loads half of it into both). Either way
// the cluster, not the CTA, walks GroupedTileScheduler with tile_n = 128 x
// cluster size, every CTA of it computing the same sequence of pair tiles;
// CTA `rank` then owns the share [col0 + 128 * rank, +128) of each, which
// may be empty at a segment's end (it still takes part in the loads and
// MMAs and writes nothing). With one CTA per cluster this is the plain walk.
#pragma once
#include <cstdint>

#include "tile_scheduler.h"

namespace ggemm {

constexpr uint32_t kRowsPerCta = 128;  // weight rows (output columns) per CTA

// The linear tile indices of cluster block / cluster_size: start, then +stride.
struct ClusterWalk {
  uint64_t first;
  uint64_t stride;
};

GGEMM_HOST_DEVICE constexpr ClusterWalk cluster_walk(uint32_t block, uint32_t grid, uint32_t cluster_size) {
  return ClusterWalk{block / cluster_size, grid / cluster_size};
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

}  // namespace ggemm
