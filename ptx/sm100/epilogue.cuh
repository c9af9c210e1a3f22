// The sm_100a grouped GEMM's epilogue: warps 2..5, one per 32-lane quarter
// of tensor memory, drain each tile's accumulator (tcgen05.ld), scale, add
// or route each output and store it to global memory directly, then hand
// the accumulator back to the MMA thread. grouped_gemm.cuh dispatches it;
// Cfg is the kernel's GroupedGemmSm100Config.
#pragma once
#include "../blocks/cluster_tiles.h"
#include "../blocks/grouped_params.h"
#include "../blocks/pipeline.h"
#include "../blocks/tile_handoff.h"
#include "../blocks/tile_scheduler.h"
#include "../blocks/out_convert.h"
#include "../instr/cluster.h"
#include "../instr/mbarrier.h"
#include "../instr/sm100/tcgen05.h"
#include "../instr/sm100/umma_desc.h"
#include "smem_layout.h"

namespace ggemm::sm100 {

template <class Cfg>
struct EpilogueSm100 {
  // Thread `lane` of the warp owning tensor-memory lanes 32q..32q+31 holds
  // weight row (output column) 32q + lane of every tile.
  GGEMM_DEVICE static void run(const GroupedGemmParams &p, const typename Cfg::Barriers &b, uint32_t tmem_base,
                               uint32_t q, uint32_t rank) {
    const uint32_t lane = threadIdx.x % 32;
    const uint32_t row_in_tile = 32 * q + lane;
    const bool accumulate = p.epilogue == kEpilogueAccumulate;
    const bool scale_rows = p.epilogue == kEpilogueRowScale;
    TileHandoff handoff;
    RingPosition acc;
    GroupedTile pair;
    while (Cfg::next_tile(handoff, &pair)) {
      const GroupedTile tile = cta_share(pair, rank);  // this CTA's 128 rows of the pair tile
      const bool active = tile.expert >= 0;
      if (!active && accumulate) continue;  // C += 0
      const uint32_t col = tile.col0 + row_in_tile;
      const bool owned = row_in_tile < tile.cols;
      const OutputView &view = p.out[p.span_segments ? output_segment(p, col) : tile.segment];
      typename Cfg::Out *dst =
          reinterpret_cast<typename Cfg::Out *>(view.base) + size_t(tile.row0) * view.ld + (col - view.col_offset);

      if (!active) {  // rows of an inactive group are zeroed
        if (owned)
          for (uint32_t r = 0; r < tile.rows; ++r) dst[size_t(r) * view.ld] = OutConvert<typename Cfg::Out>::from(0.f);
        continue;
      }
      ptx::mbarrier_wait_parity(&b.acc_full[acc.stage], acc.phase);
      tcgen05_fence_after_thread_sync();
      const uint32_t taddr = tmem_base + make_tmem_addr(32 * q, acc.stage * Cfg::kTileM);
      for (uint32_t c = 0; c < tile.rows; c += 8) {  // 8 token columns at a time
        uint32_t v[8];
        tcgen05_ld_32x32b_x8(taddr + c, v);
        tcgen05_wait_ld();
        if (!owned) continue;
#pragma unroll
        for (uint32_t j = 0; j < 8; ++j) {
          const uint32_t r = c + j;
          if (r >= tile.rows) break;
          float out = __uint_as_float(v[j]) * p.alpha;
          if (scale_rows) out *= __ldg(&p.row_scale[tile.row0 + r]);
          typename Cfg::Out *d = dst + size_t(r) * view.ld;
          if (accumulate) out += OutConvert<typename Cfg::Out>::to(*d);  // one rounding, below
          *d = OutConvert<typename Cfg::Out>::from(out);
        }
      }
      // This thread's loads of the accumulator are complete (wait::ld): hand
      // it back to the MMA thread (the leader's) for the tile after next.
      tcgen05_fence_before_thread_sync();
      if constexpr (Cfg::kCtaGroup == 2) {
        ptx::mbarrier_arrive_remote(ptx::map_shared_to_rank(&b.acc_empty[acc.stage], 0));
      } else {
        ptx::mbarrier_arrive(&b.acc_empty[acc.stage]);
      }
      acc.advance(kAccBuffers);
    }
  }
};

}  // namespace ggemm::sm100
