// Byte offsets of 16-byte units in shared-memory tiles laid out with the
// TMA's swizzles (the XOR applies to address bits, so a tile's base must be
// aligned to the swizzle's span: 1024 bytes for 128B, 512 for 64B): the
// epilogues' staging, which stmatrix writes and TMA stores read.
#pragma once
#include <cstdint>

#include "../instr/arch.h"

namespace ggemm {

// Unit `unit` (0..7) of row `row` in a tile of 128-byte rows, 128B swizzle:
// the unit index XOR row % 8.
GGEMM_DEVICE uint32_t swizzle128_offset(uint32_t row, uint32_t unit) { return row * 128 + ((unit ^ (row & 7)) << 4); }

// Unit `unit` (0..3) of row `row` in a tile of 64-byte rows, 64B swizzle:
// the unit index XOR (row / 2) % 4.
GGEMM_DEVICE uint32_t swizzle64_offset(uint32_t row, uint32_t unit) {
  return row * 64 + ((unit ^ ((row / 2) % 4)) << 4);
}

}  // namespace ggemm
