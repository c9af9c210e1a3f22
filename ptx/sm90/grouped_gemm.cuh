// The sm_90a persistent, warp-specialised grouped GEMM (docs/design.md,
// kernel architecture).
//
// One CTA per SM walks output tiles of tile_m tokens x 128 features. A and B
// are swapped as the MMA sees them: the weights are the wgmma's M side (two
// consumer warpgroups, 64 weight rows each) and the tokens its N side
// (tile_m = 16..256), so decode-sized groups waste little.
//
//   warpgroup 0  40 registers. Warp 1: one thread walks the tiles and hands
//                each to the other roles through shared memory
//                (ptx/blocks/tile_handoff.h), so no other role waits on the walk's
//                routing loads. Warp 0: the producer, one thread issuing TMA
//                loads of each tile's weights and tokens into a ring of
//                `stages` buffers (full/empty mbarrier pairs). With K-sliced
//                views a stage holds 2 or 4 slices of K, one box per operand
//                (GroupedGemmParams::k_slices: narrow stages are slow per
//                stage, not per byte). A tile narrower than tile_m loads
//                only the token rows its MMA reads (tmap_tokens_narrow).
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
// barriers; CRing below). The epilogue adds into the slot and stores from
// it.
//
// ClusterM = 2: clusters of two CTAs walk pair tiles of 256 features and one
// token tile (ptx/blocks/cluster_tiles.h). Each CTA loads its own 128 weight rows
// and half of the token tile, multicast into both CTAs' shared memory, so
// the pair reads the shared tokens from L2 once instead of twice. A stage
// is free when the consumers of both CTAs have released it: each consumer
// warpgroup arrives on the empty barrier of both.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "../blocks/cluster_tiles.h"
#include "../blocks/grouped_params.h"
#include "../blocks/l2_prefetch.h"
#include "../blocks/pipeline.h"
#include "../blocks/routing_check.h"
#include "../blocks/routing_prefetch.h"
#include "../blocks/tile_handoff.h"
#include "../blocks/tile_scheduler.h"
#include "../blocks/trace.h"
#include "../instr/barrier.h"
#include "../instr/cluster.h"
#include "../instr/elect.h"
#include "../instr/fence.h"
#include "../instr/ldmatrix.h"
#include "../instr/mbarrier.h"
#include "../instr/setmaxnreg.h"
#include "../instr/sm90/wgmma.h"
#include "../instr/stmatrix.h"
#include "../instr/tma.h"
#include "kernel_table.h"
#include "smem_layout.h"
#include "staging_buffers.h"

namespace ggemm::sm90 {

template <typename T>
struct OutTraits;
template <>
struct OutTraits<__nv_bfloat16> {
  GGEMM_DEVICE static uint32_t pack(float lo, float hi) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t *>(&v);
  }
  GGEMM_DEVICE static float2 unpack(uint32_t v) { return __bfloat1622float2(*reinterpret_cast<__nv_bfloat162 *>(&v)); }
};
template <>
struct OutTraits<__half> {
  GGEMM_DEVICE static uint32_t pack(float lo, float hi) {
    __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<uint32_t *>(&v);
  }
  GGEMM_DEVICE static float2 unpack(uint32_t v) { return __half22float2(*reinterpret_cast<__half2 *>(&v)); }
};

// Byte offset of 16-byte chunk `chunk` (0..7) of row `row` in a tile of
// 128-byte rows with the TMA's 128B swizzle (chunk index XOR row % 8).
GGEMM_DEVICE uint32_t swizzle128_offset(uint32_t row, uint32_t chunk) {
  return row * 128 + ((chunk ^ (row & 7)) << 4);
}

template <typename Elem, typename Out, int TileM, WeightLayout Layout, int ClusterM = 1>
struct GroupedGemmSm90 {
  static_assert(ClusterM == 1 || (ClusterM == 2 && TileM >= 32), "clusters of 1, or pairs splitting >= 32 tokens");
  static constexpr uint32_t kPairTileN = kTileN * ClusterM;  // features a cluster's tile covers
  static constexpr uint32_t kTokensPerCta = TileM / ClusterM;  // token rows each CTA loads (and multicasts)
  // K-sliced stages (GroupedGemmParams::k_slices): K-major weights, no
  // cluster (a pair's multicast halves would interleave the slices).
  static constexpr bool kSlicedViews = Layout == WeightLayout::kKMajor && ClusterM == 1;
  GGEMM_DEVICE static uint32_t k_slices(const GroupedGemmParams &p) { return kSlicedViews ? p.k_slices : 1u; }
  static_assert(TileM % 16 == 0 && TileM >= 16 && TileM <= 256 && !(sizeof(Out) == 4 && TileM > 128),
                "tile_m is the wgmma N (16..256, step 16 for stmatrix x4); fp32 output stops at 128");
  static constexpr int kAccRegs = TileM / 2;  // m64nNk16 f32: N/2 per thread
  static constexpr uint32_t kOutBytes = sizeof(Out);
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
  // The consumer warpgroups that multiply (GroupedGemmParams::
  // consumer_warpgroups): one when N <= 64, for K-major weights without a
  // cluster; otherwise both.
  static constexpr bool kOneConsumerAllowed = Layout == WeightLayout::kKMajor && ClusterM == 1;
  GGEMM_DEVICE static uint32_t consumers(const GroupedGemmParams &p) {
    return kOneConsumerAllowed ? p.consumer_warpgroups : kConsumerWarpgroups;
  }
  // At tile_m 256 the 128 accumulator registers leave too few for the
  // accumulate epilogue's old values (it spills); the runtime never picks
  // that pair (GGEMM_SM90_TILE_M_SUPPORTS_ACCUMULATE).
  static constexpr bool kSupportsAccumulate = GGEMM_SM90_TILE_M_SUPPORTS_ACCUMULATE(TileM);
  static_assert(!kSupportsAccumulate || kStageChunks == 1, "accumulate: one staging chunk per tile");
  GGEMM_DEVICE static bool accumulates(const GroupedGemmParams &p) {
    return kSupportsAccumulate && p.epilogue == kEpilogueAccumulate;
  }

  // The accumulate epilogue's ring of old-C slots (staging_buffers of them
  // per consumer warpgroup; every active tile takes the next slot, in the
  // order the producer filled them). c_full[s]: the producer's TMA load of
  // both warpgroups' halves landed. c_empty[s]: each warpgroup is done with
  // its half (its TMA store has read it, or its masked stores have).
  struct CBarriers {
    uint64_t *full, *empty;
  };
  // A consumer warpgroup's place in the ring. The slot of a whole tile is
  // freed one tile later, once the store group after it is committed and
  // wait_group.read 1 says its own store has read it (a wait right after the
  // store would expose the store's latency); `pending` is that slot + 1, or
  // 0. Thread 0 of the warpgroup keeps `pending` (it issues the stores).
  // With two slots or more the producer never needs a pending slot before
  // the consumers' next tile: it waits for tile n - slots to be freed, and
  // tile n - 2 at the latest is freed during tile n - 1.
  struct CRing {
    uint32_t count = 0, pending = 0;
  };

  using Pipeline = RingPosition;

  GGEMM_DEVICE static void run(const GroupedGemmParams &p) {
    extern __shared__ uint8_t smem_raw[];
    uint8_t *smem = reinterpret_cast<uint8_t *>(
        (reinterpret_cast<uintptr_t>(smem_raw) + kSmemAlign - 1) & ~uintptr_t(kSmemAlign - 1));
    const SmemLayout layout = make_smem_layout(TileM, p.swizzle_bytes, kOutBytes, p.stages, p.staging_buffers,
                                               k_slices(p), p.weights_box_rows, consumers(p));
    uint64_t *full = reinterpret_cast<uint64_t *>(smem + layout.barrier_offset());
    uint64_t *empty = full + p.stages;
    uint64_t *c_full = empty + p.stages;       // [kMaxStagingBuffers]: old C landed (accumulate)
    uint64_t *c_empty = c_full + kMaxStagingBuffers;  // [kMaxStagingBuffers]: slot's store has read it

    const uint32_t warpgroup = threadIdx.x / 128;
    // First of all: small operands on their way into L2 (warp 3 has nothing
    // else to do before the roles split).
    if (threadIdx.x == 96) ptx::prefetch_small_operands(p);
    if (threadIdx.x == 0) {
      for (uint32_t s = 0; s < p.stages; ++s) {
        ptx::mbarrier_init(&full[s], 1);                                // the producer's expect_tx
        ptx::mbarrier_init(&empty[s], consumers(p) * ClusterM);  // each consumer of the cluster
      }
      if (accumulates(p)) {
        for (uint32_t s = 0; s < p.staging_buffers; ++s) {
          ptx::mbarrier_init(&c_full[s], 1);              // the producer's expect_tx
          ptx::mbarrier_init(&c_empty[s], consumers(p));  // each consumer warpgroup, once its slot is free
        }
      }
      // Who reads each handed-off tile: the producer thread and every
      // consumer thread.
      TileHandoff::init(handoff_region(), 1 + consumers(p) * 128);
      ptx::fence_mbarrier_init();
    }
    if (threadIdx.x / 32 == 1) {
      ptx::prefetch_routing(p, threadIdx.x % 32);
      if (threadIdx.x == 32) {
        ptx::prefetch_tensormap(&p.tmap_tokens);
        if (narrow_token_boxes(p)) {
#pragma unroll
          for (uint32_t i = 0; i < kNarrowTokenMaps; ++i)
            if (narrow_token_map_exists(i, TileM)) ptx::prefetch_tensormap(&p.tmap_tokens_narrow[i]);
        }
        ptx::prefetch_tensormap(&p.tmap_weights);
        for (int v = 0; v < 3; ++v) ptx::prefetch_tensormap(&p.tmap_out[v]);
      }
    }
    // Checked mode: one warp of CTA 0 looks at the routing arrays before the
    // roles split (after it, the producer's 40 registers have no room, and
    // in a consumer the extra code costs ptxas registers the accumulators
    // need). CTA 0 starts about one memory latency later; only in checked
    // mode.
    if (p.device_status && blockIdx.x == 0 && threadIdx.x / 32 == 2) check_routing_warp(p);
    // The barriers' inits (and, in a cluster, the peer's) are visible before
    // any TMA or remote arrival can reach them.
    sync_cta_or_cluster();

    if (warpgroup == 0) {
      ptx::setmaxnreg_dec<kProducerRegs>();
      if (threadIdx.x < 32) {
        if (ptx::elect_one_sync()) produce(p, smem, layout, full, empty, c_full, c_empty);
      } else if (threadIdx.x < 64) {
        if (ptx::elect_one_sync()) walk_tiles(p, handoff_region());
      }
    } else if (warpgroup <= consumers(p)) {  // a second warpgroup with no rows below N has nothing to do
      ptx::setmaxnreg_inc<kConsumerRegs>();
      // One consumer loop per swizzle (tile_k = swizzle / 2), chosen once:
      // each stage's wgmmas are then unrolled and no branch merges the
      // accumulators inside the loop. (A run-time k-step count, or a branch
      // between wgmmas, makes ptxas close extra wgmma groups or serialise
      // them, C7515.)
      // K-sliced stages (k_slices 2 or 4) exist for the 128-byte swizzle only.
      const CBarriers c{c_full, c_empty};
      switch (p.swizzle_bytes) {
        case 128:
          if constexpr (kSlicedViews) {
            if (p.k_slices == 4) {
              consume<128, 4>(p, smem, layout, full, empty, c, warpgroup - 1);
              break;
            }
            if (p.k_slices == 2) {
              consume<128, 2>(p, smem, layout, full, empty, c, warpgroup - 1);
              break;
            }
          }
          consume<128>(p, smem, layout, full, empty, c, warpgroup - 1);
          break;
        case 64: consume<64>(p, smem, layout, full, empty, c, warpgroup - 1); break;
        default: consume<32>(p, smem, layout, full, empty, c, warpgroup - 1); break;
      }
    }
    if constexpr (ClusterM > 1) {
      // The peer's consumers arrive on this CTA's empty barriers until their
      // last stage: neither CTA leaves while the other may still do so.
      __syncwarp();
      ptx::cluster_sync();
    }
  }

  // The tile handoff's shared memory (kStaticSmemBytes, smem_layout.h).
  GGEMM_DEVICE static uint8_t *handoff_region() {
    __shared__ alignas(16) uint8_t region[kTileHandoffBytes];
    return region;
  }

  GGEMM_DEVICE static void sync_cta_or_cluster() {
    if constexpr (ClusterM > 1) {
      ptx::cluster_sync();
    } else {
      __syncthreads();
    }
  }

  // The cluster's walk (cluster_walk, as the CPU tests simulate it), read
  // from the special registers at each use (the walker has 40 registers).
  GGEMM_DEVICE static uint32_t first_tile() { return uint32_t(cluster_walk(blockIdx.x, gridDim.x, ClusterM).first); }
  GGEMM_DEVICE static uint32_t tile_stride() { return uint32_t(cluster_walk(blockIdx.x, gridDim.x, ClusterM).stride); }

  // This CTA's rank in its cluster (0 without clusters).
  GGEMM_DEVICE static uint32_t rank() {
    if constexpr (ClusterM > 1) {
      return ptx::cluster_ctarank();
    } else {
      return 0;
    }
  }

  // ---- tile walker: one thread of warp 1 -----------------------------------
  // The only role that walks the tiles (its chain of dependent routing
  // loads): each tile goes to the producer and the consumers through the
  // handoff (ptx/blocks/tile_handoff.h), up to kTileSlots ahead of the slowest.
  GGEMM_DEVICE static void walk_tiles(const GroupedGemmParams &p, uint8_t *handoff_region) {
    GroupedTileScheduler sched(grouped_problem(p), TileM, kPairTileN);
    TileHandoff handoff;
    GroupedTile pair;
    // Each CTA of a pair gets its share of the pair tile (its 128 features);
    // the other roles use only that.
    // (Without a cluster the tile is the CTA's whole: cta_share would clamp
    // it to kRowsPerCta, a silent trap for any wider single-CTA tile.)
    for (uint64_t t = first_tile(); sched.next(t, &pair); t += tile_stride()) {
      if constexpr (ClusterM > 1) {
        handoff.publish(handoff_region, cta_share(pair, rank()), uint32_t(t));
      } else {
        handoff.publish(handoff_region, pair, uint32_t(t));
      }
    }
    handoff.finish(handoff_region);
  }

  // ---- producer: one thread ------------------------------------------------
  GGEMM_DEVICE static void produce(const GroupedGemmParams &p, uint8_t *smem, const SmemLayout &layout,
                                   uint64_t *full, uint64_t *empty, uint64_t *c_full, uint64_t *c_empty) {
    const uint32_t tile_k = p.swizzle_bytes / 2;
    const uint32_t k_iters = k_stages(p.k, tile_k, k_slices(p));
    const uint32_t weights_bytes = Layout == WeightLayout::kKMajor ? k_slices(p) * p.weights_box_rows * p.swizzle_bytes
                                                                   : layout.weights_stage_bytes;
    const uint32_t stage_bytes = weights_bytes + layout.tokens_stage_bytes;
    TileHandoff handoff;
    const uint32_t r = rank();
    Pipeline pipe;
    TraceWriter trace(trace_buffer(p), 0);
    trace.record_with_time(kTraceStart, 0);
    GroupedTile tile;  // this CTA's share of the pair tile
    uint32_t index;
    Pipeline c_ring;  // accumulate: the old-C slots
    while (handoff.take(handoff_region(), &tile, &index)) {
      trace.record(kTraceTile, index);
      if (tile.expert < 0) continue;  // inactive group: nothing to load
      // This CTA's token rows: all of them, or its half of the pair's.
      const int32_t token_row =
          int32_t(tile.row0 + r * kTokensPerCta + (p.a_planes ? tile.segment * p.m : 0));
      // A tile narrower than TileM loads only the token rows its MMA reads
      // (narrow_token_boxes): under load the stages come at the pace of
      // their bytes, not of the MMA, so a narrow tile loading full boxes
      // takes as long as a full one.
      const CUtensorMap *tokens = &p.tmap_tokens;
      uint32_t tile_stage_bytes = stage_bytes;
      if (narrow_token_boxes(p)) {
        const uint32_t width = narrow_mma_width(tile.rows, TileM);
        if (width < uint32_t(TileM)) {
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
      if (accumulates(p)) {
        ptx::mbarrier_wait_parity(&c_empty[c_ring.stage], c_ring.phase ^ 1);
        load_old_c(p, tile, smem + layout.c_offset() + c_ring.stage * kStagingBytes, &c_full[c_ring.stage]);
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
  GGEMM_DEVICE static void load_old_c(const GroupedGemmParams &p, const GroupedTile &tile, uint8_t *slot0,
                                      uint64_t *bar) {
    const OutputView &view = p.out[tile.segment];
    ptx::mbarrier_arrive_expect_tx(bar, consumers(p) * kStagingBytes);
    for (uint32_t cw = 0; cw < consumers(p); ++cw) {
      uint8_t *slot = slot0 + cw * p.staging_buffers * kStagingBytes;
      const int32_t col = int32_t(warpgroup_col0(tile, cw) - view.col_offset);
      for (uint32_t b = 0; b < kBoxes; ++b)
        ptx::tma_load_2d(slot + b * kStageTokens * 128, &p.tmap_out[tile.segment], bar,
                         col + int32_t(b * kColsPerBox), int32_t(tile.row0));
    }
  }

  // Narrow token boxes: one slice of K a stage, no cluster (the runtime
  // encodes them only then).
  GGEMM_DEVICE static bool narrow_token_boxes(const GroupedGemmParams &p) {
    return ClusterM == 1 && k_slices(p) == 1 && p.narrow_token_boxes != 0;
  }

  // The TMA loads of stage ki of a tile into weights w and tokens x, both
  // completing on `bar`: one slice of K (tile_k), or with the K-sliced views
  // k_slices slices in one box per operand (past K: zero-filled, their bytes
  // still counted). `tokens`: the tile's token map (one slice a stage, no
  // cluster: tmap_tokens or a narrow one).
  GGEMM_DEVICE static void load_stage(const GroupedGemmParams &p, uint8_t *w, uint8_t *x, uint64_t *bar, uint32_t ki,
                                      const GroupedTile &tile, const CUtensorMap *tokens, int32_t token_row,
                                      uint32_t r) {
    const uint32_t tile_k = p.swizzle_bytes / 2;
    if (k_slices(p) > 1) {
      const int32_t slice0 = int32_t(ki * k_slices(p));
      ptx::tma_load_4d(w, &p.tmap_weights, bar, 0, int32_t(tile.col0), slice0, tile.expert);
      ptx::tma_load_3d(x, &p.tmap_tokens, bar, 0, token_row, slice0);
      return;
    }
    const int32_t k0 = int32_t(ki * tile_k);
    if constexpr (Layout == WeightLayout::kKMajor) {
      ptx::tma_load_3d(w, &p.tmap_weights, bar, k0, int32_t(tile.col0), tile.expert);
    } else {
      // Two boxes of [tile_k rows of K][64 features]; one per consumer.
      for (uint32_t half = 0; half < kConsumerWarpgroups; ++half)
        ptx::tma_load_3d(w + half * tile_k * 128, &p.tmap_weights, bar,
                         int32_t(tile.col0 + half * kFeaturesPerWarpgroup), k0, tile.expert);
    }
    if constexpr (ClusterM > 1) {
      ptx::tma_load_2d_multicast(x + r * kTokensPerCta * p.swizzle_bytes, &p.tmap_tokens, bar, k0, token_row,
                                 uint16_t((1u << ClusterM) - 1));
    } else {
      ptx::tma_load_2d(x, tokens, bar, k0, token_row);
    }
  }

  // ---- consumers: one warpgroup per 64 weight rows ---------------------------
  template <uint32_t Swizzle, uint32_t Slices = 1>
  GGEMM_DEVICE static void consume(const GroupedGemmParams &p, uint8_t *smem, const SmemLayout &layout,
                                   uint64_t *full, uint64_t *empty, const CBarriers &c, uint32_t cw) {
    // k_iters and the staging address are recomputed per tile where used:
    // at tile_m 256 the accumulators leave no registers to keep them live.
    const uint32_t tid = threadIdx.x % 128;
    Pipeline pipe;
    TileHandoff handoff;
    // Zeroed once, before any wgmma: a tile narrower than TileM leaves the
    // registers past its width untouched, and the epilogue reads (then masks)
    // them.
    float acc[kAccRegs];
#pragma unroll
    for (int i = 0; i < kAccRegs; ++i) acc[i] = 0.f;
    CRing c_ring;
    StagingBuffers staging_buffers(p.staging_buffers);
    TraceWriter trace(tid == 0 ? trace_buffer(p) : nullptr, 1 + cw);
    trace.record_with_time(kTraceStart, 0);

    for (;;) {
      // The tile's fields are read from its slot where they are used, and
      // the slot is released after the epilogue: at tile_m 256 the
      // accumulators leave no registers to hold them through the tile.
      const TileSlot &slot = handoff.wait(handoff_region());
      if (slot.tile.rows == 0) break;  // the end
      consume_tile<Swizzle, Slices>(p, smem, layout, full, empty, c, cw, tid, slot.tile, slot.index, pipe, acc,
                                    staging_buffers, c_ring, trace);
      handoff.release(handoff_region());
    }
    if (tid == 0) ptx::tma_store_wait_group_read<0>();
    trace.finish();
  }

  // One tile of a consumer warpgroup: its mainloop (none for an inactive
  // group's tile, whose outputs the epilogue zeroes), then its epilogue.
  template <uint32_t Swizzle, uint32_t Slices>
  GGEMM_DEVICE static void consume_tile(const GroupedGemmParams &p, uint8_t *smem, const SmemLayout &layout,
                                        uint64_t *full, uint64_t *empty, const CBarriers &c, uint32_t cw, uint32_t tid,
                                        const GroupedTile &tile, uint32_t tile_index, Pipeline &pipe,
                                        float (&acc)[kAccRegs], StagingBuffers &staging_buffers, CRing &c_ring,
                                        TraceWriter &trace) {
    const bool active = tile.expert >= 0;
    trace.record(kTraceTile, tile_index);
    if (active) {
      run_mainloop<Swizzle, Slices, TileM>(p, smem, layout, full, empty, cw, tile.rows, pipe, acc, trace);
    } else if (p.epilogue == kEpilogueAccumulate) {
      return;  // C += 0
    }
    trace.record(kTraceEpilogue, tile_index);
    uint8_t *staging = smem + layout.c_offset() + cw * p.staging_buffers * kStagingBytes;
    if constexpr (kSupportsAccumulate) {
      if (p.epilogue == kEpilogueAccumulate) {
        epilogue_accumulate(p, tile, cw, tid, staging, c, c_ring, acc);
        trace.record(kTraceEpilogueEnd, tile_index);
        return;
      }
    }
    epilogue(p, tile, active, cw, tid, staging, staging_buffers, acc);
    trace.record(kTraceEpilogueEnd, tile_index);
  }

  // Runs the mainloop with the narrowest wgmma N (TileM, TileM / 2, ..., 16)
  // that covers the tile's rows (narrow_mma_width, which the producer sizes
  // the token boxes by): a group's last, partial row block costs only the
  // MMA width it needs. The m64nNk16 fragment is a prefix of the
  // m64n(2N)k16 fragment, so the narrower MMA accumulates into acc's prefix.
  template <uint32_t Swizzle, uint32_t Slices, int N>
  GGEMM_DEVICE static void run_mainloop(const GroupedGemmParams &p, uint8_t *smem, const SmemLayout &layout,
                                        uint64_t *full, uint64_t *empty, uint32_t cw, uint32_t rows, Pipeline &pipe,
                                        float (&acc)[kAccRegs], TraceWriter &trace) {
    if constexpr (N > 16) {
      if (rows <= uint32_t(N / 2)) {
        run_mainloop<Swizzle, Slices, N / 2>(p, smem, layout, full, empty, cw, rows, pipe, acc, trace);
        return;
      }
    }
    mainloop<Swizzle, Slices, N>(p, smem, layout, full, empty, cw, k_stages(p.k, Swizzle / 2, Slices), pipe,
                                 reinterpret_cast<float(&)[N / 2]>(acc), trace);
  }

  template <uint32_t Swizzle, uint32_t Slices, int N>
  GGEMM_DEVICE static void mainloop(const GroupedGemmParams &p, uint8_t *smem, const SmemLayout &layout,
                                    uint64_t *full, uint64_t *empty, uint32_t cw, uint32_t k_iters, Pipeline &pipe,
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
        // slices TileM rows apart.
        const uint32_t w_slice_bytes = p.weights_box_rows * Swizzle;
#pragma unroll
        for (uint32_t s = 0; s < Slices; ++s)
          mma_stage<Swizzle, N>(w + s * w_slice_bytes, x + s * TileM * Swizzle, cw, ki != 0 || s != 0, acc);
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
    if constexpr (ClusterM > 1) {
#pragma unroll
      for (uint32_t cta = 0; cta < ClusterM; ++cta) ptx::mbarrier_arrive_remote(ptx::map_shared_to_rank(empty, cta));
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
      if constexpr (Layout == WeightLayout::kKMajor) {
        // This warpgroup's 64 rows; k advances 32 bytes along the row.
        desc_w = make_kmajor_desc(w + cw * 64 * Swizzle + kk * 32, Swizzle);
      } else {
        // This warpgroup's box of tile_k rows of 128 bytes; k advances 16 rows.
        desc_w = make_mnmajor_sw128_desc(w + cw * kTileK * 128 + kk * 16 * 128);
      }
      const uint64_t desc_x = make_kmajor_desc(x + kk * 32, Swizzle);
      WgmmaM64K16<N, Elem, Layout == WeightLayout::kMNMajor ? 1 : 0>::run(acc, desc_w, desc_x,
                                                                            (accumulate || kk > 0) ? 1u : 0u);
    }
  }

  // ---- epilogue -------------------------------------------------------------
  // The features of a tile that consumer warpgroup cw owns: the first one's
  // column, and how many (at most 64; 0 past the segment's end).
  GGEMM_DEVICE static uint32_t warpgroup_col0(const GroupedTile &tile, uint32_t cw) {
    return tile.col0 + cw * kFeaturesPerWarpgroup;
  }
  GGEMM_DEVICE static uint32_t warpgroup_cols(const GroupedTile &tile, uint32_t cw) {
    return tile.cols > cw * kFeaturesPerWarpgroup ? min(tile.cols - cw * kFeaturesPerWarpgroup, kFeaturesPerWarpgroup)
                                                  : 0;
  }

  // Fragment of m64nNk16 (PTX ISA 9.7.15.5.1.1, "Register fragments"): warp w
  // of the warpgroup owns weight rows 16w..16w+15; acc[4j + e] is row
  // 16w + lane/4 + 8*(e/2), token 8j + 2*(lane%4) + e%2.
  //
  // The epilogue only reads acc: every output value is computed on the way to
  // the staging tile. Writing acc here (scaling in place, zeroing) would be a
  // non-wgmma definition of the accumulators inside the tile loop, and ptxas
  // then serialises every wgmma of the mainloop (C7515).
  GGEMM_DEVICE static void epilogue(const GroupedGemmParams &p, const GroupedTile &tile, bool active, uint32_t cw,
                                    uint32_t tid, uint8_t *staging_base, StagingBuffers &staging_buffers,
                                    const float (&acc)[kAccRegs]) {
    const uint32_t warp = tid / 32, lane = tid % 32;
    const uint32_t barrier_id = 1 + cw;  // named barrier of this warpgroup (0 is __syncthreads)

    const uint32_t col0 = warpgroup_col0(tile, cw), cols = warpgroup_cols(tile, cw);
    // The segment of these columns; with span_segments they may cross a
    // split, and then each 8-column chunk is routed by the masked stores.
    const uint32_t segment = p.span_segments ? output_segment(p, col0) : tile.segment;
    const bool crosses = p.span_segments && cols > 0 && output_segment(p, col0 + cols - 1) != segment;
    const OutputView &view = p.out[segment];
    const CUtensorMap *tmap_out = &p.tmap_out[segment];

    const bool scale = p.epilogue == kEpilogueRowScale;  // an inactive tile stages zeros either way

#pragma unroll
    for (uint32_t h = 0; h < kStageChunks; ++h) {
      const uint32_t first = h * kStageTokens;  // tokens [first, first + kStageTokens)
      if (first >= tile.rows) break;
      const uint32_t rows = min(tile.rows - first, kStageTokens);
      const int32_t row0 = int32_t(tile.row0 + first);

      // This chunk's buffer may still be read by an earlier TMA store: wait
      // as staging_buffers.h explains.
      const StagingBuffers::Chunk chunk = staging_buffers.next_chunk();
      uint8_t *staging = staging_base + chunk.buffer * kStagingBytes;
      if (tid == 0) {
        if (chunk.pending_allowed == 1) {
          ptx::tma_store_wait_group_read<1>();
        } else {
          ptx::tma_store_wait_group_read<0>();
        }
      }
      ptx::bar_sync(barrier_id, 128);

      // One staging loop per epilogue kind, chosen here and not inside the
      // unrolled steps: a runtime branch in each step leaves the skipped
      // path's code between the executed instructions, and this loop runs
      // at instruction-fetch speed (ncu on the LoRA expand: half the warp
      // stalls are "no instruction"). An inactive tile's zeros are a loop of
      // their own, so the others carry no select per output.
      if (!active) {
        stage_zeros(tid, staging);
      } else if (scale) {
        stage_chunk<true, false>(p, tile, h, warp, lane, staging, acc);
      } else {
        stage_chunk<false, false>(p, tile, h, warp, lane, staging, acc);
      }
      ptx::fence_proxy_async_shared_cta();
      ptx::bar_sync(barrier_id, 128);

      if (cols == 0) continue;
      if (rows == kStageTokens && cols == kFeaturesPerWarpgroup && !crosses) {  // whole: one TMA store
        if (tid == 0) {
          for (uint32_t b = 0; b < kBoxes; ++b)
            ptx::tma_store_2d(tmap_out, staging + b * kStageTokens * 128,
                              int32_t(col0 - view.col_offset + b * kColsPerBox), row0);
          ptx::tma_store_commit_group();
        }
        staging_buffers.stored_whole();
        continue;
      }
      masked_stores(p, tid, staging, rows, cols, col0, row0, crosses, view);
    }
  }

  // Masked 16-byte stores of a staged chunk at edges: rows past the group's
  // end and columns past the segment's end are skipped; with `crosses`, each
  // 8-column piece goes to its own segment.
  GGEMM_DEVICE static void masked_stores(const GroupedGemmParams &p, uint32_t tid, const uint8_t *staging,
                                         uint32_t rows, uint32_t cols, uint32_t col0, int32_t row0, bool crosses,
                                         const OutputView &view) {
    constexpr uint32_t kElemsPerChunk = 16 / kOutBytes;
    constexpr uint32_t kChunksPerRow = kFeaturesPerWarpgroup / kElemsPerChunk;
    for (uint32_t idx = tid; idx < kStageTokens * kChunksPerRow; idx += 128) {
      const uint32_t token = idx / kChunksPerRow, ch = idx % kChunksPerRow;
      if (token >= rows || ch * kElemsPerChunk >= cols) continue;
      const uint32_t box = ch / 8;
      uint4 v = *reinterpret_cast<const uint4 *>(staging + box * kStageTokens * 128 + swizzle128_offset(token, ch % 8));
      const uint32_t col = col0 + ch * kElemsPerChunk;  // splits are multiples of 8: a chunk never crosses one
      const OutputView &to = crosses ? p.out[output_segment(p, col)] : view;
      Out *dst = reinterpret_cast<Out *>(to.base) + size_t(row0 + token) * to.ld + (col - to.col_offset);
      *reinterpret_cast<uint4 *>(dst) = v;
    }
  }

  // The accumulate epilogue of an active tile (C += result, rounded once):
  // the producer has loaded the old C into this tile's ring slot; each
  // output adds its old value in fp32 (stage_chunk) and goes back out from
  // the same slot, by one TMA store when the tile is whole, else by masked
  // stores. Then the slot is given back (CRing says when).
  GGEMM_DEVICE static void epilogue_accumulate(const GroupedGemmParams &p, const GroupedTile &tile, uint32_t cw,
                                               uint32_t tid, uint8_t *staging_base, const CBarriers &c, CRing &ring,
                                               const float (&acc)[kAccRegs]) {
    const uint32_t warp = tid / 32, lane = tid % 32;
    const uint32_t barrier_id = 1 + cw;
    const uint32_t col0 = warpgroup_col0(tile, cw), cols = warpgroup_cols(tile, cw);
    const uint32_t rows = min(tile.rows, kStageTokens);  // tile_m <= 128: the whole tile
    const OutputView &view = p.out[tile.segment];
    const uint32_t slot = ring.count % p.staging_buffers;
    const uint32_t phase = (ring.count / p.staging_buffers) & 1;
    ++ring.count;
    uint8_t *staging = staging_base + slot * kStagingBytes;

    ptx::mbarrier_wait_parity(&c.full[slot], phase);
    stage_chunk<false, true>(p, tile, 0, warp, lane, staging, acc);
    // Generic writes (and reads) of the slot before the TMA store reads it,
    // or before the producer's next TMA load overwrites it.
    ptx::fence_proxy_async_shared_cta();
    ptx::bar_sync(barrier_id, 128);

    const bool whole = rows == kStageTokens && cols == kFeaturesPerWarpgroup;
    if (!whole) {
      masked_stores(p, tid, staging, rows, cols, col0, int32_t(tile.row0), false, view);
      ptx::fence_proxy_async_shared_cta();  // the masked stores' reads, before the next load
      ptx::bar_sync(barrier_id, 128);
    }
    if (tid == 0) {
      if (whole) {
        for (uint32_t b = 0; b < kBoxes; ++b)
          ptx::tma_store_2d(&p.tmap_out[tile.segment], staging + b * kStageTokens * 128,
                            int32_t(col0 - view.col_offset + b * kColsPerBox), int32_t(tile.row0));
        ptx::tma_store_commit_group();
        ptx::tma_store_wait_group_read<1>();  // every store but this one has read its slot
      } else {
        ptx::tma_store_wait_group_read<0>();
        ptx::mbarrier_arrive(&c.empty[slot]);
      }
      if (ring.pending) ptx::mbarrier_arrive(&c.empty[ring.pending - 1]);
      ring.pending = whole ? slot + 1 : 0;
    }
  }

  // An inactive tile's chunk: zeros in every byte of this warpgroup's
  // staging buffer (the swizzle does not matter for zeros).
  GGEMM_DEVICE static void stage_zeros(uint32_t tid, uint8_t *staging) {
    static_assert(kStagingBytes % (16 * 128) == 0, "whole 16-byte stores per thread");
#pragma unroll
    for (uint32_t i = 0; i < kStagingBytes / (16 * 128); ++i)
      *reinterpret_cast<uint4 *>(staging + (i * 128 + tid) * 16) = make_uint4(0, 0, 0, 0);
  }

  // Writes chunk h of an active tile's accumulators (this warpgroup's;
  // tokens [h * kStageTokens, (h + 1) * kStageTokens)) into the staging
  // buffer as the output type: alpha, then the routing weight (kScale) or
  // the old value already loaded into the buffer (kAccumulate).
  template <bool kScale, bool kAccumulate>
  GGEMM_DEVICE static void stage_chunk(const GroupedGemmParams &p, const GroupedTile &tile, uint32_t h, uint32_t warp,
                                       uint32_t lane, uint8_t *staging, const float (&acc)[kAccRegs]) {
    // The routing weight of token 8j + 2 * (lane % 4) + odd.
    auto row_scale = [&](int j, int odd) {
      const uint32_t token = 8 * j + 2 * (lane % 4) + odd;
      return token < tile.rows ? __ldg(&p.row_scale[tile.row0 + token]) : 0.f;
    };
    constexpr int kOctets = kStageTokens / 8;  // token octets per chunk
    if constexpr (kOutBytes == 2) {
      const uint32_t lane_addr = stmatrix_lane_addr(ptx::smem_addr(staging), warp, lane);
#pragma unroll
      for (int jj = 0; jj < kOctets; jj += 2) {
        const int j = int(h) * kOctets + jj;  // octet of the tile
        // Token octets j and j+1: v[0..3] from acc[4j..], v[4..7] from acc[4j+4..].
        float v[8];
#pragma unroll
        for (int x = 0; x < 8; ++x) v[x] = acc[4 * j + x] * p.alpha;
        if constexpr (kScale) {
          const float s[4] = {row_scale(j, 0), row_scale(j, 1), row_scale(j + 1, 0), row_scale(j + 1, 1)};
#pragma unroll
          for (int x = 0; x < 8; ++x) v[x] *= s[2 * (x / 4) + x % 2];
        }
        if constexpr (kAccumulate) {
          // ldmatrix.trans at stmatrix's addresses returns the old values in
          // fragment layout.
          uint32_t r[4];
          ptx::ldmatrix_x4_trans(lane_addr + jj * 1024, r[0], r[1], r[2], r[3]);
#pragma unroll
          for (int x = 0; x < 4; ++x) {
            const float2 old = OutTraits<Out>::unpack(r[x]);
            v[2 * x] += old.x;
            v[2 * x + 1] += old.y;
          }
        }
        ptx::stmatrix_x4_trans(lane_addr + jj * 1024, OutTraits<Out>::pack(v[0], v[1]),
                               OutTraits<Out>::pack(v[2], v[3]), OutTraits<Out>::pack(v[4], v[5]),
                               OutTraits<Out>::pack(v[6], v[7]));
      }
    } else {
#pragma unroll
      for (int jj = 0; jj < kOctets; ++jj) {
        const int j = int(h) * kOctets + jj;
        const float s[2] = {kScale ? row_scale(j, 0) : 1.f, kScale ? row_scale(j, 1) : 1.f};
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          float *slot = fp32_staging_slot(staging, warp, lane, jj, e);
          float v = acc[4 * j + e] * p.alpha * s[e % 2];
          if constexpr (kAccumulate) v += *slot;
          *slot = v;
        }
      }
    }
  }

  // The shared address this lane gives stmatrix/ldmatrix .x4.trans for token
  // octets j, j+1 at j = 0 (add 1024 bytes per octet): matrix q = lane / 8
  // holds features 8 * (q % 2) of this warp's 16 and tokens 8 * (q / 2) + row
  // (lane % 8); the row is the token, so its swizzle is fixed per lane.
  GGEMM_DEVICE static uint32_t stmatrix_lane_addr(uint32_t staging_addr, uint32_t warp, uint32_t lane) {
    const uint32_t q = lane / 8, i = lane % 8;
    return staging_addr + swizzle128_offset(8 * (q >> 1) + i, 2 * warp + (q & 1));
  }

  // Where fp32 fragment element acc[4j + e] is staged. token % 8 does not
  // depend on j, so the swizzle is fixed per (lane, e) and j only adds
  // 8 rows (1024 bytes): written out so the compiler keeps 4 bases, not 64
  // addresses.
  GGEMM_DEVICE static float *fp32_staging_slot(const uint8_t *staging, uint32_t warp, uint32_t lane, int j, int e) {
    const uint32_t feature = 16 * warp + lane / 4 + 8 * (e >> 1);
    const uint32_t token_lo = 2 * (lane % 4) + (e & 1);  // token = 8j + token_lo
    const uint32_t box = feature / kColsPerBox, col = feature % kColsPerBox;
    return reinterpret_cast<float *>(const_cast<uint8_t *>(staging) + box * kStageTokens * 128 +
                                     swizzle128_offset(token_lo, col / 4) + j * 1024) +
           col % 4;
  }
};

}  // namespace ggemm::sm90
