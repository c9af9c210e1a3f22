// The sm_100a persistent, warp-specialised grouped GEMM (docs/design.md,
// kernel architecture): its compile-time configuration and the dispatch of
// warp roles, which live beside it: ptx/blocks/tile_walker.h (the tile walker, both architectures'), producer.cuh
// (TMA producer), mma.cuh (MMA issuer), epilogue.cuh (tensor memory to outputs). Written for the B200 and compiled for
// sm_100a; NO PART OF IT HAS RUN ON BLACKWELL HARDWARE (none has been lent). What is checked instead: its SASS
// (tests/check_sass_sm100.py --table: MMA, tensor-memory alloc and load, commit barrier, no local memory; the gather4
// and SwiGLU instructions where compiled), its plans (tests/test_plan_sm100.cpp), its
// descriptor encoders (unit tests against the PTX ISA tables), and its tile walk (the scheduler the sm_90a kernel runs
// on the H200, simulated for whole launches on the CPU).
//
// One CTA per SM walks output tiles of tile_m tokens x 128 features (64 with
// narrow tiles for decode: 64-row weight boxes, the MMA's M still 128, the
// accumulator rows past the box never stored), with the
// same scheduler, routing views and epilogue semantics as the sm_90a kernel.
// A and B are swapped as the MMA sees them: the weights are tcgen05.mma's M
// side (128 rows, one tensor-memory lane each) and the tokens its N side.
//
//   warp 0     TMA producer: one thread loads weight and token tiles into a
//              ring of `stages` buffers (full/empty mbarrier pairs; full
//              completes by the TMA's transaction count). Gathering
//              (a_row_index), the whole warp: the token rows four at a time
//              by TMA gather4 (producer.cuh, run_gather).
//   warp 1     allocates tensor memory, and one thread issues tcgen05.mma
//              from shared-memory descriptors into one of two fp32
//              accumulators of tile_m columns; tcgen05.commit releases each
//              smem stage when its MMAs are done and marks the accumulator
//              full after a tile's last MMA.
//   warps 2-5  epilogue, one per 32-lane quarter of tensor memory: thread =
//              one weight row (output column); tcgen05.ld 8 token columns at
//              a time, scale / add / route (SwiGLU: gate and up lanes 8
//              apart meet by a shuffle), store to global memory directly;
//              then release the accumulator, so the MMAs of the next tile
//              run into the other buffer while this one drains.
//   warp 6     walks the tiles (its lanes together where a step crosses many groups, else lane 0
//              alone: GroupedGemmParams::walk_lanes) and lane 0 hands each to the roles above
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
#include "../blocks/kernel_shape.h"
#include "../blocks/l2_prefetch.h"
#include "../blocks/routing_check.h"
#include "../blocks/routing_prefetch.h"
#include "../blocks/tile_handoff.h"
#include "../instr/cluster.h"
#include "../instr/elect.h"
#include "../instr/fence.h"
#include "../instr/grid_dependency.h"
#include "../instr/mbarrier.h"
#include "../instr/sm100/tcgen05.h"
#include "../instr/sm100/umma_desc.h"
#include "../instr/tma.h"
#include "epilogue.cuh"
#include "mma.cuh"
#include "producer.cuh"
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

// What one kernel instantiation fixes at compile time, and what every role
// derives the same way.
template <typename ElemT, typename OutT, int TileM, WeightLayout Layout, int CtaGroup>
struct GroupedGemmSm100Config : GroupedKernelShape<ElemT, OutT, TileM, Layout> {
  static constexpr int kCtaGroup = CtaGroup;  // 1, or 2: a pair of CTAs shares each MMA

  static_assert(TileM % 16 == 0 && TileM >= 16 && TileM <= 256, "tile_m is the MMA's N: 16..256, step 16 at M 128");
  static_assert(CtaGroup == 1 || (CtaGroup == 2 && TileM >= 32),
                "cta_group 2 splits the tokens between the pair: 16 or more each");
  static constexpr uint32_t kPairTileN = kTileN * CtaGroup;              // the MMA's M (walk_tile_n: a tile's rows)
  static constexpr uint32_t kTokensPerCta = uint32_t(TileM) / CtaGroup;  // B rows each CTA loads
  static constexpr uint32_t kTmemColumns = tmem_columns(TileM);
  static_assert(kAccBuffers * TileM <= kTmemColumns && kTmemColumns <= 512, "both accumulators fit in tensor memory");
  static constexpr uint32_t kFeaturesPerBox = 64;  // MN-major weight boxes: 128 bytes of features
  static constexpr uint32_t kEpilogueThreads = 32 * kEpilogueWarps;
  // The MoE layer's parts (never run on Blackwell hardware): the SwiGLU
  // epilogue (16-bit outputs; its weights are K-major [E, 2I, K]) and gather
  // on load, both without a pair: the runtime plans cta_group 1 for them
  // (runtime/plan_sm100.cpp says why). Other kernels compile neither.
  static constexpr bool kSwiglu = sizeof(OutT) == 2 && Layout == WeightLayout::kKMajor && CtaGroup == 1;
  static constexpr bool kGather = CtaGroup == 1;
  static constexpr int kGatherQuadsPerLane = (TileM + 127) / 128;  // gather4s per lane and stage
  // The row-scale epilogue's routing weights: one register per 32 tokens
  // (epilogue.cuh, RowScalesSm100).
  static constexpr int kScaleWindows = (TileM + 31) / 32;
  // Who reads each handed-off tile (ptx/blocks/tile_handoff.h): the producer thread,
  // the MMA thread (only the pair's leader issues MMAs) and every epilogue
  // thread.
  GGEMM_DEVICE static uint32_t tile_receivers(uint32_t rank) { return 1 + (rank == 0 ? 1 : 0) + kEpilogueThreads; }

  // Shared-memory barriers, in SmemLayout's order.
  struct Barriers {
    uint64_t *full, *empty;          // [stages] each
    uint64_t *acc_full, *acc_empty;  // [kAccBuffers] each
  };

  // The instruction descriptor of every MMA of this kernel (PTX ISA
  // "Instruction descriptor", kind::f16): fp32 accumulators, M 128 x cta_group, N tile_m;
  // the weights are A (K- or MN-major as stored), the tokens B (K-major).
  GGEMM_DEVICE static uint32_t instr_desc() {
    return UmmaInstrDescF16{UmmaDFormat::kF32,
                            UmmaFormatOf<ElemT>::value,
                            UmmaFormatOf<ElemT>::value,
                            false,
                            false,
                            Layout == WeightLayout::kKMajor ? UmmaMajor::kK : UmmaMajor::kMN,
                            UmmaMajor::kK,
                            kPairTileN,
                            uint32_t(TileM)}
        .encode();
  }

  // Weight rows of each tile the walker hands out (smem_layout.h).
  GGEMM_DEVICE static uint32_t walk_tile_n(const GroupedGemmParams &p) {
    return sm100::walk_tile_n(Layout == WeightLayout::kKMajor, p.weights_box_rows, CtaGroup);
  }

  // The walk (TileWalker, ptx/blocks/tile_walker.h): a pair walks its
  // tiles together, and each CTA is handed the whole pair tile (the pair's
  // MMA multiplies it; each CTA loads its own rows of it).
  static constexpr int kWalkClusterSize = CtaGroup;
  GGEMM_DEVICE static GroupedTile walk_share(const GroupedTile &tile) { return tile; }

  // The tile handoff's shared memory (kStaticSmemBytes, smem_layout.h).
  GGEMM_DEVICE static uint8_t *handoff_region() {
    __shared__ alignas(16) uint8_t region[kTileHandoffBytes];
    return region;
  }

  // The next pair tile from the walker, its slot freed at once; false at the
  // end.
  GGEMM_DEVICE static bool next_tile(TileHandoff &handoff, GroupedTile *tile) {
    uint32_t index;  // for traces; sm_100a has none
    return handoff.take(handoff_region(), tile, &index);
  }
};

template <typename Elem, typename Out, int TileM, WeightLayout Layout, int CtaGroup>
struct GroupedGemmSm100 {
  using Cfg = GroupedGemmSm100Config<Elem, Out, TileM, Layout, CtaGroup>;

  GGEMM_DEVICE static void run(const GroupedGemmParams &p) {
    extern __shared__ uint8_t smem_raw[];
    uint8_t *smem = reinterpret_cast<uint8_t *>((reinterpret_cast<uintptr_t>(smem_raw) + kSmemAlign - 1) &
                                                ~uintptr_t(kSmemAlign - 1));
    const SmemLayout layout = make_smem_layout(TileM, p.swizzle_bytes, p.stages, CtaGroup);
    uint64_t *bars = reinterpret_cast<uint64_t *>(smem + layout.barrier_offset());
    const typename Cfg::Barriers b{bars, bars + p.stages, bars + 2 * p.stages, bars + 2 * p.stages + kAccBuffers};
    uint32_t *tmem_slot = reinterpret_cast<uint32_t *>(smem + layout.tmem_slot_offset());
    const uint32_t warp = threadIdx.x / 32;
    const uint32_t rank = CtaGroup == 2 ? ptx::cluster_ctarank() : 0;

    if (threadIdx.x == 0) {
      for (uint32_t s = 0; s < p.stages; ++s) {
        ptx::mbarrier_init(&b.full[s], 1);   // the producer's expect_tx
        ptx::mbarrier_init(&b.empty[s], 1);  // the MMA thread's tcgen05.commit
      }
      for (uint32_t i = 0; i < kAccBuffers; ++i) {
        ptx::mbarrier_init(&b.acc_full[i], 1);                                  // tcgen05.commit after a tile's MMAs
        ptx::mbarrier_init(&b.acc_empty[i], Cfg::kEpilogueThreads * CtaGroup);  // every epilogue thread of the pair
      }
      TileHandoff::init(Cfg::handoff_region(), Cfg::tile_receivers(rank));
      ptx::fence_mbarrier_init();
    }
    if (threadIdx.x == 32) {  // kernel parameters: no other kernel writes them
      ptx::prefetch_tensormap(&p.tmap_tokens);
      ptx::prefetch_tensormap(&p.tmap_weights);
    }
    // From here on the stream's earlier kernels are done (as on sm_90a,
    // ptx/instr/grid_dependency.h).
    ptx::wait_prior_grids();
    // Small operands on their way into L2, as on sm_90a (the walker's warp
    // has nothing else to do before the roles split), the routing into L1.
    if (threadIdx.x == kWalkerWarp * 32) ptx::prefetch_small_operands(p);
    if (warp == 1) ptx::prefetch_routing(p, threadIdx.x % 32);
    if (warp == kMmaWarp) {  // with cta_group 2, this warp in both CTAs, together
      tcgen05_alloc<CtaGroup>(tmem_slot, Cfg::kTmemColumns);
      tcgen05_relinquish_alloc_permit<CtaGroup>();
    }
    // The next kernel may be placed only once this CTA holds its tensor
    // memory: placed earlier on this SM, a kernel that allocates tensor
    // memory before its own wait could take the columns this one needs and
    // then wait for it to finish.
    ptx::launch_dependent_grids();
    // Checked mode: one warp of CTA 0 looks at the routing arrays before the
    // roles split (as on sm_90a).
    // Gathering, one warp of every CTA checks its share of the source indices
    // (as on sm_90a).
    if (p.device_status && blockIdx.x == 0 && warp == kFirstEpilogueWarp) check_routing_warp(p);
    if (p.device_status && ProducerSm100<Cfg>::gathers(p) && warp == kFirstEpilogueWarp + 1) check_gather_warp(p);
    // The barriers' inits (and, for a pair, the peer's) are visible before
    // any TMA, commit or remote arrival can reach them.
    tcgen05_fence_before_thread_sync();
    sync_cta_or_pair();
    tcgen05_fence_after_thread_sync();
    const uint32_t tmem_base = *tmem_slot;

    if (warp == kProducerWarp) {
      run_producer(p, smem, layout, b, rank);
    } else if (warp == kMmaWarp) {
      if (rank == 0 && ptx::elect_one_sync()) MmaIssuerSm100<Cfg>::run(p, smem, layout, b, tmem_base);
    } else if (warp == kWalkerWarp) {
      TileWalker<Cfg>::run(p, Cfg::handoff_region());
    } else {
      EpilogueSm100<Cfg>::run(p, b, tmem_base, warp % 4, rank);
    }
    __syncwarp();

    // Every accumulator has been drained (each epilogue waited for each
    // tile's commit, and the leader's MMA thread for both epilogues), so no
    // MMA or tcgen05.ld still uses tensor memory in either CTA.
    tcgen05_fence_before_thread_sync();
    sync_cta_or_pair();
    if (warp == kMmaWarp) {
      tcgen05_fence_after_thread_sync();
      tcgen05_dealloc<CtaGroup>(tmem_base, Cfg::kTmemColumns);
    }
  }

  // Warp 0: the producer's one thread, or the whole warp when gathering.
  GGEMM_DEVICE static void run_producer(const GroupedGemmParams &p, uint8_t *smem, const SmemLayout &layout,
                                        const typename Cfg::Barriers &b, uint32_t rank) {
    if constexpr (Cfg::kGather) {
      if (ProducerSm100<Cfg>::gathers(p)) {
        ProducerSm100<Cfg>::run_gather(p, smem, layout, b);
        return;
      }
    } else if (p.a_row_index) {
      // A pair kernel is never planned for a gather (runtime/plan_sm100.cpp);
      // launched with one anyway, it fails loudly rather than reading the
      // rows in order. (A bare trap: see EpilogueSm100::run.)
      asm volatile("trap;");
    }
    if (ptx::elect_one_sync()) ProducerSm100<Cfg>::run(p, smem, layout, b, rank);
  }

  // All threads of the CTA, or of both CTAs of a pair.
  GGEMM_DEVICE static void sync_cta_or_pair() {
    if constexpr (CtaGroup == 2) {
      ptx::cluster_sync();
    } else {
      __syncthreads();
    }
  }
};

}  // namespace ggemm::sm100
