// The sm_100a grouped GEMM's tile walker (one thread of warp 6) and TMA
// producer (one thread of warp 0); grouped_gemm.cuh dispatches them. Cfg is
// the kernel's GroupedGemmSm100Config.
#pragma once
#include "../blocks/cluster_tiles.h"
#include "../blocks/grouped_params.h"
#include "../blocks/pipeline.h"
#include "../blocks/tile_handoff.h"
#include "../blocks/tile_scheduler.h"
#include "../instr/cluster.h"
#include "../instr/mbarrier.h"
#include "../instr/tma.h"
#include "smem_layout.h"

namespace ggemm::sm100 {

// The only role that walks the tiles (as on sm_90a); the others read the
// pair tiles from the handoff (each CTA of a pair walks the same ones).
template <class Cfg>
struct TileWalkerSm100 {
  GGEMM_DEVICE static void run(const GroupedGemmParams &p) {
    GroupedTileScheduler sched(grouped_problem(p), Cfg::kTileM, Cfg::kPairTileN);
    const ClusterWalk w = Cfg::walk();
    TileHandoff handoff;
    GroupedTile pair;
    for (uint64_t t = w.first; sched.next(t, &pair); t += w.stride)
      handoff.publish(Cfg::handoff_region(), pair, uint32_t(t));
    handoff.finish(Cfg::handoff_region());
  }
};

// Loads each tile's weights and tokens into the ring of `stages` buffers
// (the sm_90a producer's loads), completing on the full barrier of the
// MMA's CTA.
template <class Cfg>
struct ProducerSm100 {
  // One TMA load into this CTA's shared memory, completing on the full
  // barrier of the MMA's CTA: this one, or the pair's leader.
  GGEMM_DEVICE static void load_3d(void *dst, const CUtensorMap *map, uint64_t *full, int32_t c0, int32_t c1,
                                   int32_t c2) {
    if constexpr (Cfg::kCtaGroup == 2) {
      ptx::tma_load_3d_to_pair_barrier(dst, map, ptx::map_shared_to_rank(full, 0), c0, c1, c2);
    } else {
      ptx::tma_load_3d(dst, map, full, c0, c1, c2);
    }
  }
  GGEMM_DEVICE static void load_2d(void *dst, const CUtensorMap *map, uint64_t *full, int32_t c0, int32_t c1) {
    if constexpr (Cfg::kCtaGroup == 2) {
      ptx::tma_load_2d_to_pair_barrier(dst, map, ptx::map_shared_to_rank(full, 0), c0, c1);
    } else {
      ptx::tma_load_2d(dst, map, full, c0, c1);
    }
  }

  GGEMM_DEVICE static void run(const GroupedGemmParams &p, uint8_t *smem, const SmemLayout &layout,
                               const typename Cfg::Barriers &b, uint32_t rank) {
    const uint32_t tile_k = p.swizzle_bytes / 2;
    const uint32_t k_iters = (p.k + tile_k - 1) / tile_k;
    // The leader expects both CTAs' bytes on its barrier; the peer only loads.
    const uint32_t weights_bytes =
        Cfg::kLayout == WeightLayout::kKMajor ? p.weights_box_rows * p.swizzle_bytes : layout.weights_stage_bytes;
    const uint32_t stage_bytes = Cfg::kCtaGroup * (weights_bytes + layout.tokens_stage_bytes);
    TileHandoff handoff;
    RingPosition pipe;
    GroupedTile pair;
    while (Cfg::next_tile(handoff, &pair)) {
      if (pair.expert < 0) continue;  // inactive group: nothing to load
      // This CTA's 128 weight rows (zero-filled past N by the 3-D map) and
      // its share of the tokens (rows past the group are computed, never stored).
      const int32_t weight_row = int32_t(pair.col0 + rank * kTileN);
      const int32_t token_row = int32_t(pair.row0 + rank * Cfg::kTokensPerCta + (p.a_planes ? pair.segment * p.m : 0));
      for (uint32_t ki = 0; ki < k_iters; ++ki) {
        // A fresh barrier's "previous phase" (parity 1) counts as complete.
        ptx::mbarrier_wait_parity(&b.empty[pipe.stage], pipe.phase ^ 1);
        if (rank == 0) ptx::mbarrier_arrive_expect_tx(&b.full[pipe.stage], stage_bytes);
        uint8_t *wt = smem + layout.weights_offset(pipe.stage);
        const int32_t k0 = int32_t(ki * tile_k);
        if constexpr (Cfg::kLayout == WeightLayout::kKMajor) {
          load_3d(wt, &p.tmap_weights, &b.full[pipe.stage], k0, weight_row, pair.expert);
        } else {
          // Two boxes of [tile_k rows of K][64 features], one after the other.
          for (uint32_t box = 0; box < kTileN / Cfg::kFeaturesPerBox; ++box)
            load_3d(wt + box * tile_k * 128, &p.tmap_weights, &b.full[pipe.stage],
                    int32_t(weight_row + box * Cfg::kFeaturesPerBox), k0, pair.expert);
        }
        load_2d(smem + layout.tokens_offset(pipe.stage), &p.tmap_tokens, &b.full[pipe.stage], k0, token_row);
        pipe.advance(p.stages);
      }
    }
  }
};

}  // namespace ggemm::sm100
