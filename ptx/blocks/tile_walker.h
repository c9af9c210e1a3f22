// The tile walker of both architectures' persistent kernels (and sm_90a's
// token-major one): the only role that walks the tiles, their chain of
// dependent routing loads, handing each to the producer and the consumers
// through the tile handoff (tile_handoff.h), up to kTileSlots ahead of the
// slowest receiver.
//
// Cfg says what is walked:
//   kTileM               tokens a tile
//   walk_tile_n(p)       features of the cluster's tile (the walk's column step)
//   kWalkClusterSize     CTAs that walk one sequence of tiles together
//                        (sm_90a's pair, sm_100a's cta_group 2 pair; 1)
//   walk_share(tile)     what this CTA is handed of the cluster's tile (sm_90a:
//                        a pair's CTA its 128 features; sm_100a: the whole
//                        pair tile, which the pair's MMA multiplies)
#pragma once
#include <cstdint>

#include "../instr/arch.h"
#include "cluster_tiles.h"
#include "tile_handoff.h"
#include "tile_scheduler.h"

namespace ggemm {

#if defined(__CUDACC__)
template <class Cfg>
struct TileWalker {
  // The walker warp. Its lanes walk together where a CTA's step from one
  // tile to its next crosses many groups (GroupedGemmParams::walk_lanes:
  // next_warp, 32 groups' ends a step, lane 0 publishes); otherwise lane 0
  // walks alone (next: kWalkBatch groups a step, whose few dependent
  // instructions take less than a lane step's scans and shuffles).
  template <class Params>
  GGEMM_DEVICE static void run(const Params &p, uint8_t *handoff_region) {
    if (p.walk_lanes) {
      walk<true>(p, handoff_region);
    } else if (threadIdx.x % 32 == 0) {
      walk<false>(p, handoff_region);
    }
  }

 private:
  // The cluster's walk (cluster_walk, as the CPU tests simulate it), read
  // from the special registers at each use (sm_90a's walker has 40
  // registers).
  GGEMM_DEVICE static uint32_t first_tile() {
    return uint32_t(cluster_walk(blockIdx.x, gridDim.x, Cfg::kWalkClusterSize).first);
  }
  GGEMM_DEVICE static uint32_t tile_stride() {
    return uint32_t(cluster_walk(blockIdx.x, gridDim.x, Cfg::kWalkClusterSize).stride);
  }

  template <bool kLanes, class Params>
  GGEMM_DEVICE static void walk(const Params &p, uint8_t *handoff_region) {
    GroupedTileScheduler sched(grouped_problem(p), Cfg::kTileM, Cfg::walk_tile_n(p));
    TileHandoff handoff;
    GroupedTile tile;
    const bool publisher = threadIdx.x % 32 == 0;
    for (uint64_t t = first_tile(); kLanes ? sched.next_warp(t, &tile) : sched.next(t, &tile); t += tile_stride()) {
      if (publisher) handoff.publish(handoff_region, Cfg::walk_share(tile), uint32_t(t));
      if constexpr (kLanes) __syncwarp();  // the lanes meet again before the next step's shuffles
    }
    if (publisher) handoff.finish(handoff_region);
  }
};
#endif

}  // namespace ggemm
