// The sm_90a short-K kernel's constants and shared memory, computed alike by
// the runtime (launch size, occupancy) and the kernel (ptx/sm90/short_k_gemm.cuh).
#pragma once
#include <cstdint>

#include "../instr/arch.h"
#include "smem_layout.h"  // kTileN

namespace ggemm::sm90 {

// Four warps; each multiplies 32 of the tile's kTileN weight rows by all its tokens.
constexpr uint32_t kShortKThreads = 128;
constexpr uint32_t kShortKWarps = kShortKThreads / 32;
// CTAs an SM holds at least (the kernels' launch bounds: registers for it);
// more where shared memory allows are not counted on.
constexpr uint32_t kShortKMinBlocksPerSm = 4;
// The longest K the kernel takes: the whole of K is one step, in shared memory
// at once (LoRA ranks go up to 128).
constexpr uint32_t kShortKMaxK = 128;
// Token tiles it is instantiated for (ptx/sm90/kernel_table.h): the MMA's n8
// blocks, so decode groups of a few rows fill an 8-token tile.
constexpr uint32_t kShortKMinTileM = 8, kShortKMaxTileM = 32;
// The split kernels (decode calls with a long K, the LoRA shrink's): a
// cluster of kShortKSplit CTAs shares each tile, every CTA one slice of K of
// at most kShortKMaxSlice (so the whole slice is in shared memory at once),
// and the others push their fp32 partials into rank 0's shared memory
// (cp.async.bulk), which sums them.
constexpr uint32_t kShortKSplit = 8;  // a portable cluster size
constexpr uint32_t kShortKMaxSlice = 512;
constexpr uint32_t kShortKSplitMaxK = kShortKSplit * kShortKMaxSlice;
// Token tiles of the split kernels: the partials (and the slice) stay small.
constexpr uint32_t kShortKSplitMaxTileM = 16;
// One CTA's slice of K: K split kShortKSplit ways, rounded up to the MMA's
// 16; K itself when unsplit.
GGEMM_HOST_DEVICE constexpr uint32_t short_k_slice(uint32_t k, uint32_t splits) {
  return splits == 1 ? k : (k + 16 * splits - 1) / (16 * splits) * 16;
}
// Where CTA `rank`'s slice starts, and how much of it lies below K (0 for
// the ranks whose slice starts past K).
GGEMM_HOST_DEVICE constexpr uint32_t short_k_slice_start(uint32_t k, uint32_t splits, uint32_t rank) {
  return rank * short_k_slice(k, splits);
}
GGEMM_HOST_DEVICE constexpr uint32_t short_k_slice_valid(uint32_t k, uint32_t splits, uint32_t rank) {
  return k > short_k_slice_start(k, splits, rank)
             ? (k - short_k_slice_start(k, splits, rank) < short_k_slice(k, splits)
                    ? k - short_k_slice_start(k, splits, rank)
                    : short_k_slice(k, splits))
             : 0u;
}

// Groups whose routing (a_offsets, expert_ids) a CTA copies into shared
// memory at entry, in one memory trip; a call with more walks global memory.
constexpr uint32_t kShortKTableGroups = 256;
// A warp's row-block sum that could overflow (a thread's groups past
// kShortKThreadRowBlocks, only with malformed offsets or M past ~2^28):
// the kernel then falls back to the bound from M and the group count.
constexpr uint32_t kShortKRowBlocksUnbounded = 0xFFFFFFFFu;
constexpr uint32_t kShortKThreadRowBlocks = 1u << 25;  // 32 of them sum below 2^32

// One operand row in shared memory: K rounded up to the MMA's 16, plus 16
// bytes, so the 8 rows an ldmatrix reads fall in 8 different 16-byte bank
// groups when K is a multiple of 16 (the row's 16-byte units are then odd).
GGEMM_HOST_DEVICE constexpr uint32_t short_k_row_bytes(uint32_t k) { return (k + 15) / 16 * 32 + 16; }

// One staged output row: kTileN outputs plus a pad that puts the 4 tokens
// of an MMA fragment's writes 4 (16-bit) or 8 (fp32) banks apart, so a
// warp's 32 writes hit distinct banks.
GGEMM_HOST_DEVICE constexpr uint32_t short_k_staging_row_bytes(uint32_t out_bytes) {
  return kTileN * out_bytes + (out_bytes == 4 ? 32 : 16);
}

// [kTileN weight rows][tile_m token rows] of operands (the CTA's slice of
// K), then the output staging ([tile_m][kTileN], which also receives the
// old outputs in accumulate mode, loaded beside the operands), then the
// routing table (a_offsets [kShortKTableGroups + 1], expert_ids
// [kShortKTableGroups], each warp's row blocks [kShortKWarps]), then,
// split, at the next 16 bytes the slots of the partials rank 0 receives
// (one per other rank, partial_bytes each: every thread's accumulator
// fragments, in its own order, the same in every CTA of the cluster), then
// the split's mbarriers (kPartialsLanded, kPartialTaken, kOperandsLanded).
// Every CTA of a cluster has the same layout; only rank 0's slots are used.
struct ShortKLayout {
  uint32_t row_bytes, staging_row_bytes, tile_m, partial_bytes;
  static constexpr uint32_t kPartialsLanded = 0;  // rank 0's: the others' partials are in its slots
  static constexpr uint32_t kPartialTaken = 1;    // each other rank's: rank 0 has read its slot
  static constexpr uint32_t kOperandsLanded = 2;  // every CTA's: its slice's bulk copies are in
  static constexpr uint32_t kSplitBarriers = 3;
  GGEMM_HOST_DEVICE constexpr uint32_t weights_offset() const { return 0; }
  GGEMM_HOST_DEVICE constexpr uint32_t tokens_offset() const { return kTileN * row_bytes; }
  GGEMM_HOST_DEVICE constexpr uint32_t staging_offset() const { return (kTileN + tile_m) * row_bytes; }
  GGEMM_HOST_DEVICE constexpr uint32_t offsets_table_offset() const {
    return staging_offset() + tile_m * staging_row_bytes;
  }
  GGEMM_HOST_DEVICE constexpr uint32_t ids_table_offset() const {
    return offsets_table_offset() + 4 * (kShortKTableGroups + 1);
  }
  // Each warp's sum of its groups' row blocks (or kShortKRowBlocksUnbounded).
  GGEMM_HOST_DEVICE constexpr uint32_t warp_row_blocks_offset() const {
    return ids_table_offset() + 4 * kShortKTableGroups;
  }
  GGEMM_HOST_DEVICE constexpr uint32_t table_end() const { return warp_row_blocks_offset() + 4 * kShortKWarps; }
  // 16-byte aligned: the partials move as float4s. Rank r's slot: r - 1.
  GGEMM_HOST_DEVICE constexpr uint32_t slots_offset() const { return (table_end() + 15) / 16 * 16; }
  GGEMM_HOST_DEVICE constexpr uint32_t slot_offset(uint32_t rank) const {
    return slots_offset() + (rank - 1) * partial_bytes;
  }
  GGEMM_HOST_DEVICE constexpr uint32_t barriers_offset() const {
    return slots_offset() + (kShortKSplit - 1) * partial_bytes;
  }
  GGEMM_HOST_DEVICE constexpr uint32_t total_bytes() const {
    return partial_bytes == 0 ? table_end() : barriers_offset() + 8 * kSplitBarriers;
  }
};

// Each thread's fp32 accumulators: 2 m16 blocks of weight rows (its warp's
// 32) x tile_m / 8 n8 blocks of tokens x 4.
GGEMM_HOST_DEVICE constexpr uint32_t short_k_partial_bytes(uint32_t tile_m) {
  return kShortKThreads * 2 * (tile_m / 8) * 4 * 4;
}

GGEMM_HOST_DEVICE constexpr ShortKLayout make_short_k_layout(uint32_t tile_m, uint32_t k, uint32_t out_bytes,
                                                             uint32_t splits = 1) {
  return ShortKLayout{short_k_row_bytes(short_k_slice(k, splits)), short_k_staging_row_bytes(out_bytes), tile_m,
                      splits == 1 ? 0u : short_k_partial_bytes(tile_m)};
}

}  // namespace ggemm::sm90
