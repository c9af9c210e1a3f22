// The sm_100a SwiGLU epilogue's lane arithmetic (ptx/sm100/swiglu_lanes.h),
// on the CPU: the kernel has never run (no Blackwell GPU is lent), so what
// can be checked is that its lanes read the values the weights' 5-D view puts
// there. The view's box layout below is written from the tensor map the
// runtime encodes (runtime/launch_grouped.cpp, encode_swiglu_weights: dims
// {K, 8 rows, gate | up, I / 8 octets, E}, box {tile_k, 8, 2, 8, 1}) and the
// TMA's rule that a box lands in shared memory innermost dimension first, not
// from the epilogue's formulas.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <random>
#include <utility>
#include <vector>

#include "ptx/sm100/swiglu_lanes.h"

namespace ggemm::sm100 {
namespace {

// Where the box puts weight rows: shared-memory row s (= tensor-memory lane s,
// the MMA's M row) of a tile starting at feature octet o0 holds global row
// i + u * half + 8 * (o0 + o) of the [2I, K] weights, with (i, u, o) the box
// coordinates of dimensions 1..3: s = (o * 2 + u) * 8 + i.
struct BoxRow {
  bool up;
  uint32_t feature;  // of the tile: the global feature minus 8 * o0
};
BoxRow box_row(uint32_t s) {
  const uint32_t i = s % 8, u = (s / 8) % 2, o = s / 16;
  return BoxRow{u == 1, 8 * o + i};
}

TEST(Sm100SwigluLanes, EachLaneHoldsTheRowTheFiveDimensionalBoxPutsThere) {
  std::map<std::pair<uint32_t, bool>, int> seen;  // (feature, up) -> lanes holding it
  for (uint32_t q = 0; q < 4; ++q)
    for (uint32_t lane = 0; lane < 32; ++lane) {
      const BoxRow want = box_row(32 * q + lane);
      EXPECT_EQ(SwigluLanes::is_up(lane), want.up) << "warp " << q << " lane " << lane;
      EXPECT_EQ(SwigluLanes::feature(q, lane), want.feature) << "warp " << q << " lane " << lane;
      // The partner (lane ^ 8, same warp) holds the other row of the feature.
      const uint32_t partner = lane ^ SwigluLanes::kPartnerXor;
      EXPECT_EQ(SwigluLanes::feature(q, partner), want.feature);
      EXPECT_NE(SwigluLanes::is_up(partner), want.up);
      ++seen[{want.feature, want.up}];
    }
  // 64 features a tile (kTileN / 2), each gate and up once.
  EXPECT_EQ(seen.size(), 128u);
  for (const auto &kv : seen) EXPECT_EQ(kv.second, 1) << "feature " << kv.first.first;
}

// The drain, emulated for all four warps: each lane's tcgen05.ld chunk, the
// swap by shfl.xor 8, and the (gate, up) each lane pairs for each token it
// stores. Every (token, feature) of the tile below `rows` and `features` is
// stored exactly once, with the gate and up values of that feature. A
// narrow tile (decode, runtime/plan_rules.h) is a 64-row box, 4 octet
// pairs: the MMA's rows past it come from stale shared memory (NaN here)
// and must never be stored.
TEST(Sm100SwigluLanes, DrainPairsEveryGateWithItsUpOnce) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-4.f, 4.f);
  for (bool narrow : {false, true})
  for (uint32_t rows : {1u, 3u, 8u, 13u, 64u, 256u})
    for (uint32_t features : {8u, 24u, 32u, 40u, 64u}) {  // a whole tile: 64 (32 narrow); a last tile of I % 64
      if (narrow && features > 32) continue;
      SCOPED_TRACE(::testing::Message() << rows << " rows, " << features << " features" << (narrow ? ", narrow" : ""));
      const uint32_t chunks = (rows + 7) / 8;
      std::vector<float> acc(128 * chunks * 8);  // [lane s][token]
      for (float &x : acc) x = dist(rng);
      if (narrow) std::fill(acc.begin() + 64 * chunks * 8, acc.end(), std::numeric_limits<float>::quiet_NaN());
      auto at = [&](uint32_t s, uint32_t t) { return acc[s * chunks * 8 + t]; };
      // The expected pair of each feature, from the box layout.
      std::map<uint32_t, uint32_t> gate_row, up_row;
      for (uint32_t s = 0; s < 128; ++s) (box_row(s).up ? up_row : gate_row)[box_row(s).feature] = s;

      std::map<std::pair<uint32_t, uint32_t>, int> stores;  // (token, feature) -> count
      for (uint32_t q = 0; q < 4; ++q)
        for (uint32_t c = 0; c < rows; c += 8) {
          float v[32][8], sent[32][4];
          for (uint32_t lane = 0; lane < 32; ++lane)
            for (uint32_t j = 0; j < 8; ++j) v[lane][j] = at(32 * q + lane, c + j);
          for (uint32_t lane = 0; lane < 32; ++lane)
            for (uint32_t i = 0; i < 4; ++i) sent[lane][i] = SwigluLanes::sent(lane, i, v[lane]);
          for (uint32_t lane = 0; lane < 32; ++lane) {
            const uint32_t f = SwigluLanes::feature(q, lane);
            if (f >= features) continue;  // the kernel's `owned`
            for (uint32_t i = 0; i < 4; ++i) {
              const uint32_t t = c + SwigluLanes::first_token(lane) + i;
              if (t >= rows) break;
              const float mine = SwigluLanes::kept(lane, i, v[lane]);
              const float theirs = sent[lane ^ SwigluLanes::kPartnerXor][i];
              EXPECT_EQ(SwigluLanes::gate(lane, mine, theirs), at(gate_row[f], t)) << "token " << t << " feature " << f;
              EXPECT_EQ(SwigluLanes::up(lane, mine, theirs), at(up_row[f], t)) << "token " << t << " feature " << f;
              ++stores[{t, f}];
            }
          }
        }
      EXPECT_EQ(stores.size(), size_t(rows) * features);
      for (const auto &kv : stores) EXPECT_EQ(kv.second, 1) << "token " << kv.first.first << " feature " << kv.first.second;
    }
}

}  // namespace
}  // namespace ggemm::sm100
