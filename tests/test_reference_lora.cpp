// CPU tests of the LoRA Q/K/V references (ggemm::ref::lora_shrink_qkv and
// lora_expand_qkv): hand-computed small cases for the planar routing, GQA
// output routing, groups, scale and the accumulate rounding; the threaded
// references against naive loops written here; and both against
// ggemm::ref::grouped_matmul, whose contract they specialise.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "dtype.h"
#include "ggemm_reference.h"
#include "test_util.h"

namespace ggemm::testing {
namespace {

using ref::dtype_size;
using ref::load_as_float;
using ref::round_to_dtype;
using ref::store_from_float;

// ------------------------------------------------------------- shrink ------

// A small shrink with logical float values. P starts poisoned unless p_init.
struct ShrinkHand {
  ggemm_dtype in = kBf16, out = kFp32;
  int64_t m = 0, k = 0, rank = 0, adapters = 1;
  std::vector<float> x, a;  // x [M, K], a [G, 3R, K]
  std::vector<uint32_t> offsets;
  std::vector<int32_t> ids;
  uint32_t active = 0;
  float scale = 1.0f;
  bool accumulate = false;
  std::vector<float> p_init;  // [3, M, R]

  Bytes x_mem, a_mem, p;
  uint32_t stats[2] = {0, 0};

  void run(unsigned threads = 0) {
    x_mem = pack_exact(in, x);
    a_mem = pack_exact(in, a);
    ASSERT_EQ(x.size(), static_cast<size_t>(m * k));
    ASSERT_EQ(a.size(), static_cast<size_t>(adapters * 3 * rank * k));
    ASSERT_EQ(offsets.size(), ids.size() + 1);
    if (p_init.empty()) {
      p = poisoned_bytes(out, static_cast<size_t>(3 * m * rank));
    } else {
      ASSERT_EQ(p_init.size(), static_cast<size_t>(3 * m * rank));
      p = pack_exact(out, p_init);
    }
    stats[1] = active;
    ggemm_lora_shrink_qkv_args args{};
    args.struct_size = sizeof args;
    args.x_dtype = in, args.p_dtype = out;
    args.m = m, args.k = k, args.rank = rank, args.num_adapters = adapters;
    args.x = x_mem.data(), args.lora_a = a_mem.data(), args.p = p.data();
    args.a_offsets = offsets.data(), args.adapter_ids = ids.data(), args.expert_usage_stats = stats;
    args.num_groups = static_cast<int64_t>(ids.size());
    args.scale = scale, args.accumulate = accumulate ? 1 : 0;
    ggemm::ref::lora_shrink_qkv(args, threads);
  }
  // P[plane][row][:] as a [3M, R] matrix row.
  void expect(int plane, int64_t row, const std::vector<float>& want) const {
    SCOPED_TRACE("plane " + std::to_string(plane));
    expect_row(out, p, rank, plane * m + row, want, "P");
  }
  void expect_poisoned(int plane, int64_t row) const {
    SCOPED_TRACE("plane " + std::to_string(plane));
    expect_row_poisoned(out, p, rank, plane * m + row, "P");
  }
  uint32_t bits(int plane, int64_t row, int64_t r) const {
    return bits_at(out, p, static_cast<size_t>((plane * m + row) * rank + r));
  }
};

TEST(ReferenceLoraShrink, FusedColumnsGoToPlanes) {
  // One adapter, K = 2, R = 2. Fused rows of A: q [1,0],[0,1]; k [1,1],[1,-1];
  // v [2,0],[0,3]. So P[0][m] = [x0, x1], P[1][m] = [x0+x1, x0-x1],
  // P[2][m] = [2 x0, 3 x1].
  for (unsigned threads : {1u, 0u}) {
    ShrinkHand t;
    t.m = 2, t.k = 2, t.rank = 2;
    t.x = {1, 2, 3, 4};
    t.a = {1, 0, 0, 1, /*k*/ 1, 1, 1, -1, /*v*/ 2, 0, 0, 3};
    t.offsets = {0, 2};
    t.ids = {0};
    t.active = 1;
    t.run(threads);
    t.expect(0, 0, {1, 2});
    t.expect(0, 1, {3, 4});
    t.expect(1, 0, {3, -1});
    t.expect(1, 1, {7, -1});
    t.expect(2, 0, {2, 6});
    t.expect(2, 1, {6, 12});
    // The flat layout is [plane][m][r]: element 5 is P[1][0][1].
    EXPECT_EQ(load_as_float(t.out, t.p.data(), 5), -1.0f);
    EXPECT_EQ(load_as_float(t.out, t.p.data(), 8), 2.0f);   // P[2][0][0]
    EXPECT_EQ(load_as_float(t.out, t.p.data(), 10), 6.0f);  // P[2][1][0]
  }
}

TEST(ReferenceLoraShrink, AdaptersPerGroupWithScale) {
  // Two adapters, R = 1: A[0] fused rows [1,0],[0,1],[1,1]; A[1] = 2 * A[0]
  // negated. Rows 0-1 use adapter 1, row 2 adapter 0. Scale 0.5.
  ShrinkHand t;
  t.out = kBf16;
  t.m = 3, t.k = 2, t.rank = 1, t.adapters = 2;
  t.x = {1, 2, 3, 4, 5, 6};
  t.a = {1, 0, 0, 1, 1, 1, /**/ -2, 0, 0, -2, -2, -2};
  t.offsets = {0, 2, 3};
  t.ids = {1, 0};
  t.active = 2;
  t.scale = 0.5f;
  t.run();
  // adapter 1: 0.5 * -2 * [x0, x1, x0 + x1] = -[x0, x1, x0 + x1]
  t.expect(0, 0, {-1});
  t.expect(1, 0, {-2});
  t.expect(2, 0, {-3});
  t.expect(0, 1, {-3});
  t.expect(1, 1, {-4});
  t.expect(2, 1, {-7});
  // adapter 0: 0.5 * [5, 6, 11]
  t.expect(0, 2, {2.5f});
  t.expect(1, 2, {3});
  t.expect(2, 2, {5.5f});
}

TEST(ReferenceLoraShrink, InactiveZeroedEmptySkippedUngroupedUntouched) {
  // Groups: rows [0,1) adapter 0, [1,1) empty, [1,3) adapter -1, [3,4) id == G
  // (out of range: inactive), [4,5) id -7. Row 5 is in no group.
  ShrinkHand t;
  t.out = kFp16;
  t.m = 6, t.k = 2, t.rank = 1, t.adapters = 1;
  t.x = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  t.a = {1, 0, 0, 1, 1, 1};
  t.offsets = {0, 1, 1, 3, 4, 5};
  t.ids = {0, 0, -1, 1, -7};
  t.active = 5;
  t.run();
  for (int plane = 0; plane < 3; ++plane) {
    for (int64_t row = 1; row < 5; ++row) t.expect(plane, row, {0});
    t.expect_poisoned(plane, 5);
  }
  t.expect(0, 0, {1});
  t.expect(1, 0, {2});
  t.expect(2, 0, {3});
}

TEST(ReferenceLoraShrink, NumActiveAndMalformedOffsets) {
  // Offsets {0, 3, 2, 9} over M = 5: group 1 runs backwards (empty), group 2
  // starts where group 0 ended and is clamped to M. With active = 1 only
  // group 0 is touched; with 100 (clamped to 3) all.
  auto make = [](uint32_t active) {
    ShrinkHand t;
    t.m = 5, t.k = 1, t.rank = 1, t.adapters = 2;
    t.x = {1, 2, 3, 4, 5};
    t.a = {1, 2, 3, /**/ -1, -2, -3};
    t.offsets = {0, 3, 2, 9};
    t.ids = {0, 0, 1};
    t.active = active;
    t.run();
    return t;
  };
  {
    ShrinkHand t = make(1);
    for (int64_t row = 0; row < 3; ++row)
      for (int plane = 0; plane < 3; ++plane) t.expect(plane, row, {float((plane + 1) * (row + 1))});
    for (int plane = 0; plane < 3; ++plane) {
      t.expect_poisoned(plane, 3);
      t.expect_poisoned(plane, 4);
    }
  }
  {
    ShrinkHand t = make(100);
    for (int64_t row = 3; row < 5; ++row)
      for (int plane = 0; plane < 3; ++plane) t.expect(plane, row, {-float((plane + 1) * (row + 1))});
  }
  {
    ShrinkHand t = make(0);
    for (int plane = 0; plane < 3; ++plane)
      for (int64_t row = 0; row < 5; ++row) t.expect_poisoned(plane, row);
  }
}

TEST(ReferenceLoraShrink, AccumulateAddsOnceRoundingOnce) {
  // bf16 P. Row 0: x = [1, 2^-8], q row [1, 0.75]: result 1 + 3 * 2^-10;
  // scale 1; old 2^-8 -> old + v = 1 + 7 * 2^-10, past the tie at 1 + 2^-8:
  // one rounding gives 1 + 2^-7 (0x3F81); rounding v first (to 1) would land
  // on the tie and round to even 1.0. Row 1's group is inactive: unchanged,
  // even where the old value is -0 or NaN (+= 0 would change -0 to +0).
  const float tiny = std::ldexp(1.0f, -8);
  ShrinkHand t;
  t.out = kBf16;
  t.m = 2, t.k = 2, t.rank = 1;
  t.x = {1, tiny, 7, 7};
  t.a = {1, 0.75f, /*k*/ 1, 0, /*v*/ 0, 2};
  t.offsets = {0, 1, 2};
  t.ids = {0, -1};
  t.active = 2;
  t.accumulate = true;
  // [plane][m]: q: tiny, -0; k: 10, 5; v: 0.5, 1
  t.p_init = {tiny, -0.0f, 10, 5, 0.5f, 1};
  t.run();
  EXPECT_EQ(t.bits(0, 0, 0), 0x3F81u);
  t.expect(1, 0, {11});
  t.expect(2, 0, {0.5f + 2 * tiny});
  EXPECT_EQ(t.bits(0, 1, 0), 0x8000u) << "-0 of an inactive row must stay -0";
  t.expect(1, 1, {5});
  t.expect(2, 1, {1});
}

TEST(ReferenceLoraShrink, ScaleIsAnFp32MultiplyThenOneRounding) {
  // result 3, scale 0.1f: v = fl32(0.1f * 3) = 0x3E99999A; fp16(v) = 0x34CD.
  for (ggemm_dtype out : {kFp16, kFp32, kBf16}) {
    ShrinkHand t;
    t.out = out;
    t.m = 1, t.k = 1, t.rank = 1;
    t.x = {3};
    t.a = {1, -1, 2};
    t.offsets = {0, 1};
    t.ids = {0};
    t.active = 1;
    t.scale = 0.1f;
    t.run();
    const float v = 0.1f * 3.0f;
    EXPECT_EQ(load_as_float(out, t.p.data(), 0), round_to_dtype(out, v));
    EXPECT_EQ(load_as_float(out, t.p.data(), 1), round_to_dtype(out, 0.1f * -3.0f));
    EXPECT_EQ(load_as_float(out, t.p.data(), 2), round_to_dtype(out, 0.1f * 6.0f));
    if (out == kFp16) {
      EXPECT_EQ(t.bits(0, 0, 0), 0x34CDu);
    }
  }
}

// ------------------------------------------------------------- expand ------

// A small expand with logical float values. q_out/kv_out start poisoned
// unless their init vectors are given.
struct ExpandHand {
  ggemm_dtype in = kBf16, out = kFp32;
  int64_t m = 0, rank = 0, q = 0, kv = 0, adapters = 1;
  std::vector<float> p, b;  // p [3, M, R], b [G, q + 2 kv, R]
  std::vector<uint32_t> offsets;
  std::vector<int32_t> ids;
  uint32_t active = 0;
  float scale = 1.0f;
  bool accumulate = false;
  std::vector<float> q_init, kv_init;

  Bytes p_mem, b_mem, q_out, kv_out;
  uint32_t stats[2] = {0, 0};

  void run(unsigned threads = 0) {
    ASSERT_EQ(p.size(), static_cast<size_t>(3 * m * rank));
    ASSERT_EQ(b.size(), static_cast<size_t>(adapters * (q + 2 * kv) * rank));
    ASSERT_EQ(offsets.size(), ids.size() + 1);
    p_mem = pack_exact(in, p);
    b_mem = pack_exact(in, b);
    q_out = q_init.empty() ? poisoned_bytes(out, static_cast<size_t>(m * q)) : pack_exact(out, q_init);
    kv_out = kv_init.empty() ? poisoned_bytes(out, static_cast<size_t>(2 * m * kv)) : pack_exact(out, kv_init);
    stats[1] = active;
    ggemm_lora_expand_qkv_args args{};
    args.struct_size = sizeof args;
    args.p_dtype = in, args.out_dtype = out;
    args.m = m, args.rank = rank, args.q_dim = q, args.kv_dim = kv, args.num_adapters = adapters;
    args.p = p_mem.data(), args.lora_b = b_mem.data(), args.q_out = q_out.data(), args.kv_out = kv_out.data();
    args.a_offsets = offsets.data(), args.adapter_ids = ids.data(), args.expert_usage_stats = stats;
    args.num_groups = static_cast<int64_t>(ids.size());
    args.scale = scale, args.accumulate = accumulate ? 1 : 0;
    ggemm::ref::lora_expand_qkv(args, threads);
  }
  void expect_q(int64_t row, const std::vector<float>& want) const { expect_row(out, q_out, q, row, want, "q_out"); }
  // kv_out row `row` of [2M, kv]: K rows are [0, M), V rows [M, 2M).
  void expect_kv(int64_t row, const std::vector<float>& want) const {
    expect_row(out, kv_out, kv, row, want, "kv_out");
  }
  void expect_token_poisoned(int64_t token) const {
    expect_row_poisoned(out, q_out, q, token, "q_out");
    expect_row_poisoned(out, kv_out, kv, token, "kv_out");
    expect_row_poisoned(out, kv_out, kv, m + token, "kv_out");
  }
};

// GQA (q_dim 3 != kv_dim 2), R = 2, M = 2. Each plane of P has its own scale
// of values, so every output shows which plane it read:
//   P0 = [[1,2],[3,4]], P1 = [[10,20],[30,40]], P2 = [[100,200],[320,400]]
//   B q rows [1,0],[0,1],[1,1]; k rows [1,0],[0,2]; v rows [1,0],[0,3].
ExpandHand gqa_case() {
  ExpandHand t;
  t.m = 2, t.rank = 2, t.q = 3, t.kv = 2;
  t.p = {1, 2, 3, 4, /*k*/ 10, 20, 30, 40, /*v*/ 100, 200, 320, 400};
  t.b = {1, 0, 0, 1, 1, 1, /*k*/ 1, 0, 0, 2, /*v*/ 1, 0, 0, 3};
  t.offsets = {0, 2};
  t.ids = {0};
  t.active = 1;
  return t;
}

TEST(ReferenceLoraExpand, GqaRoutingToQAndKvHalves) {
  for (unsigned threads : {1u, 0u}) {
    for (ggemm_dtype out : {kFp32, kBf16, kFp16}) {
      ExpandHand t = gqa_case();
      t.out = out;
      t.run(threads);
      t.expect_q(0, {1, 2, 3});
      t.expect_q(1, {3, 4, 7});
      t.expect_kv(0, {10, 40});     // K of token 0
      t.expect_kv(1, {30, 80});     // K of token 1
      t.expect_kv(2, {100, 600});   // V of token 0: row M + 0
      t.expect_kv(3, {320, 1200});  // V of token 1: row M + 1
    }
  }
}

TEST(ReferenceLoraExpand, EachGroupUsesItsAdapter) {
  // Two adapters: B[1] = -0.5 * B[0]; token 0 uses adapter 1, token 1 adapter 0.
  ExpandHand t = gqa_case();
  std::vector<float> b1;
  for (float v : t.b) b1.push_back(-0.5f * v);
  t.b.insert(t.b.end(), b1.begin(), b1.end());
  t.adapters = 2;
  t.offsets = {0, 1, 2};
  t.ids = {1, 0};
  t.active = 2;
  t.run();
  t.expect_q(0, {-0.5f, -1, -1.5f});
  t.expect_q(1, {3, 4, 7});
  t.expect_kv(0, {-5, -20});
  t.expect_kv(1, {30, 80});
  t.expect_kv(2, {-50, -300});
  t.expect_kv(3, {320, 1200});
}

TEST(ReferenceLoraExpand, ScaleAlphaOverRank) {
  ExpandHand t = gqa_case();
  t.scale = 0.25f;
  t.out = kBf16;
  t.run();
  t.expect_q(0, {0.25f, 0.5f, 0.75f});
  t.expect_q(1, {0.75f, 1, 1.75f});
  t.expect_kv(0, {2.5f, 10});
  t.expect_kv(1, {7.5f, 20});
  t.expect_kv(2, {25, 150});
  t.expect_kv(3, {80, 300});
}

TEST(ReferenceLoraExpand, InactiveZeroedInAllRegionsUngroupedUntouched) {
  // M = 5 tokens, R = 1, q 2, kv 1. Groups: [0,1) adapter 0; [1,1) empty;
  // [1,2) -1; [2,3) id == G; token 3 and 4 in no group (offsets end at 3).
  ExpandHand t;
  t.out = kBf16;
  t.m = 5, t.rank = 1, t.q = 2, t.kv = 1;
  t.p = {1, 2, 3, 4, 5, /*k*/ 6, 7, 8, 9, 10, /*v*/ 11, 12, 13, 14, 15};
  t.b = {1, 2, /*k*/ 3, /*v*/ 4};
  t.offsets = {0, 1, 1, 2, 3};
  t.ids = {0, 0, -1, 1};
  t.active = 4;
  t.run();
  t.expect_q(0, {1, 2});
  t.expect_kv(0, {18});
  t.expect_kv(5, {44});  // V of token 0
  for (int64_t token : {1, 2}) {
    t.expect_q(token, {0, 0});
    t.expect_kv(token, {0});
    t.expect_kv(5 + token, {0});
  }
  t.expect_token_poisoned(3);
  t.expect_token_poisoned(4);
}

TEST(ReferenceLoraExpand, AccumulateAddsOnceRoundingOnceInactiveUnchanged) {
  // bf16 out, scale 0.5. Token 0 (adapter 0): P0 = [1, 2^-7], q row [2, 0.75]:
  // result 2 + 6 * 2^-10, v = 1 + 3 * 2^-10; old 2^-8 -> 1 + 7 * 2^-10, one
  // rounding: 0x3F81 (rounding v first would give 1 + 2^-8, a tie, -> 1.0).
  // Token 1 is inactive: its rows are left exactly as they were.
  const float tiny = std::ldexp(1.0f, -8);
  ExpandHand t;
  t.out = kBf16;
  t.m = 2, t.rank = 2, t.q = 1, t.kv = 1;
  t.p = {1, 2 * tiny, 7, 7, /*k*/ 4, 0, 7, 7, /*v*/ 0, 8, 7, 7};
  t.b = {2, 0.75f, /*k*/ 1, 0, /*v*/ 0, 1};
  t.offsets = {0, 1, 2};
  t.ids = {0, -1};
  t.active = 2;
  t.scale = 0.5f;
  t.accumulate = true;
  t.q_init = {tiny, -0.0f};
  t.kv_init = {10, 5, /*V*/ -3, 6};
  t.run();
  EXPECT_EQ(bits_at(kBf16, t.q_out, 0), 0x3F81u);
  t.expect_kv(0, {10 + 2});  // K: 0.5 * 4
  t.expect_kv(2, {-3 + 4});  // V: 0.5 * 8
  EXPECT_EQ(bits_at(kBf16, t.q_out, 1), 0x8000u) << "-0 of an inactive token must stay -0";
  t.expect_kv(1, {5});
  t.expect_kv(3, {6});
}

TEST(ReferenceLoraExpand, EmptyKvOrQRegionsAreFine) {
  // The reference tolerates kv_dim = 0 (not a valid call, but no crash).
  ExpandHand t;
  t.m = 1, t.rank = 1, t.q = 2, t.kv = 0;
  t.p = {2, 0, 0};
  t.b = {1, -1};
  t.offsets = {0, 1};
  t.ids = {0};
  t.active = 1;
  t.run();
  t.expect_q(0, {2, -2});
}

// ------------------------------------------------------------ composed ------

TEST(ReferenceLora, ShrinkThenExpandThroughBf16P) {
  // X [1, 2] = [1, x1], x1 = 1 + 2^-6. A's fused rows: q [1, 1] gives
  // 2 + 2^-6 (a bf16: exact); k [1, 2^-7] gives 1 + 2^-7 + 2^-13, which bf16
  // P rounds to 1 + 2^-7; v [0, 3] gives 3 + 3 * 2^-6 (exact). The expand
  // (q 1, kv 1) must then read the rounded P, as the GPU's expand reads the
  // bf16 P its shrink wrote.
  const float x1 = 1 + std::ldexp(1.0f, -6);
  ShrinkHand s;
  s.out = kBf16;
  s.m = 1, s.k = 2, s.rank = 1;
  s.x = {1, x1};
  s.a = {1, 1, /*k*/ 1, std::ldexp(1.0f, -7), /*v*/ 0, 3};
  s.offsets = {0, 1};
  s.ids = {0};
  s.active = 1;
  s.run();
  const float pq = round_to_dtype(kBf16, 1 + x1);
  const float pk = round_to_dtype(kBf16, 1 + x1 * std::ldexp(1.0f, -7));
  const float pv = round_to_dtype(kBf16, 3 * x1);
  s.expect(0, 0, {pq});
  s.expect(1, 0, {pk});
  s.expect(2, 0, {pv});
  EXPECT_NE(pk, 1 + x1 * std::ldexp(1.0f, -7)) << "the case should exercise P's rounding";

  ExpandHand e;
  e.out = kFp32;
  e.m = 1, e.rank = 1, e.q = 1, e.kv = 1;
  e.p = {pq, pk, pv};
  e.b = {3, /*k*/ -1, /*v*/ 0.5f};
  e.offsets = {0, 1};
  e.ids = {0};
  e.active = 1;
  e.run();
  e.expect_q(0, {3 * pq});
  e.expect_kv(0, {-pk});
  e.expect_kv(1, {0.5f * pv});
}

// ---------------------------------------------- randomized consistency -----

// The contracts written as plainly as possible: one element at a time, a
// sequential k loop, through load_as_float / store_from_float.
template <class Route>
void naive_groups(int64_t M, int64_t N, int64_t num_adapters, const uint32_t* offsets, const int32_t* ids,
                  const uint32_t* stats, int64_t num_groups, bool accumulate, ggemm_dtype out, Route route) {
  const int64_t active = std::min<int64_t>(stats[1], num_groups);
  int64_t prev_end = 0;
  for (int64_t g = 0; g < active; ++g) {
    const int64_t start = prev_end;  // group 0 from row 0, group g where g - 1 ended
    const int64_t end = std::min<int64_t>(std::max<int64_t>(offsets[g + 1], start), M);
    prev_end = end;
    const int32_t a = ids[g];
    const bool valid = a >= 0 && a < num_adapters;
    for (int64_t m = start; m < end; ++m)
      for (int64_t n = 0; n < N; ++n) {
        void* base;
        size_t idx;
        float result = 0;
        route(m, n, valid ? a : -1, &base, &idx, &result);
        if (!valid) {
          if (!accumulate) store_from_float(out, base, idx, 0.0f);
          continue;
        }
        store_from_float(out, base, idx, accumulate ? load_as_float(out, base, idx) + result : result);
      }
  }
}

void naive_shrink(const ggemm_lora_shrink_qkv_args& p) {
  const int64_t M = p.m, K = p.k, R = p.rank;
  naive_groups(M, 3 * R, p.num_adapters, p.a_offsets, p.adapter_ids, p.expert_usage_stats, p.num_groups,
               p.accumulate != 0, p.p_dtype, [&](int64_t m, int64_t c, int32_t a, void** base, size_t* idx, float* v) {
                 *base = p.p;
                 *idx = static_cast<size_t>(((c / R) * M + m) * R + c % R);
                 if (a < 0) return;
                 float sum = 0;
                 for (int64_t k = 0; k < K; ++k)
                   sum += load_as_float(p.x_dtype, p.x, static_cast<size_t>(m * K + k)) *
                          load_as_float(p.x_dtype, p.lora_a, static_cast<size_t>((a * 3 * R + c) * K + k));
                 *v = p.scale * sum;
               });
}

void naive_expand(const ggemm_lora_expand_qkv_args& p) {
  const int64_t M = p.m, R = p.rank, Q = p.q_dim, KV = p.kv_dim, N = Q + 2 * KV;
  naive_groups(M, N, p.num_adapters, p.a_offsets, p.adapter_ids, p.expert_usage_stats, p.num_groups,
               p.accumulate != 0, p.out_dtype, [&](int64_t m, int64_t j, int32_t a, void** base, size_t* idx, float* v) {
                 int64_t plane;
                 if (j < Q) {
                   plane = 0, *base = p.q_out, *idx = static_cast<size_t>(m * Q + j);
                 } else if (j < Q + KV) {
                   plane = 1, *base = p.kv_out, *idx = static_cast<size_t>(m * KV + j - Q);
                 } else {
                   plane = 2, *base = p.kv_out, *idx = static_cast<size_t>((M + m) * KV + j - Q - KV);
                 }
                 if (a < 0) return;
                 float sum = 0;
                 for (int64_t r = 0; r < R; ++r)
                   sum += load_as_float(p.p_dtype, p.p, static_cast<size_t>((plane * M + m) * R + r)) *
                          load_as_float(p.p_dtype, p.lora_b, static_cast<size_t>((a * N + j) * R + r));
                 *v = p.scale * sum;
               });
}

// Random groups (sometimes malformed), ids in [-1, G] (G: out of range),
// active counts past num_groups; shared by both random cases.
struct RandomGroups {
  std::vector<uint32_t> offsets;
  std::vector<int32_t> ids;
  uint32_t stats[2] = {0, 0};

  void init(Rng& rng, int64_t M, int64_t G) {
    const int64_t groups = rng.uniform_int(1, 9);
    offsets.assign(static_cast<size_t>(groups + 1), 0);
    for (int64_t g = 1; g <= groups; ++g) offsets[static_cast<size_t>(g)] = static_cast<uint32_t>(rng.uniform_int(0, M));
    std::sort(offsets.begin() + 1, offsets.end());
    if (rng.uniform_int(0, 3) == 0) offsets.back() = static_cast<uint32_t>(M);
    if (rng.uniform_int(0, 4) == 0)
      for (uint32_t& o : offsets) o = static_cast<uint32_t>(rng.uniform_int(0, M + 5));
    ids.resize(static_cast<size_t>(groups));
    for (int32_t& id : ids) id = static_cast<int32_t>(rng.uniform_int(-1, G));
    stats[1] = static_cast<uint32_t>(rng.uniform_int(0, groups + 2));
  }

  // Points a LoRA call's routing fields at these groups.
  template <typename LoraArgs>
  void route(LoraArgs& args) const {
    args.a_offsets = offsets.data();
    args.adapter_ids = ids.data();
    args.expert_usage_stats = stats;
    args.num_groups = static_cast<int64_t>(ids.size());
  }
};

// exact: operands are multiples of 1/4 in [-2, 2] and the scale a power of
// two, so every sum is exact and summation order cannot matter.
void fill_values(Rng& rng, bool exact, ggemm_dtype dt, Bytes& mem, size_t count) {
  mem.assign(count * dtype_size(dt), 0);
  if (exact)
    for (size_t i = 0; i < count; ++i) store_from_float(dt, mem.data(), i, static_cast<float>(rng.uniform_int(-8, 8)) / 4);
  else
    fill_random(dt, mem.data(), count, rng);
}

float random_scale(Rng& rng, bool exact) {
  const float exact_scales[] = {1.0f, 0.5f, -2.0f, 0.25f, 0.0f};
  return exact ? exact_scales[rng.uniform_int(0, 4)] : rng.uniform(-2.0f, 2.0f);
}

struct RandomShrink {
  ggemm_lora_shrink_qkv_args args{};
  Bytes x, a, p_init;
  RandomGroups groups;

  RandomShrink(Rng& rng, bool exact) {
    const ggemm_dtype in = rng.uniform_int(0, 1) ? kBf16 : kFp16;
    const ggemm_dtype outs[3] = {kBf16, kFp16, kFp32};
    const ggemm_dtype out = outs[rng.uniform_int(0, 2)];
    const int64_t M = rng.uniform_int(0, 120), K = rng.uniform_int(1, exact ? 40 : 300);
    const int64_t R = rng.uniform_int(1, 20), G = rng.uniform_int(1, 5);
    groups.init(rng, M, G);
    const bool acc = rng.uniform_int(0, 1) != 0;
    fill_values(rng, exact, in, x, static_cast<size_t>(M * K));
    fill_values(rng, exact, in, a, static_cast<size_t>(G * 3 * R * K));
    if (acc)
      fill_values(rng, exact, out, p_init, static_cast<size_t>(3 * M * R));
    else
      p_init = poisoned_bytes(out, static_cast<size_t>(3 * M * R));
    args.struct_size = sizeof args;
    args.x_dtype = in, args.p_dtype = out;
    args.m = M, args.k = K, args.rank = R, args.num_adapters = G;
    args.x = x.data(), args.lora_a = a.data();  // P: each run's own copy of p_init
    groups.route(args);
    args.scale = random_scale(rng, exact);
    args.accumulate = acc;
  }
  Bytes run(bool naive, unsigned threads = 0) const {
    Bytes p = p_init;
    ggemm_lora_shrink_qkv_args q = args;
    q.p = p.data();
    if (naive)
      naive_shrink(q);
    else
      ggemm::ref::lora_shrink_qkv(q, threads);
    return p;
  }
  std::string describe() const {
    std::ostringstream s;
    s << "M " << args.m << " K " << args.k << " R " << args.rank << " G " << args.num_adapters << " groups "
      << args.num_groups << " active " << groups.stats[1] << " in " << args.x_dtype << " out " << args.p_dtype
      << " scale " << args.scale << " accumulate " << args.accumulate;
    return s.str();
  }
};

struct RandomExpand {
  ggemm_lora_expand_qkv_args args{};
  Bytes p, b, q_init, kv_init;
  RandomGroups groups;

  RandomExpand(Rng& rng, bool exact) {
    const ggemm_dtype in = rng.uniform_int(0, 1) ? kBf16 : kFp16;
    const ggemm_dtype outs[3] = {kBf16, kFp16, kFp32};
    const ggemm_dtype out = outs[rng.uniform_int(0, 2)];
    const int64_t M = rng.uniform_int(0, 120), R = rng.uniform_int(1, exact ? 40 : 140);
    const int64_t Q = rng.uniform_int(1, 70), KV = rng.uniform_int(1, 40), G = rng.uniform_int(1, 5);
    groups.init(rng, M, G);
    const bool acc = rng.uniform_int(0, 1) != 0;
    fill_values(rng, exact, in, p, static_cast<size_t>(3 * M * R));
    fill_values(rng, exact, in, b, static_cast<size_t>(G * (Q + 2 * KV) * R));
    if (acc) {
      fill_values(rng, exact, out, q_init, static_cast<size_t>(M * Q));
      fill_values(rng, exact, out, kv_init, static_cast<size_t>(2 * M * KV));
    } else {
      q_init = poisoned_bytes(out, static_cast<size_t>(M * Q));
      kv_init = poisoned_bytes(out, static_cast<size_t>(2 * M * KV));
    }
    args.struct_size = sizeof args;
    args.p_dtype = in, args.out_dtype = out;
    args.m = M, args.rank = R, args.q_dim = Q, args.kv_dim = KV, args.num_adapters = G;
    args.p = p.data(), args.lora_b = b.data();  // the outputs: each run's own copies
    groups.route(args);
    args.scale = random_scale(rng, exact);
    args.accumulate = acc;
  }
  // q_out followed by kv_out.
  Bytes run(bool naive, unsigned threads = 0) const {
    Bytes q = q_init, kv = kv_init;
    ggemm_lora_expand_qkv_args e = args;
    e.q_out = q.data();
    e.kv_out = kv.data();
    if (naive)
      naive_expand(e);
    else
      ggemm::ref::lora_expand_qkv(e, threads);
    q.insert(q.end(), kv.begin(), kv.end());
    return q;
  }
  std::string describe() const {
    std::ostringstream s;
    s << "M " << args.m << " R " << args.rank << " q " << args.q_dim << " kv " << args.kv_dim << " G "
      << args.num_adapters << " groups " << args.num_groups << " active " << groups.stats[1] << " in "
      << args.p_dtype << " out " << args.out_dtype << " scale " << args.scale << " accumulate " << args.accumulate;
    return s.str();
  }
};

TEST(ReferenceLoraShrink, ThreadedMatchesNaiveExactly) {
  Rng rng(20261201);
  for (int iter = 0; iter < 80; ++iter) {
    const RandomShrink rc(rng, /*exact=*/true);
    SCOPED_TRACE(rc.describe());
    const Bytes want = rc.run(true);
    for (unsigned threads : {1u, 3u, 0u}) {
      const Bytes got = rc.run(false, threads);
      ASSERT_TRUE(want == got) << "threads " << threads << "\n"
                               << compare_matrix(rc.args.p_dtype, want.data(), got.data(), 3 * rc.args.m,
                                                 rc.args.rank, 0, 0)
                                      .message();
    }
  }
}

TEST(ReferenceLoraExpand, ThreadedMatchesNaiveExactly) {
  Rng rng(20261202);
  for (int iter = 0; iter < 80; ++iter) {
    const RandomExpand rc(rng, /*exact=*/true);
    SCOPED_TRACE(rc.describe());
    const Bytes want = rc.run(true);
    for (unsigned threads : {1u, 3u, 0u}) {
      const Bytes got = rc.run(false, threads);
      ASSERT_TRUE(want == got) << "threads " << threads;
    }
  }
}

// Real-valued operands: the summation order differs from the naive loop, so
// within the default tolerances (times |scale|), and independent of threads.
TEST(ReferenceLora, ThreadedMatchesNaiveWithinTolerance) {
  using ggemm::testing::default_atol;
  using ggemm::testing::default_rtol;
  Rng rng(77);
  for (int iter = 0; iter < 30; ++iter) {
    {
      const RandomShrink rc(rng, false);
      SCOPED_TRACE(rc.describe());
      const Bytes want = rc.run(true), got1 = rc.run(false, 1), got4 = rc.run(false, 4);
      EXPECT_TRUE(got1 == got4) << "the result depends on the thread count";
      const ggemm_dtype out = rc.args.p_dtype;
      // ACCUMULATE: the old value and v may cancel; see test_reference.cpp.
      const double atol = std::fabs(rc.args.scale) * (default_atol(out, rc.args.k) +
                                                      (rc.args.accumulate ? default_rtol(out) * rc.args.k : 0.0)) +
                          (out == kFp16 ? std::ldexp(1.0, -24) : 0.0);
      EXPECT_TRUE(compare_matrix(out, want.data(), got1.data(), 3 * rc.args.m, rc.args.rank, atol,
                                 default_rtol(out)));
    }
    {
      const RandomExpand rc(rng, false);
      SCOPED_TRACE(rc.describe());
      const Bytes want = rc.run(true), got1 = rc.run(false, 1), got4 = rc.run(false, 4);
      EXPECT_TRUE(got1 == got4) << "the result depends on the thread count";
      const ggemm_dtype out = rc.args.out_dtype;
      const double atol = std::fabs(rc.args.scale) * (default_atol(out, rc.args.rank) +
                                                      (rc.args.accumulate ? default_rtol(out) * rc.args.rank : 0.0)) +
                          (out == kFp16 ? std::ldexp(1.0, -24) : 0.0);
      const size_t q_bytes = static_cast<size_t>(rc.args.m * rc.args.q_dim) * dtype_size(out);
      EXPECT_TRUE(compare_matrix(out, want.data(), got1.data(), rc.args.m, rc.args.q_dim, atol, default_rtol(out)))
          << "q_out";
      EXPECT_TRUE(compare_matrix(out, want.data() + q_bytes, got1.data() + q_bytes, 2 * rc.args.m, rc.args.kv_dim,
                                 atol, default_rtol(out)))
          << "kv_out";
    }
  }
}

// ------------------------------------- against ggemm::ref::grouped_matmul --

// The expand is grouped_matmul with a_plane_splits (q, q + kv) and the Q/K/V
// routing; the shrink is grouped_matmul with N = 3R and the planar permute.
// With exact operands and scale 1 both must agree bit for bit.
TEST(ReferenceLora, AgreesWithGroupedMatmulReference) {
  Rng rng(5150);
  for (int iter = 0; iter < 40; ++iter) {
    RandomExpand e(rng, true);
    e.args.scale = 1.0f;
    SCOPED_TRACE("expand " + e.describe());
    const Bytes got = e.run(false);
    const int64_t M = e.args.m, Q = e.args.q_dim, KV = e.args.kv_dim, N = Q + 2 * KV, R = e.args.rank;
    const ggemm_dtype out = e.args.out_dtype;
    // C [M, N] starts as the routed view of the expand's initial outputs.
    Bytes c(static_cast<size_t>(M * N) * dtype_size(out));
    auto src_index = [&](int64_t m, int64_t j, bool* in_q) {
      *in_q = j < Q;
      if (j < Q) return static_cast<size_t>(m * Q + j);
      if (j < Q + KV) return static_cast<size_t>(m * KV + j - Q);
      return static_cast<size_t>((M + m) * KV + j - Q - KV);
    };
    const size_t es = dtype_size(out);
    for (int64_t m = 0; m < M; ++m)
      for (int64_t j = 0; j < N; ++j) {
        bool in_q;
        const size_t s = src_index(m, j, &in_q);
        std::memcpy(c.data() + static_cast<size_t>(m * N + j) * es, (in_q ? e.q_init : e.kv_init).data() + s * es, es);
      }
    ggemm_grouped_matmul_args g{};
    g.struct_size = sizeof g;
    g.a_dtype = g.b_dtype = e.args.p_dtype;
    g.c_dtype = out;
    g.m = M, g.n = N, g.k = R, g.num_experts = e.args.num_adapters;
    g.a = e.p.data(), g.b = e.b.data(), g.c = c.data(), g.transpose_b = 1;
    g.a_offsets = e.groups.offsets.data(), g.expert_ids = e.groups.ids.data();
    g.expert_usage_stats = e.groups.stats, g.num_groups = e.args.num_groups;
    g.a_plane_split0 = Q, g.a_plane_split1 = Q + KV;
    g.epilogue = e.args.accumulate ? GGEMM_EPILOGUE_ACCUMULATE : GGEMM_EPILOGUE_STORE;
    ggemm::ref::grouped_matmul(g);
    const size_t q_bytes = static_cast<size_t>(M * Q) * es;
    for (int64_t m = 0; m < M; ++m)
      for (int64_t j = 0; j < N; ++j) {
        bool in_q;
        const size_t s = src_index(m, j, &in_q);
        const unsigned char* mine = got.data() + (in_q ? 0 : q_bytes) + s * es;
        ASSERT_EQ(std::memcmp(mine, c.data() + static_cast<size_t>(m * N + j) * es, es), 0)
            << "token " << m << " fused column " << j;
      }
  }
  for (int iter = 0; iter < 40; ++iter) {
    RandomShrink s(rng, true);
    s.args.scale = 1.0f;
    SCOPED_TRACE("shrink " + s.describe());
    const Bytes got = s.run(false);
    const int64_t M = s.args.m, R = s.args.rank, N = 3 * R;
    const ggemm_dtype out = s.args.p_dtype;
    const size_t es = dtype_size(out);
    Bytes c(static_cast<size_t>(M * N) * es);
    auto p_index = [&](int64_t m, int64_t col) { return static_cast<size_t>(((col / R) * M + m) * R + col % R); };
    for (int64_t m = 0; m < M; ++m)
      for (int64_t col = 0; col < N; ++col)
        std::memcpy(c.data() + static_cast<size_t>(m * N + col) * es, s.p_init.data() + p_index(m, col) * es, es);
    ggemm_grouped_matmul_args g{};
    g.struct_size = sizeof g;
    g.a_dtype = g.b_dtype = s.args.x_dtype;
    g.c_dtype = out;
    g.m = M, g.n = N, g.k = s.args.k, g.num_experts = s.args.num_adapters;
    g.a = s.x.data(), g.b = s.a.data(), g.c = c.data(), g.transpose_b = 1;
    g.a_offsets = s.groups.offsets.data(), g.expert_ids = s.groups.ids.data();
    g.expert_usage_stats = s.groups.stats, g.num_groups = s.args.num_groups;
    g.epilogue = s.args.accumulate ? GGEMM_EPILOGUE_ACCUMULATE : GGEMM_EPILOGUE_STORE;
    ggemm::ref::grouped_matmul(g);
    for (int64_t m = 0; m < M; ++m)
      for (int64_t col = 0; col < N; ++col)
        ASSERT_EQ(std::memcmp(got.data() + p_index(m, col) * es, c.data() + static_cast<size_t>(m * N + col) * es, es),
                  0)
            << "token " << m << " fused column " << col;
  }
}

}  // namespace
}  // namespace ggemm::testing
