// The sm_90a short-K kernel's constants and shared memory, computed alike by
// the runtime (launch size, occupancy) and the kernel (ptx/sm90/short_k_gemm.cuh).
#pragma once
#include <cstdint>

#include "../arch.h"
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
// Groups whose routing (a_offsets, expert_ids) a CTA copies into shared
// memory at entry, in one memory trip; a call with more walks global memory.
constexpr uint32_t kShortKTableGroups = 256;

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

// [kTileN weight rows][tile_m token rows] of operands, then the output
// staging ([tile_m][kTileN], which also receives the old outputs in
// accumulate mode, loaded beside the operands), then the routing table
// (a_offsets [kShortKTableGroups + 1], expert_ids [kShortKTableGroups]).
struct ShortKLayout {
  uint32_t row_bytes, staging_row_bytes, tile_m;
  GGEMM_HOST_DEVICE constexpr uint32_t weights_offset() const { return 0; }
  GGEMM_HOST_DEVICE constexpr uint32_t tokens_offset() const { return kTileN * row_bytes; }
  GGEMM_HOST_DEVICE constexpr uint32_t staging_offset() const { return (kTileN + tile_m) * row_bytes; }
  GGEMM_HOST_DEVICE constexpr uint32_t offsets_table_offset() const {
    return staging_offset() + tile_m * staging_row_bytes;
  }
  GGEMM_HOST_DEVICE constexpr uint32_t ids_table_offset() const {
    return offsets_table_offset() + 4 * (kShortKTableGroups + 1);
  }
  GGEMM_HOST_DEVICE constexpr uint32_t total_bytes() const { return ids_table_offset() + 4 * kShortKTableGroups; }
};

GGEMM_HOST_DEVICE constexpr ShortKLayout make_short_k_layout(uint32_t tile_m, uint32_t k, uint32_t out_bytes) {
  return ShortKLayout{short_k_row_bytes(k), short_k_staging_row_bytes(out_bytes), tile_m};
}

}  // namespace ggemm::sm90
