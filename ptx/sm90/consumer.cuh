// The sm_90a grouped GEMM's mainloop: one consumer warpgroup's wgmmas over
// a tile's pipeline stages, from shared-memory descriptors into fp32
// registers (grouped_gemm.cuh runs it for each tile, then the epilogue).
// Cfg is the kernel's GroupedGemmSm90Config; Swizzle (128, 64 or 32 bytes,
// tile_k = Swizzle / 2) and Slices (K slices a stage) are fixed per consumer
// loop, so each stage's wgmmas are unrolled.
#pragma once
#include "params.h"
#include "../blocks/pipeline.h"
#include "../blocks/trace.h"
#include "../instr/cluster.h"
#include "../instr/cvta.h"
#include "../instr/mbarrier.h"
#include "../instr/sm90/wgmma.h"
#include "smem_layout.h"

namespace ggemm::sm90 {

template <class Cfg>
struct MainloopSm90 {
  // Runs the mainloop of a tile of `rows` tokens with the narrowest wgmma N
  // (tile_m, tile_m / 2, ..., 16) that covers them (narrow_mma_width, which
  // the producer sizes the token boxes by): a group's last, partial row
  // block costs only the MMA width it needs. The m64nNk16 fragment is a
  // prefix of the m64n(2N)k16 fragment, so the narrower MMA accumulates into
  // acc's prefix.
  template <uint32_t Swizzle, uint32_t Slices, int N>
  GGEMM_DEVICE static void run(const Sm90GroupedParams &p, uint8_t *smem, const SmemLayout &layout, uint64_t *full,
                               uint64_t *empty, uint32_t cw, uint32_t rows, RingPosition &pipe,
                               float (&acc)[Cfg::kAccRegs], TraceWriter &trace) {
    if constexpr (N > 16) {
      if (rows <= uint32_t(N / 2)) {
        run<Swizzle, Slices, N / 2>(p, smem, layout, full, empty, cw, rows, pipe, acc, trace);
        return;
      }
    }
    mainloop<Swizzle, Slices, N>(p, smem, layout, full, empty, cw, k_stages(p.k, Swizzle / 2, Slices), pipe,
                                 reinterpret_cast<float(&)[N / 2]>(acc), trace);
  }

  template <uint32_t Swizzle, uint32_t Slices, int N>
  GGEMM_DEVICE static void mainloop(const Sm90GroupedParams &p, uint8_t *smem, const SmemLayout &layout, uint64_t *full,
                                    uint64_t *empty, uint32_t cw, uint32_t k_iters, RingPosition &pipe,
                                    float (&acc)[N / 2], TraceWriter &trace) {
    uint32_t prev_stage = 0;
    for (uint32_t ki = 0; ki < k_iters; ++ki) {
      ptx::mbarrier_wait_parity(&full[pipe.stage], pipe.phase);
      const uint32_t seq = trace.next_stage();
      trace.record(kTraceFull, seq);
      const uint32_t w = ptx::smem_addr(smem + layout.weights_offset(pipe.stage));
      const uint32_t x = ptx::smem_addr(smem + layout.tokens_offset(pipe.stage));
      wgmma_fence();
      if constexpr (Slices == 1) {
        mma_stage<Swizzle, N>(w, x, cw, ki != 0, acc);
      } else {
        // The box packed the weight slices box_rows rows apart, the token
        // slices tile_m rows apart.
        const uint32_t w_slice_bytes = p.weights_box_rows * Swizzle;
#pragma unroll
        for (uint32_t s = 0; s < Slices; ++s)
          mma_stage<Swizzle, N>(w + s * w_slice_bytes, x + s * Cfg::kTileM * Swizzle, cw, ki != 0 || s != 0, acc);
      }
      wgmma_commit_group();
      // Keep one group in flight: the previous stage's wgmmas are done now.
      wgmma_wait_group<1>();
      fence_accumulators(acc);
      if (ki > 0 && threadIdx.x % 128 == 0) {
        release_stage(&empty[prev_stage]);
        trace.record(kTraceRelease, seq - 1);
      }
      prev_stage = pipe.stage;
      pipe.advance(p.stages);
    }
    wgmma_wait_group<0>();
    fence_accumulators(acc);
    if (threadIdx.x % 128 == 0) {
      release_stage(&empty[prev_stage]);
      trace.record(kTraceRelease, trace.stages_seen() - 1);
    }
  }

  // One consumer warpgroup is done reading a stage: it may be refilled once
  // every consumer of the cluster has said so (the peer's producer writes
  // half of this CTA's tokens).
  GGEMM_DEVICE static void release_stage(uint64_t *empty) {
    if constexpr (Cfg::kClusterM > 1) {
#pragma unroll
      for (uint32_t cta = 0; cta < Cfg::kClusterM; ++cta)
        ptx::mbarrier_arrive_remote(ptx::map_shared_to_rank(empty, cta));
    } else {
      ptx::mbarrier_arrive(empty);
    }
  }

  // The wgmmas of one pipeline stage: tile_k / 16 = Swizzle / 32 k-steps.
  template <uint32_t Swizzle, int N>
  GGEMM_DEVICE static void mma_stage(uint32_t w, uint32_t x, uint32_t cw, bool accumulate, float (&acc)[N / 2]) {
    constexpr uint32_t kTileK = Swizzle / 2;
#pragma unroll
    for (uint32_t kk = 0; kk < Swizzle / 32; ++kk) {
      uint64_t desc_w;
      if constexpr (Cfg::kLayout == WeightLayout::kKMajor) {
        // This warpgroup's 64 rows; k advances 32 bytes along the row.
        desc_w = make_kmajor_desc(w + cw * 64 * Swizzle + kk * 32, Swizzle);
      } else {
        // This warpgroup's box of tile_k rows of 128 bytes; k advances 16 rows.
        desc_w = make_mnmajor_sw128_desc(w + cw * kTileK * 128 + kk * 16 * 128);
      }
      const uint64_t desc_x = make_kmajor_desc(x + kk * 32, Swizzle);
      WgmmaM64K16<N, typename Cfg::Elem, Cfg::kLayout == WeightLayout::kMNMajor ? 1 : 0>::run(
          acc, desc_w, desc_x, (accumulate || kk > 0) ? 1u : 0u);
    }
  }
};

}  // namespace ggemm::sm90
