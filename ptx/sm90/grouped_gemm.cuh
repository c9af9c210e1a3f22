// The sm_90a persistent, warp-specialised grouped GEMM (docs/design.md,
// kernel architecture): its compile-time configuration and the dispatch of
// warpgroup roles. The roles live beside it: ptx/blocks/tile_walker.h (the
// tile walker, both architectures'), producer.cuh (TMA producer, old-C
// loader), consumer.cuh (the wgmma mainloop), epilogue.cuh (staging, TMA
// stores, masked stores, accumulate).
//
// One CTA per SM walks output tiles of tile_m tokens x 128 features (64,
// one consumer warpgroup multiplying, where the runtime plans narrow tiles:
// runtime/plan_rules.h, narrow_tiles). A and B
// are swapped as the MMA sees them: the weights are the wgmma's M side (two
// consumer warpgroups, 64 weight rows each) and the tokens its N side
// (tile_m = 16..256), so decode-sized groups waste little.
//
//   warpgroup 0  40 registers. Warp 1 walks the tiles (its lanes together,
//                32 groups a step, where a step crosses many groups; lane 0
//                alone otherwise: GroupedGemmParams::walk_lanes) and lane 0
//                hands each to the other roles
//                through shared memory
//                (ptx/blocks/tile_handoff.h), so no other role waits on the
//                walk's routing loads. Warp 0: the producer, one thread
//                issuing TMA loads of each tile's weights and tokens into a
//                ring of `stages` buffers (full/empty mbarrier pairs). With
//                K-sliced views a stage holds 2 or 4 slices of K, one box per
//                operand (Sm90GroupedParams::k_slices: narrow stages are slow
//                per stage, not per byte). A tile narrower than tile_m loads
//                only the token rows its MMA reads (tmap_tokens_narrow).
//                Warp 2, gathering (a_row_index): the gather loader, the
//                token rows one box each (gather_loader.cuh); at tile_m 256
//                with the row-scale epilogue: the row-scale loader
//                (row_scales.h).
//   warpgroups 1, 2  consumers: wgmma from shared-memory descriptors into
//                fp32 registers, then the epilogue for their 64 features:
//                stmatrix.trans into a 128B-swizzled staging tile, then a TMA
//                store when the tile is whole, or masked 16-byte stores at
//                group and segment edges.
//
// Accumulate mode (C += result): the producer also TMA-loads each active
// tile's old C into a ring of `staging_buffers` (2..4) staging slots per
// consumer warpgroup, right after the tile's operands, so the reads of C
// run ahead of the epilogues like the operand loads (c_full / c_empty
// barriers, OldCBarriers). The epilogue adds into the slot and stores from
// it.
//
// ClusterM = 2: clusters of two CTAs walk pair tiles of 256 features and one
// token tile (ptx/blocks/cluster_tiles.h). Each CTA loads its own 128 weight
// rows and half of the token tile, multicast into both CTAs' shared memory,
// so the pair reads the shared tokens from L2 once instead of twice. A
// stage is free when the consumers of both CTAs have released it: each
// consumer warpgroup arrives on the empty barrier of both.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "params.h"
#include "../blocks/kernel_shape.h"
#include "../blocks/l2_prefetch.h"
#include "../blocks/routing_check.h"
#include "../blocks/routing_prefetch.h"
#include "../instr/grid_dependency.h"
#include "../blocks/tile_handoff.h"
#include "../blocks/tile_scheduler.h"
#include "../blocks/trace.h"
#include "../instr/cluster.h"
#include "../instr/elect.h"
#include "../instr/fence.h"
#include "../instr/mbarrier.h"
#include "../instr/setmaxnreg.h"
#include "../instr/tma.h"
#include "consumer.cuh"
#include "epilogue.cuh"
#include "gather_loader.cuh"
#include "kernel_table.h"
#include "producer.cuh"
#include "smem_layout.h"

namespace ggemm::sm90 {

// The epilogues a persistent kernel is compiled for (kernel_table.h):
//   kAny        every epilogue the tile offers (store, row scale, SwiGLU and
//               accumulate where the tile has the registers) and gather on
//               load: the MoE calls. p.epilogue is tested per tile.
//   kStoreOnly  the store epilogue alone, no gather (_store kernels): plain
//               grouped GEMMs and the LoRA shrink and expand. Their calls
//               are short enough that the other paths' code costs them: with
//               those paths in the kernel (its tile_m 128 SASS twice the
//               size) LoRA expand M 1024 ran 11.9-12.2 us under ncu against
//               11.4 without (docs/performance.md, "Cold, against
//               e409675").
//   kAccumulateOnly  the accumulate epilogue alone, no gather (_accumulate
//               kernels, tile_m <= 128): the LoRA expand adding into the
//               base projection, for the same reason.
//   kSwigluOnly the SwiGLU epilogue alone (_swiglu kernels), so tile_m 256
//               has the registers for it.
enum class Sm90Epilogues { kAny, kStoreOnly, kAccumulateOnly, kSwigluOnly };

// What one kernel instantiation fixes at compile time, and the few
// per-launch choices every role derives the same way from the parameters.
template <typename ElemT, typename OutT, int TileM, WeightLayout Layout, int ClusterM,
          Sm90Epilogues Epilogues = Sm90Epilogues::kAny>
struct GroupedGemmSm90Config : GroupedKernelShape<ElemT, OutT, TileM, Layout> {
  static constexpr int kClusterM = ClusterM;  // CTAs of a cluster sharing a token tile
  static constexpr bool kSwigluOnly = Epilogues == Sm90Epilogues::kSwigluOnly;
  static constexpr bool kAccumulateOnly = Epilogues == Sm90Epilogues::kAccumulateOnly;
  // Every epilogue, p.epilogue tested per tile (the general kernels).
  static constexpr bool kAnyEpilogue = Epilogues == Sm90Epilogues::kAny;
  static_assert(!kSwigluOnly || (Layout == WeightLayout::kKMajor && ClusterM == 1 && sizeof(OutT) == 2),
                "SwiGLU-only kernels: K-major weights, no cluster, 16-bit outputs");

  static_assert(ClusterM == 1 || (ClusterM == 2 && TileM >= 32), "clusters of 1, or pairs splitting >= 32 tokens");
  static constexpr uint32_t kTokensPerCta = TileM / ClusterM;  // token rows each CTA loads (and multicasts)
  // K-sliced stages (Sm90GroupedParams::k_slices): K-major weights, no
  // cluster (a pair's multicast halves would interleave the slices).
  static constexpr bool kSlicedViews = Layout == WeightLayout::kKMajor && ClusterM == 1;
  static_assert(TileM % 16 == 0 && TileM >= 16 && TileM <= 256 && !(sizeof(OutT) == 4 && TileM > 128),
                "tile_m is the wgmma N (16..256, step 16 for stmatrix x4); fp32 output stops at 128");
  static constexpr int kAccRegs = TileM / 2;  // m64nNk16 f32: N/2 per thread
  static constexpr uint32_t kOutBytes = sizeof(OutT);
  static constexpr uint32_t kFeaturesPerWarpgroup = kTileN / kConsumerWarpgroups;  // 64
  // Staging of one warpgroup: boxes of [TileM rows][128 bytes of columns].
  static constexpr uint32_t kColsPerBox = 128 / kOutBytes;
  static constexpr uint32_t kBoxes = kFeaturesPerWarpgroup / kColsPerBox;
  // The epilogue stages at most 128 tokens at a time (kStageTokens, the C
  // tensor map's box rows): a whole 256-token tile would take 64 KB and leave
  // 3 pipeline stages instead of 4.
  static constexpr uint32_t kStageTokens = sm90_epilogue_stage_tokens(TileM);
  static constexpr uint32_t kStageChunks = TileM / kStageTokens;
  static constexpr uint32_t kStagingBytes = kBoxes * kStageTokens * 128;
  static constexpr uint32_t kProducerRegs = 40, kConsumerRegs = 232;
  // The SwiGLU epilogue (16-bit outputs) and gather on load (no cluster):
  // not at tile_m 256, where the SwiGLU epilogue spills (the accumulators'
  // 128 registers leave it too few). The runtime plans tile_m <=
  // kMaxGatherSwigluTileM for them.
  static constexpr bool kSwiglu =
      sizeof(OutT) == 2 && (kSwigluOnly || (kAnyEpilogue && TileM <= int(kMaxGatherSwigluTileM)));
  static constexpr bool kGather = kAnyEpilogue && ClusterM == 1 && TileM <= int(kMaxGatherSwigluTileM);
  // The consumer warpgroups that multiply (Sm90GroupedParams::
  // consumer_warpgroups): one, with tiles of 64 features, for K-major
  // weights without a cluster where N <= 64, wide tiles would leave half
  // the SMs idle, or a decode call's wide tiles would fall short of one
  // wave or leave half the SMs idle in their last (runtime/plan_rules.h,
  // narrow_tiles); otherwise both.
  static constexpr bool kOneConsumerAllowed = Layout == WeightLayout::kKMajor && ClusterM == 1;
  // At tile_m 256 the 128 accumulator registers leave too few for the
  // accumulate epilogue's old values (it spills); the runtime never picks
  // that pair (GGEMM_SM90_TILE_M_SUPPORTS_ACCUMULATE; a config's tile_m or
  // mma_n of 256 with accumulate is refused, api/src/validate_config.cpp).
  // The consumers count on it: their accumulate path is compiled only here.
  static constexpr bool kSupportsAccumulate =
      (kAnyEpilogue || kAccumulateOnly) && GGEMM_SM90_TILE_M_SUPPORTS_ACCUMULATE(TileM);
  static_assert(!kSupportsAccumulate || kStageChunks == 1, "accumulate: one staging chunk per tile");
  static_assert(!kAccumulateOnly || kSupportsAccumulate, "accumulate-only kernels: tile_m <= 128");

  GGEMM_DEVICE static uint32_t k_slices(const Sm90GroupedParams &p) { return kSlicedViews ? p.k_slices : 1u; }
  GGEMM_DEVICE static uint32_t consumers(const Sm90GroupedParams &p) {
    return kOneConsumerAllowed ? p.consumer_warpgroups : kConsumerWarpgroups;
  }
  // Features a (cluster's) tile covers, as the walk tiles N: 64 per
  // multiplying warpgroup and CTA (plan.tile_n, times the cluster).
  GGEMM_DEVICE static uint32_t walk_tile_n(const Sm90GroupedParams &p) {
    return consumers(p) * kFeaturesPerWarpgroup * ClusterM;
  }
  GGEMM_DEVICE static bool accumulates(const Sm90GroupedParams &p) {
    return kAccumulateOnly || (kSupportsAccumulate && p.epilogue == kEpilogueAccumulate);
  }
  // Narrow token boxes: one slice of K a stage, no cluster (the runtime
  // encodes them only then).
  GGEMM_DEVICE static bool narrow_token_boxes(const Sm90GroupedParams &p) {
    return ClusterM == 1 && k_slices(p) == 1 && p.narrow_token_boxes != 0;
  }

  // The tile handoff's shared memory (static_smem_bytes, smem_layout.h): one
  // region per kernel, whichever role asks.
  GGEMM_DEVICE static uint8_t *handoff_region() {
    __shared__ alignas(16) uint8_t region[kTileHandoffBytes];
    return region;
  }
  // The row-scale epilogue's weights of a tile of two chunks (row_scales.h;
  // sm90_row_scales_bytes, smem_layout.h): only kernels whose epilogue
  // calls it (tile_m 256) have it.
  GGEMM_DEVICE static float *row_scales_region() {
    static_assert(sm90_row_scales_bytes(TileM) == TileM * sizeof(float) + sizeof(RowScalesBarriers),
                  "a tile of two epilogue chunks");
    __shared__ float region[TileM];
    return region;
  }
  GGEMM_DEVICE static RowScalesBarriers *row_scales_barriers() {
    __shared__ RowScalesBarriers barriers;
    return &barriers;
  }
  // Whether warp 2 runs the row-scale loader (row_scales.h): tiles of two
  // epilogue chunks (which never gather) with the row-scale epilogue.
  static constexpr bool kRowScalesShared = kAnyEpilogue && kStageChunks > 1;
  GGEMM_DEVICE static bool loads_row_scales(const Sm90GroupedParams &p) {
    return kRowScalesShared && p.epilogue == kEpilogueRowScale;
  }

  // This CTA's rank in its cluster (0 without clusters).
  GGEMM_DEVICE static uint32_t rank() {
    if constexpr (ClusterM > 1) {
      return ptx::cluster_ctarank();
    } else {
      return 0;
    }
  }

  // The walk (TileWalker, ptx/blocks/tile_walker.h): a pair walks its
  // tiles together and each CTA gets its share, its 128 features. (Without
  // a cluster the tile is the CTA's whole: cta_share would clamp it to
  // kRowsPerCta, a silent trap for any wider single-CTA tile.)
  static constexpr int kWalkClusterSize = ClusterM;
  GGEMM_DEVICE static GroupedTile walk_share(const GroupedTile &tile) {
    if constexpr (ClusterM > 1) {
      return cta_share(tile, rank());
    } else {
      return tile;
    }
  }

  // The features of a tile that consumer warpgroup cw owns: the first one's
  // column, and how many (at most 64; 0 past the segment's end).
  GGEMM_DEVICE static uint32_t warpgroup_col0(const GroupedTile &tile, uint32_t cw) {
    return tile.col0 + cw * kFeaturesPerWarpgroup;
  }
  GGEMM_DEVICE static uint32_t warpgroup_cols(const GroupedTile &tile, uint32_t cw) {
    return tile.cols > cw * kFeaturesPerWarpgroup ? min(tile.cols - cw * kFeaturesPerWarpgroup, kFeaturesPerWarpgroup)
                                                  : 0;
  }
};

template <typename Elem, typename Out, int TileM, WeightLayout Layout, int ClusterM = 1,
          Sm90Epilogues Epilogues = Sm90Epilogues::kAny>
struct GroupedGemmSm90 {
  using Cfg = GroupedGemmSm90Config<Elem, Out, TileM, Layout, ClusterM, Epilogues>;

  GGEMM_DEVICE static void run(const Sm90GroupedParams &p) {
    extern __shared__ uint8_t smem_raw[];
    uint8_t *smem = reinterpret_cast<uint8_t *>((reinterpret_cast<uintptr_t>(smem_raw) + kSmemAlign - 1) &
                                                ~uintptr_t(kSmemAlign - 1));
    const SmemLayout layout = make_smem_layout(TileM, p.swizzle_bytes, Cfg::kOutBytes, p.stages, p.staging_buffers,
                                               Cfg::k_slices(p), p.weights_box_rows, Cfg::consumers(p));
    uint64_t *full = reinterpret_cast<uint64_t *>(smem + layout.barrier_offset());
    uint64_t *empty = full + p.stages;
    uint64_t *c_full = empty + p.stages;              // [kMaxStagingBuffers]: old C landed (accumulate)
    uint64_t *c_empty = c_full + kMaxStagingBuffers;  // [kMaxStagingBuffers]: slot's store has read it

    const uint32_t warpgroup = threadIdx.x / 128;
    ptx::launch_dependent_grids();
    if (threadIdx.x == 0) {
      for (uint32_t s = 0; s < p.stages; ++s) {
        ptx::mbarrier_init(&full[s], 1);                              // the producer's expect_tx
        ptx::mbarrier_init(&empty[s], Cfg::consumers(p) * ClusterM);  // each consumer of the cluster
      }
      if (Cfg::accumulates(p)) {
        for (uint32_t s = 0; s < p.staging_buffers; ++s) {
          ptx::mbarrier_init(&c_full[s], 1);                   // the producer's expect_tx
          ptx::mbarrier_init(&c_empty[s], Cfg::consumers(p));  // each consumer warpgroup, once its slot is free
        }
      }
      if constexpr (Cfg::kRowScalesShared) {
        if (Cfg::loads_row_scales(p)) {
          ptx::mbarrier_init(&Cfg::row_scales_barriers()->full, 32);                       // the loader's lanes
          ptx::mbarrier_init(&Cfg::row_scales_barriers()->empty, Cfg::consumers(p) * 4);  // every consumer warp
        }
      }
      // Who reads each handed-off tile: the producer thread, every consumer
      // thread and, gathering, the gather loader or, scaling rows of tiles
      // of two chunks, the row-scale loader (one release per warp).
      TileHandoff::init(Cfg::handoff_region(),
                        1 + Cfg::consumers(p) * 128 + (gathers(p) || Cfg::loads_row_scales(p) ? 1 : 0));
      ptx::fence_mbarrier_init();
    }
    if (threadIdx.x == 32) {  // the tensor maps are kernel parameters: no other kernel writes them
      ptx::prefetch_tensormap(&p.tmap_tokens);
      if (Cfg::narrow_token_boxes(p)) {
#pragma unroll
        for (uint32_t i = 0; i < kNarrowTokenMaps; ++i)
          if (narrow_token_map_exists(i, TileM)) ptx::prefetch_tensormap(&p.tmap_tokens_narrow[i]);
      }
      ptx::prefetch_tensormap(&p.tmap_weights);
      for (int v = 0; v < 3; ++v) ptx::prefetch_tensormap(&p.tmap_out[v]);
    }
    // Up to here nothing touched global memory; from here on the stream's
    // earlier kernels are done (ptx/instr/grid_dependency.h).
    ptx::wait_prior_grids();
    // Small operands on their way into L2 (warp 3 has nothing else to do
    // before the roles split), the routing arrays into L1.
    if (threadIdx.x == 96) ptx::prefetch_small_operands(p);
    if (threadIdx.x / 32 == 1) ptx::prefetch_routing(p, threadIdx.x % 32);
    // Checked mode: one warp of CTA 0 looks at the routing arrays before the
    // roles split (after it, the producer's 40 registers have no room, and
    // in a consumer the extra code costs ptxas registers the accumulators
    // need). CTA 0 starts about one memory latency later; only in checked
    // mode.
    if (p.device_status && threadIdx.x / 32 == 2) {
      if (blockIdx.x == 0) check_routing_warp(p);
      if (Cfg::kGather && p.a_row_index) check_gather_warp(p);
    }
    // The barriers' inits (and, in a cluster, the peer's) are visible before
    // any TMA or remote arrival can reach them.
    sync_cta_or_cluster();

    if (warpgroup == 0) {
      ptx::setmaxnreg_dec<Cfg::kProducerRegs>();
      if (threadIdx.x < 32) {
        if (ptx::elect_one_sync()) ProducerSm90<Cfg>::run(p, smem, layout, full, empty, c_full, c_empty);
      } else if (threadIdx.x < 64) {
        TileWalker<Cfg>::run(p, Cfg::handoff_region());
      } else if (threadIdx.x < 96) {
        if (gathers(p)) {
          GatherLoaderSm90<Cfg>::run(p, smem, layout, full, empty);
        } else if constexpr (Cfg::kRowScalesShared) {
          if (Cfg::loads_row_scales(p))
            RowScaleLoaderSm90<TileM>::run(p, Cfg::handoff_region(), Cfg::row_scales_region(),
                                           Cfg::row_scales_barriers());
        }
      }
    } else if (warpgroup <= Cfg::consumers(p)) {  // a second warpgroup with no rows below N has nothing to do
      ptx::setmaxnreg_inc<Cfg::kConsumerRegs>();
      consume_swizzled(p, smem, layout, full, empty, OldCBarriers{c_full, c_empty}, warpgroup - 1);
    }
    if constexpr (ClusterM > 1) {
      // The peer's consumers arrive on this CTA's empty barriers until their
      // last stage: neither CTA leaves while the other may still do so.
      __syncwarp();
      ptx::cluster_sync();
    }
  }

  GGEMM_DEVICE static bool gathers(const Sm90GroupedParams &p) { return ProducerSm90<Cfg>::gathers(p); }

  GGEMM_DEVICE static void sync_cta_or_cluster() {
    if constexpr (ClusterM > 1) {
      ptx::cluster_sync();
    } else {
      __syncthreads();
    }
  }

  // One consumer loop per swizzle (tile_k = swizzle / 2), chosen once:
  // each stage's wgmmas are then unrolled and no branch merges the
  // accumulators inside the loop. (A run-time k-step count, or a branch
  // between wgmmas, makes ptxas close extra wgmma groups or serialise
  // them, C7515.)
  // K-sliced stages (k_slices 2 or 4) exist for the 128-byte swizzle only.
  GGEMM_DEVICE static void consume_swizzled(const Sm90GroupedParams &p, uint8_t *smem, const SmemLayout &layout,
                                            uint64_t *full, uint64_t *empty, const OldCBarriers &c, uint32_t cw) {
    switch (p.swizzle_bytes) {
      case 128:
        if constexpr (Cfg::kSlicedViews) {
          if (p.k_slices == 4) {
            consume<128, 4>(p, smem, layout, full, empty, c, cw);
            break;
          }
          if (p.k_slices == 2) {
            consume<128, 2>(p, smem, layout, full, empty, c, cw);
            break;
          }
        }
        consume<128>(p, smem, layout, full, empty, c, cw);
        break;
      case 64: consume<64>(p, smem, layout, full, empty, c, cw); break;
      default: consume<32>(p, smem, layout, full, empty, c, cw); break;
    }
  }

  // A consumer warpgroup (cw 0 or 1): for each handed-off tile, its
  // mainloop, then its epilogue.
  template <uint32_t Swizzle, uint32_t Slices = 1>
  GGEMM_DEVICE static void consume(const Sm90GroupedParams &p, uint8_t *smem, const SmemLayout &layout, uint64_t *full,
                                   uint64_t *empty, const OldCBarriers &c, uint32_t cw) {
    // k_iters and the staging address are recomputed per tile where used:
    // at tile_m 256 the accumulators leave no registers to keep them live.
    const uint32_t tid = threadIdx.x % 128;
    RingPosition pipe;
    TileHandoff handoff;
    // Zeroed once, before any wgmma: a tile narrower than tile_m leaves the
    // registers past its width untouched, and the epilogue reads (then masks)
    // them.
    float acc[Cfg::kAccRegs];
#pragma unroll
    for (int i = 0; i < Cfg::kAccRegs; ++i) acc[i] = 0.f;
    OldCRing c_ring;
    StagingBuffers staging_buffers(p.staging_buffers);
    uint32_t scaled_tiles = 0;  // tiles of two chunks: row-scaled tiles stored (EpilogueSm90::store)
    TraceWriter trace(tid == 0 ? trace_buffer(p) : nullptr, 1 + cw);
    trace.record_with_time(kTraceStart, 0);

    for (;;) {
      // The tile's fields are read from its slot where they are used, and
      // the slot is released after the epilogue: at tile_m 256 the
      // accumulators leave no registers to hold them through the tile.
      const TileSlot &slot = handoff.wait(Cfg::handoff_region());
      if (slot.tile.rows == 0) break;  // the end
      consume_tile<Swizzle, Slices>(p, smem, layout, full, empty, c, cw, tid, slot.tile, slot.index, pipe, acc,
                                    staging_buffers, scaled_tiles, c_ring, trace);
      handoff.release(Cfg::handoff_region());
    }
    if (tid == 0) ptx::tma_store_wait_group_read<0>();
    trace.finish();
  }

  // One tile of a consumer warpgroup: its mainloop (none for an inactive
  // group's tile, whose outputs the epilogue zeroes, or, accumulating,
  // leaves as they are), then its epilogue.
  template <uint32_t Swizzle, uint32_t Slices>
  GGEMM_DEVICE static void consume_tile(const Sm90GroupedParams &p, uint8_t *smem, const SmemLayout &layout,
                                        uint64_t *full, uint64_t *empty, const OldCBarriers &c, uint32_t cw,
                                        uint32_t tid, const GroupedTile &tile, uint32_t tile_index, RingPosition &pipe,
                                        float (&acc)[Cfg::kAccRegs], StagingBuffers &staging_buffers,
                                        uint32_t &scaled_tiles, OldCRing &c_ring, TraceWriter &trace) {
    const bool active = tile.expert >= 0;
    trace.record(kTraceTile, tile_index);
    // The row-scale epilogue's weights of a one-chunk tile, loaded now so
    // that their latency hides under the mainloop (row_scales.h; those of
    // a two-chunk tile come from the row-scale loader).
    typename EpilogueSm90<Cfg>::RowScales scales;
    if constexpr (Cfg::kAnyEpilogue && !Cfg::kRowScalesShared) {
      if (active && p.epilogue == kEpilogueRowScale) scales.load(p, tile.row0, tile.rows, tid);
    }
    const bool accumulates = Cfg::accumulates(p);
    if (active) {
      MainloopSm90<Cfg>::template run<Swizzle, Slices, Cfg::kTileM>(p, smem, layout, full, empty, cw, tile.rows, pipe,
                                                                    acc, trace);
    } else if (accumulates) {
      return;  // C += 0
    }
    trace.record(kTraceEpilogue, tile_index);
    uint8_t *staging = smem + layout.c_offset() + cw * p.staging_buffers * Cfg::kStagingBytes;
    if constexpr (Cfg::kSupportsAccumulate) {
      if (accumulates) {
        EpilogueSm90<Cfg>::store_accumulate(p, tile, cw, tid, staging, c, c_ring, acc);
        trace.record(kTraceEpilogueEnd, tile_index);
        return;
      }
    }
    EpilogueSm90<Cfg>::store(p, tile, active, cw, tid, staging, staging_buffers, scales, scaled_tiles, acc);
    trace.record(kTraceEpilogueEnd, tile_index);
  }
};

}  // namespace ggemm::sm90
