// The wgmma shared-memory matrix descriptor, as a typed encoder usable on the
// host (unit tests) and the device.
//
// PTX ISA 9.7.15.5.1.2 ("Matrix Descriptor Format"), 64 bits:
//   bits  0..13  matrix start address in shared memory, >> 4
//   bits 16..29  leading dimension byte offset (LBO), >> 4
//   bits 32..45  stride dimension byte offset (SBO), >> 4
//   bits 49..51  matrix base offset (0 when the tile is 1024-byte aligned)
//   bits 62..63  swizzle mode: 0 none, 1 = 128B, 2 = 64B, 3 = 32B
#pragma once
#include <cstdint>

#include "../arch.h"

namespace ggemm::sm90 {

enum class WgmmaSwizzle : uint32_t { kNone = 0, k128B = 1, k64B = 2, k32B = 3 };

// Swizzle mode for a swizzle span in bytes (128, 64 or 32; anything else: none).
GGEMM_HOST_DEVICE constexpr WgmmaSwizzle wgmma_swizzle_for_bytes(uint32_t bytes) {
  return bytes == 128 ? WgmmaSwizzle::k128B
         : bytes == 64 ? WgmmaSwizzle::k64B
         : bytes == 32 ? WgmmaSwizzle::k32B
                       : WgmmaSwizzle::kNone;
}

struct WgmmaSmemDesc {
  uint32_t start_address;  // byte address in shared memory (multiple of 16)
  uint32_t leading_byte_offset;
  uint32_t stride_byte_offset;
  uint32_t base_offset;  // 0..7
  WgmmaSwizzle swizzle;

  GGEMM_HOST_DEVICE constexpr uint64_t encode() const {
    return (uint64_t((start_address >> 4) & 0x3FFF) << 0) |
           (uint64_t((leading_byte_offset >> 4) & 0x3FFF) << 16) |
           (uint64_t((stride_byte_offset >> 4) & 0x3FFF) << 32) |
           (uint64_t(base_offset & 0x7) << 49) | (uint64_t(static_cast<uint32_t>(swizzle) & 0x3) << 62);
  }
};

// A K-major operand tile whose rows are `swizzle_bytes` long (TMA box inner
// dimension = one swizzle span) and swizzled: the canonical layout groups 8
// rows into one swizzle atom, so SBO = 8 rows; LBO is unused for swizzled
// K-major layouts (set to 1 by convention). Advancing k by 16 elements moves
// the start address 32 bytes along the row; the hardware applies the swizzle
// to the final address, which is why tiles must be 1024-byte aligned.
GGEMM_HOST_DEVICE constexpr uint64_t make_kmajor_desc(uint32_t smem_byte_addr, uint32_t swizzle_bytes) {
  return WgmmaSmemDesc{smem_byte_addr, 16, 8 * swizzle_bytes, 0, wgmma_swizzle_for_bytes(swizzle_bytes)}
      .encode();
}

// An MN-major tile of 16-bit elements stored as k-rows of 128 bytes (64
// elements along M) with 128B swizzle: the atom is 64 (M) x 8 (K), so SBO =
// the distance between consecutive groups of 8 k-rows = 1024 bytes. LBO is
// the distance between M-adjacent atoms, which an m64 operand never crosses.
GGEMM_HOST_DEVICE constexpr uint64_t make_mnmajor_sw128_desc(uint32_t smem_byte_addr) {
  return WgmmaSmemDesc{smem_byte_addr, 8192, 1024, 0, WgmmaSwizzle::k128B}.encode();
}

}  // namespace ggemm::sm90
