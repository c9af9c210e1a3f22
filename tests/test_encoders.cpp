// The wgmma shared-memory matrix descriptor encoder, bit by bit, against
// PTX ISA section 9.7.15.5.1.2 "Matrix Descriptor Format" (64 bits):
//   bits  0..13  matrix start address, (addr & 0x3FFFF) >> 4
//   bits 16..29  leading dimension byte offset (LBO) >> 4
//   bits 32..45  stride dimension byte offset (SBO) >> 4
//   bits 49..51  matrix base offset
//   bits 62..63  swizzle mode: 0 none, 1 128-byte, 2 64-byte, 3 32-byte
// every other bit reserved (zero). A wrong field here makes wgmma read the
// wrong shared memory silently, so the decode below is written from the table,
// not from the encoder.
#include <gtest/gtest.h>

#include <cstdint>
#include <initializer_list>

#include "ptx/instr/sm90/wgmma_desc.h"

namespace ggemm::sm90 {
namespace {

struct Decoded {
  uint32_t start, lbo, sbo, base, swizzle;  // raw field values (addresses still >> 4)
  uint64_t reserved;                        // every bit outside the five fields
};

// Brace-initialised structs inside EXPECT_EQ would split at their commas.
uint64_t enc(uint32_t start, uint32_t lbo, uint32_t sbo, uint32_t base, WgmmaSwizzle sw) {
  return WgmmaSmemDesc{start, lbo, sbo, base, sw}.encode();
}

uint64_t bits(uint64_t v, int lo, int hi) { return (v >> lo) & ((uint64_t(1) << (hi - lo + 1)) - 1); }

Decoded decode(uint64_t d) {
  Decoded x;
  x.start = uint32_t(bits(d, 0, 13));
  x.lbo = uint32_t(bits(d, 16, 29));
  x.sbo = uint32_t(bits(d, 32, 45));
  x.base = uint32_t(bits(d, 49, 51));
  x.swizzle = uint32_t(bits(d, 62, 63));
  x.reserved = d & (uint64_t(0x3) << 14 | uint64_t(0x3) << 30 | uint64_t(0x7) << 46 | uint64_t(0x3FF) << 52);
  return x;
}

TEST(WgmmaDesc, SwizzleModeCodes) {
  // Table: 1 = 128B, 2 = 64B, 3 = 32B, 0 = none.
  EXPECT_EQ(uint32_t(wgmma_swizzle_for_bytes(128)), 1u);
  EXPECT_EQ(uint32_t(wgmma_swizzle_for_bytes(64)), 2u);
  EXPECT_EQ(uint32_t(wgmma_swizzle_for_bytes(32)), 3u);
  EXPECT_EQ(uint32_t(wgmma_swizzle_for_bytes(0)), 0u);
  EXPECT_EQ(uint32_t(wgmma_swizzle_for_bytes(16)), 0u);
  EXPECT_EQ(uint32_t(wgmma_swizzle_for_bytes(256)), 0u);
}

TEST(WgmmaDesc, EachFieldLandsInItsBits) {
  // One field non-zero at a time: the others and the reserved bits stay 0.
  const uint64_t start = enc(0x1230, 0, 0, 0, WgmmaSwizzle::kNone);
  EXPECT_EQ(start, uint64_t(0x123));
  const uint64_t lbo = enc(0, 0x1230, 0, 0, WgmmaSwizzle::kNone);
  EXPECT_EQ(lbo, uint64_t(0x123) << 16);
  const uint64_t sbo = enc(0, 0, 0x1230, 0, WgmmaSwizzle::kNone);
  EXPECT_EQ(sbo, uint64_t(0x123) << 32);
  const uint64_t base = enc(0, 0, 0, 5, WgmmaSwizzle::kNone);
  EXPECT_EQ(base, uint64_t(5) << 49);
  EXPECT_EQ(enc(0, 0, 0, 0, WgmmaSwizzle::k128B), uint64_t(1) << 62);
  EXPECT_EQ(enc(0, 0, 0, 0, WgmmaSwizzle::k64B), uint64_t(2) << 62);
  EXPECT_EQ(enc(0, 0, 0, 0, WgmmaSwizzle::k32B), uint64_t(3) << 62);
}

TEST(WgmmaDesc, ValuesAreMaskedToTheirWidth) {
  // All-ones inputs must set exactly the field bits: nothing spills into the
  // reserved bits or a neighbouring field.
  const uint64_t all =
      enc(0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu, static_cast<WgmmaSwizzle>(0xFFFFFFFFu));
  const uint64_t fields = uint64_t(0x3FFF) | uint64_t(0x3FFF) << 16 | uint64_t(0x3FFF) << 32 |
                          uint64_t(0x7) << 49 | uint64_t(0x3) << 62;
  EXPECT_EQ(all, fields);
  const Decoded d = decode(all);
  EXPECT_EQ(d.reserved, 0u);

  // Bit 18 of an address is past the 14-bit field (after >> 4): dropped, not
  // carried into bit 14.
  const Decoded over = decode(enc(0x40010, 0x40020, 0x40030, 9, WgmmaSwizzle::kNone));
  EXPECT_EQ(over.start, 0x1u);
  EXPECT_EQ(over.lbo, 0x2u);
  EXPECT_EQ(over.sbo, 0x3u);
  EXPECT_EQ(over.base, 1u);  // 9 & 7
  EXPECT_EQ(over.reserved, 0u);
  // The low 4 bits of an address are below the field's resolution.
  EXPECT_EQ(enc(0x10F, 0, 0, 0, WgmmaSwizzle::kNone), uint64_t(0x10));
}

TEST(WgmmaDesc, KMajorDescriptorsDecodeBack) {
  // Swizzled K-major: LBO unused (16 bytes, i.e. 1, by convention), SBO = 8
  // rows of one swizzle span each, base offset 0 (tiles are 1024-aligned).
  for (uint32_t sw : {128u, 64u, 32u}) {
    for (uint32_t addr : {0u, 1024u, 0x8000u, 0x37C00u}) {
      SCOPED_TRACE(::testing::Message() << "swizzle " << sw << ", address " << addr);
      const Decoded d = decode(make_kmajor_desc(addr, sw));
      EXPECT_EQ(d.start, addr >> 4);
      EXPECT_EQ(d.lbo, 1u);
      EXPECT_EQ(d.sbo, 8 * sw >> 4);
      EXPECT_EQ(d.base, 0u);
      EXPECT_EQ(d.swizzle, sw == 128 ? 1u : sw == 64 ? 2u : 3u);
      EXPECT_EQ(d.reserved, 0u);
    }
  }
  // The mainloop steps K by 16 elements = 32 bytes inside a row: the start
  // field must advance by exactly 2 and nothing else may change.
  EXPECT_EQ(make_kmajor_desc(1024 + 32, 128) - make_kmajor_desc(1024, 128), uint64_t(2));
}

TEST(WgmmaDesc, MNMajorSw128DecodesBack) {
  for (uint32_t addr : {0u, 2048u, 0x20000u}) {
    SCOPED_TRACE(::testing::Message() << "address " << addr);
    const Decoded d = decode(make_mnmajor_sw128_desc(addr));
    EXPECT_EQ(d.start, addr >> 4);
    EXPECT_EQ(d.lbo, 8192u >> 4);
    EXPECT_EQ(d.sbo, 1024u >> 4);  // 8 k-rows of 128 bytes
    EXPECT_EQ(d.base, 0u);
    EXPECT_EQ(d.swizzle, 1u);
    EXPECT_EQ(d.reserved, 0u);
  }
}

TEST(WgmmaDesc, HandComputedConstants) {
  // make_kmajor_desc(0x400, 128):
  //   start 0x400 >> 4 = 0x40          -> 0x0000'0000'0000'0040
  //   LBO   16 >> 4    = 1    << 16    -> 0x0000'0000'0001'0000
  //   SBO   1024 >> 4  = 0x40 << 32    -> 0x0000'0040'0000'0000
  //   swizzle 128B     = 1    << 62    -> 0x4000'0000'0000'0000
  EXPECT_EQ(make_kmajor_desc(0x400, 128), 0x4000004000010040ull);

  // make_kmajor_desc(0x2A80, 32):
  //   start 0x2A80 >> 4 = 0x2A8        -> 0x0000'0000'0000'02A8
  //   LBO   1 << 16                    -> 0x0000'0000'0001'0000
  //   SBO   8 * 32 = 256 >> 4 = 0x10 << 32 -> 0x0000'0010'0000'0000
  //   swizzle 32B       = 3 << 62      -> 0xC000'0000'0000'0000
  EXPECT_EQ(make_kmajor_desc(0x2A80, 32), 0xC0000010000102A8ull);

  // make_mnmajor_sw128_desc(0x8000):
  //   start 0x8000 >> 4 = 0x800        -> 0x0000'0000'0000'0800
  //   LBO   8192 >> 4   = 0x200 << 16  -> 0x0000'0000'0200'0000
  //   SBO   1024 >> 4   = 0x40 << 32   -> 0x0000'0040'0000'0000
  //   swizzle 128B      = 1 << 62      -> 0x4000'0000'0000'0000
  EXPECT_EQ(make_mnmajor_sw128_desc(0x8000), 0x4000004002000800ull);

  // Every field at its maximum, 64B swizzle:
  //   0x3FFF | 0x3FFF << 16 | 0x3FFF << 32 | 7 << 49 (0x000E'0000'0000'0000)
  //   | 2 << 62 (0x8000'0000'0000'0000)
  EXPECT_EQ(enc(0x3FFF0, 0x3FFF0, 0x3FFF0, 7, WgmmaSwizzle::k64B), 0x800E3FFF3FFF3FFFull);
}

// The encoder is constexpr on the host, so the kernels' descriptors can be
// checked at compile time as well.
static_assert(make_kmajor_desc(0x400, 128) == 0x4000004000010040ull, "k-major 128B descriptor");

}  // namespace
}  // namespace ggemm::sm90
