// tcgen05 (sm_100a) descriptors and tensor-memory addresses, as typed
// encoders usable on the host (unit tests) and the device.
//
// Sections are those of the PTX ISA 9.1/9.2 ("9.7.16 TensorCore 5th
// Generation Family Instructions"); later releases renumber the chapter
// (9.7.17, 9.7.18), so each citation also gives the documentation anchor,
// which has stayed the same:
//   9.7.16.1.1  Tensor Memory Addressing        #tensor-memory-addressing
//   9.7.16.1.2  Tensor Memory Allocation        #tensor-memory-allocation
//   9.7.16.4.1  Shared Memory Descriptor        #tcgen05-shared-memory-desc-layout
//               (Table 40 in PTX ISA 9.2)
//   9.7.16.4.2  Instruction Descriptor          #tcgen05-instuction-desc-kind-tf32-f16-f8f6f4
//               (Table 42 in PTX ISA 9.2; the anchor's typo is NVIDIA's)
//   9.7.16.7.1  tcgen05.alloc / dealloc / relinquish_alloc_permit
#pragma once
#include <cstdint>

#include "../arch.h"

namespace ggemm::sm100 {

// ---------------------------------------------------------------------------
// Shared-memory matrix descriptor (9.7.16.4.1), 64 bits:
//   bits  0..13  matrix start address, (addr & 0x3FFFF) >> 4
//   bits 14..15  reserved (0)
//   bits 16..29  leading dimension byte offset (LBO) >> 4, or the absolute
//                leading-dimension address >> 4 when bit 52 is 1
//   bits 30..31  reserved (0)
//   bits 32..45  stride dimension byte offset (SBO) >> 4
//   bits 46..48  fixed constant 0b001 (wgmma's descriptor has 0 here: a
//                Hopper descriptor reused on Blackwell is wrong)
//   bits 49..51  matrix base offset (0 when the swizzle pattern starts on its
//                boundary: 1024 B for 128B, 512 B for 64B, 256 B for 32B)
//   bit  52      leading-dimension stride mode: 0 relative offset,
//                1 absolute address (only for 48-byte K tiles, sm_103a)
//   bits 53..60  fixed constant 0
//   bits 61..63  swizzle mode: 0 none, 1 128B with 32B atomicity, 2 128B,
//                4 64B, 6 32B (3, 5, 7 invalid)
// ---------------------------------------------------------------------------

enum class UmmaSwizzle : uint32_t { kNone = 0, k128BAtom32B = 1, k128B = 2, k64B = 4, k32B = 6 };
enum class UmmaLboMode : uint32_t { kRelative = 0, kAbsolute = 1 };

// Swizzle mode for a swizzle span in bytes (128, 64 or 32; anything else: none).
GGEMM_HOST_DEVICE constexpr UmmaSwizzle umma_swizzle_for_bytes(uint32_t bytes) {
  return bytes == 128 ? UmmaSwizzle::k128B
         : bytes == 64 ? UmmaSwizzle::k64B
         : bytes == 32 ? UmmaSwizzle::k32B
                       : UmmaSwizzle::kNone;
}

struct UmmaSmemDesc {
  uint32_t start_address;        // byte address in shared memory (multiple of 16)
  uint32_t leading_byte_offset;  // bytes (multiple of 16)
  uint32_t stride_byte_offset;   // bytes (multiple of 16)
  uint32_t base_offset;          // 0..7
  UmmaLboMode lbo_mode;
  UmmaSwizzle swizzle;

  // Every field is masked to its width, so an over-wide value cannot spill
  // into a neighbour or into the fixed bits.
  GGEMM_HOST_DEVICE constexpr uint64_t encode() const {
    return (uint64_t((start_address >> 4) & 0x3FFF) << 0) |          // bits  0..13
           (uint64_t((leading_byte_offset >> 4) & 0x3FFF) << 16) |   // bits 16..29
           (uint64_t((stride_byte_offset >> 4) & 0x3FFF) << 32) |    // bits 32..45
           (uint64_t(0x1) << 46) |                                   // bits 46..48 = 0b001
           (uint64_t(base_offset & 0x7) << 49) |                     // bits 49..51
           (uint64_t(static_cast<uint32_t>(lbo_mode) & 0x1) << 52) | // bit  52
           (uint64_t(static_cast<uint32_t>(swizzle) & 0x7) << 61);   // bits 61..63
  }
};

// A K-major operand tile whose rows are `swizzle_bytes` long (the TMA box's
// inner dimension is one swizzle span) and swizzled: 8 rows form one swizzle
// atom, so SBO = 8 rows; LBO is not used by swizzled K-major layouts
// (9.7.16.3.1.1: "assumed to be 1"), and we write 16 bytes (encoded 1).
// Advancing K by 16 bf16/fp16 elements moves the start address 32 bytes along
// the row; tiles are 1024-byte aligned, so the base offset is 0.
GGEMM_HOST_DEVICE constexpr uint64_t make_kmajor_desc(uint32_t smem_byte_addr, uint32_t swizzle_bytes) {
  return UmmaSmemDesc{smem_byte_addr, 16, 8 * swizzle_bytes, 0, UmmaLboMode::kRelative,
                      umma_swizzle_for_bytes(swizzle_bytes)}
      .encode();
}

// An MN-major operand of 16-bit elements stored as boxes of [k rows][64
// elements] (one 128-byte row per k) with the 128B swizzle, boxes
// `box_stride_bytes` apart along M/N: the swizzle atom is 64 elements x 8
// k-rows, so LBO = the distance between MN-adjacent atoms (the box stride)
// and SBO = the distance between consecutive groups of 8 k-rows (1024 bytes)
// (9.7.16.3.1.1, the canonical MN-major layouts). Advancing K by 16 elements
// moves the start address 16 rows = 2048 bytes.
GGEMM_HOST_DEVICE constexpr uint64_t make_mnmajor_sw128_desc(uint32_t smem_byte_addr, uint32_t box_stride_bytes) {
  return UmmaSmemDesc{smem_byte_addr, box_stride_bytes, 1024, 0, UmmaLboMode::kRelative, UmmaSwizzle::k128B}.encode();
}

// ---------------------------------------------------------------------------
// Instruction descriptor for tcgen05.mma .kind::f16 (9.7.16.4.2), 32 bits:
//   bits  0..1   sparsity selector (0: dense)
//   bit   2      sparsity (0: dense)
//   bit   3      saturate (0: not applicable to .kind::f16)
//   bits  4..5   D format: 0 F16, 1 F32
//   bit   6      reserved
//   bits  7..9   A format: 0 F16, 1 BF16
//   bits 10..12  B format: 0 F16, 1 BF16
//   bit  13      negate A
//   bit  14      negate B
//   bit  15      transpose A (0: K-major, 1: M-major)
//   bit  16      transpose B (0: K-major, 1: N-major)
//   bits 17..22  N >> 3
//   bit  23      reserved
//   bits 24..28  M >> 4
//   bit  29      reserved
//   bits 30..31  maximum shift (.ws only; 0)
// The sparsity, saturate and shift fields are always zero here: ggemm issues
// dense, non-.ws MMAs only.
// ---------------------------------------------------------------------------

enum class UmmaDFormat : uint32_t { kF16 = 0, kF32 = 1 };
enum class UmmaABFormat : uint32_t { kF16 = 0, kBF16 = 1 };
enum class UmmaMajor : uint32_t { kK = 0, kMN = 1 };  // "transpose" bit: 1 = MN-major

struct UmmaInstrDescF16 {
  UmmaDFormat d_format;
  UmmaABFormat a_format;
  UmmaABFormat b_format;
  bool negate_a;
  bool negate_b;
  UmmaMajor a_major;
  UmmaMajor b_major;
  uint32_t m;  // 64, 128 (cta_group::1) or 256 (cta_group::2)
  uint32_t n;  // multiple of 8 (M 64) or 16 (M 128/256), up to 256

  GGEMM_HOST_DEVICE constexpr uint32_t encode() const {
    return (uint32_t(static_cast<uint32_t>(d_format) & 0x3) << 4) |   // bits  4..5
           (uint32_t(static_cast<uint32_t>(a_format) & 0x7) << 7) |   // bits  7..9
           (uint32_t(static_cast<uint32_t>(b_format) & 0x7) << 10) |  // bits 10..12
           (uint32_t(negate_a ? 1 : 0) << 13) |                       // bit  13
           (uint32_t(negate_b ? 1 : 0) << 14) |                       // bit  14
           (uint32_t(static_cast<uint32_t>(a_major) & 0x1) << 15) |   // bit  15
           (uint32_t(static_cast<uint32_t>(b_major) & 0x1) << 16) |   // bit  16
           (((n >> 3) & 0x3F) << 17) |                                // bits 17..22
           (((m >> 4) & 0x1F) << 24);                                 // bits 24..28
  }
};

// ---------------------------------------------------------------------------
// Tensor-memory addresses (9.7.16.1.1), 32 bits:
//   bits 31..16  lane index (0..127 on sm_100a)
//   bits 15..0   column index (0..511 on sm_100a; one column = 32 bits/lane)
// ---------------------------------------------------------------------------

GGEMM_HOST_DEVICE constexpr uint32_t make_tmem_addr(uint32_t lane, uint32_t column) {
  return ((lane & 0xFFFF) << 16) | (column & 0xFFFF);
}
GGEMM_HOST_DEVICE constexpr uint32_t tmem_lane(uint32_t taddr) { return taddr >> 16; }
GGEMM_HOST_DEVICE constexpr uint32_t tmem_column(uint32_t taddr) { return taddr & 0xFFFF; }

// tcgen05.alloc / dealloc column counts (9.7.16.1.2, 9.7.16.7.1): a power of
// two in [32, 512]; 512 columns is the whole tensor memory of one SM.
constexpr uint32_t kTmemColumns = 512;
GGEMM_HOST_DEVICE constexpr bool tmem_alloc_columns_valid(uint32_t ncols) {
  return ncols >= 32 && ncols <= kTmemColumns && (ncols & (ncols - 1)) == 0;
}

// The smallest valid allocation holding `needed` columns, or 0 when more than
// the whole tensor memory is needed.
GGEMM_HOST_DEVICE constexpr uint32_t tmem_alloc_columns_for(uint32_t needed) {
  uint32_t n = 32;
  while (n < needed && n < kTmemColumns) n <<= 1;
  return needed <= n ? n : 0;
}

}  // namespace ggemm::sm100
