// The sm_100a grouped GEMM's MMA issuer: one thread of warp 1 (the pair
// leader's, with cta_group 2) issues tcgen05.mma from shared-memory
// descriptors into one of two tensor-memory accumulators, and
// tcgen05.commit frees each stage and marks each accumulator full.
// grouped_gemm.cuh dispatches it; Cfg is the kernel's GroupedGemmSm100Config.
#pragma once
#include "../blocks/grouped_params.h"
#include "../blocks/pipeline.h"
#include "../blocks/tile_handoff.h"
#include "../blocks/tile_scheduler.h"
#include "../instr/cvta.h"
#include "../instr/mbarrier.h"
#include "../instr/sm100/tcgen05.h"
#include "../instr/sm100/umma_desc.h"
#include "smem_layout.h"

namespace ggemm::sm100 {

template <class Cfg>
struct MmaIssuerSm100 {
  // The weights' shared-memory descriptor at k-step kk of a stage (PTX ISA
  // "Shared memory descriptor", tcgen05 matrix descriptors). K-major: rows of
  // one swizzle span, 8-row groups 8 spans apart, a k-step advances 32 bytes
  // inside the span. MN-major (128B swizzle): atoms of 64 features x 8 k-rows;
  // LBO = the distance between the two 64-feature boxes, SBO = 8 k-rows of
  // 128 bytes; a k-step advances 16 k-rows.
  GGEMM_DEVICE static uint64_t weights_desc(uint32_t w, uint32_t kk, uint32_t swizzle_bytes) {
    if constexpr (Cfg::kLayout == WeightLayout::kKMajor) {
      return make_kmajor_desc(w + kk * 32, swizzle_bytes);
    } else {
      return make_mnmajor_sw128_desc(w + kk * 16 * 128, (swizzle_bytes / 2) * 128);
    }
  }

  // One arrival on `bar` (in both CTAs of a pair) once this thread's MMAs
  // so far have completed.
  GGEMM_DEVICE static void commit(uint64_t *bar) {
    if constexpr (Cfg::kCtaGroup == 2) {
      tcgen05_commit_pair(bar, 0x3);
    } else {
      tcgen05_commit(bar);
    }
  }

  GGEMM_DEVICE static void run(const GroupedGemmParams &p, uint8_t *smem, const SmemLayout &layout,
                               const typename Cfg::Barriers &b, uint32_t tmem_base) {
    const uint32_t tile_k = p.swizzle_bytes / 2;
    const uint32_t k_iters = (p.k + tile_k - 1) / tile_k;
    const uint32_t idesc = Cfg::instr_desc();
    TileHandoff handoff;
    RingPosition pipe, acc;  // acc.stage: which accumulator; acc.phase: its use count's parity
    GroupedTile tile;
    while (Cfg::next_tile(handoff, &tile)) {
      if (tile.expert < 0) continue;  // inactive: the epilogue writes zeros without an accumulator
      // The epilogue has drained this accumulator (a fresh one counts as drained).
      ptx::mbarrier_wait_parity(&b.acc_empty[acc.stage], acc.phase ^ 1);
      tcgen05_fence_after_thread_sync();
      const uint32_t d_tmem = tmem_base + acc.stage * Cfg::kTileM;  // column offset; lane 0
      for (uint32_t ki = 0; ki < k_iters; ++ki) {
        ptx::mbarrier_wait_parity(&b.full[pipe.stage], pipe.phase);
        tcgen05_fence_after_thread_sync();
        const uint32_t wt = ptx::smem_addr(smem + layout.weights_offset(pipe.stage));
        const uint32_t x = ptx::smem_addr(smem + layout.tokens_offset(pipe.stage));
        for (uint32_t kk = 0; kk < tile_k / 16; ++kk) {
          tcgen05_mma_f16<Cfg::kCtaGroup>(d_tmem, weights_desc(wt, kk, p.swizzle_bytes),
                                          make_kmajor_desc(x + kk * 32, p.swizzle_bytes), idesc, ki > 0 || kk > 0);
        }
        commit(&b.empty[pipe.stage]);  // the stage is free (in both CTAs) once these MMAs have read it
        pipe.advance(p.stages);
      }
      commit(&b.acc_full[acc.stage]);  // the accumulator is complete once every MMA is
      acc.advance(kAccBuffers);
    }
  }
};

}  // namespace ggemm::sm100
