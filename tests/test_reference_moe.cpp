// The MoE layer's CPU reference (reference/moe_reference.h) against
// hand-worked cases: the routing's stable order, -1 and foreign slots,
// duplicate experts in a token's top-k, hostile ids and weights, T = 0; the
// combine's order, rounding and bad indices; and the whole layer against a
// direct reading of its formula on a tiny model.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "dtype.h"
#include "ggemm.h"
#include "moe_reference.h"
#include "test_util.h"

namespace ggemm::testing {
namespace {

// The routing's outputs, poisoned before the call so that every entry the
// reference must write is seen to be written.
struct RouteOut {
  std::vector<uint32_t> a_offsets;
  std::vector<int32_t> expert_ids;
  uint32_t stats[2] = {0xdeadbeef, 0xdeadbeef};
  std::vector<int32_t> row_token, row_slot, slot_row;
  std::vector<float> row_weight;
  uint32_t faults = 0;
};

RouteOut route(int64_t tokens, int64_t k, int64_t num_experts, int64_t first, int64_t local,
               const std::vector<int32_t> &ids, const std::vector<float> &weights) {
  RouteOut o;
  const size_t slots = size_t(tokens * k);
  o.a_offsets.assign(size_t(local + 1), 0xdeadbeef);
  o.expert_ids.assign(size_t(local), 12345);
  o.row_token.assign(slots, 777), o.row_slot.assign(slots, 777), o.slot_row.assign(slots, 777);
  o.row_weight.assign(slots, 7.f);
  ggemm_moe_route_args a{};
  a.struct_size = sizeof a;
  a.num_tokens = tokens, a.top_k = k, a.num_experts = num_experts, a.first_expert = first, a.local_experts = local;
  a.topk_ids = ids.data(), a.topk_weights = weights.data();
  a.a_offsets = o.a_offsets.data(), a.expert_ids = o.expert_ids.data(), a.expert_usage_stats = o.stats;
  a.row_token = o.row_token.data(), a.row_slot = o.row_slot.data(), a.row_weight = o.row_weight.data();
  a.slot_row = o.slot_row.data();
  o.faults = ref::moe_route(a);
  return o;
}

using I = std::vector<int32_t>;
using U = std::vector<uint32_t>;
using F = std::vector<float>;

// 3 tokens, top-2 of 4 experts: rows by expert, then by slot.
TEST(ReferenceMoeRoute, StableOrderByExpertThenSlot) {
  const RouteOut o = route(3, 2, 4, 0, 4, {2, 0, 0, 2, 2, 3}, {.1f, .2f, .3f, .4f, .5f, .6f});
  EXPECT_EQ(o.faults, 0u);
  // expert 0: slots 1, 2; expert 1: none; expert 2: slots 0, 3, 4; expert 3: slot 5.
  EXPECT_EQ(o.row_slot, (I{1, 2, 0, 3, 4, 5}));
  EXPECT_EQ(o.row_token, (I{0, 1, 0, 1, 2, 2}));
  EXPECT_EQ(o.row_weight, (F{.2f, .3f, .1f, .4f, .5f, .6f}));
  EXPECT_EQ(o.slot_row, (I{2, 0, 1, 3, 4, 5}));
  // Groups only for experts with rows; past the active count: R and -1.
  EXPECT_EQ(o.a_offsets, (U{0, 2, 5, 6, 6}));
  EXPECT_EQ(o.expert_ids, (I{0, 2, 3, -1}));
  EXPECT_EQ(o.stats[0], 3u);
  EXPECT_EQ(o.stats[1], 3u);
}

// A token naming one expert twice gets two rows, in slot order.
TEST(ReferenceMoeRoute, DuplicateExpertsInATokensTopK) {
  const RouteOut o = route(2, 3, 2, 0, 2, {1, 1, 0, 1, 0, 1}, {1, 2, 3, 4, 5, 6});
  EXPECT_EQ(o.row_slot, (I{2, 4, 0, 1, 3, 5}));
  EXPECT_EQ(o.row_token, (I{0, 1, 0, 0, 1, 1}));
  EXPECT_EQ(o.a_offsets, (U{0, 2, 6}));
  EXPECT_EQ(o.expert_ids, (I{0, 1}));
  EXPECT_EQ(o.stats[0], 4u);
}

// -1 slots and other ranks' experts are not routed and not faults; rows past
// R are -1 / -1 / 0.
TEST(ReferenceMoeRoute, MinusOneAndForeignSlotsHaveNoRow) {
  // Experts [2, 4) of 6 are local: local ids 0, 1.
  const RouteOut o = route(2, 2, 6, 2, 2, {-1, 3, 5, 2}, {9, .5f, 9, .25f});
  EXPECT_EQ(o.faults, 0u);
  EXPECT_EQ(o.row_slot, (I{3, 1, -1, -1}));
  EXPECT_EQ(o.row_token, (I{1, 0, -1, -1}));
  EXPECT_EQ(o.row_weight, (F{.25f, .5f, 0.f, 0.f}));
  EXPECT_EQ(o.slot_row, (I{-1, 1, -1, 0}));
  EXPECT_EQ(o.a_offsets, (U{0, 1, 2}));
  EXPECT_EQ(o.expert_ids, (I{0, 1}));  // local expert indices
}

// Ids < -1 or >= num_experts act as -1 and raise ID_OUT_OF_RANGE; a
// non-finite weight drops a local slot and raises WEIGHT_NOT_FINITE, but is
// not looked at on a slot with no local expert.
TEST(ReferenceMoeRoute, HostileIdsAndWeights) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  RouteOut o = route(2, 2, 4, 0, 4, {-7, 1, 4, 2}, {1, 1, 1, 1});
  EXPECT_EQ(o.faults, uint32_t(GGEMM_DEVICE_FAULT_ID_OUT_OF_RANGE));
  EXPECT_EQ(o.row_slot, (I{1, 3, -1, -1}));
  o = route(2, 2, 4, 0, 4, {0, 1, 2, 3}, {nan, 1, -inf, 2});
  EXPECT_EQ(o.faults, uint32_t(GGEMM_DEVICE_FAULT_WEIGHT_NOT_FINITE));
  EXPECT_EQ(o.row_slot, (I{1, 3, -1, -1}));
  EXPECT_EQ(o.expert_ids, (I{1, 3, -1, -1}));
  // NaN on padding (-1) or on another rank's expert: not this call's to report.
  o = route(1, 2, 4, 0, 2, {-1, 3}, {nan, inf});
  EXPECT_EQ(o.faults, 0u);
  EXPECT_EQ(o.stats[1], 0u);
  o = route(1, 2, 4, 0, 4, {INT32_MIN, INT32_MAX}, {nan, 1});
  EXPECT_EQ(o.faults, uint32_t(GGEMM_DEVICE_FAULT_ID_OUT_OF_RANGE));
}

// T = 0: empty groups, stats 0, no slot array touched.
TEST(ReferenceMoeRoute, NoTokens) {
  const RouteOut o = route(0, 4, 8, 0, 8, {}, {});
  EXPECT_EQ(o.a_offsets, U(9, 0));
  EXPECT_EQ(o.expert_ids, I(8, -1));
  EXPECT_EQ(o.stats[0], 0u);
  EXPECT_EQ(o.stats[1], 0u);
}

// Every pair to one expert: one group of T * k rows in slot order.
TEST(ReferenceMoeRoute, OneExpertTakesEveryToken) {
  const RouteOut o = route(3, 2, 8, 0, 8, I(6, 5), F(6, 1.f));
  EXPECT_EQ(o.row_slot, (I{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(o.a_offsets, (U{0, 6, 6, 6, 6, 6, 6, 6, 6}));
  EXPECT_EQ(o.expert_ids, (I{5, -1, -1, -1, -1, -1, -1, -1}));
  EXPECT_EQ(o.stats[0], 6u);
  EXPECT_EQ(o.stats[1], 1u);
}

// ---- combine ---------------------------------------------------------------------

// out[t] = round(sum of its rows in slot order); -1 adds nothing; an index
// outside [-1, y_rows) adds nothing and is reported; accumulate adds the
// rounded-once sum to an fp32 out.
TEST(ReferenceMoeCombine, SumsRowsBySlotRow) {
  const int64_t hidden = 8;
  // y rows r hold r + 1 + column / 8 (exact in bf16).
  std::vector<float> yv;
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < hidden; ++c) yv.push_back(float(r + 1) + c / 8.f);
  const Bytes y = pack_exact(kBf16, yv);
  const I slot_row = {3, 0, -1, 1, 2, 9, -1, -1, -5};  // 3 tokens, top-3
  Bytes out = poisoned_bytes(kBf16, 3 * hidden);
  ggemm_moe_combine_args a{};
  a.struct_size = sizeof a;
  a.y_dtype = a.out_dtype = kBf16;
  a.num_tokens = 3, a.top_k = 3, a.hidden = hidden, a.y_rows = 4;
  a.y = y.data(), a.slot_row = slot_row.data(), a.out = out.data();
  EXPECT_EQ(ref::moe_combine(a), uint32_t(GGEMM_DEVICE_FAULT_INDEX_OUT_OF_RANGE));
  std::vector<float> t0, t1, t2;
  for (int c = 0; c < hidden; ++c) {
    t0.push_back(4 + c / 8.f + 1 + c / 8.f);
    t1.push_back(2 + c / 8.f + 3 + c / 8.f);
    t2.push_back(0.f);
  }
  expect_row(kBf16, out, hidden, 0, t0, "out");
  expect_row(kBf16, out, hidden, 1, t1, "out");
  expect_row(kBf16, out, hidden, 2, t2, "out");

  std::vector<float> old(size_t(3 * hidden), 0.5f);
  a.out_dtype = kFp32, a.accumulate = 1, a.out = old.data();
  ref::moe_combine(a);
  EXPECT_EQ(old[0], 0.5f + t0[0]);
  EXPECT_EQ(old[size_t(2 * hidden)], 0.5f);
}

// The sum is fp32 and rounded once: bf16 1 + 2^-8 + 2^-8 keeps the two small
// rows (1 + 2^-7 is exact; 1 + 2^-8 is a tie that rounds to 1), which rounding after each add would lose.
TEST(ReferenceMoeCombine, RoundsOnce) {
  const Bytes y = pack_exact(kBf16, {1.f, 1.f, 1.f, 1.f, 1.f, 1.f, 1.f, 1.f, 0x1p-8f, 0x1p-8f, 0x1p-8f, 0x1p-8f,
                                     0x1p-8f, 0x1p-8f, 0x1p-8f, 0x1p-8f});
  const I slot_row = {0, 1, 1};
  Bytes out = poisoned_bytes(kBf16, 8);
  ggemm_moe_combine_args a{};
  a.struct_size = sizeof a;
  a.y_dtype = a.out_dtype = kBf16;
  a.num_tokens = 1, a.top_k = 3, a.hidden = 8, a.y_rows = 2;
  a.y = y.data(), a.slot_row = slot_row.data(), a.out = out.data();
  ref::moe_combine(a);
  EXPECT_EQ(ref::load_as_float(kBf16, out.data(), 0), 1.f + 0x1p-7f);
}

// ---- the whole layer ---------------------------------------------------------------

// One token, top-2 of 2 experts, H = 8, I = 8: the layer's formula by hand
// with each rounding where the contract puts it.
TEST(ReferenceMoeFfn, MatchesTheFormula) {
  const int64_t H = 8, In = 8, E = 2;
  Rng rng(7);
  Bytes x(size_t(H) * 2), wgu(size_t(E * 2 * In * H) * 2), wd(size_t(E * H * In) * 2);
  fill_random(kBf16, x.data(), size_t(H), rng);
  fill_random(kBf16, wgu.data(), size_t(E * 2 * In * H), rng);
  fill_random(kBf16, wd.data(), size_t(E * H * In), rng);
  const I ids = {1, 0};
  const F weights = {0.75f, -0.5f};
  Bytes out = poisoned_bytes(kBf16, size_t(H));
  ggemm_moe_ffn_args a{};
  a.struct_size = sizeof a;
  a.dtype = kBf16;
  a.num_tokens = 1, a.hidden = H, a.intermediate = In, a.top_k = 2;
  a.num_experts = E, a.first_expert = 0, a.local_experts = E;
  a.x = x.data(), a.w_gate_up = wgu.data(), a.w_down = wd.data();
  a.topk_ids = ids.data(), a.topk_weights = weights.data(), a.out = out.data();
  EXPECT_EQ(ref::moe_ffn(a), 0u);

  auto ld = [](const Bytes &b, size_t i) { return ref::load_as_float(kBf16, b.data(), i); };
  std::vector<float> want(size_t(H), 0.f);
  for (int j = 0; j < 2; ++j) {
    const size_t e = size_t(ids[size_t(j)]);
    std::vector<float> h(static_cast<size_t>(In));
    for (int64_t i = 0; i < In; ++i) {
      float g = 0, u = 0;
      for (int64_t c = 0; c < H; ++c) {
        g += ld(x, size_t(c)) * ld(wgu, (e * 2 * In + size_t(i)) * H + size_t(c));
        u += ld(x, size_t(c)) * ld(wgu, (e * 2 * In + size_t(In + i)) * H + size_t(c));
      }
      h[size_t(i)] = ref::round_to_dtype(kBf16, g / (1.f + std::exp(-g)) * u);
    }
    for (int64_t n = 0; n < H; ++n) {
      float d = 0;
      for (int64_t i = 0; i < In; ++i) d += h[size_t(i)] * ld(wd, (e * H + size_t(n)) * In + size_t(i));
      want[size_t(n)] += ref::round_to_dtype(kBf16, d * weights[size_t(j)]);
    }
  }
  for (auto &v : want) v = ref::round_to_dtype(kBf16, v);
  expect_row(kBf16, out, H, 0, want, "out");
}

// A token none of whose slots has a local expert gets zeros, and the
// routing's faults come back.
TEST(ReferenceMoeFfn, TokenWithNoLocalExpertIsZero) {
  const int64_t H = 8, In = 8;
  Bytes x(size_t(H) * 2, 0x3c), wgu(size_t(2 * In * H) * 2, 0x3c), wd(size_t(H * In) * 2, 0x3c);
  const I ids = {-1, 5, 9};
  const F weights = {1, 1, 1};
  Bytes out = poisoned_bytes(kFp16, size_t(H));
  ggemm_moe_ffn_args a{};
  a.struct_size = sizeof a;
  a.dtype = kFp16;
  a.num_tokens = 1, a.hidden = H, a.intermediate = In, a.top_k = 3;
  a.num_experts = 8, a.first_expert = 0, a.local_experts = 1;
  a.x = x.data(), a.w_gate_up = wgu.data(), a.w_down = wd.data();
  a.topk_ids = ids.data(), a.topk_weights = weights.data(), a.out = out.data();
  EXPECT_EQ(ref::moe_ffn(a), uint32_t(GGEMM_DEVICE_FAULT_ID_OUT_OF_RANGE));
  expect_row(kFp16, out, H, 0, std::vector<float>(size_t(H), 0.f), "out");
}

}  // namespace
}  // namespace ggemm::testing
