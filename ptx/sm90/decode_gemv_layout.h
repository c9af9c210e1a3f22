// The sm_90a decode GEMV's constants and shared memory, read alike by the
// runtime (plan, launch size) and the kernel (ptx/sm90/decode_gemv.cuh).
#pragma once
#include <cstdint>

#include "../instr/arch.h"
#include "short_k_layout.h"

namespace ggemm::sm90 {

constexpr uint32_t kDecodeGemvThreads = kShortKThreads;  // four warps: the short-K routing table's CTA
constexpr uint32_t kDecodeGemvRows = 8;                  // weight rows a warp multiplies
constexpr uint32_t kDecodeGemvTileN = 4 * kDecodeGemvRows;  // weight rows a tile (columns of N)
constexpr uint32_t kDecodeGemvMinBlocksPerSm = 3;        // CTAs an SM by the launch bounds' registers
// Rows a tile (the kernels of ptx/sm90/kernel_table.h): the products of a
// weight row with 1, 2 or 4 token rows accumulate in one pass over it (8
// spill the launch bounds' 168 registers; a group of more rows takes a
// tile per 4, re-reading its weights).
constexpr uint32_t kDecodeGemvMaxTileM = 4;
// The largest group the automatic plan sends to it (runtime/plan_sm90.cpp).
constexpr uint32_t kDecodeGemvMaxRows = 8;

// The routing table's shared memory: the short-K layout with no operand
// rows and no staging, so its tables start at 0.
GGEMM_HOST_DEVICE constexpr ShortKLayout decode_gemv_layout() { return ShortKLayout{0, 0, 0, 0}; }

}  // namespace ggemm::sm90
