// The sm_90a token-major ping-pong grouped GEMM: prefill calls with the
// store, row-scale and SwiGLU epilogues (runtime/plan_sm90.cpp,
// token_major_filter).
//
// Tokens are the wgmma's M side and the weights its N side (the persistent
// kernel, grouped_gemm.cuh, swaps them). Each consumer warpgroup owns whole
// tiles of 128 tokens x 192 features: per k16 step two m64n192k16 (the two
// 64-token halves) on one weight operand, 192 fp32 accumulator registers.
// The two warpgroups take the CTA's tiles in turn and their mainloops
// alternate (named barriers, `order`), so one warpgroup's epilogue runs
// under the other's mainloop: the persistent kernel's two warpgroups end
// their tiles together and the tensor cores wait out every epilogue (3-15%
// of a prefill tile; docs/performance.md, "What limits each row"). The price
// is bytes: per k16 a warpgroup reads 2 x (2 + 6) KB of shared memory for
// 1.6 MFLOP, 0.0208 B/FLOP against the persistent tile's 0.0195, and a
// tile loads (128 + 192) rows of K from L2 for 128 x 192 outputs (0.0130
// B/FLOP against 0.0117). Token tiles of 128 also fit ragged groups better
// than the persistent kernel's 256: an expert of 260 rows there runs a
// second tile for 4 rows and loads its weights again.
//
// With tokens on M each thread's accumulators belong to 4 token rows (its
// two rows of each 16-row warp slice, in each half), so the row-scale
// epilogue loads 4 scales a tile.
//
// SwiGLU (its own kernels, Swiglu = true): the weights' 5-D view lands a
// tile's 192 weight rows as 12 octet pairs (8 gate rows, then the 8 up rows
// of the same features; kSwigluOctet), so accumulator octet 2q holds a
// thread's gate values and octet 2q + 1 the up values of the same two
// features: each thread computes silu(gate) * up of its own accumulators,
// 96 output features a tile.
//
// The consumers' mbarrier waits trap through a call (kTrapCall,
// ptx/instr/mbarrier.h): with the trap inlined, nvcc 13.0's ptxas
// allocated nothing above ~R218 in their setmaxnreg region, spilled ~1.2
// KB and serialised the wgmmas; with the call the accumulators sit at
// R24..R215 and nothing spills.
//
//   warpgroup 0   40 registers. Warp 0, one thread: TMA loads of each
//                 tile's tokens (box 128 x 64) and weights (192 x 64, fewer
//                 rows where N < 192) into a ring of 4 stages. Warp 1: the
//                 persistent kernels' tile walker (TileWalker, tiles of
//                 128 tokens x 192 features), handing each tile to the others
//                 through shared memory (ptx/blocks/tile_handoff.h).
//   warpgroups 1, 2  232 registers: the consumers of the CTA's even and odd
//                 tiles. Epilogue: 64-feature chunks by stmatrix into a
//                 128B-swizzled staging tile (SwiGLU: the whole 96-feature
//                 tile as three 64B-swizzled chunks of 32), then TMA stores
//                 where the tile's 128 rows are the group's, else masked
//                 16-byte stores.
//
// Scope: K-major 16-bit weights [E, N, K] and tokens [M, K], 16-bit outputs
// of one segment, the store, row-scale and SwiGLU epilogues; no gather, no planes,
// no cluster (the runtime plans the persistent kernel for the rest).
#pragma once
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "params.h"
#include "token_major_layout.h"
#include "../blocks/out_convert.h"
#include "../blocks/pipeline.h"
#include "../blocks/routing_check.h"
#include "../blocks/swiglu.h"
#include "../blocks/swizzle.h"
#include "../blocks/tile_handoff.h"
#include "../blocks/tile_scheduler.h"
#include "../blocks/tile_walker.h"
#include "../instr/barrier.h"
#include "../instr/cvta.h"
#include "../instr/elect.h"
#include "../instr/fence.h"
#include "../instr/global_v4.h"
#include "../instr/grid_dependency.h"
#include "../instr/mbarrier.h"
#include "../instr/setmaxnreg.h"
#include "../instr/sm90/wgmma.h"
#include "../instr/stmatrix.h"
#include "../instr/tma.h"

namespace ggemm::sm90 {

#if defined(__CUDACC__)
template <typename Elem, typename Out, bool Swiglu>
struct TokenMajorGemmSm90 {
  using S = TokenMajorShape;
  static_assert(sizeof(Elem) == 2 && sizeof(Out) == 2, "16-bit operands and outputs");
  static constexpr uint32_t kStagingBytes = S::staging_bytes(Swiglu);

  GGEMM_DEVICE static uint8_t *handoff_region() {
    __shared__ alignas(16) uint8_t region[kTileHandoffBytes];
    return region;
  }
  // The dynamic shared memory, aligned up to 1024 bytes (the 128B swizzle's
  // atoms; kSmemAlignSlack in the plan's bytes). Not by declaring the extern
  // array __align__(1024): that aligns the dynamic base of every kernel of
  // the module, padding the persistent kernels' static shared memory past
  // what their plans count (their tile_m 256 launches then asked for more
  // than the SM has).
  GGEMM_DEVICE static uint8_t *smem_base() {
    extern __shared__ uint8_t smem_dynamic[];
    return reinterpret_cast<uint8_t *>((reinterpret_cast<uintptr_t>(smem_dynamic) + 1023) & ~uintptr_t(1023));
  }
  GGEMM_DEVICE static uint64_t *full_barriers() {
    __shared__ uint64_t bars[S::kStages];
    return bars;
  }
  GGEMM_DEVICE static uint64_t *empty_barriers() {
    __shared__ uint64_t bars[S::kStages];
    return bars;
  }
  GGEMM_DEVICE static uint32_t k_iters(const Sm90GroupedParams &p) { return (p.k + S::kTileK - 1) / S::kTileK; }

  GGEMM_DEVICE static void run(const Sm90GroupedParams &p) {
    uint8_t *smem = smem_base();
    uint64_t *full = full_barriers();
    uint64_t *empty = empty_barriers();
    const uint32_t warpgroup = threadIdx.x / 128;
    ptx::launch_dependent_grids();
    if (threadIdx.x == 0) {
      for (uint32_t s = 0; s < S::kStages; ++s) {
        ptx::mbarrier_init(&full[s], 1);   // the producer's expect_tx
        ptx::mbarrier_init(&empty[s], 1);  // the one consumer warpgroup of the stage's tile
      }
      TileHandoff::init(handoff_region(), 1 + 2 * 128);  // the producer, every consumer thread
      ptx::fence_mbarrier_init();
    }
    if (threadIdx.x == 32) {  // the tensor maps are kernel parameters: no other kernel writes them
      ptx::prefetch_tensormap(&p.tmap_tokens);
      ptx::prefetch_tensormap(&p.tmap_weights);
      ptx::prefetch_tensormap(&p.tmap_out[0]);
    }
    // From here on the stream's earlier kernels are done (ptx/instr/grid_dependency.h).
    ptx::wait_prior_grids();
    // Checked mode: one warp of CTA 0 looks at the routing arrays.
    if (p.device_status && blockIdx.x == 0 && threadIdx.x / 32 == 2) check_routing_warp(p);
    __syncthreads();
    if (warpgroup == 0) {
      ptx::setmaxnreg_dec<S::kProducerRegs>();
      if (threadIdx.x < 32) {
        if (ptx::elect_one_sync()) produce(p, smem, full, empty);
      } else if (threadIdx.x < 64) {
        walk(p);
      }
    } else {
      ptx::setmaxnreg_inc<S::kConsumerRegs>();
      consume(p, smem, full, empty, warpgroup - 1);
    }
  }

  // The persistent kernels' tile walker (ptx/blocks/tile_walker.h) over
  // this kernel's tiles: what it reads of a kernel's configuration.
  struct WalkConfig {
    static constexpr int kTileM = S::kTileTokens;
    static constexpr int kWalkClusterSize = 1;
    GGEMM_DEVICE static uint32_t walk_tile_n(const Sm90GroupedParams &) { return S::kTileFeatures; }
    GGEMM_DEVICE static GroupedTile walk_share(const GroupedTile &tile) { return tile; }
  };
  GGEMM_DEVICE static void walk(const Sm90GroupedParams &p) { TileWalker<WalkConfig>::run(p, handoff_region()); }

  // One thread of warp 0.
  GGEMM_DEVICE static void produce(const Sm90GroupedParams &p, uint8_t *smem, uint64_t *full, uint64_t *empty) {
    const uint32_t iters = k_iters(p);
    // The weight box holds N's rows where N < 192 (kmajor_box_rows); the
    // MMA's rows past it read stale shared memory into output columns past
    // N, which are never stored.
    const uint32_t stage_bytes = S::kTokensBytes + p.weights_box_rows * 128;
    TileHandoff handoff;
    RingPosition pipe;
    GroupedTile tile;
    uint32_t index;
    while (handoff.take(handoff_region(), &tile, &index)) {
      if (tile.expert < 0) continue;  // inactive group: zeros, nothing to load
      for (uint32_t ki = 0; ki < iters; ++ki) {
        // A fresh barrier's "previous phase" (parity 1) counts as complete.
        ptx::mbarrier_wait_parity(&empty[pipe.stage], pipe.phase ^ 1);
        ptx::mbarrier_arrive_expect_tx(&full[pipe.stage], stage_bytes);
        uint8_t *stage = smem + pipe.stage * S::kStageBytes;
        const int32_t k0 = int32_t(ki * S::kTileK);
        // Past M and K the boxes are zero-filled (their bytes still counted).
        ptx::tma_load_2d(stage, &p.tmap_tokens, &full[pipe.stage], k0, int32_t(tile.row0));
        if constexpr (Swiglu) {
          // {K, 8 rows, gate | up, feature octet, expert}: 12 octet pairs,
          // zeros past I (runtime/launch_grouped.cpp, encode_swiglu_weights).
          ptx::tma_load_5d(stage + S::kTokensBytes, &p.tmap_weights, &full[pipe.stage], k0, 0, 0,
                           int32_t(tile.col0 / (2 * kSwigluOctet)), tile.expert);
        } else {
          ptx::tma_load_3d(stage + S::kTokensBytes, &p.tmap_weights, &full[pipe.stage], k0, int32_t(tile.col0),
                           tile.expert);
        }
        pipe.advance(S::kStages);
      }
    }
  }

  // Consumer warpgroup cw: the CTA's tiles of turn parity cw. Both
  // warpgroups read (and release) every tile's slot; the other's active
  // tiles move the ring position past their stages.
  GGEMM_DEVICE static void consume(const Sm90GroupedParams &p, uint8_t *smem, uint64_t *full, uint64_t *empty,
                                   uint32_t cw) {
    const uint32_t tid = threadIdx.x % 128;
    RingPosition pipe;
    TileHandoff handoff;
    // Not zeroed: each tile's first wgmma overwrites them (scale-d 0).
    float lo[S::kAccHalf], hi[S::kAccHalf];
    uint32_t turn = 0;
    for (;; ++turn) {
      const TileSlot &slot = handoff.wait<true>(handoff_region());
      if (slot.tile.rows == 0) break;
      const bool active = slot.tile.expert >= 0;
      if ((turn & 1) != cw) {
        if (active) advance_by(pipe, k_iters(p));
        handoff.release(handoff_region());
        continue;
      }
      // The other warpgroup has waited for its last tile's every stage, so
      // every stage before this tile's has completed its phase: no wait
      // below is a phase ahead of its barrier.
      if (turn > 0) ptx::bar_sync(S::kOrderBarrier + cw, 256);
      if (active) {
        mainloop(smem, full, empty, k_iters(p), pipe, lo, hi, cw, tid);
        uint8_t *staging = smem + S::kStagingOffset + cw * kStagingBytes;
        if constexpr (Swiglu) {
          swiglu_epilogue(p, slot.tile, tid, cw, staging, lo, hi);
        } else {
          epilogue(p, slot.tile, tid, cw, staging, lo, hi);
        }
      } else {
        ptx::bar_arrive(S::kOrderBarrier + (cw ^ 1), 256);
        store_zeros(p, slot.tile, tid);
      }
      handoff.release(handoff_region());
    }
    // The last tile's owner signalled this warpgroup: take that arrival, so
    // that no barrier is left half-passed.
    if (turn > 0 && ((turn - 1) & 1) != cw) ptx::bar_sync(S::kOrderBarrier + cw, 256);
    if (tid == 0) ptx::tma_store_wait_group_read<0>();
  }

  GGEMM_DEVICE static void advance_by(RingPosition &pipe, uint32_t n) {
    const uint32_t next = pipe.stage + n;
    pipe.phase ^= (next / S::kStages) & 1u;
    pipe.stage = next % S::kStages;
  }

  GGEMM_DEVICE static void mainloop(uint8_t *smem, uint64_t *full, uint64_t *empty, uint32_t iters,
                                    RingPosition &pipe, float (&lo)[S::kAccHalf], float (&hi)[S::kAccHalf], uint32_t cw,
                                    uint32_t tid) {
    // The tile's first stage, peeled: its first k16 step only writes the
    // accumulators (dead from the last tile's epilogue to here).
    ptx::mbarrier_wait_parity<true>(&full[pipe.stage], pipe.phase);
    mma_stage<true>(smem, pipe.stage, lo, hi);
    wgmma_commit_group();
    uint32_t prev_stage = pipe.stage;
    pipe.advance(S::kStages);
    for (uint32_t ki = 1; ki < iters; ++ki) {
      ptx::mbarrier_wait_parity<true>(&full[pipe.stage], pipe.phase);
      mma_stage<false>(smem, pipe.stage, lo, hi);
      wgmma_commit_group();
      wgmma_wait_group<1>();  // the stage before is read
      fence_accumulators(lo);
      fence_accumulators(hi);
      if (tid == 0) ptx::mbarrier_arrive(&empty[prev_stage]);
      prev_stage = pipe.stage;
      pipe.advance(S::kStages);
    }
    // Every stage of this tile has been waited for: the other warpgroup may
    // start its tile's mainloop while these wgmmas drain.
    ptx::bar_arrive(S::kOrderBarrier + (cw ^ 1), 256);
    wgmma_wait_group<0>();
    fence_accumulators(lo);
    fence_accumulators(hi);
    if (tid == 0) ptx::mbarrier_arrive(&empty[prev_stage]);
  }

  // One stage's 4 k16 steps, each two m64n192k16 (the tile's two 64-token
  // halves) on the stage's one weight operand.
  template <bool kFirst>
  GGEMM_DEVICE static void mma_stage(uint8_t *smem, uint32_t stage, float (&lo)[S::kAccHalf],
                                     float (&hi)[S::kAccHalf]) {
    const uint32_t x = ptx::smem_addr(smem + stage * S::kStageBytes);
    const uint32_t w = x + S::kTokensBytes;
    wgmma_fence();
#pragma unroll
    for (uint32_t kk = 0; kk < 4; ++kk) {
      const uint64_t dw = make_kmajor_desc(w + kk * 32, 128);
      const uint64_t dlo = make_kmajor_desc(x + kk * 32, 128), dhi = make_kmajor_desc(x + 64 * 128 + kk * 32, 128);
      if (kFirst && kk == 0) {
        WgmmaM64K16Overwrite<192, Elem, 0>::run(lo, dlo, dw);
        WgmmaM64K16Overwrite<192, Elem, 0>::run(hi, dhi, dw);
      } else {
        WgmmaM64K16<192, Elem, 0>::run(lo, dlo, dw, 1u);
        WgmmaM64K16<192, Elem, 0>::run(hi, dhi, dw, 1u);
      }
    }
  }

  // An inactive group's rows (expert -1 or out of range): zeros. (SwiGLU:
  // a tile's cols weight rows are cols / 2 output features, from col0 / 2.)
  GGEMM_DEVICE static void store_zeros(const Sm90GroupedParams &p, const GroupedTile &tile, uint32_t tid) {
    const OutputView &view = p.out[0];
    const uint32_t col0 = Swiglu ? tile.col0 / 2 : tile.col0;
    const uint32_t units = (Swiglu ? tile.cols / 2 : tile.cols) / 8;  // N (SwiGLU: I) a multiple of 8
    for (uint32_t u = tid; u < tile.rows * units; u += 128)
      ptx::st_global_v4(static_cast<Out *>(view.base) + size_t(tile.row0 + u / units) * view.ld +
                            (col0 - view.col_offset + (u % units) * 8),
                        make_uint4(0, 0, 0, 0));
  }

  // Chunks of 64 features: stmatrix into the warpgroup's 128B-swizzled
  // staging tile, then one TMA store (the tile's 128 rows all the group's)
  // or masked 16-byte stores of the group's rows. Each output is the
  // accumulator times alpha, or times alpha x its row's scale.
  GGEMM_DEVICE static void epilogue(const Sm90GroupedParams &p, const GroupedTile &tile, uint32_t tid, uint32_t cw,
                                    uint8_t *staging, const float (&lo)[S::kAccHalf], const float (&hi)[S::kAccHalf]) {
    // The thread index read again here (asm volatile): otherwise ptxas
    // hoists the stmatrix addresses out of the tile loop and keeps them in
    // registers the accumulators need.
    uint32_t t;
    asm volatile("mov.u32 %0, %%tid.x;" : "=r"(t));
    const uint32_t warp = (t / 32) % 4, lane = t % 32;
    const uint32_t base = ptx::smem_addr(staging);
    const uint32_t m = lane / 8;  // the stmatrix matrix whose row address this lane gives
    // This thread's rows: h * 64 + warp * 16 + lane / 4 (+ 8), h = 0, 1.
    float scale[4];
#pragma unroll
    for (uint32_t i = 0; i < 4; ++i) {
      const uint32_t row = (i / 2) * 64 + warp * 16 + lane / 4 + (i % 2) * 8;
      scale[i] = p.alpha;
      if (p.epilogue == kEpilogueRowScale) scale[i] = row < tile.rows ? p.alpha * p.row_scale[tile.row0 + row] : 0.f;
    }
    const OutputView &view = p.out[0];
#pragma unroll
    for (uint32_t ch = 0; ch < S::kChunks; ++ch) {
      if (tile.col0 + ch * 64 >= p.n) break;
      if (tid == 0) ptx::tma_store_wait_group_read<0>();  // the last chunk's store has read the tile
      ptx::bar_sync(S::kEpilogueBarrier + cw, 128);
#pragma unroll
      for (uint32_t h = 0; h < 2; ++h) {
#pragma unroll
        for (uint32_t jj = 0; jj < 8; jj += 2) {
          const float *a = (h == 0 ? lo : hi) + (ch * 8 + jj) * 4;
          const float s0 = scale[2 * h], s1 = scale[2 * h + 1];
          const uint32_t row = h * 64 + warp * 16 + (m & 1) * 8 + lane % 8;
          const uint32_t unit = jj + (m >> 1);
          ptx::stmatrix_x4(base + swizzle128_offset(row, unit), OutConvert<Out>::pack2(a[0] * s0, a[1] * s0),
                           OutConvert<Out>::pack2(a[2] * s1, a[3] * s1), OutConvert<Out>::pack2(a[4] * s0, a[5] * s0),
                           OutConvert<Out>::pack2(a[6] * s1, a[7] * s1));
        }
      }
      ptx::fence_proxy_async_shared_cta();
      ptx::bar_sync(S::kEpilogueBarrier + cw, 128);
      const uint32_t col = tile.col0 + ch * 64;
      if (tile.rows == S::kTileTokens) {
        if (tid == 0) {
          ptx::tma_store_2d(&p.tmap_out[0], staging, int32_t(col - view.col_offset), int32_t(tile.row0));
          ptx::tma_store_commit_group();
        }
      } else {
        for (uint32_t u = tid; u < tile.rows * 8; u += 128) {
          const uint32_t row = u / 8, unit = u % 8;
          if (col + unit * 8 < p.n) {
            // swizzle128_offset(row, unit), added to the pointer term by term
            // (through the helper ptxas schedules this kernel differently).
            const uint4 v = *reinterpret_cast<const uint4 *>(staging + row * 128 + ((unit ^ (row & 7)) << 4));
            ptx::st_global_v4(
                static_cast<Out *>(view.base) + size_t(tile.row0 + row) * view.ld + (col - view.col_offset + unit * 8),
                v);
          }
        }
      }
    }
  }

  // Byte offset of 16-byte output unit `unit` (0..11: 8 features each) of
  // row `row` in the SwiGLU staging: its chunk, then the chunk's 64B swizzle.
  GGEMM_DEVICE static uint32_t swiglu_staging_offset(uint32_t row, uint32_t unit) {
    return (unit / 4) * S::kSwigluChunkBytes + swizzle64_offset(row, unit % 4);
  }

  // SwiGLU: output octet q of the tile (features col0 / 2 + 8q ..) is
  // silu(accumulator octet 2q) * octet 2q + 1, times alpha each, rounded
  // once. The whole 128 x 96 tile is staged at once, as three chunks of 32
  // features whose 64-byte rows are 64B-swizzled (swiglu_staging_offset,
  // the output map's box), then stored by three TMA stores (full tiles) or
  // masked 16-byte stores.
  GGEMM_DEVICE static void swiglu_epilogue(const Sm90GroupedParams &p, const GroupedTile &tile, uint32_t tid,
                                           uint32_t cw, uint8_t *staging, const float (&lo)[S::kAccHalf],
                                           const float (&hi)[S::kAccHalf]) {
    uint32_t t;  // read again: see epilogue()
    asm volatile("mov.u32 %0, %%tid.x;" : "=r"(t));
    const uint32_t warp = (t / 32) % 4, lane = t % 32;
    const uint32_t base = ptx::smem_addr(staging);
    const uint32_t m = lane / 8;  // the stmatrix matrix whose row address this lane gives
    const float alpha = p.alpha;
    const auto act = [alpha](float gate, float up) { return swiglu(alpha * gate, alpha * up); };
    if (tid == 0) ptx::tma_store_wait_group_read<0>();  // the last tile's stores have read the staging
    ptx::bar_sync(S::kEpilogueBarrier + cw, 128);
#pragma unroll
    for (uint32_t h = 0; h < 2; ++h) {
#pragma unroll
      for (uint32_t q = 0; q < S::kSwigluOutFeatures / 8; q += 2) {
        // Output octets q and q + 1: gate a[0..3], up a[4..7]; gate a[8..11], up a[12..15].
        const float *a = (h == 0 ? lo : hi) + q * 8;
        const uint32_t row = h * 64 + warp * 16 + (m & 1) * 8 + lane % 8;
        ptx::stmatrix_x4(base + swiglu_staging_offset(row, q + (m >> 1)),
                         OutConvert<Out>::pack2(act(a[0], a[4]), act(a[1], a[5])),
                         OutConvert<Out>::pack2(act(a[2], a[6]), act(a[3], a[7])),
                         OutConvert<Out>::pack2(act(a[8], a[12]), act(a[9], a[13])),
                         OutConvert<Out>::pack2(act(a[10], a[14]), act(a[11], a[15])));
      }
    }
    ptx::fence_proxy_async_shared_cta();
    ptx::bar_sync(S::kEpilogueBarrier + cw, 128);
    const OutputView &view = p.out[0];
    const uint32_t out_n = p.n / 2, col0 = tile.col0 / 2;
    if (tile.rows == S::kTileTokens) {
      if (tid == 0) {
#pragma unroll
        for (uint32_t c = 0; c < S::kSwigluChunks; ++c) {
          const uint32_t col = col0 + c * S::kSwigluChunkFeatures;
          if (col < out_n)  // (past I the map clips a chunk's columns)
            ptx::tma_store_2d(&p.tmap_out[0], staging + c * S::kSwigluChunkBytes, int32_t(col - view.col_offset),
                              int32_t(tile.row0));
        }
        ptx::tma_store_commit_group();
      }
    } else {
      constexpr uint32_t kUnits = S::kSwigluOutFeatures / 8;  // 16-byte units of a row
      for (uint32_t u = tid; u < tile.rows * kUnits; u += 128) {
        const uint32_t row = u / kUnits, unit = u % kUnits, col = col0 + unit * 8;
        if (col < out_n) {
          // swiglu_staging_offset(row, unit), term by term (as above).
          const uint4 v = *reinterpret_cast<const uint4 *>(staging + (unit / 4) * S::kSwigluChunkBytes + row * 64 +
                                                           (((unit % 4) ^ ((row / 2) % 4)) << 4));
          ptx::st_global_v4(static_cast<Out *>(view.base) + size_t(tile.row0 + row) * view.ld + (col - view.col_offset),
                            v);
        }
      }
    }
  }
};
#endif

}  // namespace ggemm::sm90
