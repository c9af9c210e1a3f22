// CPU simulation of whole persistent launches with the grouped tile scheduler
// the kernels run (ptx/blocks/tile_scheduler.h): every CTA walks its own scheduler
// instance over t = blockIdx.x, += gridDim.x, exactly as the kernel loop does,
// and the union of all tiles must cover each owned output element once.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "ggemm.h"
#include "ptx/blocks/routing_check.h"
#include "ptx/blocks/cluster_tiles.h"
#include "ptx/blocks/grouped_params.h"
#include "ptx/sm90/params.h"
#include "ptx/blocks/tile_scheduler.h"
#include "tests/lane_threads.h"

namespace ggemm {
namespace {

constexpr uint32_t kTileN = 128;  // the sm_90a kernel's weight tile
const uint32_t kGrids[] = {1, 7, 132};
const uint32_t kTileMs[] = {16, 64, 128, 256};

// One routing as the device would hold it.
struct Routing {
  std::string name;
  uint32_t m = 0, n = 0, num_experts = 8;
  std::vector<uint32_t> offsets;  // [num_groups + 1], plus optional trailing garbage
  std::vector<int32_t> ids;       // [num_groups], plus optional trailing garbage
  uint32_t num_groups = 0;        // capacity, as the host passes it
  uint32_t stats_active = 0;      // expert_usage_stats[1], may exceed num_groups
  uint32_t split0 = 0, split1 = 0;
  bool span_segments = false;  // tiles cover [0, N) across the splits
  bool well_formed = true;  // offsets non-decreasing, [0] == 0, last <= m
};

// The clamp of the device's active count to the arrays' capacity, exactly as
// the kernel calls it (ggemm::active_groups).
uint32_t clamped_active(const Routing &r) { return ggemm::active_groups(r.stats_active, r.num_groups); }

GroupedProblem problem_of(const Routing &r) {
  return GroupedProblem{r.offsets.data(), r.ids.data(), clamped_active(r), r.m,
                        r.n,              r.num_experts, r.split0,           r.split1,
                        r.span_segments ? 1u : 0u};
}

// Activation plane of column c, straight from the contract (DESIGN.md 1.1).
uint32_t plane_of(const Routing &r, uint32_t c) {
  if (r.split0 == 0 && r.split1 == 0) return 0;
  return uint32_t(c >= r.split0) + uint32_t(c >= r.split1);
}

// Start and end of the range tiled from its own start that holds column c:
// its plane segment, or all of N when tiles span the segments.
void segment_of(const Routing &r, uint32_t c, uint32_t *start, uint32_t *end) {
  if ((r.split0 == 0 && r.split1 == 0) || r.span_segments) {
    *start = 0, *end = r.n;
  } else if (c < r.split0) {
    *start = 0, *end = r.split0;
  } else if (c < r.split1) {
    *start = r.split0, *end = r.split1;
  } else {
    *start = r.split1, *end = r.n;
  }
}

std::string describe(const GroupedTile &t) {
  std::ostringstream s;
  s << "{group " << t.group << ", expert " << t.expert << ", rows [" << t.row0 << ", +" << t.rows << "), cols ["
    << t.col0 << ", +" << t.cols << "), plane " << t.segment << "}";
  return s.str();
}

// Runs one simulated launch and checks every property of the tiles it makes.
void check_launch(const Routing &r, uint32_t tile_m, uint32_t grid) {
  SCOPED_TRACE(::testing::Message() << r.name << ": tile_m " << tile_m << ", grid " << grid << ", M " << r.m
                                    << ", N " << r.n << ", splits (" << r.split0 << ", " << r.split1 << ")");
  const GroupedProblem prob = problem_of(r);
  const uint32_t active = clamped_active(r);
  const uint64_t elems = uint64_t(r.m) * r.n;
  std::vector<uint8_t> cover(elems, 0);

  // Non-empty, non-overlapping tiles inside C number at most M*N; more means a
  // runaway scheduler, and the cap keeps a bug from hanging the test.
  const uint64_t max_tiles = elems + 1;
  uint64_t tiles = 0;
  int failures = 0;  // stop after a few so one bug does not flood the log
  auto fail_once = [&](const std::string &what) {
    if (++failures <= 5) ADD_FAILURE() << what;
  };

  for (uint32_t b = 0; b < grid && failures == 0; ++b) {
    GroupedTileScheduler sched(prob, tile_m, kTileN);  // one per CTA, as on the device
    GroupedTile tile;
    for (uint64_t t = b; sched.next(t, &tile); t += grid) {
      if (++tiles > max_tiles) {
        fail_once("more tiles than output elements: the scheduler does not terminate");
        break;
      }
      const std::string d = "CTA " + std::to_string(b) + " t " + std::to_string(t) + " " + describe(tile);
      if (tile.group >= active) {
        fail_once("tile of a group at or past the active count (" + std::to_string(active) + "): " + d);
        continue;
      }
      if (tile.rows < 1 || tile.rows > tile_m || tile.cols < 1 || tile.cols > kTileN) {
        fail_once("tile size outside 1..tile_m x 1..tile_n: " + d);
        continue;
      }
      if (uint64_t(tile.row0) + tile.rows > r.m || uint64_t(tile.col0) + tile.cols > r.n) {
        fail_once("tile outside C [0, M) x [0, N): " + d);
        continue;
      }
      const int32_t id = r.ids[tile.group];
      const int32_t want_expert = (id >= 0 && uint32_t(id) < r.num_experts) ? id : -1;
      if (tile.expert != want_expert)
        fail_once("expert " + std::to_string(tile.expert) + ", want " + std::to_string(want_expert) + ": " + d);

      // A tile lies in one plane segment; its first and last columns suffice
      // because segments are intervals.
      uint32_t s_start, s_end;
      segment_of(r, tile.col0, &s_start, &s_end);
      const uint32_t last_col = tile.col0 + tile.cols - 1;
      if (last_col >= s_end) fail_once("tile straddles a plane split: " + d);
      if (r.span_segments ? tile.segment != 0
                          : tile.segment != plane_of(r, tile.col0) || tile.segment != plane_of(r, last_col))
        fail_once("plane " + std::to_string(tile.segment) + " is not the plane of its columns: " + d);
      // Column blocks start at tile_n steps from their segment's start and are
      // as wide as the segment allows (header: "each tiled by tile_n from its
      // own start").
      if ((tile.col0 - s_start) % kTileN != 0 || tile.cols != std::min(kTileN, s_end - tile.col0))
        fail_once("column block not aligned to its segment or not maximal: " + d);

      if (r.well_formed) {
        const uint32_t g0 = r.offsets[tile.group], g1 = r.offsets[tile.group + 1];
        if (tile.row0 < g0 || uint64_t(tile.row0) + tile.rows > g1)
          fail_once("rows outside the group's [" + std::to_string(g0) + ", " + std::to_string(g1) + "): " + d);
        else if ((tile.row0 - g0) % tile_m != 0 || tile.rows != std::min(tile_m, g1 - tile.row0))
          fail_once("row block not aligned to the group start or not maximal: " + d);
      }

      for (uint32_t i = 0; i < tile.rows; ++i) {
        uint8_t *row = cover.data() + uint64_t(tile.row0 + i) * r.n + tile.col0;
        for (uint32_t j = 0; j < tile.cols; ++j) row[j] = uint8_t(row[j] + 1);
      }
    }
  }
  if (failures) return;

  // Coverage: once inside the active groups' rows, never elsewhere (rows past
  // a_offsets[active] belong to no group and must not be written).
  const uint32_t owned_end = r.well_formed ? std::min(r.offsets[active], r.m) : 0;
  for (uint64_t e = 0; e < elems; ++e) {
    const uint32_t row = uint32_t(e / r.n), col = uint32_t(e % r.n);
    if (cover[e] > 1) {
      fail_once("element (" + std::to_string(row) + ", " + std::to_string(col) + ") covered " +
                std::to_string(cover[e]) + " times");
    } else if (r.well_formed) {
      const uint8_t want = row < owned_end ? 1 : 0;
      if (cover[e] != want)
        fail_once("element (" + std::to_string(row) + ", " + std::to_string(col) + ") covered " +
                  std::to_string(cover[e]) + " times, want " + std::to_string(want));
    }
    if (failures >= 5) break;
  }
}

// One simulated launch in clusters (ptx/blocks/cluster_tiles.h): clusters of
// `cta_group` CTAs (sm_100a's cta_group, sm_90a's cluster_m; the walk is the
// same) take pair tiles of 128 * cta_group weight rows; every CTA runs its
// own scheduler, as on the device. Checks that the CTAs of a cluster agree
// on every pair tile, that pair tiles are aligned and maximal within their
// segment, and that the CTAs' shares cover each owned output once.
void check_cluster_launch(const Routing &r, uint32_t tile_m, uint32_t grid, uint32_t cta_group) {
  SCOPED_TRACE(::testing::Message() << r.name << ": clusters of " << cta_group << ", tile_m " << tile_m
                                    << ", grid " << grid);
  const uint32_t pair_n = kRowsPerCta * cta_group;
  const GroupedProblem prob = problem_of(r);
  const uint32_t active = clamped_active(r);
  const uint64_t elems = uint64_t(r.m) * r.n;
  std::vector<uint8_t> cover(elems, 0);
  int failures = 0;
  auto fail_once = [&](const std::string &what) {
    if (++failures <= 5) ADD_FAILURE() << what;
  };
  auto same = [](const GroupedTile &a, const GroupedTile &b) {
    return a.group == b.group && a.expert == b.expert && a.row0 == b.row0 && a.rows == b.rows && a.col0 == b.col0 &&
           a.cols == b.cols && a.segment == b.segment;
  };

  for (uint32_t cluster = 0; cluster < grid / cta_group && failures == 0; ++cluster) {
    std::vector<GroupedTile> seq[2];
    for (uint32_t rank = 0; rank < cta_group; ++rank) {
      GroupedTileScheduler sched(prob, tile_m, pair_n);  // one per CTA
      const ClusterWalk walk = cluster_walk(cluster * cta_group + rank, grid, cta_group);
      GroupedTile tile;
      for (uint64_t t = walk.first; sched.next(t, &tile); t += walk.stride) {
        if (seq[rank].size() > elems) {
          fail_once("more tiles than output elements: the walk does not terminate");
          break;
        }
        seq[rank].push_back(tile);
      }
    }
    if (cta_group == 2 && seq[0].size() != seq[1].size())
      fail_once("the CTAs of cluster " + std::to_string(cluster) + " walk " + std::to_string(seq[0].size()) +
                " and " + std::to_string(seq[1].size()) + " pair tiles");
    for (size_t k = 0; k < seq[0].size() && failures == 0; ++k) {
      const GroupedTile &pair = seq[0][k];
      const std::string d = "cluster " + std::to_string(cluster) + " pair tile " + std::to_string(k) + " " +
                            describe(pair);
      if (cta_group == 2 && (k >= seq[1].size() || !same(pair, seq[1][k])))
        fail_once("the two CTAs of the cluster disagree on " + d);
      if (pair.group >= active || pair.cols < 1 || pair.cols > pair_n || pair.rows < 1 || pair.rows > tile_m) {
        fail_once("pair tile out of range: " + d);
        continue;
      }
      uint32_t s_start, s_end;
      segment_of(r, pair.col0, &s_start, &s_end);
      if ((pair.col0 - s_start) % pair_n != 0 || pair.cols != std::min(pair_n, s_end - pair.col0))
        fail_once("pair tile not aligned to its segment or not maximal: " + d);
      for (uint32_t rank = 0; rank < cta_group; ++rank) {
        const GroupedTile share = cta_share(pair, rank);
        if (share.cols == 0) {  // past the pair tile's end: joins the MMA, writes nothing
          if (rank * kRowsPerCta < pair.cols) fail_once("CTA " + std::to_string(rank) + " got no share of " + d);
          continue;
        }
        if (share.cols > kRowsPerCta || share.col0 < pair.col0 ||
            share.col0 + share.cols > pair.col0 + pair.cols)
          fail_once("CTA " + std::to_string(rank) + "'s share leaves its pair tile: " + d);
        if (uint64_t(share.row0) + share.rows > r.m || uint64_t(share.col0) + share.cols > r.n) {
          fail_once("share outside C: " + d);
          continue;
        }
        for (uint32_t i = 0; i < share.rows; ++i) {
          uint8_t *row = cover.data() + uint64_t(share.row0 + i) * r.n + share.col0;
          for (uint32_t j = 0; j < share.cols; ++j) row[j] = uint8_t(row[j] + 1);
        }
      }
    }
  }
  if (failures) return;
  const uint32_t owned_end = r.well_formed ? std::min(r.offsets[active], r.m) : 0;
  for (uint64_t e = 0; e < elems && failures < 5; ++e) {
    const uint32_t row = uint32_t(e / r.n);
    const uint8_t want = (r.well_formed && row < owned_end) ? 1 : 0;
    if (cover[e] > 1 || (r.well_formed && cover[e] != want))
      fail_once("element (" + std::to_string(row) + ", " + std::to_string(e % r.n) + ") covered " +
                std::to_string(cover[e]) + " times");
  }
}

// Every routing case runs as single-CTA launches and in clusters of 1 and 2
// (sm_100a's cta_group, sm_90a's cluster_m pairs; grids of whole clusters).
void check_all_shapes(const Routing &r) {
  for (uint32_t tile_m : kTileMs)
    for (uint32_t grid : kGrids) {
      check_launch(r, tile_m, grid);
      for (uint32_t cta_group : {1u, 2u})
        check_cluster_launch(r, tile_m, grid - grid % cta_group + (grid < cta_group ? cta_group : 0), cta_group);
    }
}

// Builds a well-formed routing from rows per group; `unowned` rows follow the
// last group.
Routing from_rows(std::string name, const std::vector<uint32_t> &rows, uint32_t n, uint32_t unowned = 3) {
  Routing r;
  r.name = std::move(name);
  r.n = n;
  r.offsets.push_back(0);
  for (uint32_t x : rows) r.offsets.push_back(r.offsets.back() + x);
  for (size_t g = 0; g < rows.size(); ++g) r.ids.push_back(int32_t(g % r.num_experts));
  r.num_groups = uint32_t(rows.size());
  r.stats_active = r.num_groups;
  r.m = r.offsets.back() + unowned;
  return r;
}

// ---- routings ----------------------------------------------------------------

TEST(GroupedTileScheduler, RandomRoutingWithEmptyAndInactiveGroups) {
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    std::mt19937_64 rng(seed);  // fixed seeds: a failure reproduces
    auto uni = [&](uint32_t lo, uint32_t hi) { return std::uniform_int_distribution<uint32_t>(lo, hi)(rng); };
    std::vector<uint32_t> rows(uni(1, 48));
    for (auto &x : rows) x = uni(0, 3) == 0 ? 0 : uni(1, 300);  // about a quarter empty
    Routing r = from_rows("random seed " + std::to_string(seed), rows, 8 * uni(1, 96), uni(0, 40));
    for (auto &id : r.ids) {
      const uint32_t kind = uni(0, 9);
      id = kind == 0 ? -1 : kind == 1 ? int32_t(r.num_experts + uni(0, 5)) : int32_t(uni(0, r.num_experts - 1));
    }
    r.stats_active = uni(0, 2) == 0 ? uni(0, r.num_groups) : r.num_groups;  // sometimes fewer active
    check_all_shapes(r);
  }
}

TEST(GroupedTileScheduler, InactiveGroupsStillGetTilesWithExpertMinusOne) {
  // Inactive groups' rows are written as zeros, so they must be tiled.
  Routing r = from_rows("inactive", {40, 0, 17, 130, 5}, 256);
  r.ids = {-1, -1, 3, -1, int32_t(r.num_experts)};  // last one out of range: inactive too
  check_all_shapes(r);
}

TEST(GroupedTileScheduler, OneHugeGroup) {
  check_all_shapes(from_rows("huge", {100000}, 256, 17));
}

TEST(GroupedTileScheduler, HeavySkew) {
  for (uint64_t seed = 11; seed <= 13; ++seed) {
    std::mt19937_64 rng(seed);
    std::vector<uint32_t> rows(32);
    uint32_t rest = 0;
    for (auto &x : rows) rest += (x = std::uniform_int_distribution<uint32_t>(0, 20)(rng));
    rows[std::uniform_int_distribution<size_t>(0, rows.size() - 1)(rng)] += 9 * rest;  // ~90% of all rows
    check_all_shapes(from_rows("skew seed " + std::to_string(seed), rows, 384));
  }
}

TEST(GroupedTileScheduler, ZeroActiveGroupsMakeNoTiles) {
  Routing r = from_rows("zero active", {64, 64, 64}, 256);
  r.stats_active = 0;
  check_all_shapes(r);  // coverage must be zero everywhere
  GroupedTileScheduler sched(problem_of(r), 16, kTileN);
  GroupedTile tile;
  EXPECT_FALSE(sched.next(0, &tile));
}

TEST(GroupedTileScheduler, ActiveCountPastCapacityIsClamped) {
  // Trailing entries past the capacity describe further groups; a scheduler
  // that walked past num_groups would tile them and fail the group check.
  Routing r = from_rows("active > capacity", {20, 70, 0, 33}, 256, 200);
  r.offsets.insert(r.offsets.end(), {r.offsets.back() + 50, r.offsets.back() + 150});
  r.ids.insert(r.ids.end(), {1, 2});
  for (uint32_t stats : {r.num_groups + 1, r.num_groups + 2, 0xFFFFFFFFu}) {
    r.stats_active = stats;
    check_all_shapes(r);
  }
}

TEST(GroupedTileScheduler, DecodeManySmallGroups) {
  for (uint64_t seed = 21; seed <= 23; ++seed) {
    std::mt19937_64 rng(seed);
    std::vector<uint32_t> rows(256);
    for (auto &x : rows) x = std::uniform_int_distribution<uint32_t>(1, 16)(rng);
    Routing r = from_rows("decode seed " + std::to_string(seed), rows, 512);
    r.num_experts = 256;
    for (size_t g = 0; g < rows.size(); ++g) r.ids[g] = int32_t(g);
    check_all_shapes(r);
  }
}

TEST(GroupedTileScheduler, PlaneSplits) {
  struct Split {
    uint32_t s0, s1, n;
  };
  const Split splits[] = {
      {512, 640, 768},  // tile-aligned (q 512, kv 128)
      {328, 456, 584},  // unaligned: partial tiles end each segment
      {256, 256, 512},  // empty middle segment
      {384, 768, 768},  // empty last segment
      {8, 16, 24},      // segments narrower than one tile
  };
  for (const Split &s : splits) {
    for (uint64_t seed = 31; seed <= 32; ++seed) {
      std::mt19937_64 rng(seed);
      std::vector<uint32_t> rows(9);
      for (auto &x : rows) x = std::uniform_int_distribution<uint32_t>(0, 200)(rng);
      Routing r = from_rows("splits " + std::to_string(s.s0) + "/" + std::to_string(s.s1) + " seed " +
                                std::to_string(seed),
                            rows, s.n);
      r.split0 = s.s0, r.split1 = s.s1;
      check_all_shapes(r);
    }
  }
}

// LoRA shrink's routing: the splits only route outputs, so tiles are cut
// from column 0 as if there were none, crossing the splits.
TEST(GroupedTileScheduler, TilesSpanningTheSplits) {
  const uint32_t splits[][3] = {{16, 32, 48}, {64, 128, 192}, {8, 16, 24}, {128, 256, 384}, {40, 40, 200}};
  for (const auto &s : splits) {
    std::mt19937_64 rng(s[2]);
    std::vector<uint32_t> rows(7);
    for (auto &x : rows) x = std::uniform_int_distribution<uint32_t>(0, 300)(rng);
    Routing r = from_rows("spanning splits " + std::to_string(s[0]) + "/" + std::to_string(s[1]), rows, s[2]);
    r.split0 = s[0], r.split1 = s[1];
    r.span_segments = true;
    check_all_shapes(r);
  }
}

// Device arrays the caller got wrong, over M 100: decreasing, past M, not
// starting at 0, wrapped, starting past M, overlapping.
std::vector<Routing> malformed_routings() {
  const std::vector<std::vector<uint32_t>> cases = {
      {0, 50, 30, 80, 500, 20, 100},      // decreasing, then past M, then back
      {10, 5, 60, 60, 40, 99},            // [0] != 0 and decreasing
      {0, 1000, 2000, 50},                // everything past M
      {0, 0xFFFFFFFFu, 3, 0xFFFFFFF0u},   // wrapped around uint32
      {200, 300, 400},                    // starts past M
      {0, 100, 0, 100, 0, 100},           // every group the same rows again
  };
  std::vector<Routing> routings;
  for (size_t i = 0; i < cases.size(); ++i) {
    Routing r;
    r.name = "malformed #" + std::to_string(i);
    r.m = 100;
    r.n = 264;
    r.offsets = cases[i];
    r.num_groups = uint32_t(r.offsets.size() - 1);
    r.stats_active = r.num_groups;
    r.ids.assign(r.num_groups, 1);
    r.well_formed = false;
    routings.push_back(r);
  }
  return routings;
}

TEST(GroupedTileScheduler, MalformedOffsetsStayInsideC) {
  // The scheduler clamps as it reads, so tiles must stay inside C and never
  // overlap (coverage <= 1), whatever else they do.
  for (Routing r : malformed_routings()) {
    check_all_shapes(r);
    r.split0 = 128, r.split1 = 200;
    check_all_shapes(r);
  }
}

// The walk crosses groups kWalkBatch at a time (their offsets loaded
// together); it must find the same group and rows for every tile as walking
// one group at a time with the header's clamping rules, modelled here.
struct ModelGroup {
  uint32_t group, row_start, row_end;
};
ModelGroup model_group_of(const Routing &r, uint32_t tile_m, uint32_t col_blocks, uint64_t t, bool *found) {
  const uint32_t active = clamped_active(r);
  uint64_t before = 0;
  uint32_t prev_end = 0;
  for (uint32_t g = 0; g < active; ++g) {
    // The header's rule: group 0 starts at row 0, group g where g - 1 ended.
    const uint32_t hi = r.offsets[g + 1];
    const uint32_t start = prev_end;
    const uint32_t end = std::min(std::max(hi, start), r.m);
    prev_end = end;
    const uint64_t tiles = uint64_t((end - start + tile_m - 1) / tile_m) * col_blocks;
    if (t < before + tiles) {
      *found = true;
      return {g, start, end};
    }
    before += tiles;
  }
  *found = false;
  return {active, 0, 0};
}

TEST(GroupedTileScheduler, BatchedGroupWalkMatchesOneGroupAtATime) {
  std::vector<Routing> routings = malformed_routings();
  for (uint64_t seed = 31; seed <= 36; ++seed) {
    // Decode as torch's offs give it: every expert listed, few of them routed.
    std::mt19937_64 rng(seed);
    std::vector<uint32_t> rows(std::uniform_int_distribution<uint32_t>(1, 140)(rng), 0);
    for (auto &x : rows) x = std::uniform_int_distribution<uint32_t>(0, 15)(rng) == 0 ? std::uniform_int_distribution<uint32_t>(1, 40)(rng) : 0;
    Routing r = from_rows("sparse seed " + std::to_string(seed), rows, 256, 3);
    r.stats_active = std::uniform_int_distribution<uint32_t>(0, 1)(rng) ? r.num_groups : r.num_groups / 2;
    routings.push_back(r);
  }
  for (const Routing &r : routings) {
    for (uint32_t tile_m : kTileMs) {
      for (uint32_t grid : kGrids) {
        SCOPED_TRACE(r.name + ", tile_m " + std::to_string(tile_m) + ", grid " + std::to_string(grid));
        for (uint32_t b = 0; b < grid; ++b) {
          GroupedTileScheduler sched(problem_of(r), tile_m, kTileN);
          GroupedTile tile;
          uint64_t t = b;
          for (; t < uint64_t(r.m) * r.n + 1; t += grid) {
            bool found = false;
            const ModelGroup want = model_group_of(r, tile_m, sched.col_blocks(), t, &found);
            const bool got = sched.next(t, &tile);
            ASSERT_EQ(got, found) << "t " << t;
            if (!got) break;
            ASSERT_EQ(tile.group, want.group) << "t " << t;
            ASSERT_GE(tile.row0, want.row_start) << "t " << t;
            ASSERT_LE(tile.row0 + tile.rows, want.row_end) << "t " << t;
          }
        }
      }
    }
  }
}


// The persistent kernels' walker warps cross groups 32 at a time where a
// step crosses many (GroupedGemmParams::walk_lanes), a group's end per
// lane, by scans and a ballot over the lanes (next_lanes). Run here
// by 32 threads as its lanes (tests/lane_threads.h), the header's very code
// must give every lane the same tiles as the one-thread walk, for each CTA
// of a launch: malformed offsets (decreasing, past M, wrapped), every
// expert listed with few routed (steps of empty groups, stops at a step's
// first and last lane), active counts below the groups, segments, both tile
// widths. A lane that disagrees with another fails as well.
TEST(GroupedTileScheduler, WarpWalkMatchesTheOneThreadWalk) {
  std::vector<Routing> routings = malformed_routings();
  for (uint64_t seed = 41; seed <= 46; ++seed) {
    std::mt19937_64 rng(seed);
    auto uni = [&](uint32_t lo, uint32_t hi) { return std::uniform_int_distribution<uint32_t>(lo, hi)(rng); };
    std::vector<uint32_t> rows(uni(1, 300), 0);
    for (auto &x : rows) x = uni(0, 15) == 0 ? uni(1, 40) : 0;
    Routing r = from_rows("sparse seed " + std::to_string(seed), rows, 8 * uni(1, 64), uni(0, 5));
    r.stats_active = uni(0, 1) ? r.num_groups : uni(0, r.num_groups);
    if (seed % 3 == 0) r.split0 = 8 * uni(1, r.n / 8), r.split1 = std::max(r.split0, 8 * uni(1, r.n / 8));
    routings.push_back(r);
  }
  // Groups at a warp step's edges: routed groups 0, 31, 32, 63, 64, 200.
  std::vector<uint32_t> edges(230, 0);
  for (uint32_t g : {0u, 31u, 32u, 63u, 64u, 200u}) edges[g] = 5;
  routings.push_back(from_rows("step edges", edges, 512, 2));
  for (const Routing &r : routings) {
    for (uint32_t tile_n : {64u, 128u}) {
      for (uint32_t tile_m : {16u, 128u}) {
        for (uint32_t grid : {1u, 7u, 132u}) {
          SCOPED_TRACE(r.name + ", tile_n " + std::to_string(tile_n) + ", tile_m " + std::to_string(tile_m) +
                       ", grid " + std::to_string(grid));
          for (uint32_t b : {0u, grid / 2, grid - 1}) {
            std::vector<GroupedTile> want;
            {
              GroupedTileScheduler sched(problem_of(r), tile_m, tile_n);
              GroupedTile tile;
              for (uint64_t t = b; sched.next(t, &tile); t += grid) want.push_back(tile);
            }
            // At most one tile past the one-thread walk's: a wrong walk may
            // make groups of ~2^32 rows.
            std::vector<std::vector<GroupedTile>> got(testing::LaneGroup::kLanes);
            const bool met = testing::run_lanes([&](const testing::ThreadLanes &lanes) {
              GroupedTileScheduler sched(problem_of(r), tile_m, tile_n);
              GroupedTile tile;
              std::vector<GroupedTile> &mine = got[lanes.id()];
              for (uint64_t t = b; mine.size() <= want.size() && sched.next_lanes(t, &tile, lanes); t += grid)
                mine.push_back(tile);
            });
            ASSERT_TRUE(met) << "CTA " << b << ": the lanes stopped meeting (their walks diverged)";
            for (uint32_t lane = 0; lane < testing::LaneGroup::kLanes; ++lane) {
              ASSERT_EQ(got[lane].size(), want.size()) << "CTA " << b << ", lane " << lane;
              for (size_t i = 0; i < want.size(); ++i)
                ASSERT_EQ(describe(got[lane][i]), describe(want[i])) << "CTA " << b << ", lane " << lane << ", tile " << i;
            }
          }
        }
      }
    }
  }
}

// The short-K kernels stop a CTA at the sum of group_row_blocks_bound over
// the active groups (times the column blocks) instead of walking past the
// last tile: that sum must never be below the walk's tile count (a tile
// would go unwritten), and must equal it for well-formed offsets.
TEST(GroupedTileScheduler, RowBlockBoundsCoverTheWalk) {
  std::vector<Routing> routings;
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    std::mt19937_64 rng(seed);
    auto uni = [&](uint32_t lo, uint32_t hi) { return std::uniform_int_distribution<uint32_t>(lo, hi)(rng); };
    std::vector<uint32_t> rows(uni(1, 300));
    for (auto &x : rows) x = uni(0, 3) == 0 ? 0 : uni(1, 40);
    Routing r = from_rows("random seed " + std::to_string(seed), rows, 8 * uni(1, 96), uni(0, 40));
    r.stats_active = uni(0, 2) == 0 ? uni(0, r.num_groups) : r.num_groups;
    routings.push_back(r);
  }
  for (const Routing &r : malformed_routings()) routings.push_back(r);
  for (const Routing &r : routings)
    for (uint32_t tile_m : {8u, 16u, 32u, 64u, 128u}) {
      SCOPED_TRACE(r.name + ", tile_m " + std::to_string(tile_m));
      GroupedTileScheduler walk(problem_of(r), tile_m, kTileN);
      GroupedTile tile;
      uint64_t tiles = 0;
      while (walk.next(tiles, &tile)) ++tiles;
      uint64_t bound = 0;
      for (uint32_t g = 0; g < clamped_active(r); ++g)  // as the short-K kernel sums: group 0 from row 0
        bound += group_row_blocks_bound(g == 0 ? 0 : r.offsets[g], r.offsets[g + 1], r.m, tile_m);
      bound *= walk.col_blocks();
      EXPECT_GE(bound, tiles);
      if (r.well_formed) EXPECT_EQ(bound, tiles);
    }
}

// Every tile of a walk, in order.
std::vector<GroupedTile> walk_all(const Routing &r, uint32_t tile_m) {
  GroupedTileScheduler sched(problem_of(r), tile_m, kTileN);
  std::vector<GroupedTile> tiles;
  GroupedTile tile;
  for (uint64_t t = 0; tiles.size() <= uint64_t(r.m) * r.n && sched.next(t, &tile); ++t) tiles.push_back(tile);
  return tiles;
}

// The walk reads the group ends alone (a_offsets[g + 1]); group 0 starts at
// row 0 whatever a_offsets[0] holds. That is what lets a call pass torch's
// group ends as a_offsets = group_ends - 1 (the entry before the ends is not
// the call's memory).
TEST(GroupedTileScheduler, NeverReadsTheFirstOffset) {
  std::vector<Routing> routings = malformed_routings();
  routings.push_back(from_rows("ragged", {27, 0, 300, 150, 1}, 264, 5));
  routings.push_back(from_rows("empty first group", {0, 0, 40, 9}, 136, 0));
  for (const Routing &base : routings)
    for (uint32_t tile_m : {16u, 128u}) {
      SCOPED_TRACE(base.name + ", tile_m " + std::to_string(tile_m));
      Routing zero = base;
      zero.offsets[0] = 0;
      const std::vector<GroupedTile> want = walk_all(zero, tile_m);
      if (!want.empty() && want[0].group == 0) EXPECT_EQ(want[0].row0, 0u);
      for (uint32_t garbage : {7u, 99u, 0xFFFFFFFFu}) {
        Routing r = base;
        r.offsets[0] = garbage;
        const std::vector<GroupedTile> got = walk_all(r, tile_m);
        ASSERT_EQ(got.size(), want.size()) << "a_offsets[0] = " << garbage;
        for (size_t i = 0; i < got.size(); ++i)
          EXPECT_TRUE(got[i].group == want[i].group && got[i].row0 == want[i].row0 && got[i].rows == want[i].rows &&
                      got[i].col0 == want[i].col0 && got[i].cols == want[i].cols)
              << "tile " << i << " with a_offsets[0] = " << garbage << ": " << describe(got[i]) << ", want "
              << describe(want[i]);
      }
    }
}

TEST(GroupedTileScheduler, BandOrderKeepsSideBySideTilesCompact) {
  // One large group (73 row blocks x 12 column blocks, like Qwen3's largest
  // expert under skewed routing). The first band's tiles, which side-by-side
  // CTAs run together, must cover exactly kBandRowBlocks row blocks and every
  // column block: each activation and weight tile is then read once per band.
  const uint32_t rows = 73 * 128, n = 12 * 128;
  const std::vector<uint32_t> offsets = {0, rows};
  const std::vector<int32_t> ids = {0};
  const GroupedProblem problem{offsets.data(), ids.data(), 1, rows, n, 1, 0, 0};
  GroupedTileScheduler sched(problem, 128, 128);
  const uint32_t band = GroupedTileScheduler::kBandRowBlocks;
  std::set<uint32_t> row_blocks, col_blocks;
  GroupedTile tile;
  for (uint64_t t = 0; t < uint64_t(band) * 12; ++t) {
    ASSERT_TRUE(sched.next(t, &tile));
    row_blocks.insert(tile.row0 / 128);
    col_blocks.insert(tile.col0 / 128);
  }
  EXPECT_EQ(row_blocks.size(), band);
  EXPECT_EQ(col_blocks.size(), 12u);
  EXPECT_EQ(*row_blocks.rbegin(), band - 1);
  // The remainder (73 = 9 * 8 + 1) joins the last band: row blocks 64..72,
  // row block fastest, so row block 72 is read beside 64..71 rather than in
  // a band of its own that walks every column block again.
  GroupedTileScheduler tail(problem, 128, 128);
  for (uint32_t i = 0; i < 9 * 12; ++i) {
    ASSERT_TRUE(tail.next(uint64_t(64) * 12 + i, &tile));
    EXPECT_EQ(tile.row0, (64 + i % 9) * 128);
    EXPECT_EQ(tile.col0, i / 9 * 128);
  }
  EXPECT_FALSE(tail.next(uint64_t(73) * 12, &tile));
}

TEST(GroupedTileScheduler, BandsTakeARemainderOfAtMostHalfABand) {
  // The walk of one group against its order written out: bands of 8 row
  // blocks, a remainder of 1..4 joining the last band, of 5..7 (or a group
  // under 8 row blocks) a band of its own; row block fastest within a band.
  const uint32_t band = GroupedTileScheduler::kBandRowBlocks, col_blocks = 3;
  for (uint32_t row_blocks = 1; row_blocks <= 5 * band; ++row_blocks) {
    std::vector<uint32_t> sizes(row_blocks / band, band);
    const uint32_t rest = row_blocks % band;
    if (rest != 0 && rest <= band / 2 && !sizes.empty())
      sizes.back() += rest;
    else if (rest != 0)
      sizes.push_back(rest);
    std::vector<std::pair<uint32_t, uint32_t>> want;  // (row block, column block)
    uint32_t rb0 = 0;
    for (uint32_t size : sizes) {
      for (uint32_t cb = 0; cb < col_blocks; ++cb)
        for (uint32_t rb = rb0; rb < rb0 + size; ++rb) want.emplace_back(rb, cb);
      rb0 += size;
    }
    const uint32_t rows = row_blocks * 64 - 5;  // last row block partial
    const std::vector<uint32_t> offsets = {0, rows};
    const std::vector<int32_t> ids = {0};
    const GroupedProblem problem{offsets.data(), ids.data(), 1, rows, col_blocks * 128, 1, 0, 0};
    GroupedTileScheduler sched(problem, 64, 128);
    GroupedTile tile;
    for (uint64_t t = 0; t < want.size(); ++t) {
      ASSERT_TRUE(sched.next(t, &tile)) << row_blocks << " row blocks, tile " << t;
      EXPECT_EQ(tile.row0 / 64, want[t].first) << row_blocks << " row blocks, tile " << t;
      EXPECT_EQ(tile.col0 / 128, want[t].second) << row_blocks << " row blocks, tile " << t;
    }
    EXPECT_FALSE(sched.next(want.size(), &tile)) << row_blocks << " row blocks";
  }
}

// The token box a tile's stages load (narrow_mma_width): the narrowest of
// tile_m, tile_m / 2, ..., 16 that holds the rows, as the consumers'
// MainloopSm90::run (ptx/sm90/consumer.cuh) picks its wgmma N; each width
// below tile_m has its map.
TEST(NarrowTokenBoxes, WidthIsTheNarrowestPowerOfTwoHoldingTheRows) {
  for (uint32_t tile_m : {16u, 32u, 64u, 128u, 256u})
    for (uint32_t rows = 1; rows <= tile_m; ++rows) {
      const uint32_t w = narrow_mma_width(rows, tile_m);
      EXPECT_TRUE(w >= 16 && w <= tile_m && (w & (w - 1)) == 0) << rows << " of " << tile_m << ": " << w;
      EXPECT_GE(w, rows);
      EXPECT_TRUE(w == 16 || rows > w / 2) << rows << " of " << tile_m << ": " << w << " is not the narrowest";
      if (w < tile_m) {
        ASSERT_LT(narrow_token_map_index(w), kNarrowTokenMaps);
        EXPECT_EQ(16u << narrow_token_map_index(w), w);
        // The map a narrow tile uses is one the runtime encoded.
        EXPECT_TRUE(narrow_token_map_exists(narrow_token_map_index(w), tile_m)) << w << " of " << tile_m;
      }
    }
}

// The narrow maps that exist: exactly the widths 16, 32, ... below tile_m.
TEST(NarrowTokenBoxes, MapsExistExactlyForWidthsBelowTheTile) {
  for (uint32_t tile_m : {16u, 32u, 64u, 128u, 256u}) {
    uint32_t count = 0;
    for (uint32_t i = 0; i < 8; ++i) count += narrow_token_map_exists(i, tile_m);
    uint32_t expected = 0;
    for (uint32_t w = 16; w < tile_m; w *= 2) ++expected;
    EXPECT_EQ(count, expected) << tile_m;
    // ... and they are the first `count` entries, each narrower than the tile.
    for (uint32_t i = 0; i < count; ++i) {
      EXPECT_TRUE(narrow_token_map_exists(i, tile_m)) << i << " of " << tile_m;
      EXPECT_LT(16u << i, tile_m);
    }
  }
}

// Checked mode's per-group rule (ptx/blocks/routing_check.h), the code the kernel's
// checking warp runs, against the C ABI's bits.
TEST(RoutingCheck, FaultBitsMatchTheAbiAndEachRule) {
  static_assert(kFaultOffsetsNotMonotone == GGEMM_DEVICE_FAULT_OFFSETS_NOT_MONOTONE);
  static_assert(kFaultOffsetPastM == GGEMM_DEVICE_FAULT_OFFSET_PAST_M);
  static_assert(kFaultIdOutOfRange == GGEMM_DEVICE_FAULT_ID_OUT_OF_RANGE);
  static_assert(kFaultActiveCount == GGEMM_DEVICE_FAULT_ACTIVE_COUNT);
  const uint32_t m = 100, experts = 4;
  const std::vector<uint32_t> good = {0, 10, 10, 100};
  const std::vector<int32_t> ids = {0, -1, 3};
  for (uint32_t g = 0; g < 3; ++g) EXPECT_EQ(group_faults(good.data(), ids.data(), g, m, experts), 0u) << g;

  const std::vector<uint32_t> first = {1, 10};
  EXPECT_EQ(group_faults(first.data(), ids.data(), 0, m, experts), kFaultOffsetsNotMonotone);
  // Group ends (a_offsets = group_ends - 1): a_offsets[0] is not there and
  // counts as 0, so whatever sits in its place is neither read nor reported.
  EXPECT_EQ(group_faults(first.data(), ids.data(), 0, m, experts, true), 0u);
  const std::vector<uint32_t> ends_past = {0xFFFFFFFFu, 101};
  EXPECT_EQ(group_faults(ends_past.data(), ids.data(), 0, m, experts, true), kFaultOffsetPastM);
  const std::vector<uint32_t> ends_down = {0xFFFFFFFFu, 50, 40};
  EXPECT_EQ(group_faults(ends_down.data(), ids.data(), 1, m, experts, true), kFaultOffsetsNotMonotone);
  EXPECT_EQ(group_faults(good.data(), ids.data(), 1, m, experts, true), 0u);
  const std::vector<uint32_t> down = {0, 50, 40};
  EXPECT_EQ(group_faults(down.data(), ids.data(), 1, m, experts), kFaultOffsetsNotMonotone);
  EXPECT_EQ(group_faults(down.data(), ids.data(), 0, m, experts), 0u);
  const std::vector<uint32_t> past = {0, 101};
  EXPECT_EQ(group_faults(past.data(), ids.data(), 0, m, experts), kFaultOffsetPastM);
  const std::vector<uint32_t> both = {0, 0xFFFFFFFFu, 5};
  EXPECT_EQ(group_faults(both.data(), ids.data(), 1, m, experts), kFaultOffsetsNotMonotone);
  EXPECT_EQ(group_faults(both.data(), ids.data(), 0, m, experts), kFaultOffsetPastM);

  for (int32_t bad : {-2, 4, 5, int32_t(0x80000000u), 0x7fffffff}) {
    const std::vector<int32_t> one = {bad};
    EXPECT_EQ(group_faults(good.data(), one.data(), 0, m, experts), kFaultIdOutOfRange) << bad;
  }
  EXPECT_EQ(active_count_faults(3, 3), 0u);
  EXPECT_EQ(active_count_faults(0, 3), 0u);
  EXPECT_EQ(active_count_faults(4, 3), kFaultActiveCount);
}

}  // namespace
}  // namespace ggemm
