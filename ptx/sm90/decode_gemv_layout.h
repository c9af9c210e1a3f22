// The sm_90a decode GEMV's constants and shared memory, read alike by the
// runtime (plan, launch size) and the kernel (ptx/sm90/decode_gemv.cuh).
#pragma once
#include <cstdint>

#include "../instr/arch.h"
#include "../moe/moe_params.h"
#include "short_k_layout.h"

namespace ggemm::sm90 {

constexpr uint32_t kDecodeGemvThreads = kShortKThreads;  // four warps: the short-K routing table's CTA
constexpr uint32_t kDecodeGemvRows = 8;                  // weight rows a warp multiplies
constexpr uint32_t kDecodeGemvTileN = 4 * kDecodeGemvRows;  // weight rows a tile (columns of N)
// CTAs an SM by the launch bounds' registers (the kernels' __launch_bounds__,
// kernel_table.h): three for every tile (up to 168 registers: tiles of 2
// and 4 take about 160). Tiles of 1 row also have kernels bounded to four
// (128 registers), launched only where four CTAs an SM fill the waves
// better (decode_gemv_waves): at 128 registers the compiler issues the
// second K step's loads after the first's FMAs, half the bytes in flight,
// and at three CTAs an SM those kernels took 12-18% longer than the 136-
// register ones (H200, docs/performance.md), while Qwen3-30B-A3B down at
// one token, 512 tiles, gains a whole wave at four (9.6 -> 8.9 us sustained).
GGEMM_HOST_DEVICE constexpr uint32_t decode_gemv_max_ctas_per_sm(uint32_t tile_m) { return tile_m == 1 ? 4 : 3; }
constexpr uint32_t kDecodeGemvMinCtasPerSm = 3;
// Rows a tile (the kernels of ptx/sm90/kernel_table.h): the products of a
// weight row with 1, 2 or 4 token rows accumulate in one pass over it (8
// spill the launch bounds' 168 registers; a group of more rows takes a
// tile per 4, re-reading its weights).
constexpr uint32_t kDecodeGemvMaxTileM = 4;
// The largest group the automatic plan sends to it (runtime/plan_sm90.cpp).
constexpr uint32_t kDecodeGemvMaxRows = 8;

// The routing table's shared memory: the short-K layout with no operand
// rows and no staging, so its tables start at 0; then, for the routed
// kernels (which route the MoE layer's slots in their prologue,
// decode_gemv.cuh), each sorted row's token (its gather index), one word a
// slot.
GGEMM_HOST_DEVICE constexpr ShortKLayout decode_gemv_layout() { return ShortKLayout{0, 0, 0, 0}; }
GGEMM_HOST_DEVICE constexpr uint32_t decode_gemv_row_token_offset() { return decode_gemv_layout().total_bytes(); }
GGEMM_HOST_DEVICE constexpr uint32_t decode_gemv_smem_bytes() {
  return decode_gemv_row_token_offset() + 4 * moe::kOneWarpMaxSlots;
}

}  // namespace ggemm::sm90
