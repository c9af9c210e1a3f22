// The sm_100a (tcgen05) encoders, bit by bit, against the PTX ISA tables
// (section numbers of PTX ISA 9.1/9.2; anchors in ptx/instr/sm100/umma_desc.h):
//   9.7.16.4.1  Shared Memory Descriptor (Table 40), 64 bits
//   9.7.16.4.2  Instruction Descriptor for .kind::f16 (Table 42), 32 bits
//   9.7.16.1.1  Tensor Memory Addressing: lane 31..16, column 15..0
//   9.7.16.1.2 / 9.7.16.7.1  tcgen05.alloc: nCols a power of two in [32, 512]
// A wrong bit here makes tcgen05.mma read the wrong shared memory or compute
// the wrong shape silently, and no Blackwell GPU is lent to catch it, so the
// decoders below are written from the tables, not from the encoders, and the
// hand-computed constants are written out in full. Shifting any field of the
// encoders by one bit makes HandComputed* and EachFieldLandsInItsBits fail
// (checked by editing a copy of the header, one field at a time).
#include <gtest/gtest.h>

#include <cstdint>
#include <initializer_list>

#include "ptx/instr/sm100/umma_desc.h"

namespace ggemm::sm100 {
namespace {

uint64_t bits(uint64_t v, int lo, int hi) { return (v >> lo) & ((uint64_t(1) << (hi - lo + 1)) - 1); }

// ---- Shared memory descriptor, 9.7.16.4.1 --------------------------------

struct SmemFields {
  uint32_t start, lbo, sbo, fixed_46_48, base, lbo_mode, fixed_53_60, swizzle;
  uint64_t reserved;  // bits 14..15 and 30..31
};

SmemFields decode_smem(uint64_t d) {
  SmemFields x;
  x.start = uint32_t(bits(d, 0, 13));
  x.lbo = uint32_t(bits(d, 16, 29));
  x.sbo = uint32_t(bits(d, 32, 45));
  x.fixed_46_48 = uint32_t(bits(d, 46, 48));
  x.base = uint32_t(bits(d, 49, 51));
  x.lbo_mode = uint32_t(bits(d, 52, 52));
  x.fixed_53_60 = uint32_t(bits(d, 53, 60));
  x.swizzle = uint32_t(bits(d, 61, 63));
  x.reserved = d & (uint64_t(0x3) << 14 | uint64_t(0x3) << 30);
  return x;
}

uint64_t smem(uint32_t start, uint32_t lbo, uint32_t sbo, uint32_t base, UmmaLboMode mode, UmmaSwizzle sw) {
  return UmmaSmemDesc{start, lbo, sbo, base, mode, sw}.encode();
}

constexpr uint64_t kFixed46 = uint64_t(1) << 46;  // the 0b001 at bits 46..48

TEST(UmmaSmemDesc, SwizzleModeCodes) {
  // Table 40, bits 61..63: 0 none, 1 128B/32B-atom, 2 128B, 4 64B, 6 32B.
  EXPECT_EQ(uint32_t(UmmaSwizzle::kNone), 0u);
  EXPECT_EQ(uint32_t(UmmaSwizzle::k128BAtom32B), 1u);
  EXPECT_EQ(uint32_t(umma_swizzle_for_bytes(128)), 2u);
  EXPECT_EQ(uint32_t(umma_swizzle_for_bytes(64)), 4u);
  EXPECT_EQ(uint32_t(umma_swizzle_for_bytes(32)), 6u);
  EXPECT_EQ(uint32_t(umma_swizzle_for_bytes(0)), 0u);
  EXPECT_EQ(uint32_t(umma_swizzle_for_bytes(16)), 0u);
  EXPECT_EQ(uint32_t(umma_swizzle_for_bytes(256)), 0u);
}

TEST(UmmaSmemDesc, EachFieldLandsInItsBits) {
  // All fields zero: only the fixed 0b001 at bits 46..48 is set.
  EXPECT_EQ(smem(0, 0, 0, 0, UmmaLboMode::kRelative, UmmaSwizzle::kNone), kFixed46);
  // One field non-zero at a time.
  EXPECT_EQ(smem(0x1230, 0, 0, 0, UmmaLboMode::kRelative, UmmaSwizzle::kNone), kFixed46 | 0x123);
  EXPECT_EQ(smem(0, 0x1230, 0, 0, UmmaLboMode::kRelative, UmmaSwizzle::kNone), kFixed46 | uint64_t(0x123) << 16);
  EXPECT_EQ(smem(0, 0, 0x1230, 0, UmmaLboMode::kRelative, UmmaSwizzle::kNone), kFixed46 | uint64_t(0x123) << 32);
  EXPECT_EQ(smem(0, 0, 0, 5, UmmaLboMode::kRelative, UmmaSwizzle::kNone), kFixed46 | uint64_t(5) << 49);
  EXPECT_EQ(smem(0, 0, 0, 0, UmmaLboMode::kAbsolute, UmmaSwizzle::kNone), kFixed46 | uint64_t(1) << 52);
  EXPECT_EQ(smem(0, 0, 0, 0, UmmaLboMode::kRelative, UmmaSwizzle::k128BAtom32B), kFixed46 | uint64_t(1) << 61);
  EXPECT_EQ(smem(0, 0, 0, 0, UmmaLboMode::kRelative, UmmaSwizzle::k128B), kFixed46 | uint64_t(2) << 61);
  EXPECT_EQ(smem(0, 0, 0, 0, UmmaLboMode::kRelative, UmmaSwizzle::k64B), kFixed46 | uint64_t(4) << 61);
  EXPECT_EQ(smem(0, 0, 0, 0, UmmaLboMode::kRelative, UmmaSwizzle::k32B), kFixed46 | uint64_t(6) << 61);
}

TEST(UmmaSmemDesc, ValuesAreMaskedToTheirWidth) {
  // All-ones inputs set exactly the field bits and the fixed 0b001; bits
  // 47..48, 53..60 and the reserved bits stay 0.
  const uint64_t all = smem(0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu,
                            static_cast<UmmaLboMode>(0xFFFFFFFFu), static_cast<UmmaSwizzle>(0xFFFFFFFFu));
  const SmemFields d = decode_smem(all);
  EXPECT_EQ(d.start, 0x3FFFu);
  EXPECT_EQ(d.lbo, 0x3FFFu);
  EXPECT_EQ(d.sbo, 0x3FFFu);
  EXPECT_EQ(d.fixed_46_48, 1u);
  EXPECT_EQ(d.base, 7u);
  EXPECT_EQ(d.lbo_mode, 1u);
  EXPECT_EQ(d.fixed_53_60, 0u);
  EXPECT_EQ(d.swizzle, 7u);
  EXPECT_EQ(d.reserved, 0u);
  EXPECT_EQ(all, 0xE01E7FFF3FFF3FFFull);

  // Addresses keep bits 4..17 only: (x & 0x3FFFF) >> 4. Bit 18 is dropped,
  // not carried into bit 14 (or 30, or 46).
  const SmemFields over = decode_smem(smem(0x40010, 0x40020, 0x40030, 9, UmmaLboMode::kRelative, UmmaSwizzle::kNone));
  EXPECT_EQ(over.start, 0x1u);
  EXPECT_EQ(over.lbo, 0x2u);
  EXPECT_EQ(over.sbo, 0x3u);
  EXPECT_EQ(over.fixed_46_48, 1u);
  EXPECT_EQ(over.base, 1u);  // 9 & 7
  EXPECT_EQ(over.lbo_mode, 0u);
  EXPECT_EQ(over.reserved, 0u);
  // The low 4 bits of an address are below the field's resolution.
  EXPECT_EQ(smem(0x10F, 0, 0, 0, UmmaLboMode::kRelative, UmmaSwizzle::kNone), kFixed46 | 0x10);
}

TEST(UmmaSmemDesc, KMajorDescriptorsDecodeBack) {
  for (uint32_t sw : {128u, 64u, 32u}) {
    for (uint32_t addr : {0u, 1024u, 0x8000u, 0x37C00u}) {
      SCOPED_TRACE(::testing::Message() << "swizzle " << sw << ", address " << addr);
      const SmemFields d = decode_smem(make_kmajor_desc(addr, sw));
      EXPECT_EQ(d.start, addr >> 4);
      EXPECT_EQ(d.lbo, 1u);
      EXPECT_EQ(d.sbo, 8 * sw >> 4);
      EXPECT_EQ(d.fixed_46_48, 1u);
      EXPECT_EQ(d.base, 0u);
      EXPECT_EQ(d.lbo_mode, 0u);
      EXPECT_EQ(d.fixed_53_60, 0u);
      EXPECT_EQ(d.swizzle, sw == 128 ? 2u : sw == 64 ? 4u : 6u);
      EXPECT_EQ(d.reserved, 0u);
    }
  }
  // A K step of 16 bf16 elements = 32 bytes: the start field advances by 2
  // and nothing else changes.
  EXPECT_EQ(make_kmajor_desc(1024 + 32, 128) - make_kmajor_desc(1024, 128), uint64_t(2));
}

// The sm_100a kernel's MN-major weights ([E, K, N] storage): two boxes of
// [tile_k k-rows][64 features], 128B swizzle (9.7.16.3.1.1, MN-major
// canonical layouts: LBO = MN-atom stride, SBO = 8-row k-group stride).
TEST(UmmaSmemDesc, MNMajorDescriptorsDecodeBack) {
  for (uint32_t box_stride : {64u * 128u, 32u * 128u, 16u * 128u}) {  // tile_k 64, 32, 16
    for (uint32_t addr : {0u, 1024u, 0x8000u}) {
      SCOPED_TRACE(::testing::Message() << "box stride " << box_stride << ", address " << addr);
      const SmemFields d = decode_smem(make_mnmajor_sw128_desc(addr, box_stride));
      EXPECT_EQ(d.start, addr >> 4);
      EXPECT_EQ(d.lbo, box_stride >> 4);
      EXPECT_EQ(d.sbo, 1024u >> 4);
      EXPECT_EQ(d.fixed_46_48, 1u);
      EXPECT_EQ(d.base, 0u);
      EXPECT_EQ(d.lbo_mode, 0u);
      EXPECT_EQ(d.swizzle, 2u);  // 128B
      EXPECT_EQ(d.reserved, 0u);
    }
  }
  // make_mnmajor_sw128_desc(0x800, 8192): start 0x80; LBO 8192 >> 4 = 0x200,
  // << 16 -> 0x0200'0000; SBO 0x40 << 32; bit 46; swizzle 2 << 61.
  EXPECT_EQ(make_mnmajor_sw128_desc(0x800, 8192), 0x4000404002000080ull);
  // A K step of 16 elements = 16 rows of 128 bytes: start advances 2048 >> 4.
  EXPECT_EQ(make_mnmajor_sw128_desc(0x800 + 2048, 8192) - make_mnmajor_sw128_desc(0x800, 8192), uint64_t(128));
}

TEST(UmmaSmemDesc, HandComputedConstants) {
  // make_kmajor_desc(0x400, 128):
  //   start   0x400 >> 4 = 0x40              -> 0x0000'0000'0000'0040
  //   LBO     16 >> 4 = 1, << 16             -> 0x0000'0000'0001'0000
  //   SBO     1024 >> 4 = 0x40, << 32        -> 0x0000'0040'0000'0000
  //   fixed   0b001 << 46                    -> 0x0000'4000'0000'0000
  //   swizzle 128B = 2, << 61                -> 0x4000'0000'0000'0000
  EXPECT_EQ(make_kmajor_desc(0x400, 128), 0x4000404000010040ull);

  // make_kmajor_desc(0x1000, 64):
  //   start   0x100; LBO 1 << 16; SBO 512 >> 4 = 0x20, << 32 -> 0x0000'0020'0000'0000
  //   fixed   bit 46; swizzle 64B = 4, << 61 -> 0x8000'0000'0000'0000
  EXPECT_EQ(make_kmajor_desc(0x1000, 64), 0x8000402000010100ull);

  // make_kmajor_desc(0x2A80, 32):
  //   start   0x2A8; LBO 1 << 16; SBO 256 >> 4 = 0x10, << 32 -> 0x0000'0010'0000'0000
  //   fixed   bit 46; swizzle 32B = 6, << 61 -> 0xC000'0000'0000'0000
  EXPECT_EQ(make_kmajor_desc(0x2A80, 32), 0xC0004010000102A8ull);

  // Every field at its maximum, LBO absolute, 128B-with-32B-atom swizzle:
  //   0x3FFF | 0x3FFF << 16 | 0x3FFF << 32 | 1 << 46 (-> 0x0000'7FFF'0000'0000 with SBO)
  //   | 7 << 49 (0x000E'...) | 1 << 52 (0x0010'...) | 1 << 61 (0x2000'...)
  EXPECT_EQ(smem(0x3FFF0, 0x3FFF0, 0x3FFF0, 7, UmmaLboMode::kAbsolute, UmmaSwizzle::k128BAtom32B),
            0x201E7FFF3FFF3FFFull);

  // An unswizzled (interleaved) MN-major tile, base offset 3, LBO 0x800, SBO 0x80:
  //   start 0x3C40 >> 4 = 0x3C4; LBO 0x80 << 16 = 0x0080'0000; SBO 0x8 << 32;
  //   fixed bit 46; base 3 << 49 = 0x0006'0000'0000'0000; swizzle 0
  EXPECT_EQ(smem(0x3C40, 0x800, 0x80, 3, UmmaLboMode::kRelative, UmmaSwizzle::kNone), 0x00064008008003C4ull);
}

// ---- Instruction descriptor, 9.7.16.4.2 (.kind::f16) ----------------------

struct InstrFields {
  uint32_t sparse_sel, sparse, saturate, d_fmt, a_fmt, b_fmt, neg_a, neg_b, tr_a, tr_b, n_enc, m_enc, shift;
  uint32_t reserved;  // bits 6, 23, 29
};

InstrFields decode_instr(uint32_t d) {
  InstrFields x;
  x.sparse_sel = uint32_t(bits(d, 0, 1));
  x.sparse = uint32_t(bits(d, 2, 2));
  x.saturate = uint32_t(bits(d, 3, 3));
  x.d_fmt = uint32_t(bits(d, 4, 5));
  x.a_fmt = uint32_t(bits(d, 7, 9));
  x.b_fmt = uint32_t(bits(d, 10, 12));
  x.neg_a = uint32_t(bits(d, 13, 13));
  x.neg_b = uint32_t(bits(d, 14, 14));
  x.tr_a = uint32_t(bits(d, 15, 15));
  x.tr_b = uint32_t(bits(d, 16, 16));
  x.n_enc = uint32_t(bits(d, 17, 22));
  x.m_enc = uint32_t(bits(d, 24, 28));
  x.shift = uint32_t(bits(d, 30, 31));
  x.reserved = d & (1u << 6 | 1u << 23 | 1u << 29);
  return x;
}

uint32_t instr(UmmaDFormat d, UmmaABFormat a, UmmaABFormat b, bool na, bool nb, UmmaMajor ma, UmmaMajor mb,
               uint32_t m, uint32_t n) {
  return UmmaInstrDescF16{d, a, b, na, nb, ma, mb, m, n}.encode();
}

constexpr UmmaDFormat F32 = UmmaDFormat::kF32;
constexpr UmmaDFormat F16D = UmmaDFormat::kF16;
constexpr UmmaABFormat BF16 = UmmaABFormat::kBF16;
constexpr UmmaABFormat F16 = UmmaABFormat::kF16;
constexpr UmmaMajor K = UmmaMajor::kK;
constexpr UmmaMajor MN = UmmaMajor::kMN;

TEST(UmmaInstrDesc, FormatCodes) {
  // Table 42, .kind::f16 column: D F16 = 0, F32 = 1; A/B F16 = 0, BF16 = 1.
  EXPECT_EQ(uint32_t(UmmaDFormat::kF16), 0u);
  EXPECT_EQ(uint32_t(UmmaDFormat::kF32), 1u);
  EXPECT_EQ(uint32_t(UmmaABFormat::kF16), 0u);
  EXPECT_EQ(uint32_t(UmmaABFormat::kBF16), 1u);
  EXPECT_EQ(uint32_t(UmmaMajor::kK), 0u);
  EXPECT_EQ(uint32_t(UmmaMajor::kMN), 1u);
}

TEST(UmmaInstrDesc, EachFieldLandsInItsBits) {
  EXPECT_EQ(instr(F16D, F16, F16, false, false, K, K, 0, 0), 0u);
  EXPECT_EQ(instr(F32, F16, F16, false, false, K, K, 0, 0), 1u << 4);
  EXPECT_EQ(instr(F16D, BF16, F16, false, false, K, K, 0, 0), 1u << 7);
  EXPECT_EQ(instr(F16D, F16, BF16, false, false, K, K, 0, 0), 1u << 10);
  EXPECT_EQ(instr(F16D, F16, F16, true, false, K, K, 0, 0), 1u << 13);
  EXPECT_EQ(instr(F16D, F16, F16, false, true, K, K, 0, 0), 1u << 14);
  EXPECT_EQ(instr(F16D, F16, F16, false, false, MN, K, 0, 0), 1u << 15);
  EXPECT_EQ(instr(F16D, F16, F16, false, false, K, MN, 0, 0), 1u << 16);
  EXPECT_EQ(instr(F16D, F16, F16, false, false, K, K, 0, 8), 1u << 17);   // N 8 -> 1
  EXPECT_EQ(instr(F16D, F16, F16, false, false, K, K, 16, 0), 1u << 24);  // M 16 -> 1
}

TEST(UmmaInstrDesc, ValuesAreMaskedToTheirWidth) {
  // Over-wide enum values and shapes set only their own field's bits: the
  // sparsity, saturate, shift and reserved bits stay 0.
  const uint32_t all = instr(static_cast<UmmaDFormat>(0xFFFFFFFFu), static_cast<UmmaABFormat>(0xFFFFFFFFu),
                             static_cast<UmmaABFormat>(0xFFFFFFFFu), true, true,
                             static_cast<UmmaMajor>(0xFFFFFFFFu), static_cast<UmmaMajor>(0xFFFFFFFFu),
                             0xFFFFFFFFu, 0xFFFFFFFFu);
  const InstrFields d = decode_instr(all);
  EXPECT_EQ(d.sparse_sel, 0u);
  EXPECT_EQ(d.sparse, 0u);
  EXPECT_EQ(d.saturate, 0u);
  EXPECT_EQ(d.d_fmt, 3u);
  EXPECT_EQ(d.a_fmt, 7u);
  EXPECT_EQ(d.b_fmt, 7u);
  EXPECT_EQ(d.n_enc, 0x3Fu);
  EXPECT_EQ(d.m_enc, 0x1Fu);
  EXPECT_EQ(d.shift, 0u);
  EXPECT_EQ(d.reserved, 0u);
  // bits 4..5, 7..22, 24..28 set; 0..3, 6, 23, 29..31 clear.
  EXPECT_EQ(all, 0x1F7FFFB0u);
  // N 512 (>> 3 = 64) does not carry into bit 23; M 512 (>> 4 = 32) not into bit 29.
  EXPECT_EQ(instr(F16D, F16, F16, false, false, K, K, 512, 512), 0u);
  // The low bits of N and M are below the fields' resolution.
  EXPECT_EQ(instr(F16D, F16, F16, false, false, K, K, 64 + 15, 8 + 7), instr(F16D, F16, F16, false, false, K, K, 64, 8));
}

TEST(UmmaInstrDesc, HandComputedConstants) {
  // BF16 x BF16 -> F32, M 128, N 256, A and B K-major (the main sm_100a tile):
  //   D F32   1 << 4   = 0x0000'0010
  //   A BF16  1 << 7   = 0x0000'0080
  //   B BF16  1 << 10  = 0x0000'0400
  //   N 256 >> 3 = 32, << 17 = 0x0040'0000
  //   M 128 >> 4 = 8,  << 24 = 0x0800'0000
  EXPECT_EQ(instr(F32, BF16, BF16, false, false, K, K, 128, 256), 0x08400490u);

  // FP16 x FP16 -> F16, M 64, N 8, K-major:
  //   formats all 0; N 8 >> 3 = 1, << 17 = 0x0002'0000; M 64 >> 4 = 4, << 24 = 0x0400'0000
  EXPECT_EQ(instr(F16D, F16, F16, false, false, K, K, 64, 8), 0x04020000u);

  // BF16 -> F32, M 128, N 64, A K-major, B transposed (N-major):
  //   0x10 | 0x80 | 0x400 | B major 1 << 16 = 0x0001'0000
  //   | N 64 >> 3 = 8, << 17 = 0x0010'0000 | M 8 << 24 = 0x0800'0000
  EXPECT_EQ(instr(F32, BF16, BF16, false, false, K, MN, 128, 64), 0x08110490u);

  // FP16 -> F32, M 64, N 128, negate A and B, A transposed (M-major):
  //   0x10 | negate A 0x2000 | negate B 0x4000 | A major 0x8000
  //   | N 128 >> 3 = 16, << 17 = 0x0020'0000 | M 4 << 24 = 0x0400'0000
  EXPECT_EQ(instr(F32, F16, F16, true, true, MN, K, 64, 128), 0x0420E010u);

  // Mixed A/B formats (not legal to issue, but the fields are independent):
  //   A BF16 only, M 256 (cta_group::2), N 16: 0x80 | 2 << 17 = 0x0004'0000 | 16 << 24 = 0x1000'0000
  EXPECT_EQ(instr(F16D, BF16, F16, false, false, K, K, 256, 16), 0x10040080u);
}

// ---- Tensor memory addresses, 9.7.16.1.1; allocation, 9.7.16.1.2 ----------

TEST(Sm100TmemAddr, LaneHighColumnLow) {
  EXPECT_EQ(make_tmem_addr(0, 0), 0u);
  EXPECT_EQ(make_tmem_addr(1, 0), 0x00010000u);
  EXPECT_EQ(make_tmem_addr(0, 1), 0x00000001u);
  // Warp 3's lane quarter (lanes 96..127), second accumulator buffer (column 256).
  EXPECT_EQ(make_tmem_addr(96, 256), 0x00600100u);
  EXPECT_EQ(make_tmem_addr(127, 511), 0x007F01FFu);
  EXPECT_EQ(tmem_lane(0x007F01FFu), 127u);
  EXPECT_EQ(tmem_column(0x007F01FFu), 511u);
  // Over-wide values are masked to 16 bits each: no carry into the lane field.
  EXPECT_EQ(make_tmem_addr(0x12345, 0x10003), 0x23450003u);
  // The address an allocation returns plus an offset decodes back.
  for (uint32_t lane : {0u, 32u, 64u, 96u}) {
    for (uint32_t col : {0u, 8u, 128u, 504u}) {
      const uint32_t a = make_tmem_addr(lane, col);
      EXPECT_EQ(tmem_lane(a), lane);
      EXPECT_EQ(tmem_column(a), col);
    }
  }
}

TEST(Sm100TmemAlloc, ColumnCountRule) {
  // Power of two, 32 <= nCols <= 512.
  for (uint32_t n : {32u, 64u, 128u, 256u, 512u}) EXPECT_TRUE(tmem_alloc_columns_valid(n)) << n;
  for (uint32_t n : {0u, 1u, 16u, 31u, 33u, 48u, 96u, 192u, 384u, 511u, 513u, 1024u, 0x80000000u})
    EXPECT_FALSE(tmem_alloc_columns_valid(n)) << n;
  // Rounding a requirement up to a valid allocation.
  EXPECT_EQ(tmem_alloc_columns_for(0), 32u);
  EXPECT_EQ(tmem_alloc_columns_for(1), 32u);
  EXPECT_EQ(tmem_alloc_columns_for(32), 32u);
  EXPECT_EQ(tmem_alloc_columns_for(33), 64u);
  EXPECT_EQ(tmem_alloc_columns_for(200), 256u);
  EXPECT_EQ(tmem_alloc_columns_for(2 * 256), 512u);  // two N-256 fp32 accumulators
  EXPECT_EQ(tmem_alloc_columns_for(513), 0u);        // more than the whole tensor memory
  for (uint32_t need = 0; need <= 512; ++need) {
    const uint32_t n = tmem_alloc_columns_for(need);
    ASSERT_TRUE(tmem_alloc_columns_valid(n)) << need;
    ASSERT_GE(n, need);
  }
}

// Constexpr on the host: a kernel's descriptors can be checked at compile time.
static_assert(make_kmajor_desc(0x400, 128) == 0x4000404000010040ull, "k-major 128B smem descriptor");
static_assert(UmmaInstrDescF16{UmmaDFormat::kF32, UmmaABFormat::kBF16, UmmaABFormat::kBF16, false, false,
                               UmmaMajor::kK, UmmaMajor::kK, 128, 256}
                      .encode() == 0x08400490u,
              "bf16 -> f32 M128 N256 instruction descriptor");
static_assert(tmem_alloc_columns_valid(512) && !tmem_alloc_columns_valid(16), "tcgen05.alloc column rule");

}  // namespace
}  // namespace ggemm::sm100
