// The sm_100a grouped GEMM's TMA producer (one thread of warp 0, or the
// whole warp when gathering); grouped_gemm.cuh dispatches it. Cfg is the
// kernel's GroupedGemmSm100Config.
#pragma once
#include "../blocks/cluster_tiles.h"
#include "../blocks/grouped_params.h"
#include "../blocks/pipeline.h"
#include "../blocks/tile_handoff.h"
#include "../blocks/tile_walker.h"
#include "../blocks/tile_scheduler.h"
#include "../instr/cluster.h"
#include "../instr/mbarrier.h"
#include "../instr/sm100/tma_gather4.h"
#include "../instr/tma.h"
#include "smem_layout.h"

namespace ggemm::sm100 {

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

  // One stage's weights (this CTA's rows of the pair tile at col0: a box of
  // weights_box_rows, 128 or 64; slice k0 of K) into wt, completing on the full barrier of the MMA's CTA.
  GGEMM_DEVICE static void load_weights(const GroupedGemmParams &p, uint8_t *wt, uint64_t *full, int32_t k0,
                                        uint32_t col0, int32_t expert, uint32_t tile_k) {
    if constexpr (Cfg::kLayout == WeightLayout::kKMajor) {
      if constexpr (Cfg::kSwiglu) {
        if (p.epilogue == kEpilogueSwiglu) {
          // The runtime's 5-D view {K, 8 rows, gate | up, feature octet,
          // expert} (runtime/launch_grouped.cpp, encode_swiglu_weights, shared
          // with sm_90a): the tile's 64 features (32 on a narrow tile) as
          // octet pairs, smem row
          // s = 16 * octet + 8 * (up ? 1 : 0) + row (kSwigluOctet); the
          // epilogue reads them back in that order from tensor memory.
          ptx::tma_load_5d(wt, &p.tmap_weights, full, k0, 0, 0, int32_t(col0 / (2 * kSwigluOctet)), expert);
          return;
        }
      }
      load_3d(wt, &p.tmap_weights, full, k0, int32_t(col0), expert);
    } else {
      // Two boxes of [tile_k rows of K][64 features], one after the other.
      for (uint32_t box = 0; box < kTileN / Cfg::kFeaturesPerBox; ++box)
        load_3d(wt + box * tile_k * 128, &p.tmap_weights, full, int32_t(col0 + box * Cfg::kFeaturesPerBox), k0,
                expert);
    }
  }

  GGEMM_DEVICE static void run(const GroupedGemmParams &p, uint8_t *smem, const SmemLayout &layout,
                               const typename Cfg::Barriers &b, uint32_t rank) {
    const uint32_t tile_k = p.swizzle_bytes / 2;
    const uint32_t k_iters = (p.k + tile_k - 1) / tile_k;
    // The leader expects both CTAs' bytes on its barrier; the peer only loads.
    const uint32_t stage_bytes = Cfg::kCtaGroup * (weights_bytes(p, layout) + layout.tokens_stage_bytes);
    TileHandoff handoff;
    RingPosition pipe;
    GroupedTile pair;
    while (Cfg::next_tile(handoff, &pair)) {
      if (pair.expert < 0) continue;  // inactive group: nothing to load
      // This CTA's weight rows (a box of weights_box_rows, zero-filled past N
      // by the 3-D map) and
      // its share of the tokens (rows past the group are computed, never stored).
      const uint32_t weight_row = pair.col0 + rank * kTileN;
      const int32_t token_row = int32_t(pair.row0 + rank * Cfg::kTokensPerCta + (p.a_planes ? pair.segment * p.m : 0));
      for (uint32_t ki = 0; ki < k_iters; ++ki) {
        // A fresh barrier's "previous phase" (parity 1) counts as complete.
        ptx::mbarrier_wait_parity(&b.empty[pipe.stage], pipe.phase ^ 1);
        if (rank == 0) ptx::mbarrier_arrive_expect_tx(&b.full[pipe.stage], stage_bytes);
        const int32_t k0 = int32_t(ki * tile_k);
        load_weights(p, smem + layout.weights_offset(pipe.stage), &b.full[pipe.stage], k0, weight_row, pair.expert,
                     tile_k);
        load_2d(smem + layout.tokens_offset(pipe.stage), &p.tmap_tokens, &b.full[pipe.stage], k0, token_row);
        pipe.advance(p.stages);
      }
    }
    wait_stages_released(b, pipe, p.stages);
  }

  // The producer's tail: every stage's last load consumed and its release
  // landed before this CTA may leave. A stage is released by a
  // tcgen05.commit (mma.cuh), whose arrival is asynchronous and, in a pair,
  // comes from the leader into both CTAs: without this wait a CTA could exit
  // (the epilogue having seen the later acc_full commit, whose arrival the
  // PTX ISA does not order after this one) with an arrival still on its way
  // into shared memory it no longer owns. One wait a stage, at the parity of
  // its next acquisition: stages never filled (a fresh barrier's previous
  // phase) pass at once. CUTLASS's collectives end their producers the same
  // way.
  GGEMM_DEVICE static void wait_stages_released(const typename Cfg::Barriers &b, RingPosition pipe,
                                                uint32_t stages) {
    for (uint32_t i = 0; i < stages; ++i) {
      ptx::mbarrier_wait_parity(&b.empty[pipe.stage], pipe.phase ^ 1);
      pipe.advance(stages);
    }
  }

  // Bytes of one stage's weights: K-major boxes of weights_box_rows rows
  // (SwiGLU's 5-D view: 128, or 64 on a narrow tile, whole octet pairs,
  // zeros past I), or the two MN-major boxes.
  GGEMM_DEVICE static uint32_t weights_bytes(const GroupedGemmParams &p, const SmemLayout &layout) {
    return Cfg::kLayout == WeightLayout::kKMajor ? p.weights_box_rows * p.swizzle_bytes : layout.weights_stage_bytes;
  }

  // Gather on load (a_row_index; cta_group 1 only: the runtime plans no
  // pair for it).
  GGEMM_DEVICE static bool gathers(const GroupedGemmParams &p) { return Cfg::kGather && p.a_row_index != nullptr; }

  // The producer when gathering: the whole of warp 0. Token row m of a tile
  // comes from activation row a_row_index[m] (the token map's box is one
  // row), four rows per TMA gather4 (ptx/instr/sm100/tma_gather4.h): lane l
  // issues the gather4 of rows 4l..4l+3 (and 4(l + 32).. at tile_m 256),
  // whose source indices it loads once per tile and keeps in registers, so
  // a stage of 128 rows is 32 instructions issued side by side instead of
  // 128 one-row boxes from one thread. A gather4's rows land where a whole
  // box would put them (128B-swizzled K-major rows, the layout the MMA's
  // descriptors read), so nothing downstream knows the tile was gathered.
  // Lane 0 waits for the stage, expects its bytes and loads the weights.
  //
  // The last gather4 of a group whose row count is not a multiple of 4
  // repeats its first row in the rows past the group: those token columns
  // are computed and never stored (as the rows past a group always are),
  // and the expected bytes stay four whole rows per gather4.
  GGEMM_DEVICE static void run_gather(const GroupedGemmParams &p, uint8_t *smem, const SmemLayout &layout,
                                      const typename Cfg::Barriers &b) {
    static_assert(Cfg::kCtaGroup == 1, "the gather's loads complete on this CTA's barrier");
    const uint32_t lane = threadIdx.x % 32;
    const uint32_t tile_k = p.swizzle_bytes / 2;
    const uint32_t k_iters = (p.k + tile_k - 1) / tile_k;
    const uint32_t w_bytes = weights_bytes(p, layout);
    TileHandoff handoff;
    RingPosition pipe;
    GroupedTile tile;
    while (handoff.take_warp(Cfg::handoff_region(), &tile)) {
      if (tile.expert < 0) continue;  // inactive group: nothing to load
      const uint32_t rows = min(tile.rows, uint32_t(Cfg::kTileM));
      const uint32_t quads = (rows + 3) / 4;
      int32_t source[Cfg::kGatherQuadsPerLane][4];
#pragma unroll
      for (int i = 0; i < Cfg::kGatherQuadsPerLane; ++i) {
        const uint32_t r = 4 * (lane + 32 * i);
        source[i][0] = r < rows ? __ldg(&p.a_row_index[tile.row0 + r]) : 0;
#pragma unroll
        for (int e = 1; e < 4; ++e)
          source[i][e] = r + e < rows ? __ldg(&p.a_row_index[tile.row0 + r + e]) : source[i][0];
      }
      const uint32_t stage_bytes = w_bytes + 4 * quads * p.swizzle_bytes;
      for (uint32_t ki = 0; ki < k_iters; ++ki) {
        // A fresh barrier's "previous phase" (parity 1) counts as complete.
        ptx::mbarrier_wait_parity(&b.empty[pipe.stage], pipe.phase ^ 1);
        const int32_t k0 = int32_t(ki * tile_k);
        if (lane == 0) {
          ptx::mbarrier_arrive_expect_tx(&b.full[pipe.stage], stage_bytes);
          load_weights(p, smem + layout.weights_offset(pipe.stage), &b.full[pipe.stage], k0, tile.col0, tile.expert,
                       tile_k);
        }
        // (Not needed for correctness: a gather4's bytes may complete before
        // the expect_tx, the tx-count going below zero, and the phase cannot
        // complete before lane 0's arrival. It keeps the order readable.)
        __syncwarp();
        uint8_t *x = smem + layout.tokens_offset(pipe.stage);
#pragma unroll
        for (int i = 0; i < Cfg::kGatherQuadsPerLane; ++i) {
          const uint32_t quad = lane + 32 * i;
          if (quad < quads)
            tma_load_2d_gather4(x + 4 * quad * p.swizzle_bytes, &p.tmap_tokens, &b.full[pipe.stage], k0,
                                source[i][0], source[i][1], source[i][2], source[i][3]);
        }
        pipe.advance(p.stages);
      }
    }
    wait_stages_released(b, pipe, p.stages);
  }
};

}  // namespace ggemm::sm100
