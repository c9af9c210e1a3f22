// Shared-memory layout and thread roles of the sm_100a grouped GEMM,
// computed identically by the runtime (to size the launch and pick the stage
// count) and the kernel.
#pragma once
#include <cstdint>

#include "../instr/arch.h"
#include "../blocks/tile_handoff.h"

namespace ggemm::sm100 {

// Roles, one warp each except the epilogue: warp 0 issues the TMA loads,
// warp 1 allocates tensor memory and issues tcgen05.mma, warps 2..5 (one per
// 32-lane quarter of tensor memory) run the epilogue, and warp 6 walks the
// tiles for the others (ptx/blocks/tile_handoff.h, as on sm_90a).
constexpr uint32_t kProducerWarp = 0;
constexpr uint32_t kMmaWarp = 1;
constexpr uint32_t kFirstEpilogueWarp = 2;
constexpr uint32_t kEpilogueWarps = 4;
constexpr uint32_t kWalkerWarp = kFirstEpilogueWarp + kEpilogueWarps;  // 6
constexpr uint32_t kThreads = 32 * (kWalkerWarp + 1);                  // 224

constexpr uint32_t kTileN = 128;       // weight rows per tile: the MMA's M, one tensor-memory lane each
constexpr uint32_t kAccBuffers = 2;    // accumulators in tensor memory: the epilogue of one tile
                                       // overlaps the MMAs of the next
constexpr uint32_t kSmemAlign = 1024;  // 128B-swizzled tiles need 1024-byte alignment

// Tensor-memory columns to allocate for tile_m tokens: kAccBuffers fp32
// accumulators of tile_m columns each, rounded up to a power of two >= 32.
GGEMM_HOST_DEVICE constexpr uint32_t tmem_columns(uint32_t tile_m) {
  uint32_t n = 32;
  while (n < kAccBuffers * tile_m) n <<= 1;
  return n;
}

// Weight rows of each tile the walker hands out. K-major weights: each
// CTA's box rows (p.weights_box_rows) times the CTAs of the pair: 128 a CTA,
// 64 with narrow tiles for decode (runtime/plan_rules.h, narrow_tiles: the
// MMA keeps M 128, and the accumulator rows past the box, computed from
// stale shared memory, are never stored: the epilogue stores the tile's
// cols), or N rounded up to 8 where N is narrower, whose one column block
// is the same as a 128-row tile's. MN-major weights: 128 a CTA.
GGEMM_HOST_DEVICE constexpr uint32_t walk_tile_n(bool kmajor, uint32_t weights_box_rows, uint32_t cta_group) {
  return (kmajor ? weights_box_rows : kTileN) * cta_group;
}

struct SmemLayout {
  uint32_t weights_stage_bytes;  // kTileN x tile_k
  uint32_t tokens_stage_bytes;   // tile_m / cta_group x tile_k
  uint32_t stages;

  GGEMM_HOST_DEVICE constexpr uint32_t weights_offset(uint32_t s) const { return s * weights_stage_bytes; }
  GGEMM_HOST_DEVICE constexpr uint32_t tokens_offset(uint32_t s) const {
    return stages * weights_stage_bytes + s * tokens_stage_bytes;
  }
  // full[stages], empty[stages], acc_full[kAccBuffers], acc_empty[kAccBuffers]
  // (8 bytes each), then the 4-byte tensor-memory address tcgen05.alloc writes.
  GGEMM_HOST_DEVICE constexpr uint32_t barrier_offset() const {
    return stages * (weights_stage_bytes + tokens_stage_bytes);
  }
  GGEMM_HOST_DEVICE constexpr uint32_t tmem_slot_offset() const {
    return barrier_offset() + 16 * stages + 16 * kAccBuffers;
  }
  // Bytes to request: the layout plus slack to align the dynamic base.
  GGEMM_HOST_DEVICE constexpr uint32_t total_bytes() const { return tmem_slot_offset() + 16 + kSmemAlign; }
};

// One K-major row of a stage is one swizzle span (tile_k * 2 bytes); an
// MN-major weight stage holds the same bytes as two boxes of 64 features.
// With cta_group 2 each CTA of the pair holds its own 128 weight rows and
// half of the tile_m tokens.
GGEMM_HOST_DEVICE constexpr SmemLayout make_smem_layout(uint32_t tile_m, uint32_t swizzle_bytes, uint32_t stages,
                                                        uint32_t cta_group = 1) {
  return SmemLayout{kTileN * swizzle_bytes, tile_m / cta_group * swizzle_bytes, stages};
}

// Static shared memory of every sm_100a kernel, beside the dynamic layout:
// the tile handoff, as on sm_90a. It counts against the opt-in limit.
constexpr uint32_t kStaticSmemBytes = kTileHandoffBytes;

// The deepest pipeline that fits in `smem_optin` bytes (static and dynamic),
// capped at kMaxStages; 0 if not even one fits.
constexpr uint32_t kMaxStages = 32;
GGEMM_HOST_DEVICE constexpr uint32_t max_stages(uint32_t tile_m, uint32_t swizzle_bytes, uint32_t smem_optin,
                                                uint32_t cta_group = 1) {
  const SmemLayout none = make_smem_layout(tile_m, swizzle_bytes, 0, cta_group);
  const uint32_t fixed = none.total_bytes() + kStaticSmemBytes;
  const uint32_t per_stage = none.weights_stage_bytes + none.tokens_stage_bytes + 16;
  if (smem_optin < fixed + per_stage) return 0;
  const uint32_t s = (smem_optin - fixed) / per_stage;
  return s > kMaxStages ? kMaxStages : s;
}

}  // namespace ggemm::sm100
