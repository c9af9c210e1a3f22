// CPU tests of the reference: dtype conversions on known bit patterns,
// grouped_matmul on hand-computed cases, and the threaded reference against
// a naive loop written here.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "dtype.h"
#include "ggemm_reference.h"
#include "test_util.h"

namespace ggemm::testing {
namespace {

using ref::bf16_to_float;
using ref::dtype_size;
using ref::float_to_bf16;
using ref::float_to_fp16;
using ref::fp16_to_float;
using ref::load_as_float;
using ref::round_to_dtype;
using ref::store_from_float;

float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

uint32_t to_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

// ---------------------------------------------------------------- dtypes --

TEST(ReferenceDtype, Bf16KnownBitPatterns) {
  EXPECT_EQ(float_to_bf16(1.0f), 0x3F80);
  EXPECT_EQ(float_to_bf16(-2.5f), 0xC020);
  EXPECT_EQ(float_to_bf16(0.0f), 0x0000);
  EXPECT_EQ(float_to_bf16(-0.0f), 0x8000);
  EXPECT_EQ(float_to_bf16(std::numeric_limits<float>::infinity()), 0x7F80);
  EXPECT_EQ(float_to_bf16(-std::numeric_limits<float>::infinity()), 0xFF80);
  EXPECT_EQ(float_to_bf16(65504.0f), 0x4780);  // 65504 is between bf16 65280 and 65536

  // Ties to even: 1 + 2^-8 is halfway between 1 and 1 + 2^-7.
  EXPECT_EQ(float_to_bf16(from_bits(0x3F808000u)), 0x3F80);  // tie, 0x3F80 even: down
  EXPECT_EQ(float_to_bf16(from_bits(0x3F818000u)), 0x3F82);  // tie, 0x3F81 odd: up
  EXPECT_EQ(float_to_bf16(from_bits(0x3F808001u)), 0x3F81);  // just above the tie
  EXPECT_EQ(float_to_bf16(from_bits(0x3F807FFFu)), 0x3F80);  // just below
  EXPECT_EQ(float_to_bf16(from_bits(0x7F7FFFFFu)), 0x7F80);  // FLT_MAX rounds to inf
  EXPECT_EQ(float_to_bf16(from_bits(0x00000001u)), 0x0000);  // tiniest float subnormal
  EXPECT_EQ(float_to_bf16(from_bits(0x00010000u)), 0x0001);  // bf16 subnormal, exact

  // NaN stays NaN, including payloads only in the dropped low bits.
  for (uint32_t nan : {0x7FC00000u, 0x7F800001u, 0xFF800001u, 0x7FFFFFFFu}) {
    const uint16_t h = float_to_bf16(from_bits(nan));
    EXPECT_EQ(h & 0x7F80, 0x7F80) << std::hex << nan;
    EXPECT_NE(h & 0x007F, 0) << std::hex << nan;
    EXPECT_EQ(h & 0x8000, (nan >> 16) & 0x8000) << std::hex << nan;
  }

  EXPECT_EQ(bf16_to_float(0x3F80), 1.0f);
  EXPECT_EQ(bf16_to_float(0xC020), -2.5f);
  EXPECT_EQ(bf16_to_float(0x0001), from_bits(0x00010000u));
  EXPECT_TRUE(std::isnan(bf16_to_float(0xFFFF)));
}

TEST(ReferenceDtype, Fp16KnownBitPatterns) {
  EXPECT_EQ(float_to_fp16(1.0f), 0x3C00);
  EXPECT_EQ(float_to_fp16(-2.5f), 0xC100);
  EXPECT_EQ(float_to_fp16(0.0f), 0x0000);
  EXPECT_EQ(float_to_fp16(-0.0f), 0x8000);
  EXPECT_EQ(float_to_fp16(65504.0f), 0x7BFF);   // largest half
  EXPECT_EQ(float_to_fp16(65519.0f), 0x7BFF);   // below the halfway point
  EXPECT_EQ(float_to_fp16(65520.0f), 0x7C00);   // tie rounds to even 65536: inf
  EXPECT_EQ(float_to_fp16(-1.0e6f), 0xFC00);    // overflow
  EXPECT_EQ(float_to_fp16(std::numeric_limits<float>::infinity()), 0x7C00);
  EXPECT_EQ(float_to_fp16(0.1f), 0x2E66);
  EXPECT_EQ(float_to_fp16(0.3f), 0x34CD);

  // Normal ties to even: 1 + 2^-11 is halfway between 1 and 1 + 2^-10.
  EXPECT_EQ(float_to_fp16(1.0f + std::ldexp(1.0f, -11)), 0x3C00);
  EXPECT_EQ(float_to_fp16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3C02);
  EXPECT_EQ(float_to_fp16(2049.0f), 0x6800);  // between 2048 and 2050: even 2048
  EXPECT_EQ(float_to_fp16(2051.0f), 0x6802);  // between 2050 and 2052: even 2052

  // Subnormals: units of 2^-24.
  EXPECT_EQ(float_to_fp16(std::ldexp(1.0f, -14)), 0x0400);         // smallest normal
  EXPECT_EQ(float_to_fp16(std::ldexp(1023.0f, -24)), 0x03FF);      // largest subnormal
  EXPECT_EQ(float_to_fp16(std::ldexp(1023.5f, -24)), 0x0400);      // tie, rounds up into normal
  EXPECT_EQ(float_to_fp16(std::ldexp(1.0f, -24)), 0x0001);         // smallest subnormal
  EXPECT_EQ(float_to_fp16(-std::ldexp(1.0f, -24)), 0x8001);
  EXPECT_EQ(float_to_fp16(std::ldexp(1.0f, -25)), 0x0000);         // tie to even: 0
  EXPECT_EQ(float_to_fp16(std::ldexp(1.5f, -25)), 0x0001);         // above the tie
  EXPECT_EQ(float_to_fp16(std::ldexp(3.0f, -25)), 0x0002);         // 1.5 units: tie to 2
  EXPECT_EQ(float_to_fp16(std::ldexp(5.0f, -25)), 0x0002);         // 2.5 units: tie to 2
  EXPECT_EQ(float_to_fp16(std::ldexp(1.0f, -26)), 0x0000);
  EXPECT_EQ(float_to_fp16(from_bits(0x00000001u)), 0x0000);        // float subnormal

  const uint16_t nan = float_to_fp16(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(nan & 0x7C00, 0x7C00);
  EXPECT_NE(nan & 0x03FF, 0);
  EXPECT_NE(float_to_fp16(from_bits(0x7F800001u)) & 0x03FF, 0);  // signalling NaN stays NaN

  EXPECT_EQ(fp16_to_float(0x3C00), 1.0f);
  EXPECT_EQ(fp16_to_float(0xC100), -2.5f);
  EXPECT_EQ(fp16_to_float(0x7BFF), 65504.0f);
  EXPECT_EQ(fp16_to_float(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(fp16_to_float(0x8001), -std::ldexp(1.0f, -24));
  EXPECT_EQ(fp16_to_float(0x03FF), std::ldexp(1023.0f, -24));
  EXPECT_EQ(fp16_to_float(0x3555), 0.333251953125f);
  EXPECT_EQ(fp16_to_float(0x7C00), std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(fp16_to_float(0x7E00)));
}

// Every non-NaN 16-bit pattern widens exactly and narrows back to itself.
TEST(ReferenceDtype, AllPatternsRoundTrip) {
  for (uint32_t b = 0; b <= 0xFFFF; ++b) {
    const uint16_t h = static_cast<uint16_t>(b);
    if ((h & 0x7F80) != 0x7F80 || (h & 0x007F) == 0) {
      ASSERT_EQ(float_to_bf16(bf16_to_float(h)), h) << std::hex << b;
    }
    if ((h & 0x7C00) != 0x7C00 || (h & 0x03FF) == 0) {
      ASSERT_EQ(float_to_fp16(fp16_to_float(h)), h) << std::hex << b;
    }
  }
}

// Rounding agrees with a model on random floats: scale by the step of the
// target format at v's magnitude, round to nearest even in double (exact).
TEST(ReferenceDtype, RoundingMatchesNearestEvenModel) {
  Rng rng(7);
  auto model = [](float v, int mantissa_bits, int min_exp) {
    const double x = v;
    const int e = x == 0.0 ? min_exp : std::max(std::ilogb(x), min_exp);
    const double step = std::ldexp(1.0, e - mantissa_bits);
    return std::nearbyint(x / step) * step;  // default rounding mode: ties to even
  };
  for (int i = 0; i < 200000; ++i) {
    const float v = std::ldexp(rng.uniform(-1.0f, 1.0f), static_cast<int>(rng.uniform_int(-26, 16)));
    ASSERT_EQ(static_cast<double>(bf16_to_float(float_to_bf16(v))), model(v, 7, -126)) << v;
    const double h = model(v, 10, -14);
    const double want_h = std::fabs(h) >= 65536.0 ? std::copysign(INFINITY, h) : h;
    ASSERT_EQ(static_cast<double>(fp16_to_float(float_to_fp16(v))), want_h) << v;
  }
}

TEST(ReferenceDtype, LoadStoreAndSizes) {
  EXPECT_EQ(dtype_size(kBf16), 2u);
  EXPECT_EQ(dtype_size(kFp16), 2u);
  EXPECT_EQ(dtype_size(kFp32), 4u);

  uint16_t h[3] = {0, 0, 0};
  store_from_float(kBf16, h, 1, -2.5f);
  EXPECT_EQ(h[0], 0);
  EXPECT_EQ(h[1], 0xC020);
  EXPECT_EQ(h[2], 0);
  EXPECT_EQ(load_as_float(kBf16, h, 1), -2.5f);
  store_from_float(kFp16, h, 2, 0.1f);
  EXPECT_EQ(h[2], 0x2E66);
  EXPECT_EQ(load_as_float(kFp16, h, 2), fp16_to_float(0x2E66));

  float f[2] = {0, 0};
  store_from_float(kFp32, f, 1, 0.1f);  // fp32 stores as is
  EXPECT_EQ(to_bits(f[1]), to_bits(0.1f));
  EXPECT_EQ(load_as_float(kFp32, f, 1), 0.1f);
  EXPECT_EQ(round_to_dtype(kFp32, 0.1f), 0.1f);
  EXPECT_EQ(round_to_dtype(kBf16, 0.1f), bf16_to_float(float_to_bf16(0.1f)));
}

// ------------------------------------------------------ hand-computed cases --

// A small problem with logical float values, packed into the dtypes the
// reference reads. C starts poisoned unless c_init is given.
struct HandCase {
  ggemm_dtype in = kBf16, out = kFp32;
  int64_t m = 0, n = 0, k = 0, e = 1;
  std::vector<float> a, b;  // b in the layout transpose_b selects
  bool transpose_b = true;
  std::vector<uint32_t> offsets;
  std::vector<int32_t> ids;
  uint32_t active = 0;
  int64_t split0 = 0, split1 = 0;
  ggemm_epilogue epilogue = GGEMM_EPILOGUE_STORE;
  std::vector<float> row_scale;
  std::vector<float> c_init;
  bool group_ends = false;  // pass offsets[1..] as group_ends (a_offsets NULL)

  Bytes a_mem, b_mem, c_mem;
  uint32_t stats[2] = {0, 0};

  void run(unsigned threads = 0) {
    a_mem = pack_exact(in, a);
    b_mem = pack_exact(in, b);
    if (c_init.empty()) {
      c_mem = poisoned_bytes(out, static_cast<size_t>(m * n));
    } else {
      ASSERT_EQ(c_init.size(), static_cast<size_t>(m * n));
      c_mem = pack_exact(out, c_init);
    }
    stats[0] = 0;
    stats[1] = active;
    ggemm_grouped_matmul_args args{};
    args.struct_size = sizeof args;
    args.a_dtype = args.b_dtype = in;
    args.c_dtype = out;
    args.m = m, args.n = n, args.k = k, args.num_experts = e;
    args.a = a_mem.data(), args.b = b_mem.data(), args.c = c_mem.data();
    args.transpose_b = transpose_b ? 1 : 0;
    args.a_offsets = offsets.data(), args.expert_ids = ids.data(), args.expert_usage_stats = stats;
    if (group_ends) args.group_ends = offsets.data() + 1, args.a_offsets = nullptr;
    args.num_groups = static_cast<int64_t>(ids.size());
    args.a_plane_split0 = split0, args.a_plane_split1 = split1;
    args.epilogue = epilogue;
    args.row_scale = row_scale.empty() ? nullptr : row_scale.data();
    ASSERT_EQ(offsets.size(), ids.size() + 1);
    ggemm::ref::grouped_matmul(args, threads);
  }

  float c(int64_t r, int64_t col) const {
    return load_as_float(out, c_mem.data(), static_cast<size_t>(r * n + col));
  }
  uint32_t c_bits(int64_t r, int64_t col) const { return bits_at(out, c_mem, static_cast<size_t>(r * n + col)); }
  bool poisoned(int64_t r, int64_t col) const { return is_poison(out, c_mem, static_cast<size_t>(r * n + col)); }
  void expect_row(int64_t r, const std::vector<float>& want) const {
    testing::expect_row(out, c_mem, n, r, want, "C");
  }
  void expect_row_poisoned(int64_t r) const { testing::expect_row_poisoned(out, c_mem, n, r, "C"); }
};

// Two groups on two experts. W[0] = [[1,0],[0,1],[1,1]], W[1] = [[2,-1],[-1,3],[.5,.25]]
// (rows n, columns k). Group 0 (rows 0-1) uses expert 1, group 1 (rows 2-3) expert 0.
HandCase two_group_case(bool transpose_b) {
  HandCase t;
  t.m = 4, t.n = 3, t.k = 2, t.e = 2;
  t.a = {1, 2, 3, 4, 5, 6, 7, 8};
  t.transpose_b = transpose_b;
  if (transpose_b)  // [E][N][K]
    t.b = {1, 0, 0, 1, 1, 1, /**/ 2, -1, -1, 3, 0.5f, 0.25f};
  else  // [E][K][N]
    t.b = {1, 0, 1, 0, 1, 1, /**/ 2, -1, 0.5f, -1, 3, 0.25f};
  t.offsets = {0, 2, 4};
  t.ids = {1, 0};
  t.active = 2;
  return t;
}

TEST(ReferenceGroupedMatmul, StoreTwoGroupsTransposedB) {
  HandCase t = two_group_case(true);
  t.run();
  t.expect_row(0, {0, 5, 1});  // [1,2] . W1
  t.expect_row(1, {2, 9, 2.5f});
  t.expect_row(2, {5, 6, 11});  // [5,6] . W0
  t.expect_row(3, {7, 8, 15});
}

TEST(ReferenceGroupedMatmul, StoreTwoGroupsKMajorB) {
  HandCase t = two_group_case(false);
  t.run();
  t.expect_row(0, {0, 5, 1});
  t.expect_row(1, {2, 9, 2.5f});
  t.expect_row(2, {5, 6, 11});
  t.expect_row(3, {7, 8, 15});
}

TEST(ReferenceGroupedMatmul, StoreAlongLongerK) {
  // K = 8 exercises full vector lanes; K = 11 the tail.
  for (int64_t k : {8, 11}) {
    HandCase t;
    t.m = 1, t.n = 2, t.k = k, t.e = 1;
    for (int64_t i = 0; i < k; ++i) t.a.push_back(static_cast<float>(i + 1));  // 1..K
    for (int64_t i = 0; i < k; ++i) t.b.push_back(1.0f);                       // n0: all ones
    for (int64_t i = 0; i < k; ++i) t.b.push_back(i % 2 ? -1.0f : 1.0f);       // n1: alternating
    t.offsets = {0, 1};
    t.ids = {0};
    t.active = 1;
    t.run();
    const float sum = static_cast<float>(k * (k + 1) / 2);
    const float alt = k % 2 ? static_cast<float>(k + 1) / 2 : -static_cast<float>(k) / 2;
    t.expect_row(0, {sum, alt});
  }
}

TEST(ReferenceGroupedMatmul, InactiveZeroedEmptySkippedUngroupedUntouched) {
  HandCase t;
  t.out = kBf16;
  t.m = 6, t.n = 2, t.k = 2, t.e = 2;
  t.a = {1, 1, 2, 1, 9, 9, 9, 9, 1, -1, 4, 4};
  t.b = {1, 0, 0, 1, /**/ 1, 1, 1, -1};  // W0 = identity, W1 = [[1,1],[1,-1]]
  t.offsets = {0, 2, 2, 4, 5};           // group 1 is empty; row 5 is in no group
  t.ids = {0, 1, -1, 1};
  t.active = 4;
  t.run();
  t.expect_row(0, {1, 1});
  t.expect_row(1, {2, 1});
  t.expect_row(2, {0, 0});  // inactive group: zeros
  t.expect_row(3, {0, 0});
  t.expect_row(4, {0, 2});
  t.expect_row_poisoned(5);
}

TEST(ReferenceGroupedMatmul, ExpertIdOutsideRangeIsInactive) {
  for (ggemm_epilogue ep : {GGEMM_EPILOGUE_STORE, GGEMM_EPILOGUE_ACCUMULATE}) {
    HandCase t;
    t.m = 3, t.n = 2, t.k = 2, t.e = 2;
    t.a = {1, 2, 3, 4, 5, 6};
    // B holds a third expert past E: reading it for id == E would show.
    t.b = {1, 0, 0, 1, /**/ 1, 1, 1, -1, /**/ 5, 5, 5, 5};
    t.offsets = {0, 1, 2, 3};
    t.ids = {2, -7, 1};  // id == E and a negative id other than -1
    t.active = 3;
    t.epilogue = ep;
    t.c_init = {10, 11, 12, 13, 14, 15};
    t.run();
    if (ep == GGEMM_EPILOGUE_STORE) {
      t.expect_row(0, {0, 0});
      t.expect_row(1, {0, 0});
      t.expect_row(2, {11, -1});
    } else {
      t.expect_row(0, {10, 11});  // += 0
      t.expect_row(1, {12, 13});
      t.expect_row(2, {14 + 11, 15 - 1});
    }
  }
}

TEST(ReferenceGroupedMatmul, NumActiveLimitsGroups) {
  auto make = [](uint32_t active) {
    HandCase t;
    t.m = 4, t.n = 2, t.k = 2, t.e = 1;
    t.a = {1, 2, 3, 4, 5, 6, 7, 8};
    t.b = {1, 0, 0, 1};
    t.offsets = {0, 1, 3, 3};  // row 3 is past the last group
    t.ids = {0, 0, 0};
    t.active = active;
    t.run();
    return t;
  };
  {
    HandCase t = make(1);  // only group 0
    t.expect_row(0, {1, 2});
    t.expect_row_poisoned(1);
    t.expect_row_poisoned(2);
    t.expect_row_poisoned(3);
  }
  {
    HandCase t = make(0);  // nothing at all
    for (int64_t r = 0; r < 4; ++r) t.expect_row_poisoned(r);
  }
  {
    HandCase t = make(100);  // clamped to num_groups = 3
    t.expect_row(0, {1, 2});
    t.expect_row(1, {3, 4});
    t.expect_row(2, {5, 6});
    t.expect_row_poisoned(3);
  }
}

TEST(ReferenceGroupedMatmul, MalformedOffsetsAreClamped) {
  HandCase t;
  t.m = 5, t.n = 2, t.k = 2, t.e = 2;
  t.a = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  t.b = {1, 0, 0, 1, /**/ 0, 1, 1, 0};  // W1 swaps the columns: visible if used
  // Group 1 would go backwards (3 -> 2): empty. Group 2 starts where group 0
  // ended (not at 2) and its end (9) is clamped to M.
  t.offsets = {0, 3, 2, 9};
  t.ids = {0, 0, 1};
  t.active = 3;
  t.run();
  t.expect_row(0, {1, 2});
  t.expect_row(1, {3, 4});
  t.expect_row(2, {5, 6});
  t.expect_row(3, {8, 7});  // expert 1: columns swapped
  t.expect_row(4, {10, 9});

  // a_offsets[0] is never read: group 0 starts at row 0 whatever it holds
  // (a nonzero one is malformed; checked mode reports it).
  HandCase u;
  u.m = 4, u.n = 2, u.k = 2, u.e = 1;
  u.a = {1, 2, 3, 4, 5, 6, 7, 8};
  u.b = {1, 0, 0, 1};
  u.offsets = {2, 3};
  u.ids = {0};
  u.active = 1;
  u.run();
  u.expect_row(0, {1, 2});
  u.expect_row(1, {3, 4});
  u.expect_row(2, {5, 6});
  u.expect_row_poisoned(3);
}

// group_ends (torch._grouped_mm's offs) say what a_offsets = [0, ends...]
// says: the same groups, the same bits.
TEST(ReferenceGroupedMatmul, GroupEndsAreOffsetsWithoutTheLeadingZero) {
  HandCase t = two_group_case(true);
  t.run();
  HandCase u = two_group_case(true);
  u.group_ends = true;
  u.run();
  EXPECT_EQ(u.c_mem, t.c_mem);
  u.expect_row(0, {0, 5, 1});
  u.expect_row(3, {7, 8, 15});
}

TEST(ReferenceGroupedMatmul, PlaneSplitsChooseActivationRows) {
  // A has 3 planes of M = 2 rows; row m of plane p is [m + 1, p]. W0 rows are
  // [1, 10] (row 0 uses expert 0: 1 + 10p), W1 rows [2, 100] (row 1: 4 + 100p),
  // so every output names the plane it read.
  struct Split {
    int64_t s0, s1;
    std::vector<int> planes;
  };
  const std::vector<Split> splits = {
      {1, 3, {0, 1, 1, 2}},
      {2, 2, {0, 0, 2, 2}},  // no column reads plane 1
      {1, 4, {0, 1, 1, 1}},  // no column reads plane 2
      {4, 4, {0, 0, 0, 0}},
      {0, 0, {0, 0, 0, 0}},  // disabled
  };
  for (const Split& s : splits) {
    for (bool tb : {true, false}) {
      HandCase t;
      t.m = 2, t.n = 4, t.k = 2, t.e = 2;
      t.a = {1, 0, 2, 0, /**/ 1, 1, 2, 1, /**/ 1, 2, 2, 2};
      if (tb)
        t.b = {1, 10, 1, 10, 1, 10, 1, 10, /**/ 2, 100, 2, 100, 2, 100, 2, 100};
      else
        t.b = {1, 1, 1, 1, 10, 10, 10, 10, /**/ 2, 2, 2, 2, 100, 100, 100, 100};
      t.transpose_b = tb;
      t.offsets = {0, 1, 2};
      t.ids = {0, 1};
      t.active = 2;
      t.split0 = s.s0;
      t.split1 = s.s1;
      t.run();
      std::vector<float> row0, row1;
      for (int p : s.planes) {
        row0.push_back(static_cast<float>(1 + 10 * p));
        row1.push_back(static_cast<float>(4 + 100 * p));
      }
      SCOPED_TRACE(::testing::Message() << "splits " << s.s0 << "," << s.s1 << " transpose_b " << tb);
      t.expect_row(0, row0);
      t.expect_row(1, row1);
    }
  }
}

TEST(ReferenceGroupedMatmul, RowScaleFp16Operands) {
  HandCase t;
  t.in = kFp16;
  t.out = kFp16;
  t.m = 4, t.n = 2, t.k = 2, t.e = 1;
  const float tenth = fp16_to_float(0x2E66);  // 0.0999755859375: exact in fp16, not in bf16
  t.a = {1, 3, 0.75f, 2, 5, 5, tenth, 1};
  t.b = {1, 0, 0, 1};
  t.offsets = {0, 2, 3, 4};
  t.ids = {0, -1, 0};
  t.active = 3;
  t.epilogue = GGEMM_EPILOGUE_ROW_SCALE;
  t.row_scale = {0.1f, -2.0f, 3.0f, 1.0f};
  t.run();
  EXPECT_EQ(t.c_bits(0, 0), 0x2E66u);  // fp16(1 * 0.1f)
  EXPECT_EQ(t.c_bits(0, 1), 0x34CDu);  // fp16(3 * 0.1f), one rounding
  t.expect_row(1, {-1.5f, -4});
  t.expect_row(2, {0, 0});  // inactive: zero whatever the scale
  t.expect_row(3, {tenth, 1});
}

TEST(ReferenceGroupedMatmul, AccumulateAddsOnceRoundingOnce) {
  // W rows: n0 = [1, 0.75], n1 = [1, 0]. Row 0 = [1, 2^-8] gives
  // n0 = 1 + 3 * 2^-10 (not a bf16) and n1 = 1. Row 1's group is inactive.
  const float tiny = std::ldexp(1.0f, -8);
  auto make = [&](ggemm_dtype out, std::vector<float> c_init) {
    HandCase t;
    t.out = out;
    t.m = 2, t.n = 2, t.k = 2, t.e = 1;
    t.a = {1, tiny, 7, 7};
    t.b = {1, 0.75f, 1, 0};
    t.offsets = {0, 1, 2};
    t.ids = {0, -1};
    t.active = 2;
    t.epilogue = GGEMM_EPILOGUE_ACCUMULATE;
    t.c_init = std::move(c_init);
    t.run();
    return t;
  };
  {
    // bf16: old 2^-8 + result 1 + 3 * 2^-10 = 1 + 7 * 2^-10, past the tie
    // at 1 + 2^-8, so one rounding gives 1 + 2^-7 (0x3F81). Rounding the
    // result first (to 1) would give the tie 1 + 2^-8 and round to even 1.0.
    HandCase t = make(kBf16, {tiny, 10, 5, -6});
    EXPECT_EQ(t.c_bits(0, 0), 0x3F81u);
    t.expect_row(0, {1 + std::ldexp(1.0f, -7), 11});
    t.expect_row(1, {5, -6});  // inactive: unchanged
  }
  {
    // fp32: plain old + result, once.
    HandCase t = make(kFp32, {0.5f, 20, 5, -6});
    t.expect_row(0, {1.5f + 3 * std::ldexp(1.0f, -10), 21});
    t.expect_row(1, {5, -6});
  }
}

TEST(ReferenceGroupedMatmul, OutputRoundsTiesToEven) {
  // n0 = a0 + a1, n1 = a0 + 3 a1; A = [X, 1] puts both results on ties,
  // the first rounding down to even, the second up.
  struct Tie {
    const char *name;
    ggemm_dtype out;
    float x;
    uint32_t n0_bits, n1_bits;
  };
  for (const Tie tie : {Tie{"fp16", kFp16, 2048, 0x6800u, 0x6802u},   // 2049 -> 2048, 2051 -> 2052
                        Tie{"bf16", kBf16, 256, 0x4380u, 0x4382u}}) {  // 257 -> 256, 259 -> 260
    SCOPED_TRACE(tie.name);
    HandCase t;
    t.out = tie.out;
    t.m = 1, t.n = 2, t.k = 2, t.e = 1;
    t.a = {tie.x, 1};
    t.b = {1, 1, 1, 3};
    t.offsets = {0, 1};
    t.ids = {0};
    t.active = 1;
    t.run();
    EXPECT_EQ(t.c_bits(0, 0), tie.n0_bits);
    EXPECT_EQ(t.c_bits(0, 1), tie.n1_bits);
  }
}

// ------------------------------------------------- randomized consistency --

// The contract, written as plainly as possible: one element at a time, one
// sequential k loop, reading through load_as_float.
void naive_grouped_matmul(const ggemm_grouped_matmul_args& p) {
  const int64_t M = p.m, N = p.n, K = p.k;
  const int64_t active = std::min<int64_t>(p.expert_usage_stats[1], p.num_groups);
  int64_t prev_end = 0;
  for (int64_t g = 0; g < active; ++g) {
    // Group 0 from row 0, group g from where group g - 1 ended; its end
    // clamped into [start, M].
    const int64_t start = prev_end;
    const int64_t stated_end = p.group_ends ? p.group_ends[g] : p.a_offsets[g + 1];
    const int64_t end = std::min<int64_t>(std::max<int64_t>(stated_end, start), M);
    prev_end = end;
    const int32_t e = p.expert_ids[g];
    const bool valid = e >= 0 && e < p.num_experts;
    for (int64_t m = start; m < end; ++m) {
      for (int64_t n = 0; n < N; ++n) {
        const size_t idx = static_cast<size_t>(m * N + n);
        if (!valid) {
          if (p.epilogue != GGEMM_EPILOGUE_ACCUMULATE) store_from_float(p.c_dtype, p.c, idx, 0.0f);
          continue;
        }
        const bool planes = p.a_plane_split0 != 0 || p.a_plane_split1 != 0;
        const int64_t plane = planes ? (n >= p.a_plane_split0) + (n >= p.a_plane_split1) : 0;
        float sum = 0.0f;
        for (int64_t k = 0; k < K; ++k) {
          const size_t ai = static_cast<size_t>((m + plane * M) * K + k);
          const size_t bi = static_cast<size_t>(p.transpose_b ? (e * N + n) * K + k : (e * K + k) * N + n);
          sum += load_as_float(p.a_dtype, p.a, ai) * load_as_float(p.b_dtype, p.b, bi);
        }
        float v = sum;
        if (p.epilogue == GGEMM_EPILOGUE_ROW_SCALE) v = sum * p.row_scale[m];
        if (p.epilogue == GGEMM_EPILOGUE_ACCUMULATE)
          v = load_as_float(p.c_dtype, p.c, idx) + sum;
        store_from_float(p.c_dtype, p.c, idx, v);
      }
    }
  }
}

// A random problem covering every knob of the contract.
struct RandomCase {
  ggemm_grouped_matmul_args args{};
  Bytes a, b, c_init;
  std::vector<uint32_t> offsets;
  std::vector<int32_t> ids;
  std::vector<float> scale;
  uint32_t stats[2] = {0, 0};

  // exact_values: operands are multiples of 1/4 in [-2, 2] (and so are the
  // scales), so every partial sum is exact in fp32 and summation order cannot
  // matter; otherwise uniform values in [-1, 1].
  RandomCase(Rng& rng, bool exact_values) {
    const ggemm_dtype in = rng.uniform_int(0, 1) ? kBf16 : kFp16;
    const ggemm_dtype outs[3] = {kBf16, kFp16, kFp32};
    const ggemm_dtype out = outs[rng.uniform_int(0, 2)];
    const int64_t M = rng.uniform_int(0, 150), N = rng.uniform_int(1, 140);
    const int64_t K = exact_values ? rng.uniform_int(1, 48) : rng.uniform_int(1, 300);
    const int64_t E = rng.uniform_int(1, 6);
    const int64_t G = rng.uniform_int(1, 9);

    // Split points anywhere in [0, M], sorted; sometimes the last is < M.
    offsets.assign(static_cast<size_t>(G + 1), 0);
    for (int64_t g = 1; g <= G; ++g) offsets[static_cast<size_t>(g)] = static_cast<uint32_t>(rng.uniform_int(0, M));
    std::sort(offsets.begin() + 1, offsets.end());
    if (rng.uniform_int(0, 3) == 0) offsets[static_cast<size_t>(G)] = static_cast<uint32_t>(M);
    if (rng.uniform_int(0, 4) == 0)  // malformed: unsorted and past M, as the kernel tolerates
      for (uint32_t& o : offsets) o = static_cast<uint32_t>(rng.uniform_int(0, M + 5));
    ids.resize(static_cast<size_t>(G));
    for (int32_t& id : ids) id = static_cast<int32_t>(rng.uniform_int(-1, E));  // E: out of range
    stats[0] = 0;
    stats[1] = static_cast<uint32_t>(rng.uniform_int(0, G + 2));

    int64_t s0 = 0, s1 = 0;
    if (rng.uniform_int(0, 1)) {
      s0 = rng.uniform_int(1, N);
      s1 = rng.uniform_int(s0, N);
    }
    const int64_t a_rows = (s0 || s1) ? 3 * M : M;
    const bool tb = rng.uniform_int(0, 1) != 0;
    const ggemm_epilogue ep = static_cast<ggemm_epilogue>(rng.uniform_int(0, 2));

    auto fill = [&](ggemm_dtype dt, Bytes& mem, size_t count) {
      mem.assign(count * dtype_size(dt), 0);
      if (exact_values)
        for (size_t i = 0; i < count; ++i)
          store_from_float(dt, mem.data(), i, static_cast<float>(rng.uniform_int(-8, 8)) / 4);
      else
        fill_random(dt, mem.data(), count, rng);
    };
    fill(in, a, static_cast<size_t>(a_rows * K));
    fill(in, b, static_cast<size_t>(E * N * K));
    if (ep == GGEMM_EPILOGUE_ACCUMULATE)
      fill(out, c_init, static_cast<size_t>(M * N));
    else
      c_init = poisoned_bytes(out, static_cast<size_t>(M * N));
    scale.resize(static_cast<size_t>(M));
    for (float& s : scale)
      s = exact_values ? static_cast<float>(rng.uniform_int(-8, 8)) / 4 : rng.uniform(-1.0f, 1.0f);

    args.struct_size = sizeof args;
    args.a_dtype = args.b_dtype = in;
    args.c_dtype = out;
    args.m = M, args.n = N, args.k = K, args.num_experts = E;
    args.a = a.data(), args.b = b.data();  // C: each run's own copy of c_init
    args.transpose_b = tb;
    args.a_offsets = offsets.data(), args.expert_ids = ids.data(), args.expert_usage_stats = stats;
    args.num_groups = G;
    args.a_plane_split0 = s0, args.a_plane_split1 = s1;
    args.epilogue = ep;
    args.row_scale = scale.data();
  }

  Bytes run(bool naive, unsigned threads = 0) const {
    Bytes c = c_init;
    ggemm_grouped_matmul_args p = args;
    p.c = c.data();
    if (naive)
      naive_grouped_matmul(p);
    else
      ggemm::ref::grouped_matmul(p, threads);
    return c;
  }

  std::string describe() const {
    std::ostringstream s;
    s << "M " << args.m << " N " << args.n << " K " << args.k << " E " << args.num_experts << " groups "
      << args.num_groups << " active " << stats[1] << " in " << args.a_dtype << " out " << args.c_dtype
      << " transpose_b " << args.transpose_b << " splits " << args.a_plane_split0 << ","
      << args.a_plane_split1 << " epilogue " << args.epilogue;
    return s.str();
  }
};

// The same calls with group_ends = a_offsets + 1 (a_offsets NULL), and
// with garbage in a_offsets[0]: bitwise the same outputs (exact values, so
// the naive product agrees bitwise too).
TEST(ReferenceGroupedMatmul, GroupEndsAndTheFirstOffsetChangeNothing) {
  Rng rng(20261202);
  for (int iter = 0; iter < 60; ++iter) {
    RandomCase rc(rng, /*exact_values=*/true);
    SCOPED_TRACE(rc.describe());
    const Bytes want = rc.run(false);
    RandomCase ends = rc;
    ends.args.group_ends = rc.offsets.data() + 1;
    ends.args.a_offsets = nullptr;
    EXPECT_EQ(ends.run(false), want) << "group_ends";
    EXPECT_EQ(ends.run(true), want) << "group_ends, naive";
    RandomCase garbage = rc;
    garbage.offsets[0] = uint32_t(rng.uniform_int(1, 200));
    garbage.args.a_offsets = garbage.offsets.data();
    EXPECT_EQ(garbage.run(false), want) << "a_offsets[0] = " << garbage.offsets[0];
  }
}

TEST(ReferenceGroupedMatmul, ThreadedMatchesNaiveExactly) {
  Rng rng(20261129);
  for (int iter = 0; iter < 60; ++iter) {
    const RandomCase rc(rng, /*exact_values=*/true);
    SCOPED_TRACE(rc.describe());
    const Bytes want = rc.run(true);
    for (unsigned threads : {1u, 3u, 0u}) {
      const Bytes got = rc.run(false, threads);
      // Bitwise: poisoned rows must stay poisoned, every sum is exact.
      ASSERT_TRUE(want == got) << "threads " << threads << "\n"
                               << compare_matrix(rc.args.c_dtype, want.data(), got.data(), rc.args.m,
                                                 rc.args.n, 0, 0)
                                      .message();
    }
  }
}

TEST(ReferenceGroupedMatmul, ThreadedMatchesNaiveWithinTolerance) {
  Rng rng(42);
  for (int iter = 0; iter < 30; ++iter) {
    const RandomCase rc(rng, /*exact_values=*/false);
    SCOPED_TRACE(rc.describe());
    const Bytes want = rc.run(true);
    const Bytes got1 = rc.run(false, 1);
    const Bytes got5 = rc.run(false, 5);
    EXPECT_TRUE(got1 == got5) << "the result depends on the thread count";
    // ACCUMULATE: C_old and the result may cancel, so the result's own
    // rounding (up to rtol * |result|, |result| <= K) is not within rtol * |ref|.
    const ggemm_dtype out = rc.args.c_dtype;
    const double atol = default_atol(out, rc.args.k) +
                        (rc.args.epilogue == GGEMM_EPILOGUE_ACCUMULATE ? default_rtol(out) * rc.args.k : 0.0);
    EXPECT_TRUE(compare_matrix(out, want.data(), got1.data(), rc.args.m, rc.args.n, atol,
                               default_rtol(out)));
  }
}

// --------------------------------------------------------------- test_util --

TEST(TestUtil, CompareMatrixReportsMismatches) {
  std::vector<float> want = {1, 2, 3, 4, 5, 6};
  std::vector<float> got = want;
  EXPECT_TRUE(compare_matrix(kFp32, want.data(), got.data(), 2, 3, 0, 0));
  got[5] = 6.5f;
  got[1] = 2.001f;
  const ::testing::AssertionResult r = compare_matrix(kFp32, want.data(), got.data(), 2, 3, 0.01, 0);
  EXPECT_FALSE(r);
  EXPECT_NE(std::string(r.message()).find("(1, 2)"), std::string::npos) << r.message();
  EXPECT_NE(std::string(r.message()).find("1 of 6"), std::string::npos) << r.message();
  EXPECT_TRUE(compare_matrix(kFp32, want.data(), got.data(), 2, 3, 0, 0.1));  // rtol covers both

  got[5] = std::numeric_limits<float>::quiet_NaN();  // NaN actual never passes
  EXPECT_FALSE(compare_matrix(kFp32, want.data(), got.data(), 2, 3, 1e9, 1e9));
}

TEST(TestUtil, CompareMatrixPoisonMustStayUntouched) {
  uint16_t want[4] = {0x3F80, 0, 0, 0x3F80};
  uint16_t got[4] = {0x3F80, 0, 0, 0x3F80};
  poison(&want[1], 2 * sizeof(uint16_t));
  poison(&got[1], 2 * sizeof(uint16_t));
  EXPECT_TRUE(compare_matrix(kBf16, want, got, 2, 2, 0, 0));
  got[2] = 0;  // written where it should not be
  EXPECT_FALSE(compare_matrix(kBf16, want, got, 2, 2, 1e9, 1e9));
  got[2] = 0x7FC0;  // another NaN is still a write
  EXPECT_FALSE(compare_matrix(kBf16, want, got, 2, 2, 1e9, 1e9));
}

TEST(TestUtil, FillRandomIsRepresentableAndNonZero) {
  Rng rng(3);
  for (ggemm_dtype dt : {kBf16, kFp16, kFp32}) {
    Bytes mem(1000 * dtype_size(dt));
    fill_random(dt, mem.data(), 1000, rng, -3.0f, 2.0f);
    bool nonzero = false;
    for (size_t i = 0; i < 1000; ++i) {
      const float v = load_as_float(dt, mem.data(), i);
      ASSERT_GE(v, -3.0f);
      ASSERT_LE(v, 2.0f);
      nonzero = nonzero || v != 0.0f;
    }
    EXPECT_TRUE(nonzero);
  }
  // A range that rounds to zero everywhere still yields one non-zero element.
  uint16_t tiny[8];
  fill_random(kBf16, tiny, 8, rng, 0.0f, 1e-3f);
  bool nonzero = false;
  for (uint16_t h : tiny) nonzero = nonzero || bf16_to_float(h) != 0.0f;
  EXPECT_TRUE(nonzero);
}

// The default tolerances accept an honest kernel (a different summation order
// and its own rounding) and reject one that drops a 64-deep k-block.
TEST(TestUtil, DefaultTolerancesRejectAMissingKBlock) {
  Rng rng(11);
  const int64_t M = 64, N = 64, K = 1024;
  for (ggemm_dtype out : {kBf16, kFp16, kFp32}) {
    Bytes a(static_cast<size_t>(M * K) * 2), b(static_cast<size_t>(N * K) * 2);
    fill_random(kBf16, a.data(), static_cast<size_t>(M * K), rng);
    fill_random(kBf16, b.data(), static_cast<size_t>(N * K), rng);
    std::vector<uint32_t> offsets = {0, static_cast<uint32_t>(M)};
    std::vector<int32_t> ids = {0};
    uint32_t stats[2] = {static_cast<uint32_t>(M), 1};
    ggemm_grouped_matmul_args p{};
    p.struct_size = sizeof p;
    p.a_dtype = p.b_dtype = kBf16;
    p.c_dtype = out;
    p.m = M, p.n = N, p.k = K, p.num_experts = 1;
    p.a = a.data(), p.b = b.data(), p.transpose_b = 1;
    p.a_offsets = offsets.data(), p.expert_ids = ids.data(), p.expert_usage_stats = stats;
    p.num_groups = 1;
    p.epilogue = GGEMM_EPILOGUE_STORE;

    Bytes want(static_cast<size_t>(M * N) * dtype_size(out));
    Bytes reordered(want.size()), broken(want.size());
    p.c = want.data();
    ggemm::ref::grouped_matmul(p);
    p.c = reordered.data();
    naive_grouped_matmul(p);  // another summation order
    for (int64_t m = 0; m < M; ++m)
      for (int64_t k = 512; k < 576; ++k) store_from_float(kBf16, a.data(), static_cast<size_t>(m * K + k), 0.0f);
    p.c = broken.data();
    ggemm::ref::grouped_matmul(p);

    const double atol = default_atol(out, K), rtol = default_rtol(out);
    EXPECT_TRUE(compare_matrix(out, want.data(), reordered.data(), M, N, atol, rtol));
    int64_t caught = 0;
    for (size_t i = 0; i < static_cast<size_t>(M * N); ++i) {
      const double e = load_as_float(out, want.data(), i), g = load_as_float(out, broken.data(), i);
      caught += std::fabs(e - g) > atol + rtol * std::fabs(e);
    }
    EXPECT_GT(caught, M * N * 9 / 10) << "dtype " << out;
  }
}

}  // namespace
}  // namespace ggemm::testing
