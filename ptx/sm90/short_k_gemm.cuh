// The sm_90a short-K grouped GEMM: for K up to 128 (the LoRA expand, whose K
// is the adapter rank), when the call has few tiles for the GPU (decode).
//
// Such a tile is one multiply deep: K fits in shared memory at once. The
// persistent kernel (grouped_gemm.cuh) still pays its pipeline for it, a
// chain of synchronisations per tile (handoff, stage barriers, staging
// barrier, stores) after a prologue of barrier inits, which a one-tile CTA
// cannot amortise. Here there is no pipeline and (unsplit) no mbarrier:
// many small CTAs per SM, each walking the same tiles as the persistent
// kernel (GroupedTileScheduler, from blockIdx.x by gridDim.x),
// from a copy of the routing arrays that every CTA loads into shared memory
// at entry (one memory trip), and per tile:
//   1. cp.async copies of the tile's weight rows and token rows (and, in
//      accumulate mode, its old outputs) into shared memory, all in flight
//      at once, zero-filled past the group's rows, the segment's columns and
//      K;
//   2. four warps, each 32 weight rows by all the tile's tokens:
//      ldmatrix + mma.sync m16n8k16 (weights on the MMA's M, tokens on its
//      n8: a decode group of a few rows fills an 8-token tile);
//   3. alpha, the routing weight or the old value, one rounding, into a
//      staging tile; then 16-byte stores of whole rows, masked at the group's
//      and segment's edges and routed to each segment's output view.
// Latency hides behind the SM's other CTAs instead of a pipeline. Unlike
// the persistent kernel it prefetches nothing at entry: a prefetch of the
// routing arrays costs more than it hides here and the operands' L2
// prefetch gains nothing; the routing arrays are loaded outright instead
// (stage_routing_table). K-major weights only; K a multiple of 8 (the C ABI's
// rule).
//
// Split (KSplit = kShortKSplit): decode calls whose K is long (the LoRA shrink's
// hidden size) have few tiles, and the persistent kernel streams each
// tile's whole K through one SM (the decode shrink: 8 tiles of K 4096 on 8
// SMs). Here a cluster of kShortKSplit CTAs takes each tile, every CTA one
// slice of K (at most kShortKMaxSlice, in shared memory at once) in one
// memory trip of cp.async.bulk rows; all but rank 0 send their fp32
// accumulators into rank 0's shared memory (one cp.async.bulk each,
// counted on an mbarrier there), and rank 0 adds them in and runs the
// epilogue. No cluster-wide barrier per tile: barrier.cluster with release
// costs a MEMBAR.ALL.GPU, and two of them plus a pull over distributed
// shared memory would be a large share of the kernel. Clusters of 16
// (non-portable) would halve each CTA's slice, but the H200 holds only 7 of
// them at once at this shared memory, so a decode call's 8 tiles would take
// two rounds.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "params.h"
#include "../blocks/out_convert.h"
#include "../blocks/routing_check.h"
#include "../blocks/tile_scheduler.h"
#include "../instr/cluster.h"
#include "../instr/cp_async.h"
#include "../instr/fence.h"
#include "../instr/grid_dependency.h"
#include "../instr/ldmatrix.h"
#include "../instr/mbarrier.h"
#include "../instr/mma_sync.h"
#include "../instr/tma.h"
#include "short_k_layout.h"

namespace ggemm::sm90 {

// A short-K (or decode GEMV, decode_gemv.cuh) CTA's walk problem, its
// routing read from shared memory (the layout's tables; kShortKThreads
// threads a CTA), in row blocks of tile_m rows. Every thread loads its share
// of a_offsets and expert_ids beside the usage word, all in flight at once:
// one memory trip, where walking global memory takes three dependent ones
// (usage, then offsets, then ids). A table of the tiles themselves (two
// CTA-wide scans at entry, then a binary search instead of the walk) gains
// nothing over this and costs its scans when there are no groups. A call
// with more groups than the table holds walks global memory. `row_blocks`: the
// call's row blocks, at most: from the table, each thread its groups'
// (group_row_blocks_bound; each group's end loaded in the same trip),
// summed per warp beside the table, so the one barrier publishes them
// too; without the table, from M and the group count.
GGEMM_DEVICE GroupedProblem stage_routing_table(const Sm90GroupedParams &p, uint8_t *smem, const ShortKLayout &layout,
                                              uint32_t tile_m, uint64_t *row_blocks) {
  constexpr uint32_t kOffsetLoads = ceil_div(kShortKTableGroups + 1, kShortKThreads);
  constexpr uint32_t kIdLoads = ceil_div(kShortKTableGroups, kShortKThreads);
  const uint32_t n = p.num_groups;
  const bool tabled = n <= kShortKTableGroups;
  uint32_t offsets[kOffsetLoads];
  uint32_t ends[kIdLoads];  // a_offsets[i + 1] for group i (the offsets' next element)
  int32_t ids[kIdLoads];
#pragma unroll
  for (uint32_t j = 0; j < kOffsetLoads; ++j) {
    const uint32_t i = threadIdx.x + j * kShortKThreads;
    offsets[j] = tabled && i <= n && i != 0 ? p.a_offsets[i] : 0u;  // [0] is never read: group 0 starts at 0
  }
#pragma unroll
  for (uint32_t j = 0; j < kIdLoads; ++j) {
    const uint32_t i = threadIdx.x + j * kShortKThreads;
    ids[j] = tabled && i < n ? p.expert_ids[i] : -1;
    ends[j] = tabled && i < n ? p.a_offsets[i + 1] : 0u;
  }
  GroupedProblem problem = grouped_problem(p);  // the usage word, in the same trip
  *row_blocks = uint64_t(ceil_div(p.m, tile_m)) + p.num_groups;  // each group's last block may be partial
  if (!tabled) return problem;
  uint32_t *offsets_table = reinterpret_cast<uint32_t *>(smem + layout.offsets_table_offset());
  int32_t *ids_table = reinterpret_cast<int32_t *>(smem + layout.ids_table_offset());
#pragma unroll
  for (uint32_t j = 0; j < kOffsetLoads; ++j) {
    const uint32_t i = threadIdx.x + j * kShortKThreads;
    if (i <= n) offsets_table[i] = offsets[j];
  }
#pragma unroll
  for (uint32_t j = 0; j < kIdLoads; ++j) {
    const uint32_t i = threadIdx.x + j * kShortKThreads;
    if (i < n) ids_table[i] = ids[j];
  }
  uint32_t mine = 0;
#pragma unroll
  for (uint32_t j = 0; j < kIdLoads; ++j) {
    const uint32_t i = threadIdx.x + j * kShortKThreads;
    if (i < problem.num_active) mine += group_row_blocks_bound(offsets[j], ends[j], p.m, tile_m);
  }
  const bool unbounded = __any_sync(0xFFFFFFFFu, mine > kShortKThreadRowBlocks);
  const uint32_t warp_sum = __reduce_add_sync(0xFFFFFFFFu, unbounded ? 0u : mine);
  uint32_t *warp_row_blocks = reinterpret_cast<uint32_t *>(smem + layout.warp_row_blocks_offset());
  if (threadIdx.x % 32 == 0) warp_row_blocks[threadIdx.x / 32] = unbounded ? kShortKRowBlocksUnbounded : warp_sum;
  __syncthreads();
  uint64_t sum = 0;
  bool any_unbounded = false;
#pragma unroll
  for (uint32_t w = 0; w < kShortKWarps; ++w) {
    any_unbounded |= warp_row_blocks[w] == kShortKRowBlocksUnbounded;
    sum += warp_row_blocks[w];
  }
  if (!any_unbounded) *row_blocks = sum;
  problem.a_offsets = offsets_table;
  problem.expert_ids = ids_table;
  return problem;
}

// KSplit 1: each CTA a whole tile (K <= kShortKMaxK). KSplit kShortKSplit:
// a cluster of that many CTAs a tile, each one slice of K (short_k_slice),
// rank 0 summing the partials and storing (K <= kShortKSplitMaxK).
template <typename Elem, typename Out, int TileM, int KSplit = 1>
struct ShortKGroupedGemmSm90 {
  static_assert(TileM % 8 == 0 && TileM >= int(kShortKMinTileM) && TileM <= int(kShortKMaxTileM) &&
                    (TileM == 8 || TileM % 16 == 0),
                "token tiles of 8, or multiples of 16 (ldmatrix x4 loads two 8-token blocks)");
  static_assert(KSplit == 1 || (KSplit == int(kShortKSplit) && TileM <= int(kShortKSplitMaxTileM)),
                "split kernels: kShortKSplit CTAs a tile, tiles of at most kShortKSplitMaxTileM tokens");
  static constexpr int kTokenBlocks = TileM / 8;                        // the MMA's n8 blocks
  static constexpr int kFeatureBlocks = int(kTileN / kShortKWarps / 16);  // m16 blocks of one warp (2)
  static constexpr uint32_t kOutBytes = sizeof(Out);
  static constexpr uint32_t kChunkElems = 16 / kOutBytes;  // outputs per 16-byte chunk
  static constexpr uint32_t kChunksPerRow = kTileN / kChunkElems;

  GGEMM_DEVICE static void run(const Sm90GroupedParams &p) {
    extern __shared__ __align__(16) uint8_t smem[];
    const ShortKLayout layout = make_short_k_layout(TileM, p.k, kOutBytes, KSplit);
    if constexpr (KSplit > 1) {
      // The split's mbarriers, published to the cluster before any peer
      // pushes a partial or frees a slot (the wait is after the routing).
      if (threadIdx.x == 0) {
        ptx::mbarrier_init(split_barrier(smem, layout, ShortKLayout::kPartialsLanded), 1);
        ptx::mbarrier_init(split_barrier(smem, layout, ShortKLayout::kPartialTaken), 1);
        ptx::mbarrier_init(split_barrier(smem, layout, ShortKLayout::kOperandsLanded), 1);
        ptx::fence_mbarrier_init();
      }
      ptx::cluster_arrive_relaxed();
    }
    ptx::launch_dependent_grids();
    ptx::wait_prior_grids();  // the stream's earlier kernels are done (ptx/instr/grid_dependency.h)
    // Checked mode: one warp of CTA 0 looks at the routing arrays first.
    if (p.device_status && blockIdx.x == 0 && threadIdx.x < 32) check_routing_warp(p);
    // Every thread walks the tiles (from the routing table in shared
    // memory), so no thread waits on another for its tile.
    // Split, the CTAs of a cluster (consecutive blocks) take the same tiles.
    uint64_t row_blocks;  // the call's row blocks, at most (exactly, for well-formed offsets)
    GroupedTileScheduler sched(stage_routing_table(p, smem, layout, TileM, &row_blocks), TileM, kTileN);
    const uint32_t rank = KSplit > 1 ? ptx::cluster_ctarank() : 0;
    if constexpr (KSplit > 1) ptx::cluster_wait();
    GroupedTile tile;
    uint32_t rounds = 0;  // split: the active tiles reduced so far (the mbarriers' phases)
    // A CTA whose next index is past the call's tiles stops without
    // walking the groups to find out (the walk costs hundreds of cycles a
    // group, more behind the split kernel's stores).
    const uint64_t tiles = row_blocks * sched.col_blocks();
    for (uint64_t t = blockIdx.x / KSplit; t < tiles && sched.next(t, &tile); t += gridDim.x / KSplit) {
      __syncthreads();  // the previous tile's staged outputs (and received partials) are all read out
      multiply_tile(p, tile, smem, layout, rank, rounds);
    }
  }

  GGEMM_DEVICE static uint64_t *split_barrier(uint8_t *smem, const ShortKLayout &layout, uint32_t which) {
    return reinterpret_cast<uint64_t *>(smem + layout.barriers_offset()) + which;
  }

  // The segment (output view) of tile column `col`: the tile's, or with
  // span_segments each 8-column chunk's own (splits are multiples of 8).
  GGEMM_DEVICE static uint32_t segment_of(const Sm90GroupedParams &p, const GroupedTile &tile, uint32_t col) {
    return p.span_segments ? output_segment(p, tile.col0 + col) : tile.segment;
  }

  // Where output (tile row `row`, tile column `col`) lives.
  GGEMM_DEVICE static Out *output_at(const Sm90GroupedParams &p, const GroupedTile &tile, uint32_t row,
                                     uint32_t col) {
    const OutputView &view = p.out[segment_of(p, tile, col)];
    return reinterpret_cast<Out *>(view.base) + size_t(tile.row0 + row) * view.ld + (tile.col0 + col - view.col_offset);
  }

  // cp.async of `Rows` operand rows of K elements from `src` (row stride K)
  // into shared memory at `dst` (row stride layout.row_bytes); rows past
  // `valid_rows` and the chunks past K up to the MMA's 16 are zero-filled.
  template <uint32_t Rows>
  GGEMM_DEVICE static void copy_operand_rows(const Sm90GroupedParams &p, const Elem *src, uint32_t valid_rows,
                                             uint32_t dst, const ShortKLayout &layout) {
    const uint32_t row_chunks = layout.row_bytes / 16 - 1;  // K rounded up to 16, in 16-byte chunks
    const uint32_t k_chunks = p.k / 8;                      // the chunks that hold K (the rest: zeros)
    for (uint32_t i = threadIdx.x; i < Rows * row_chunks; i += kShortKThreads) {
      const uint32_t row = i / row_chunks, c = i % row_chunks;
      const bool valid = row < valid_rows && c < k_chunks;
      ptx::cp_async_16(dst + row * layout.row_bytes + 16 * c, valid ? src + size_t(row) * p.k + 8 * c : src, valid);
    }
  }

  // Split: one cp.async.bulk per valid operand row (the slice's k_valid
  // elements from `src`, row stride K), thread `row` issuing row `row`, each
  // completing on `landed`; a slice ending on half an MMA step (k_valid % 16
  // = 8) gets its last 16 bytes zeroed here. Rows past valid_rows are left as
  // they are: each feeds only its own output row (weights) or column
  // (tokens), never stored (the LoRA shrink's tile has 48 of 128).
  // (Per-thread 16-byte cp.asyncs are much slower for slices of tens of
  // KB.)
  GGEMM_DEVICE static void bulk_copy_rows(const Sm90GroupedParams &p, const Elem *src, uint32_t valid_rows,
                                          uint32_t k_valid, uint8_t *dst, const ShortKLayout &layout,
                                          uint64_t *landed) {
    for (uint32_t row = threadIdx.x; row < valid_rows; row += kShortKThreads) {
      uint8_t *dst_row = dst + row * layout.row_bytes;
      if (k_valid > 0) ptx::bulk_copy_g2s(dst_row, src + size_t(row) * p.k, k_valid * uint32_t(sizeof(Elem)), landed);
      if (k_valid % 16 != 0) *reinterpret_cast<uint4 *>(dst_row + k_valid * sizeof(Elem)) = make_uint4(0, 0, 0, 0);
    }
  }

  // Split, round `round` (the CTA's active tiles before this one): every
  // CTA but rank 0 writes its accumulators into its own slot (the one it
  // fills in rank 0) and sends the slot to rank 0 in one cp.async.bulk,
  // completing partial_bytes on rank 0's kPartialsLanded; rank 0 expects
  // the bytes, waits, adds the slots into its own accumulators and then
  // arrives on every other rank's kPartialTaken, which they wait on before
  // they reuse the slot or exit (the bulk copy reads it until it lands).
  // One bulk copy, not per-thread st.async: thousands of 16-byte
  // completions on one mbarrier land slowly, and cluster barriers with
  // release plus a pull cost more still. Returns whether this CTA holds the
  // sum.
  GGEMM_DEVICE static bool reduce_partials(float (&acc)[kFeatureBlocks][kTokenBlocks][4], uint8_t *smem,
                                           const ShortKLayout &layout, uint32_t rank, uint32_t round) {
    constexpr int kVectors = kFeatureBlocks * kTokenBlocks;  // float4s a thread
    const uint32_t my_vectors = threadIdx.x * kVectors;
    if (rank != 0) {
      uint8_t *slot = smem + layout.slot_offset(rank);
      float4 *mine = reinterpret_cast<float4 *>(slot) + my_vectors;
#pragma unroll
      for (int fb = 0; fb < kFeatureBlocks; ++fb)
#pragma unroll
        for (int tb = 0; tb < kTokenBlocks; ++tb)
          mine[fb * kTokenBlocks + tb] = make_float4(acc[fb][tb][0], acc[fb][tb][1], acc[fb][tb][2], acc[fb][tb][3]);
      ptx::fence_proxy_async_shared_cta();  // the bulk copy (async proxy) reads what these stores wrote
      __syncthreads();
      if (threadIdx.x == 0) {
        ptx::bulk_copy_s2cluster(ptx::map_shared_to_rank(slot, 0), slot, layout.partial_bytes,
                                 ptx::map_shared_to_rank(split_barrier(smem, layout, ShortKLayout::kPartialsLanded), 0));
      }
      ptx::mbarrier_wait_parity(split_barrier(smem, layout, ShortKLayout::kPartialTaken), round & 1);
      return false;
    }
    uint64_t *landed = split_barrier(smem, layout, ShortKLayout::kPartialsLanded);
    if (threadIdx.x == 0) ptx::mbarrier_arrive_expect_tx(landed, (KSplit - 1) * layout.partial_bytes);
    ptx::mbarrier_wait_parity(landed, round & 1);
#pragma unroll
    for (uint32_t r = 1; r < uint32_t(KSplit); ++r) {
      const float4 *slot = reinterpret_cast<const float4 *>(smem + layout.slot_offset(r)) + my_vectors;
#pragma unroll
      for (int fb = 0; fb < kFeatureBlocks; ++fb)
#pragma unroll
        for (int tb = 0; tb < kTokenBlocks; ++tb) {
          const float4 v = slot[fb * kTokenBlocks + tb];
          acc[fb][tb][0] += v.x, acc[fb][tb][1] += v.y, acc[fb][tb][2] += v.z, acc[fb][tb][3] += v.w;
        }
    }
    __syncthreads();  // every slot is read: the others may refill theirs, or exit
    if (threadIdx.x >= 1 && threadIdx.x < uint32_t(KSplit))
      ptx::mbarrier_arrive_remote(
          ptx::map_shared_to_rank(split_barrier(smem, layout, ShortKLayout::kPartialTaken), threadIdx.x));
    return true;
  }

  // One K step of 16: this warp's 32 weight rows (ldmatrix x4 a 16-row
  // block) by the tile's tokens, into `acc`.
  GGEMM_DEVICE static void mma_k_step(uint32_t a_addr, uint32_t b_addr, uint32_t row_bytes, uint32_t ks,
                                      float (&acc)[kFeatureBlocks][kTokenBlocks][4]) {
    uint32_t a[kFeatureBlocks][4];
#pragma unroll
    for (int fb = 0; fb < kFeatureBlocks; ++fb)
      ptx::ldmatrix_x4(a_addr + fb * 16 * row_bytes + ks * 32, a[fb][0], a[fb][1], a[fb][2], a[fb][3]);
    uint32_t b[kTokenBlocks][2];
    if constexpr (kTokenBlocks == 1) {
      ptx::ldmatrix_x2(b_addr + ks * 32, b[0][0], b[0][1]);
    } else {
#pragma unroll
      for (int tb = 0; tb < kTokenBlocks; tb += 2)
        ptx::ldmatrix_x4(b_addr + tb * 8 * row_bytes + ks * 32, b[tb][0], b[tb][1], b[tb + 1][0], b[tb + 1][1]);
    }
#pragma unroll
    for (int fb = 0; fb < kFeatureBlocks; ++fb)
#pragma unroll
      for (int tb = 0; tb < kTokenBlocks; ++tb) ptx::mma_m16n8k16<Elem>(acc[fb][tb], a[fb], b[tb][0], b[tb][1]);
  }

  GGEMM_DEVICE static void multiply_tile(const Sm90GroupedParams &p, const GroupedTile &tile, uint8_t *smem,
                                         const ShortKLayout &layout, uint32_t rank, uint32_t &rounds) {
    const bool active = tile.expert >= 0;
    const bool accumulate = p.epilogue == kEpilogueAccumulate;
    if (!active && accumulate) return;  // C += 0 (the whole CTA, and cluster, takes this branch)
    if (KSplit > 1 && !active && rank != 0) return;  // rank 0 stores the zeros
    const uint32_t tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const uint32_t smem_base = uint32_t(__cvta_generic_to_shared(smem));
    uint8_t *staging = smem + layout.staging_offset();
    // This CTA's slice of K: [k0, k0 + slice), of which k_valid lie below K.
    const uint32_t k0 = KSplit == 1 ? 0u : short_k_slice_start(p.k, KSplit, rank);
    const uint32_t k_valid = KSplit == 1 ? p.k : short_k_slice_valid(p.k, KSplit, rank);

    // 1. Every copy of the tile in flight at once.
    if (active) {
      const Elem *weight_rows =
          static_cast<const Elem *>(p.weights) + (size_t(tile.expert) * p.n + tile.col0) * p.k + k0;
      // LoRA expand's planes: segment s reads activation rows m + s * M.
      const size_t token_row0 = size_t(tile.row0) + (p.a_planes ? size_t(tile.segment) * p.m : 0);
      const Elem *token_rows = static_cast<const Elem *>(p.tokens) + token_row0 * p.k + k0;
      if constexpr (KSplit == 1) {
        copy_operand_rows<kTileN>(p, weight_rows, tile.cols, smem_base + layout.weights_offset(), layout);
        copy_operand_rows<TileM>(p, token_rows, tile.rows, smem_base + layout.tokens_offset(), layout);
      } else {
        uint64_t *landed = split_barrier(smem, layout, ShortKLayout::kOperandsLanded);
        if (tid == 0) ptx::mbarrier_arrive_expect_tx(landed, (tile.cols + tile.rows) * k_valid * uint32_t(sizeof(Elem)));
        bulk_copy_rows(p, weight_rows, tile.cols, k_valid, smem + layout.weights_offset(), layout, landed);
        bulk_copy_rows(p, token_rows, tile.rows, k_valid, smem + layout.tokens_offset(), layout, landed);
      }
    }
    if (accumulate && (KSplit == 1 || rank == 0)) {
      for (uint32_t i = tid; i < TileM * kChunksPerRow; i += kShortKThreads) {
        const uint32_t row = i / kChunksPerRow, col = i % kChunksPerRow * kChunkElems;
        const bool valid = row < tile.rows && col < tile.cols;
        const void *src = valid ? static_cast<const void *>(output_at(p, tile, row, col)) : p.out[0].base;
        ptx::cp_async_16(smem_base + layout.staging_offset() + row * layout.staging_row_bytes + col * kOutBytes, src,
                         valid);
      }
    }
    ptx::cp_async_wait_all();
    if constexpr (KSplit > 1) {
      if (active) ptx::mbarrier_wait_parity(split_barrier(smem, layout, ShortKLayout::kOperandsLanded), rounds & 1);
    }
    __syncthreads();

    // 2. This warp's 32 weight rows by the tile's tokens, K in steps of 16.
    // A warp whose rows all lie past the tile's columns has nothing to
    // store and skips the loop: its ldmatrix traffic is shared memory
    // bandwidth the others need (the LoRA shrink's tile has 48 rows, so
    // warps 2 and 3 are idle; the split slice's 32 steps read ~5 KB a step
    // over the four warps, ~1300 of its ~1720 MMA cycles at 128 B a cycle).
    float acc[kFeatureBlocks][kTokenBlocks][4] = {};
    if (active && warp * 32 < tile.cols) {
      // ldmatrix lane addresses. Weights (A, x4): rows lane % 16 of the
      // block, K half lane / 16. Tokens (B): rows (lane / 16) * 8 + lane % 8,
      // K half (lane / 8) % 2 — matrices (tokens 0-7, k 0-7), (0-7, k 8-15),
      // (8-15, k 0-7), (8-15, k 8-15).
      const uint32_t a_addr =
          smem_base + layout.weights_offset() + (warp * 32 + lane % 16) * layout.row_bytes + (lane / 16) * 16;
      const uint32_t b_addr =
          smem_base + layout.tokens_offset() + ((lane / 16) * 8 + lane % 8) * layout.row_bytes + (lane / 8 % 2) * 16;
      const uint32_t k_steps = (k_valid + 15) / 16;
      // One chain of dependent MMAs: two chains (even and odd steps) gain
      // no more than noise.
      for (uint32_t ks = 0; ks < k_steps; ++ks) mma_k_step(a_addr, b_addr, layout.row_bytes, ks, acc);
    }

    if constexpr (KSplit > 1) {
      if (active && !reduce_partials(acc, smem, layout, rank, rounds++)) return;  // rank 0 stores the tile
    }

    // 3. Staged as the output type: acc[fb][tb][e] is weight row
    // 32 warp + 16 fb + lane / 4 (+ 8 for e >= 2) and token 8 tb + 2 (lane % 4)
    // + e % 2. Zeros for an inactive tile (store and row-scale epilogues).
    const bool scale = p.epilogue == kEpilogueRowScale && active;
#pragma unroll
    for (int tb = 0; tb < kTokenBlocks; ++tb) {
#pragma unroll
      for (int odd = 0; odd < 2; ++odd) {
        const uint32_t token = 8 * tb + 2 * (lane % 4) + odd;
        const float s = scale ? (token < tile.rows ? __ldg(&p.row_scale[tile.row0 + token]) : 0.f) : 1.f;
        Out *row = reinterpret_cast<Out *>(staging + token * layout.staging_row_bytes);
#pragma unroll
        for (int fb = 0; fb < kFeatureBlocks; ++fb) {
#pragma unroll
          for (int hi = 0; hi < 2; ++hi) {
            const uint32_t feature = warp * 32 + fb * 16 + lane / 4 + 8 * hi;
            float v = active ? acc[fb][tb][2 * hi + odd] * p.alpha * s : 0.f;
            if (accumulate) v += OutConvert<Out>::to(row[feature]);
            row[feature] = OutConvert<Out>::from(v);
          }
        }
      }
    }
    __syncthreads();

    // 4. Whole 16-byte chunks of rows out, inside the group and segment.
    for (uint32_t i = tid; i < TileM * kChunksPerRow; i += kShortKThreads) {
      const uint32_t row = i / kChunksPerRow, col = i % kChunksPerRow * kChunkElems;
      if (row >= tile.rows || col >= tile.cols) continue;
      *reinterpret_cast<uint4 *>(output_at(p, tile, row, col)) =
          *reinterpret_cast<const uint4 *>(staging + row * layout.staging_row_bytes + col * kOutBytes);
    }
  }
};

}  // namespace ggemm::sm90
