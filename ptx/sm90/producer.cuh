// The sm_90a grouped GEMM's warpgroup 0 (grouped_gemm.cuh dispatches it):
// the tile walker (warp 1: TileWalker, ptx/blocks/tile_walker.h) and the
// TMA producer (one thread of warp 0), which also loads the old C of each
// tile for the accumulate epilogue. Cfg is the kernel's
// GroupedGemmSm90Config.
#pragma once
#include "../blocks/cluster_tiles.h"
#include "params.h"
#include "../blocks/pipeline.h"
#include "../blocks/tile_handoff.h"
#include "../blocks/tile_walker.h"
#include "../blocks/tile_scheduler.h"
#include "../blocks/trace.h"
#include "../instr/mbarrier.h"
#include "../instr/tma.h"
#include "smem_layout.h"

namespace ggemm::sm90 {

// TMA loads of each tile's weights and tokens into the ring of `stages`
// buffers (full/empty mbarrier pairs), and in accumulate mode of its old C
// into the ring of staging slots (c_full / c_empty), right after the tile's
// operands, so the reads of C run ahead of the epilogues like the operand
// loads.
template <class Cfg>
struct ProducerSm90 {
  // One thread of warp 0.
  GGEMM_DEVICE static void run(const Sm90GroupedParams &p, uint8_t *smem, const SmemLayout &layout, uint64_t *full,
                               uint64_t *empty, uint64_t *c_full, uint64_t *c_empty) {
    const uint32_t tile_k = p.swizzle_bytes / 2;
    const uint32_t k_iters = k_stages(p.k, tile_k, Cfg::k_slices(p));
    const uint32_t weights_bytes = Cfg::kLayout == WeightLayout::kKMajor
                                       ? Cfg::k_slices(p) * p.weights_box_rows * p.swizzle_bytes
                                       : layout.weights_stage_bytes;
    const uint32_t stage_bytes = weights_bytes + layout.tokens_stage_bytes;
    TileHandoff handoff;
    const uint32_t r = Cfg::rank();
    RingPosition pipe;
    TraceWriter trace(trace_buffer(p), 0);
    trace.record_with_time(kTraceStart, 0);
    GroupedTile tile;  // this CTA's share of the pair tile
    uint32_t index;
    RingPosition c_ring;  // accumulate: the old-C slots
    while (handoff.take(Cfg::handoff_region(), &tile, &index)) {
      trace.record(kTraceTile, index);
      if (tile.expert < 0) continue;  // inactive group: nothing to load
      // This CTA's token rows: all of them, or its half of the pair's.
      const int32_t token_row = int32_t(tile.row0 + r * Cfg::kTokensPerCta + (p.a_planes ? tile.segment * p.m : 0));
      // A tile narrower than TileM loads only the token rows its MMA reads
      // (narrow_token_boxes): under load the stages come at the pace of
      // their bytes, not of the MMA, so a narrow tile loading full boxes
      // takes as long as a full one.
      const CUtensorMap *tokens = &p.tmap_tokens;
      uint32_t tile_stage_bytes = stage_bytes;
      if (gathers(p)) {
        tile_stage_bytes = weights_bytes + min(tile.rows, uint32_t(Cfg::kTileM)) * p.swizzle_bytes;
      } else if (Cfg::narrow_token_boxes(p)) {
        const uint32_t width = narrow_mma_width(tile.rows, Cfg::kTileM);
        if (width < uint32_t(Cfg::kTileM)) {
          tokens = &p.tmap_tokens_narrow[narrow_token_map_index(width)];
          tile_stage_bytes = weights_bytes + width * p.swizzle_bytes;
        }
      }
      for (uint32_t ki = 0; ki < k_iters; ++ki) {
        // A fresh barrier's "previous phase" (parity 1) counts as complete.
        ptx::mbarrier_wait_parity(&empty[pipe.stage], pipe.phase ^ 1);
        ptx::mbarrier_arrive_expect_tx(&full[pipe.stage], tile_stage_bytes);
        load_stage(p, smem + layout.weights_offset(pipe.stage), smem + layout.tokens_offset(pipe.stage),
                   &full[pipe.stage], ki, tile, tokens, token_row, r);
        trace.record(kTraceIssue, trace.next_stage());
        pipe.advance(p.stages);
      }
      if (Cfg::accumulates(p)) {
        ptx::mbarrier_wait_parity(&c_empty[c_ring.stage], c_ring.phase ^ 1);
        load_old_c(p, tile, smem + layout.c_offset() + c_ring.stage * Cfg::kStagingBytes, &c_full[c_ring.stage]);
        c_ring.advance(p.staging_buffers);
      }
    }
    trace.finish();
  }

  // Accumulate: the TMA loads of an active tile's old C (its one chunk: tile_m
  // <= 128) into slot `slot0` of every consumer warpgroup's staging (the
  // warpgroups' slots lie staging_buffers * kStagingBytes apart), completing
  // on `bar`. Rows past the group and columns past the segment are read as
  // well (TMA zero-fills past the tensor; counted either way) and never
  // written back. No span_segments with accumulate: the tile's segment holds
  // all its columns.
  GGEMM_DEVICE static void load_old_c(const Sm90GroupedParams &p, const GroupedTile &tile, uint8_t *slot0,
                                      uint64_t *bar) {
    const OutputView &view = p.out[tile.segment];
    ptx::mbarrier_arrive_expect_tx(bar, Cfg::consumers(p) * Cfg::kStagingBytes);
    for (uint32_t cw = 0; cw < Cfg::consumers(p); ++cw) {
      uint8_t *slot = slot0 + cw * p.staging_buffers * Cfg::kStagingBytes;
      const int32_t col = int32_t(Cfg::warpgroup_col0(tile, cw) - view.col_offset);
      for (uint32_t b = 0; b < Cfg::kBoxes; ++b)
        ptx::tma_load_2d(slot + b * Cfg::kStageTokens * 128, &p.tmap_out[tile.segment], bar,
                         col + int32_t(b * Cfg::kColsPerBox), int32_t(tile.row0));
    }
  }

  // Gather on load (a_row_index): the token rows come from the gather
  // loader (gather_loader.cuh); the producer expects their bytes.
  GGEMM_DEVICE static bool gathers(const Sm90GroupedParams &p) { return Cfg::kGather && p.a_row_index != nullptr; }

  // The TMA loads of stage ki of a tile into weights w and tokens x, both
  // completing on `bar`: one slice of K (tile_k), or with the K-sliced views
  // k_slices slices in one box per operand (past K: zero-filled, their bytes
  // still counted). `tokens`: the tile's token map (one slice a stage, no
  // cluster: tmap_tokens or a narrow one).
  GGEMM_DEVICE static void load_stage(const Sm90GroupedParams &p, uint8_t *w, uint8_t *x, uint64_t *bar, uint32_t ki,
                                      const GroupedTile &tile, const CUtensorMap *tokens, int32_t token_row,
                                      uint32_t r) {
    const uint32_t tile_k = p.swizzle_bytes / 2;
    if (Cfg::k_slices(p) > 1) {
      const int32_t slice0 = int32_t(ki * Cfg::k_slices(p));
      ptx::tma_load_4d(w, &p.tmap_weights, bar, 0, int32_t(tile.col0), slice0, tile.expert);
      ptx::tma_load_3d(x, &p.tmap_tokens, bar, 0, token_row, slice0);
      return;
    }
    const int32_t k0 = int32_t(ki * tile_k);
    if constexpr (Cfg::kLayout == WeightLayout::kKMajor) {
      if (Cfg::kSwigluOnly || (Cfg::kSwiglu && p.epilogue == kEpilogueSwiglu)) {
        // {K, 8 rows, gate | up, feature octet, expert}: the tile's 64
        // features (32 on a narrow tile) as octet pairs (kSwigluOctet).
        ptx::tma_load_5d(w, &p.tmap_weights, bar, k0, 0, 0, int32_t(tile.col0 / (2 * kSwigluOctet)), tile.expert);
      } else {
        ptx::tma_load_3d(w, &p.tmap_weights, bar, k0, int32_t(tile.col0), tile.expert);
      }
    } else {
      // Two boxes of [tile_k rows of K][64 features]; one per consumer.
      for (uint32_t half = 0; half < kConsumerWarpgroups; ++half)
        ptx::tma_load_3d(w + half * tile_k * 128, &p.tmap_weights, bar,
                         int32_t(tile.col0 + half * Cfg::kFeaturesPerWarpgroup), k0, tile.expert);
    }
    if (gathers(p)) return;  // the gather loader's
    if constexpr (Cfg::kClusterM > 1) {
      ptx::tma_load_2d_multicast(x + r * Cfg::kTokensPerCta * p.swizzle_bytes, &p.tmap_tokens, bar, k0, token_row,
                                 uint16_t((1u << Cfg::kClusterM) - 1));
    } else {
      ptx::tma_load_2d(x, tokens, bar, k0, token_row);
    }
  }
};

}  // namespace ggemm::sm90
