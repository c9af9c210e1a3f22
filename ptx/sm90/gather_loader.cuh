// Gather on load (Sm90GroupedParams::a_row_index): warp 2 of warpgroup 0
// loads each stage's token rows of a tile, row m from activation row
// a_row_index[m], one one-row TMA box a row, while the producer (warp 0)
// loads the weights and expects both operands' bytes on the stage's full
// barrier. Each lane keeps its rows' source indices in registers for the
// whole tile and issues their boxes: 32 lanes issue a stage's rows at once,
// and the producer's 40 registers hold none of it (inline there, the row
// loop spills at every tile_m).
//
// A row lands at its row of the 128B-swizzled token tile: the TMA swizzles
// by shared-memory address, so one row lands as it would in a whole box.
// Gathers always plan the 128-byte swizzle (plan_common.cpp, auto_swizzle;
// validate_config refuses others): a box's shared-memory destination must
// be 128-byte aligned, so rows 64 or 32 bytes apart cannot be boxes.
// An index outside the activations reads zeros (TMA's out-of-bounds fill;
// checked mode reports it, check_gather_warp). A lane's bytes may complete
// on the full barrier before the producer's expect_tx: the barrier's
// tx-count goes below zero, and its phase cannot complete before the
// producer's arrival.
#pragma once
#include "params.h"
#include "../blocks/pipeline.h"
#include "../blocks/tile_handoff.h"
#include "../instr/mbarrier.h"
#include "../instr/tma.h"
#include "smem_layout.h"

namespace ggemm::sm90 {

template <class Cfg>
struct GatherLoaderSm90 {
  static constexpr int kRowsPerLane = (Cfg::kTileM + 31) / 32;

  // The whole of warp 2; only with Cfg::kGather and a_row_index.
  GGEMM_DEVICE static void run(const Sm90GroupedParams &p, uint8_t *smem, const SmemLayout &layout, uint64_t *full,
                               uint64_t *empty) {
    const uint32_t lane = threadIdx.x % 32;
    const uint32_t k_iters = k_stages(p.k, p.swizzle_bytes / 2, 1);
    TileHandoff handoff;
    RingPosition pipe;
    GroupedTile tile;
    while (handoff.take_warp(Cfg::handoff_region(), &tile)) {
      if (tile.expert < 0) continue;  // the producer loads nothing for it either
      const uint32_t rows = min(tile.rows, uint32_t(Cfg::kTileM)), row0 = tile.row0;
      int32_t source[kRowsPerLane];
#pragma unroll
      for (int i = 0; i < kRowsPerLane; ++i) {
        const uint32_t r = lane + 32 * i;
        source[i] = r < rows ? __ldg(&p.a_row_index[row0 + r]) : 0;
      }
      for (uint32_t ki = 0; ki < k_iters; ++ki) {
        ptx::mbarrier_wait_parity(&empty[pipe.stage], pipe.phase ^ 1);
        uint8_t *x = smem + layout.tokens_offset(pipe.stage);
        const int32_t k0 = int32_t(ki * (p.swizzle_bytes / 2));
#pragma unroll
        for (int i = 0; i < kRowsPerLane; ++i) {
          const uint32_t r = lane + 32 * i;
          if (r < rows) ptx::tma_load_2d(x + r * p.swizzle_bytes, &p.tmap_tokens, &full[pipe.stage], k0, source[i]);
        }
        pipe.advance(p.stages);
      }
    }
  }
};

}  // namespace ggemm::sm90
