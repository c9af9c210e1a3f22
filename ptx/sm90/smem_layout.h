// Shared-memory layout of the sm_90a grouped GEMM, computed identically by the
// runtime (to size the launch and pick the stage count) and the kernel.
#pragma once
#include <cstdint>

#include "../instr/arch.h"
#include "../blocks/tile_handoff.h"
#include "../blocks/tile_scheduler.h"  // ceil_div

namespace ggemm::sm90 {

constexpr uint32_t kTileN = 128;          // weight rows per tile (two m64 warpgroups)
constexpr uint32_t kConsumerWarpgroups = 2;
constexpr uint32_t kThreads = 128 * (1 + kConsumerWarpgroups);
constexpr uint32_t kSmemAlign = 1024;     // 128B-swizzled tiles need 1024-byte alignment
// Epilogue staging buffers per consumer warpgroup: 1 or 2 when storing
// (staging_buffers.h), 2 to 4 as the accumulate epilogue's ring of old-C
// slots (producer.cuh fills them, epilogue.cuh drains them).
constexpr uint32_t kMaxStagingBuffers = 4;
// The largest tile_m with gather on load and the SwiGLU epilogue
// (GroupedGemmSm90Config::kGather, kSwiglu).
constexpr uint32_t kMaxGatherSwigluTileM = 128;

// A stage holds `k_slices` slices of K, tile_k wide each (one swizzle span;
// more than one only with K-sliced TMA views, Sm90GroupedParams::k_slices).
// A K-sliced weight box packs its slices at box_rows rows apiece; the slot
// ends with the rows the multiplying warpgroups' wgmmas read past the last
// slice's box (64 rows each: with two, rows 64..127 of each slice), so they
// never read outside the stage. With one slice and two warpgroups that is
// the plain 128-row slot. One warpgroup multiplies tiles of 64 features
// (Sm90GroupedParams::consumer_warpgroups): no second one's rows.
GGEMM_HOST_DEVICE constexpr uint32_t weights_stage_rows(uint32_t k_slices, uint32_t box_rows,
                                                        uint32_t consumers = kConsumerWarpgroups) {
  return k_slices * box_rows + (consumers * (kTileN / kConsumerWarpgroups) - box_rows);
}

struct SmemLayout {
  uint32_t weights_stage_bytes;  // weights_stage_rows x tile_k
  uint32_t tokens_stage_bytes;   // k_slices x tile_m x tile_k
  uint32_t c_bytes;              // epilogue staging, every multiplying warpgroup, every buffer
  uint32_t stages;

  GGEMM_HOST_DEVICE constexpr uint32_t weights_offset(uint32_t s) const { return s * weights_stage_bytes; }
  GGEMM_HOST_DEVICE constexpr uint32_t tokens_offset(uint32_t s) const {
    return stages * weights_stage_bytes + s * tokens_stage_bytes;
  }
  // The epilogue staging is 128B-swizzled whatever the operands' swizzle, so
  // it starts on a 1024-byte boundary: an odd number of stages of 32- or
  // 64-byte rows can end between two (a misplaced staging tile makes the TMA
  // store read it with another swizzle phase than stmatrix wrote it).
  GGEMM_HOST_DEVICE constexpr uint32_t c_offset() const {
    return (stages * (weights_stage_bytes + tokens_stage_bytes) + kSmemAlign - 1) / kSmemAlign * kSmemAlign;
  }
  // full[stages], empty[stages], then the accumulate epilogue's old-C ring:
  // c_full[kMaxStagingBuffers], c_empty[kMaxStagingBuffers]; 8 bytes each.
  GGEMM_HOST_DEVICE constexpr uint32_t barrier_offset() const { return c_offset() + c_bytes; }
  // Bytes to request: the layout plus slack to align the dynamic base.
  GGEMM_HOST_DEVICE constexpr uint32_t total_bytes() const {
    return barrier_offset() + 16 * stages + 16 * kMaxStagingBuffers + kSmemAlign;
  }
};

// Pipeline stages of one tile's K: slices of tile_k (= swizzle_bytes / 2;
// the last one zero-filled past K), k_slices to a stage. The runtime sizes
// the staging buffers by it and the kernel's producer and consumers loop
// over it.
GGEMM_HOST_DEVICE constexpr uint32_t k_stages(uint32_t k, uint32_t tile_k, uint32_t k_slices) {
  return ceil_div(ceil_div(k, tile_k), k_slices);
}

// Tokens the epilogue stages at a time: the whole tile up to 128.
GGEMM_HOST_DEVICE constexpr uint32_t sm90_epilogue_stage_tokens(uint32_t tile_m) {
  return tile_m < 128 ? tile_m : 128;
}

// `staging_buffers` epilogue buffers per consumer warpgroup: storing, 1 or 2
// (with 2, a warpgroup stages its next chunk while the TMA store of the last
// one still reads shared memory); accumulating, the 2 to 4 slots of the
// old-C ring.
GGEMM_HOST_DEVICE constexpr SmemLayout make_smem_layout(uint32_t tile_m, uint32_t swizzle_bytes,
                                                        uint32_t out_bytes, uint32_t stages,
                                                        uint32_t staging_buffers = 1, uint32_t k_slices = 1,
                                                        uint32_t box_rows = kTileN,
                                                        uint32_t consumers = kConsumerWarpgroups) {
  // One K-major row of a stage is one swizzle span (tile_k * 2 bytes).
  return SmemLayout{weights_stage_rows(k_slices, box_rows, consumers) * swizzle_bytes,
                    k_slices * tile_m * swizzle_bytes,
                    staging_buffers * consumers * sm90_epilogue_stage_tokens(tile_m) *
                        (kTileN / kConsumerWarpgroups) * out_bytes,
                    stages};
}

// Static shared memory of an sm_90a kernel, beside the dynamic layout: the
// tile handoff (ptx/blocks/tile_handoff.h) and, where a tile is more than
// one epilogue chunk (tile_m 256), the row-scale epilogue's weights of a
// tile, a float per token, and their two barriers (row_scales.h). Both are
// addressed by immediates so that no register holds their addresses (the
// consumers at tile_m 256 have none to spare). They count against the
// opt-in limit with the dynamic bytes.
GGEMM_HOST_DEVICE constexpr uint32_t sm90_row_scales_bytes(uint32_t tile_m) {
  return tile_m > sm90_epilogue_stage_tokens(tile_m) ? tile_m * 4 + 16 : 0;
}
GGEMM_HOST_DEVICE constexpr uint32_t static_smem_bytes(uint32_t tile_m) {
  return kTileHandoffBytes + sm90_row_scales_bytes(tile_m);
}

// The deepest pipeline that fits in `smem_optin` bytes (the device's opt-in
// shared memory per block, static and dynamic), capped at kMaxStages; 0 if
// not even one fits.
constexpr uint32_t kMaxStages = 32;
GGEMM_HOST_DEVICE constexpr uint32_t max_stages(uint32_t tile_m, uint32_t swizzle_bytes,
                                                uint32_t out_bytes, uint32_t smem_optin,
                                                uint32_t staging_buffers = 1, uint32_t k_slices = 1,
                                                uint32_t box_rows = kTileN,
                                                uint32_t consumers = kConsumerWarpgroups) {
  // total_bytes() grows with every stage (by at least a stage's bytes, the
  // staging's alignment aside), so count up: at most kMaxStages steps.
  uint32_t s = 0;
  while (s < kMaxStages &&
         make_smem_layout(tile_m, swizzle_bytes, out_bytes, s + 1, staging_buffers, k_slices, box_rows, consumers)
                     .total_bytes() +
                 static_smem_bytes(tile_m) <=
             smem_optin)
    ++s;
  return s;
}

}  // namespace ggemm::sm90
