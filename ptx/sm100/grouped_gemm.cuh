// The sm_100a persistent, warp-specialised grouped GEMM (docs/design.md,
// kernel architecture). Written for the B200 and compiled for sm_100a; NO PART OF IT HAS
// RUN ON BLACKWELL HARDWARE (none has been lent). What is checked instead:
// its SASS (tests/check_sass_sm100.py --table: MMA, tensor-memory alloc and
// load, commit barrier, no local memory), its descriptor encoders (unit tests
// against the PTX ISA tables), and its tile walk (the scheduler the sm_90a
// kernel runs on the H200, simulated for whole launches on the CPU).
//
// One CTA per SM walks output tiles of tile_m tokens x 128 features, with the
// same scheduler, routing views and epilogue semantics as the sm_90a kernel.
// A and B are swapped as the MMA sees them: the weights are tcgen05.mma's M
// side (128 rows, one tensor-memory lane each) and the tokens its N side.
//
//   warp 0     TMA producer: one thread loads weight and token tiles into a
//              ring of `stages` buffers (full/empty mbarrier pairs; full
//              completes by the TMA's transaction count).
//   warp 1     allocates tensor memory, and one thread issues tcgen05.mma
//              from shared-memory descriptors into one of two fp32
//              accumulators of tile_m columns; tcgen05.commit releases each
//              smem stage when its MMAs are done and marks the accumulator
//              full after a tile's last MMA.
//   warps 2-5  epilogue, one per 32-lane quarter of tensor memory: thread =
//              one weight row (output column); tcgen05.ld 8 token columns at
//              a time, scale / add / route, store to global memory directly;
//              then release the accumulator, so the MMAs of the next tile
//              run into the other buffer while this one drains.
//   warp 6     one thread walks the tiles and hands each to the roles above
//              through shared memory (ptx/blocks/tile_handoff.h, the sm_90a
//              kernel's mechanism, measured there).
//
// cta_group 2 (CtaGroup = 2, a cluster of two CTAs): the pair walks tiles of
// 256 weight rows (ptx/blocks/cluster_tiles.h). Each CTA loads its own 128
// weight rows and half of the tokens, both loads completing on the leader's
// (rank 0's) full barrier; the leader's MMA thread issues
// tcgen05.mma.cta_group::2 (M 256), whose commits arrive on both CTAs'
// barriers; each CTA's epilogue drains its own 128 rows from its own tensor
// memory and arrives on the leader's acc_empty.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "../blocks/cluster_tiles.h"
#include "../blocks/grouped_params.h"
#include "../blocks/l2_prefetch.h"
#include "../blocks/out_convert.h"
#include "../blocks/pipeline.h"
#include "../blocks/routing_check.h"
#include "../blocks/routing_prefetch.h"
#include "../blocks/tile_handoff.h"
#include "../blocks/tile_scheduler.h"
#include "../instr/cluster.h"
#include "../instr/cvta.h"
#include "../instr/elect.h"
#include "../instr/fence.h"
#include "../instr/mbarrier.h"
#include "../instr/sm100/tcgen05.h"
#include "../instr/sm100/umma_desc.h"
#include "../instr/tma.h"
#include "smem_layout.h"

namespace ggemm::sm100 {

// The operands' format field of the instruction descriptor.
template <typename Elem>
struct UmmaFormatOf;
template <>
struct UmmaFormatOf<__nv_bfloat16> {
  static constexpr UmmaABFormat value = UmmaABFormat::kBF16;
};
template <>
struct UmmaFormatOf<__half> {
  static constexpr UmmaABFormat value = UmmaABFormat::kF16;
};

template <typename Elem, typename Out, int TileM, WeightLayout Layout, int CtaGroup>
struct GroupedGemmSm100 {
  static_assert(TileM % 16 == 0 && TileM >= 16 && TileM <= 256, "tile_m is the MMA's N: 16..256, step 16 at M 128");
  static_assert(CtaGroup == 1 || (CtaGroup == 2 && TileM >= 32),
                "cta_group 2 splits the tokens between the pair: 16 or more each");
  static constexpr uint32_t kPairTileN = kTileN * CtaGroup;            // weight rows the scheduler walks
  static constexpr uint32_t kTokensPerCta = uint32_t(TileM) / CtaGroup;  // B rows each CTA loads
  static constexpr uint32_t kTmemColumns = tmem_columns(TileM);
  static_assert(kAccBuffers * TileM <= kTmemColumns && kTmemColumns <= 512, "both accumulators fit in tensor memory");
  static constexpr uint32_t kFeaturesPerBox = 64;  // MN-major weight boxes: 128 bytes of features
  static constexpr uint32_t kEpilogueThreads = 32 * kEpilogueWarps;
  // Who reads each handed-off tile (ptx/blocks/tile_handoff.h): the producer thread,
  // the MMA thread (only the pair's leader issues MMAs) and every epilogue
  // thread.
  GGEMM_DEVICE static uint32_t tile_receivers(uint32_t rank) { return 1 + (rank == 0 ? 1 : 0) + kEpilogueThreads; }

  using Pipeline = RingPosition;

  // Shared-memory barriers, in SmemLayout's order.
  struct Barriers {
    uint64_t *full, *empty;         // [stages] each
    uint64_t *acc_full, *acc_empty;  // [kAccBuffers] each
  };

  // The instruction descriptor of every MMA of this kernel (PTX ISA
  // "Instruction descriptor", kind::f16): fp32 accumulators, M 128 x cta_group, N tile_m;
  // the weights are A (K- or MN-major as stored), the tokens B (K-major).
  GGEMM_DEVICE static uint32_t instr_desc() {
    return UmmaInstrDescF16{UmmaDFormat::kF32,
                            UmmaFormatOf<Elem>::value,
                            UmmaFormatOf<Elem>::value,
                            false,
                            false,
                            Layout == WeightLayout::kKMajor ? UmmaMajor::kK : UmmaMajor::kMN,
                            UmmaMajor::kK,
                            kPairTileN,
                            uint32_t(TileM)}
        .encode();
  }

  GGEMM_DEVICE static void run(const GroupedGemmParams &p) {
    extern __shared__ uint8_t smem_raw[];
    uint8_t *smem = reinterpret_cast<uint8_t *>(
        (reinterpret_cast<uintptr_t>(smem_raw) + kSmemAlign - 1) & ~uintptr_t(kSmemAlign - 1));
    const SmemLayout layout = make_smem_layout(TileM, p.swizzle_bytes, p.stages, CtaGroup);
    uint64_t *bars = reinterpret_cast<uint64_t *>(smem + layout.barrier_offset());
    const Barriers b{bars, bars + p.stages, bars + 2 * p.stages, bars + 2 * p.stages + kAccBuffers};
    uint32_t *tmem_slot = reinterpret_cast<uint32_t *>(smem + layout.tmem_slot_offset());
    const uint32_t warp = threadIdx.x / 32;
    const uint32_t rank = CtaGroup == 2 ? ptx::cluster_ctarank() : 0;

    // First of all: small operands on their way into L2, as on sm_90a (the
    // walker's warp has nothing else to do before the roles split).
    if (threadIdx.x == kWalkerWarp * 32) ptx::prefetch_small_operands(p);
    if (threadIdx.x == 0) {
      for (uint32_t s = 0; s < p.stages; ++s) {
        ptx::mbarrier_init(&b.full[s], 1);   // the producer's expect_tx
        ptx::mbarrier_init(&b.empty[s], 1);  // the MMA thread's tcgen05.commit
      }
      for (uint32_t i = 0; i < kAccBuffers; ++i) {
        ptx::mbarrier_init(&b.acc_full[i], 1);                  // tcgen05.commit after a tile's MMAs
        ptx::mbarrier_init(&b.acc_empty[i], kEpilogueThreads * CtaGroup);  // every epilogue thread of the pair
      }
      TileHandoff::init(handoff_region(), tile_receivers(rank));
      ptx::fence_mbarrier_init();
    }
    if (warp == 1) {
      ptx::prefetch_routing(p, threadIdx.x % 32);
      if (threadIdx.x == 32) {
        ptx::prefetch_tensormap(&p.tmap_tokens);
        ptx::prefetch_tensormap(&p.tmap_weights);
      }
    }
    if (warp == kMmaWarp) {  // with cta_group 2, this warp in both CTAs, together
      tcgen05_alloc<CtaGroup>(tmem_slot, kTmemColumns);
      tcgen05_relinquish_alloc_permit<CtaGroup>();
    }
    // Checked mode: one warp of CTA 0 looks at the routing arrays before the
    // roles split (as on sm_90a).
    if (p.device_status && blockIdx.x == 0 && warp == kFirstEpilogueWarp) check_routing_warp(p);
    // The barriers' inits (and, for a pair, the peer's) are visible before
    // any TMA, commit or remote arrival can reach them.
    tcgen05_fence_before_thread_sync();
    sync_cta_or_pair();
    tcgen05_fence_after_thread_sync();
    const uint32_t tmem_base = *tmem_slot;

    if (warp == kProducerWarp) {
      if (ptx::elect_one_sync()) produce(p, smem, layout, b, rank);
    } else if (warp == kMmaWarp) {
      if (rank == 0 && ptx::elect_one_sync()) issue_mmas(p, smem, layout, b, tmem_base);
    } else if (warp == kWalkerWarp) {
      if (ptx::elect_one_sync()) walk_tiles(p);
    } else {
      drain(p, b, tmem_base, warp % 4, rank);
    }
    __syncwarp();

    // Every accumulator has been drained (each epilogue waited for each
    // tile's commit, and the leader's MMA thread for both epilogues), so no
    // MMA or tcgen05.ld still uses tensor memory in either CTA.
    tcgen05_fence_before_thread_sync();
    sync_cta_or_pair();
    if (warp == kMmaWarp) {
      tcgen05_fence_after_thread_sync();
      tcgen05_dealloc<CtaGroup>(tmem_base, kTmemColumns);
    }
  }

  // All threads of the CTA, or of both CTAs of a pair.
  GGEMM_DEVICE static void sync_cta_or_pair() {
    if constexpr (CtaGroup == 2) {
      ptx::cluster_sync();
    } else {
      __syncthreads();
    }
  }

  // This CTA's (or pair's) tiles: the linear indices of its cluster.
  GGEMM_DEVICE static ClusterWalk walk() { return cluster_walk(blockIdx.x, gridDim.x, CtaGroup); }

  // The tile handoff's shared memory (kStaticSmemBytes, smem_layout.h).
  GGEMM_DEVICE static uint8_t *handoff_region() {
    __shared__ alignas(16) uint8_t region[kTileHandoffBytes];
    return region;
  }

  // ---- tile walker: one thread of warp 6 (as on sm_90a) ----------------------
  // The only role that walks the tiles; the others read the pair tiles from
  // the handoff (each CTA of a pair walks the same ones).
  GGEMM_DEVICE static void walk_tiles(const GroupedGemmParams &p) {
    GroupedTileScheduler sched(grouped_problem(p), TileM, kPairTileN);
    const ClusterWalk w = walk();
    TileHandoff handoff;
    GroupedTile pair;
    for (uint64_t t = w.first; sched.next(t, &pair); t += w.stride)
      handoff.publish(handoff_region(), pair, uint32_t(t));
    handoff.finish(handoff_region());
  }

  // The next pair tile from the walker, its slot freed at once; false at the
  // end.
  GGEMM_DEVICE static bool next_tile(TileHandoff &handoff, GroupedTile *tile) {
    uint32_t index;  // for traces; sm_100a has none
    return handoff.take(handoff_region(), tile, &index);
  }

  // ---- producer: one thread (the sm_90a producer's loads) --------------------
  // One TMA load into this CTA's shared memory, completing on the full
  // barrier of the MMA's CTA: this one, or the pair's leader.
  GGEMM_DEVICE static void load_3d(void *dst, const CUtensorMap *map, uint64_t *full, int32_t c0, int32_t c1,
                                   int32_t c2) {
    if constexpr (CtaGroup == 2) {
      ptx::tma_load_3d_to_pair_barrier(dst, map, ptx::map_shared_to_rank(full, 0), c0, c1, c2);
    } else {
      ptx::tma_load_3d(dst, map, full, c0, c1, c2);
    }
  }
  GGEMM_DEVICE static void load_2d(void *dst, const CUtensorMap *map, uint64_t *full, int32_t c0, int32_t c1) {
    if constexpr (CtaGroup == 2) {
      ptx::tma_load_2d_to_pair_barrier(dst, map, ptx::map_shared_to_rank(full, 0), c0, c1);
    } else {
      ptx::tma_load_2d(dst, map, full, c0, c1);
    }
  }

  GGEMM_DEVICE static void produce(const GroupedGemmParams &p, uint8_t *smem, const SmemLayout &layout,
                                   const Barriers &b, uint32_t rank) {
    const uint32_t tile_k = p.swizzle_bytes / 2;
    const uint32_t k_iters = (p.k + tile_k - 1) / tile_k;
    // The leader expects both CTAs' bytes on its barrier; the peer only loads.
    const uint32_t weights_bytes =
        Layout == WeightLayout::kKMajor ? p.weights_box_rows * p.swizzle_bytes : layout.weights_stage_bytes;
    const uint32_t stage_bytes = CtaGroup * (weights_bytes + layout.tokens_stage_bytes);
    TileHandoff handoff;
    Pipeline pipe;
    GroupedTile pair;
    while (next_tile(handoff, &pair)) {
      if (pair.expert < 0) continue;  // inactive group: nothing to load
      // This CTA's 128 weight rows (zero-filled past N by the 3-D map) and
      // its share of the tokens (rows past the group are computed, never stored).
      const int32_t weight_row = int32_t(pair.col0 + rank * kTileN);
      const int32_t token_row =
          int32_t(pair.row0 + rank * kTokensPerCta + (p.a_planes ? pair.segment * p.m : 0));
      for (uint32_t ki = 0; ki < k_iters; ++ki) {
        // A fresh barrier's "previous phase" (parity 1) counts as complete.
        ptx::mbarrier_wait_parity(&b.empty[pipe.stage], pipe.phase ^ 1);
        if (rank == 0) ptx::mbarrier_arrive_expect_tx(&b.full[pipe.stage], stage_bytes);
        uint8_t *wt = smem + layout.weights_offset(pipe.stage);
        const int32_t k0 = int32_t(ki * tile_k);
        if constexpr (Layout == WeightLayout::kKMajor) {
          load_3d(wt, &p.tmap_weights, &b.full[pipe.stage], k0, weight_row, pair.expert);
        } else {
          // Two boxes of [tile_k rows of K][64 features], one after the other.
          for (uint32_t box = 0; box < kTileN / kFeaturesPerBox; ++box)
            load_3d(wt + box * tile_k * 128, &p.tmap_weights, &b.full[pipe.stage],
                    int32_t(weight_row + box * kFeaturesPerBox), k0, pair.expert);
        }
        load_2d(smem + layout.tokens_offset(pipe.stage), &p.tmap_tokens, &b.full[pipe.stage], k0, token_row);
        pipe.advance(p.stages);
      }
    }
  }

  // ---- MMA issue: one thread -------------------------------------------------
  // The weights' shared-memory descriptor at k-step kk of a stage (PTX ISA
  // "Shared memory descriptor", tcgen05 matrix descriptors). K-major: rows of
  // one swizzle span, 8-row groups 8 spans apart, a k-step advances 32 bytes
  // inside the span. MN-major (128B swizzle): atoms of 64 features x 8 k-rows;
  // LBO = the distance between the two 64-feature boxes, SBO = 8 k-rows of
  // 128 bytes; a k-step advances 16 k-rows.
  GGEMM_DEVICE static uint64_t weights_desc(uint32_t w, uint32_t kk, uint32_t swizzle_bytes) {
    if constexpr (Layout == WeightLayout::kKMajor) {
      return make_kmajor_desc(w + kk * 32, swizzle_bytes);
    } else {
      return make_mnmajor_sw128_desc(w + kk * 16 * 128, (swizzle_bytes / 2) * 128);
    }
  }

  // One arrival on `bar` (in both CTAs of a pair) once this thread's MMAs
  // so far have completed.
  GGEMM_DEVICE static void commit(uint64_t *bar) {
    if constexpr (CtaGroup == 2) {
      tcgen05_commit_pair(bar, 0x3);
    } else {
      tcgen05_commit(bar);
    }
  }

  GGEMM_DEVICE static void issue_mmas(const GroupedGemmParams &p, uint8_t *smem, const SmemLayout &layout,
                                      const Barriers &b, uint32_t tmem_base) {
    const uint32_t tile_k = p.swizzle_bytes / 2;
    const uint32_t k_iters = (p.k + tile_k - 1) / tile_k;
    const uint32_t idesc = instr_desc();
    TileHandoff handoff;
    Pipeline pipe, acc;  // acc.stage: which accumulator; acc.phase: its use count's parity
    GroupedTile tile;
    while (next_tile(handoff, &tile)) {
      if (tile.expert < 0) continue;  // inactive: the epilogue writes zeros without an accumulator
      // The epilogue has drained this accumulator (a fresh one counts as drained).
      ptx::mbarrier_wait_parity(&b.acc_empty[acc.stage], acc.phase ^ 1);
      tcgen05_fence_after_thread_sync();
      const uint32_t d_tmem = tmem_base + acc.stage * TileM;  // column offset; lane 0
      for (uint32_t ki = 0; ki < k_iters; ++ki) {
        ptx::mbarrier_wait_parity(&b.full[pipe.stage], pipe.phase);
        tcgen05_fence_after_thread_sync();
        const uint32_t wt = ptx::smem_addr(smem + layout.weights_offset(pipe.stage));
        const uint32_t x = ptx::smem_addr(smem + layout.tokens_offset(pipe.stage));
        for (uint32_t kk = 0; kk < tile_k / 16; ++kk) {
          tcgen05_mma_f16<CtaGroup>(d_tmem, weights_desc(wt, kk, p.swizzle_bytes),
                                    make_kmajor_desc(x + kk * 32, p.swizzle_bytes), idesc, ki > 0 || kk > 0);
        }
        commit(&b.empty[pipe.stage]);  // the stage is free (in both CTAs) once these MMAs have read it
        pipe.advance(p.stages);
      }
      commit(&b.acc_full[acc.stage]);  // the accumulator is complete once every MMA is
      acc.advance(kAccBuffers);
    }
  }

  // ---- epilogue: warps 2..5 ----------------------------------------------------

  // Thread `lane` of the warp owning tensor-memory lanes 32q..32q+31 holds
  // weight row (output column) 32q + lane of every tile.
  GGEMM_DEVICE static void drain(const GroupedGemmParams &p, const Barriers &b, uint32_t tmem_base, uint32_t q,
                                 uint32_t rank) {
    const uint32_t lane = threadIdx.x % 32;
    const uint32_t row_in_tile = 32 * q + lane;
    const bool accumulate = p.epilogue == kEpilogueAccumulate;
    const bool scale_rows = p.epilogue == kEpilogueRowScale;
    TileHandoff handoff;
    Pipeline acc;
    GroupedTile pair;
    while (next_tile(handoff, &pair)) {
      const GroupedTile tile = cta_share(pair, rank);  // this CTA's 128 rows of the pair tile
      const bool active = tile.expert >= 0;
      if (!active && accumulate) continue;  // C += 0
      const uint32_t col = tile.col0 + row_in_tile;
      const bool owned = row_in_tile < tile.cols;
      const OutputView &view = p.out[p.span_segments ? output_segment(p, col) : tile.segment];
      Out *dst = reinterpret_cast<Out *>(view.base) + size_t(tile.row0) * view.ld + (col - view.col_offset);

      if (!active) {  // rows of an inactive group are zeroed
        if (owned)
          for (uint32_t r = 0; r < tile.rows; ++r) dst[size_t(r) * view.ld] = OutConvert<Out>::from(0.f);
        continue;
      }
      ptx::mbarrier_wait_parity(&b.acc_full[acc.stage], acc.phase);
      tcgen05_fence_after_thread_sync();
      const uint32_t taddr = tmem_base + make_tmem_addr(32 * q, acc.stage * TileM);
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
          Out *d = dst + size_t(r) * view.ld;
          if (accumulate) out += OutConvert<Out>::to(*d);  // one rounding, below
          *d = OutConvert<Out>::from(out);
        }
      }
      // This thread's loads of the accumulator are complete (wait::ld): hand
      // it back to the MMA thread (the leader's) for the tile after next.
      tcgen05_fence_before_thread_sync();
      if constexpr (CtaGroup == 2) {
        ptx::mbarrier_arrive_remote(ptx::map_shared_to_rank(&b.acc_empty[acc.stage], 0));
      } else {
        ptx::mbarrier_arrive(&b.acc_empty[acc.stage]);
      }
      acc.advance(kAccBuffers);
    }
  }
};

}  // namespace ggemm::sm100
