// GPU tests of ggemm_grouped_matmul against the CPU reference: fresh random
// inputs every case, outputs poisoned (0xFF) before the call, so unwritten or
// wrongly written elements fail, and rows outside every group must keep
// their poison bit for bit. Skipped, with the reason, without a GPU.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <ctime>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "ggemm_reference.h"
#include "dtype.h"
#include "gpu_env.h"
#include "test_util.h"

namespace ggemm::testing {
namespace {

struct Case {
  std::string name;
  std::vector<int64_t> rows;     // rows per group
  std::vector<int32_t> experts;  // expert per group (-1 inactive); empty = g % E
  int64_t n = 256, k = 256, num_experts = 4;
  ggemm_dtype in = GGEMM_DTYPE_BF16, out = GGEMM_DTYPE_BF16;
  bool transpose_b = true;
  int64_t split0 = 0, split1 = 0;
  ggemm_epilogue epilogue = GGEMM_EPILOGUE_STORE;
  int64_t unowned_rows = 5;  // rows of C after the last group: never written
  int64_t active = -1;       // expert_usage_stats[1]; -1 = all groups
  int tile_m = 0, swizzle = 0, stages = 0;  // config override (0 = auto)
  int cluster_m = 0;                         // config override: 2 = pairs sharing the token tile
  // Gather on load: A has gather_rows rows and row m reads a random one of
  // them (a_row_index); with hostile_index some indices lie outside (-1,
  // -7, gather_rows, INT32_MAX) and read zeros. 0 = no gather.
  int64_t gather_rows = 0;
  bool hostile_index = false;
  // The groups as group_ends (torch's offs) instead of a_offsets: the device
  // array is a_offsets with [0] replaced by kNotAnOffset, and the call points
  // group_ends one entry past it, so a kernel that read the entry before the
  // ends would start group 0 past row 0 (and checked mode would report it).
  bool group_ends = false;
};

constexpr uint32_t kNotAnOffset = 0x7FFFFFFFu;

std::ostream &operator<<(std::ostream &os, const Case &c) { return os << c.name; }


// Everything one call needs, on host and device.
struct Problem {
  Case c;
  int64_t m = 0, planes = 1;
  std::vector<uint32_t> offsets;
  std::vector<int32_t> ids;
  uint32_t stats[2] = {0, 0};
  std::vector<uint8_t> a, b, c_init, scale_bytes;
  std::vector<int32_t> row_index;  // gather only
  int64_t c_cols = 0;              // n, or n / 2 with SwiGLU
  DeviceBuffer d_a, d_b, d_c, d_offsets, d_ids, d_stats, d_scale, d_row_index;
  DeviceBuffer d_ends;  // group_ends only: [kNotAnOffset, the group ends...]

  explicit Problem(const Case &cs, Rng &rng) : c(cs) {
    planes = (c.split0 || c.split1) ? 3 : 1;
    offsets.push_back(0);
    int64_t max_rows = 0;
    for (int64_t r : c.rows) {
      offsets.push_back(uint32_t(offsets.back() + r));
      max_rows = std::max(max_rows, r);
    }
    const int64_t groups = int64_t(c.rows.size());
    for (int64_t g = 0; g < groups; ++g)
      ids.push_back(c.experts.empty() ? int32_t(g % c.num_experts) : c.experts[g]);
    m = offsets.back() + c.unowned_rows;
    stats[0] = uint32_t(max_rows);
    stats[1] = uint32_t(c.active < 0 ? groups : c.active);

    const int64_t a_rows = c.gather_rows ? c.gather_rows : planes * m;
    c_cols = c.epilogue == GGEMM_EPILOGUE_SWIGLU ? c.n / 2 : c.n;
    a.resize(size_t(a_rows * c.k) * esize(c.in));
    b.resize(size_t(c.num_experts * c.n * c.k) * esize(c.in));
    c_init.resize(size_t(m * c_cols) * esize(c.out));
    fill_random(c.in, a.data(), size_t(a_rows * c.k), rng);
    if (c.gather_rows) {
      for (int64_t r = 0; r < m; ++r) row_index.push_back(int32_t(rng.uniform_int(0, c.gather_rows - 1)));
      if (c.hostile_index) {
        const int32_t bad[4] = {-1, -7, int32_t(c.gather_rows), INT32_MAX};
        for (int i = 0; i < 4 && i < m; ++i) row_index[size_t(i * 3 % m)] = bad[i];
      }
    }
    fill_random(c.in, b.data(), size_t(c.num_experts * c.n * c.k), rng);
    poison(c_init.data(), c_init.size());
    if (c.epilogue == GGEMM_EPILOGUE_ACCUMULATE) {
      // Rows that groups own start from random values; the rest stay poison.
      fill_random(c.out, c_init.data(), size_t(offsets.back() * c_cols), rng);
    }
    scale_bytes.resize(size_t(std::max<int64_t>(m, 1)) * sizeof(float));
    fill_random(GGEMM_DTYPE_FP32, scale_bytes.data(), size_t(std::max<int64_t>(m, 1)), rng, 0.25f, 2.f);
  }

  ggemm_grouped_matmul_args args(bool device, const ggemm_config *cfg) const {
    ggemm_grouped_matmul_args x;
    std::memset(&x, 0, sizeof x);
    x.struct_size = sizeof x;
    x.a_dtype = x.b_dtype = c.in;
    x.c_dtype = c.out;
    x.m = m;
    x.n = c.n;
    x.k = c.k;
    x.num_experts = c.num_experts;
    x.transpose_b = c.transpose_b;
    x.num_groups = int64_t(ids.size());
    x.max_rows_per_group = stats[0];
    x.a_plane_split0 = c.split0;
    x.a_plane_split1 = c.split1;
    x.epilogue = c.epilogue;
    x.config = cfg;
    x.a_rows = c.gather_rows;
    if (device) {
      x.a = d_a.get();
      x.b = d_b.get();
      x.c = d_c.get();
      x.a_offsets = c.group_ends ? nullptr : d_offsets.as<uint32_t>();
      x.group_ends = c.group_ends ? d_ends.as<uint32_t>() + 1 : nullptr;
      x.expert_ids = d_ids.as<int32_t>();
      x.expert_usage_stats = d_stats.as<uint32_t>();
      x.row_scale = d_scale.as<float>();
      x.a_row_index = c.gather_rows ? d_row_index.as<int32_t>() : nullptr;
    } else {
      x.a = a.data();
      x.b = b.data();
      x.a_offsets = c.group_ends ? nullptr : offsets.data();
      x.group_ends = c.group_ends ? offsets.data() + 1 : nullptr;
      x.expert_ids = ids.data();
      x.expert_usage_stats = stats;
      x.row_scale = reinterpret_cast<const float *>(scale_bytes.data());
      x.a_row_index = c.gather_rows ? row_index.data() : nullptr;
    }
    return x;
  }
};

void upload(Problem &p) {
  auto put = [](DeviceBuffer &d, const void *h, size_t n) {
    ASSERT_TRUE(d.alloc(n)) << "cudaMalloc of " << n << " bytes";
    CUDA_OK(cudaMemcpy(d.get(), h, n, cudaMemcpyHostToDevice));
  };
  put(p.d_a, p.a.data(), p.a.size());
  put(p.d_b, p.b.data(), p.b.size());
  put(p.d_c, p.c_init.data(), p.c_init.size());
  put(p.d_offsets, p.offsets.data(), p.offsets.size() * 4);
  put(p.d_ids, p.ids.data(), p.ids.size() * 4);
  put(p.d_stats, p.stats, 8);
  put(p.d_scale, p.scale_bytes.data(), p.scale_bytes.size());
  if (!p.row_index.empty()) put(p.d_row_index, p.row_index.data(), p.row_index.size() * 4);
  if (p.c.group_ends) {
    std::vector<uint32_t> ends = p.offsets;
    ends[0] = kNotAnOffset;
    put(p.d_ends, ends.data(), ends.size() * 4);
  }
}

// The reference always reads the offsets with their leading zero: a call
// that gives group ends must compute what they say.
std::vector<uint8_t> reference_output(const Problem &p) {
  std::vector<uint8_t> expected = p.c_init;
  ggemm_grouped_matmul_args host = p.args(false, nullptr);
  host.a_offsets = p.offsets.data();
  host.group_ends = nullptr;
  host.c = expected.data();
  ref::grouped_matmul(host);
  return expected;
}

ggemm_config make_config(const Case &c) {
  ggemm_config cfg;
  std::memset(&cfg, 0, sizeof cfg);
  cfg.struct_size = sizeof cfg;
  cfg.tile_m = c.tile_m;
  cfg.a_swizzle = cfg.b_swizzle = c.swizzle;
  cfg.stages = c.stages;
  cfg.cluster_m = c.cluster_m;
  return cfg;
}

class GroupedMatmulGpu : public ::testing::TestWithParam<Case> {};

TEST_P(GroupedMatmulGpu, MatchesReference) {
  GGEMM_REQUIRE_GPU(handle);
  const Case &c = GetParam();
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  Rng rng(seed);
  Problem p(c, rng);
  ASSERT_NO_FATAL_FAILURE(upload(p));
  const ggemm_config cfg = make_config(c);
  const bool override = c.tile_m || c.swizzle || c.stages || c.cluster_m;
  ggemm_grouped_matmul_args dev = p.args(true, override ? &cfg : nullptr);
  GGEMM_OK(ggemm_grouped_matmul(handle, &dev, nullptr));
  CUDA_OK(cudaGetLastError());
  CUDA_OK(cudaDeviceSynchronize());

  std::vector<uint8_t> got(p.c_init.size());
  CUDA_OK(cudaMemcpy(got.data(), p.d_c.get(), got.size(), cudaMemcpyDeviceToHost));
  const std::vector<uint8_t> expected = reference_output(p);
  EXPECT_TRUE(compare_matrix(c.out, expected.data(), got.data(), p.m, p.c_cols, default_atol(c.out, c.k),
                             default_rtol(c.out)));
}

std::vector<Case> cases() {
  std::vector<Case> v;
  auto add = [&](Case c) { v.push_back(std::move(c)); };
  const std::vector<int64_t> ragged = {27, 1500, 300, 150};

  // Ragged groups, both weight layouts, every dtype pair.
  for (bool tb : {true, false})
    for (ggemm_dtype in : {GGEMM_DTYPE_BF16, GGEMM_DTYPE_FP16})
      for (ggemm_dtype out : {GGEMM_DTYPE_BF16, GGEMM_DTYPE_FP16, GGEMM_DTYPE_FP32}) {
        Case c;
        c.name = std::string("ragged_") + (tb ? "kmajor_" : "mnmajor_") + dtype_label(in) + "_" +
                 dtype_label(out);
        c.rows = ragged;
        c.n = 384;
        c.k = 520;
        c.in = in;
        c.out = out;
        c.transpose_b = tb;
        add(c);
      }
  // Extreme N and K (multiples of 8, not of the tiles).
  for (bool tb : {true, false}) {
    const std::string l = tb ? "_kmajor" : "_mnmajor";
    add({"wide_n14336_k64" + l, {40, 3, 200}, {}, 14336, 64, 3, GGEMM_DTYPE_BF16, GGEMM_DTYPE_BF16, tb});
    add({"deep_k14336_n64" + l, {100, 1, 260}, {}, 64, 14336, 3, GGEMM_DTYPE_BF16, GGEMM_DTYPE_BF16, tb});
    add({"n4096_k4096" + l, {130, 70}, {}, 4096, 4096, 2, GGEMM_DTYPE_BF16, GGEMM_DTYPE_BF16, tb});
    add({"tiny_n8_k8" + l, {3, 17, 1}, {}, 8, 8, 2, GGEMM_DTYPE_BF16, GGEMM_DTYPE_BF16, tb});
    add({"odd_n200_k72" + l, {33, 90}, {}, 200, 72, 2, GGEMM_DTYPE_BF16, GGEMM_DTYPE_FP32, tb});
  }
  // K-sliced stages (several 64-wide slices of K per TMA box; the config
  // rules take the fewest slices making a stage >= 20 KB,
  // ChooseSm90Config.KSliced...). Two slices: decode tiles (tile_m 16) with
  // 128-row weight boxes, K of 9 and 7 slices (the last stage half past K),
  // fp16 out. Four slices: narrow (shrink-like) weight boxes of 48 and 40
  // rows on tile_m 16 (few tiles: the rules halve tile_m), K of 17 slices
  // (the last stage one real slice, three past K), fp16 in with the
  // accumulate epilogue, and bf16 in with fp32 out.
  add({"sliced2_k576_n200", {9, 16, 3, 0, 12}, {}, 200, 576, 3, GGEMM_DTYPE_BF16, GGEMM_DTYPE_FP16, true});
  add({"sliced2_k448_n1024", {16, 9, 13, 0, 16, 5, 11, 2}, {}, 1024, 448, 5, GGEMM_DTYPE_BF16, GGEMM_DTYPE_BF16,
       true});
  {
    Case c{"sliced4_narrow_n48_k1088_fp16_accumulate"};
    c.rows = {20, 31, 7};
    c.n = 48;
    c.k = 1088;
    c.in = GGEMM_DTYPE_FP16;
    c.out = GGEMM_DTYPE_FP32;
    c.epilogue = GGEMM_EPILOGUE_ACCUMULATE;
    add(c);
  }
  add({"sliced4_narrow_n40_k1088_fp32", {13, 16, 0, 7}, {}, 40, 1088, 3, GGEMM_DTYPE_BF16, GGEMM_DTYPE_FP32, true});
  // Many decode-sized groups (1..16 rows) over many experts; -1 and empty groups.
  {
    Case c{"decode_256_groups"};
    for (int g = 0; g < 256; ++g) c.rows.push_back(1 + (g * 7) % 16);
    c.n = 256;
    c.k = 512;
    c.num_experts = 300;
    for (int g = 0; g < 256; ++g) c.experts.push_back(g % 11 == 5 ? -1 : (g * 37) % 300);
    add(c);
  }
  {
    Case c{"empty_and_inactive_groups"};
    c.rows = {0, 64, 0, 0, 129, 1, 0, 300, 0};
    c.experts = {0, 1, -1, 2, -1, 3, 1, 0, 2};
    c.n = 640;
    c.k = 136;
    add(c);
  }
  {
    Case c{"one_group"};
    c.rows = {1000};
    c.n = 512;
    c.k = 512;
    c.unowned_rows = 0;
    add(c);
  }
  {
    Case c{"skewed_128_groups"};
    for (int g = 0; g < 128; ++g) c.rows.push_back(g == 3 ? 2000 : (g % 5 == 0 ? 0 : g % 9));
    c.n = 256;
    c.k = 256;
    c.num_experts = 128;
    add(c);
  }
  {
    // Large groups: the token-major kernel's tiles, its partial token tiles
    // at every group's end (on the persistent kernel, in the forced-off run:
    // tile_m 256 and a narrower MMA for each group's last row block).
    Case c{"large_groups_auto_tile"};
    c.rows = {600, 700, 513, 1100};
    c.n = 384;
    c.k = 320;
    add(c);
  }
  // The token-major kernel (prefill: 128 rows a group or more, K-major,
  // 16-bit outputs, store or row scale): ragged groups with partial token
  // tiles, an inactive and an empty group, N past its 192-feature tiles and
  // its 64-feature chunks, K past its 64-wide stages; each operand and
  // output dtype; N below one tile (a narrower weight box); group ends.
  {
    Case c{"token_major_ragged_bf16"};
    c.rows = {129, 300, 0, 1000, 127, 256};
    c.experts = {0, 1, 2, -1, 3, 1};
    c.n = 1000;
    c.k = 200;
    add(c);
  }
  {
    Case c{"token_major_row_scale_fp16_bf16"};
    c.rows = {200, 385, 140};
    c.n = 456;
    c.k = 520;
    c.in = GGEMM_DTYPE_FP16;
    c.epilogue = GGEMM_EPILOGUE_ROW_SCALE;
    add(c);
  }
  {
    // N below one tile: the persistent kernel in the automatic plan, the
    // token-major one's narrow weight box in the forced run.
    Case c{"token_major_n104_row_scale_bf16_fp16"};
    c.rows = {300, 260};
    c.n = 104;
    c.k = 64;
    c.out = GGEMM_DTYPE_FP16;
    c.epilogue = GGEMM_EPILOGUE_ROW_SCALE;
    add(c);
  }
  // Several tiles a CTA (~300 tiles on 132 SMs): both consumer warpgroups,
  // their order barriers, the skipped stages, inactive tiles owned by
  // either; K of 4 stages, and of 3 (the 4-stage ring wraps mid-tile).
  for (int64_t k : {200, 136}) {
    Case c{"token_major_many_tiles_k" + std::to_string(k)};
    c.rows = {1500, 700, 2100, 900, 1300};
    c.experts = {0, -1, 1, 2, 3};
    c.n = 1000;
    c.k = k;
    if (k == 136) c.epilogue = GGEMM_EPILOGUE_ROW_SCALE;
    add(c);
  }
  {
    Case c{"token_major_group_ends_fp16"};
    c.rows = {400, 129, 513};
    c.n = 384;
    c.k = 2048;
    c.in = c.out = GGEMM_DTYPE_FP16;
    c.group_ends = true;
    add(c);
  }
  // The token-major SwiGLU kernel (N = 2I, 96 output features a tile as
  // three 32-feature chunks): I past its tiles by 40 features (a partial
  // chunk and a chunk wholly past I) and by 8 (one octet), ragged groups
  // with partial token tiles, inactive and empty groups, many tiles a CTA
  // with the ring wrapping mid-tile (K 136), fp16 and mixed dtypes, group
  // ends.
  {
    Case c{"token_major_swiglu_ragged_i1000_bf16"};
    c.rows = {129, 300, 0, 1000, 127, 256};
    c.experts = {0, 1, 2, -1, 3, 1};
    c.n = 2000;
    c.k = 200;
    c.epilogue = GGEMM_EPILOGUE_SWIGLU;
    add(c);
  }
  {
    Case c{"token_major_swiglu_many_tiles_i776_fp16"};
    c.rows = {1500, 700, 2100, 900, 1300};
    c.experts = {0, -1, 1, 2, 3};
    c.n = 1552;
    c.k = 136;
    c.in = c.out = GGEMM_DTYPE_FP16;
    c.epilogue = GGEMM_EPILOGUE_SWIGLU;
    add(c);
  }
  {
    Case c{"token_major_swiglu_group_ends_bf16_fp16"};
    c.rows = {400, 129, 513};
    c.n = 384;
    c.k = 2048;
    c.out = GGEMM_DTYPE_FP16;
    c.epilogue = GGEMM_EPILOGUE_SWIGLU;
    c.group_ends = true;
    add(c);
  }
  {
    Case c{"active_count_below_groups"};
    c.rows = {50, 60, 70, 80};
    c.active = 2;  // groups 2 and 3 are past the active count: untouched
    add(c);
  }
  {
    Case c{"zero_active_groups"};
    c.rows = {50, 60};
    c.active = 0;
    add(c);
  }
  // Activation planes (LoRA Q/K/V layout), aligned and unaligned to the tile.
  for (bool tb : {true, false}) {
    const std::string l = tb ? "_kmajor" : "_mnmajor";
    add({"planes_aligned" + l, {37, 300, 5}, {}, 768, 64, 3, GGEMM_DTYPE_BF16, GGEMM_DTYPE_BF16, tb, 512, 640});
    add({"planes_unaligned" + l, {37, 300, 5}, {}, 584, 128, 3, GGEMM_DTYPE_BF16, GGEMM_DTYPE_BF16, tb, 328,
         456});
  }
  // Epilogues.
  for (ggemm_dtype out : {GGEMM_DTYPE_BF16, GGEMM_DTYPE_FP32}) {
    for (ggemm_epilogue e : {GGEMM_EPILOGUE_ACCUMULATE, GGEMM_EPILOGUE_ROW_SCALE}) {
      Case c;
      c.name = std::string(e == GGEMM_EPILOGUE_ACCUMULATE ? "accumulate_" : "row_scale_") + dtype_label(out);
      c.rows = {27, 400, 0, 150};
      c.experts = {0, 1, 2, -1};
      c.n = 384;
      c.k = 256;
      c.out = out;
      c.epilogue = e;
      add(c);
    }
  }
  // The row-scale epilogue at tile_m 256, whose weights come through shared
  // memory (ptx/sm90/row_scales.h): two multiplying warpgroups and one (N
  // 64, narrow tiles), pairs, groups above and below one staging chunk (128
  // rows), an inactive group, both 16-bit outputs, K of two stages (the
  // ring holds whole tiles: a warpgroup may run a tile ahead) and of many.
  for (ggemm_dtype out : {GGEMM_DTYPE_BF16, GGEMM_DTYPE_FP16})
    for (int64_t n : {int64_t(384), int64_t(64)})
      for (int64_t k : {int64_t(128), int64_t(520)})
        for (int cluster : {1, 2}) {
          if (cluster == 2 && (n == 64 || out == GGEMM_DTYPE_FP16)) continue;
          Case c;
          c.name = "row_scale_tile_m256_n" + std::to_string(n) + "_k" + std::to_string(k) +
                   (cluster == 2 ? "_cluster2_" : "_") + dtype_label(out);
          c.rows = {27, 400, 0, 150, 600, 256};
          c.experts = {0, 1, 2, -1, 3, 1};
          c.n = n;
          c.k = k;
          c.in = c.out = out;
          c.epilogue = GGEMM_EPILOGUE_ROW_SCALE;
          c.tile_m = 256;
          c.cluster_m = cluster == 2 ? 2 : 0;
          add(c);
        }
  {
    // MN-major weights, N 64: two warpgroups, the second with no columns
    // (it still takes part in the row scales' barriers).
    Case c{"row_scale_tile_m256_mnmajor_n64"};
    c.rows = {27, 400, 0, 150, 600, 256};
    c.experts = {0, 1, 2, -1, 3, 1};
    c.n = 64;
    c.k = 520;
    c.transpose_b = false;
    c.epilogue = GGEMM_EPILOGUE_ROW_SCALE;
    c.tile_m = 256;
    add(c);
  }
  // SwiGLU (gate rows [0, I), up rows [I, 2I); C [M, I]) and gather on load
  // (row m reads A row a_row_index[m]), apart and together: I a multiple of
  // 64 and not (a partial last tile), I = 8 (one octet), decode tiles of 16
  // tokens (a staging chunk of two octets), large groups on the automatic
  // tile_m 256 (two staging chunks), inactive and empty groups, fp16, and
  // indices outside A (they read zeros).
  for (ggemm_dtype out : {GGEMM_DTYPE_BF16, GGEMM_DTYPE_FP16}) {
    Case c{std::string("swiglu_i200_") + dtype_label(out)};
    c.rows = {27, 400, 0, 150};
    c.experts = {0, 1, 2, -1};
    c.n = 400;
    c.k = 256;
    c.in = out;
    c.out = out;
    c.epilogue = GGEMM_EPILOGUE_SWIGLU;
    add(c);
  }
  {
    Case c{"swiglu_i768_k2048_large_groups"};
    c.rows = {600, 9, 513, 1100};
    c.n = 1536;
    c.k = 2048;
    c.epilogue = GGEMM_EPILOGUE_SWIGLU;
    add(c);
    c.name = "swiglu_i8_tile16";
    c.rows = {3, 16, 1, 40};
    c.n = 16;
    c.k = 72;
    c.tile_m = 16;
    add(c);
  }
  // Decode's narrow tiles past a wave (runtime/plan_rules.h, narrow_tiles):
  // 9 routed rows in 10 groups (one empty, one inactive) x 22 wide column
  // blocks = 198 wide tiles, whose last wave of 66 runs on half the H200's
  // SMs, so 64-feature tiles. Every epilogue; SwiGLU's narrow tile is 4
  // octet pairs (I 1400: the last tile has 3, the box's fourth past I), with
  // and without gather on load, both 16-bit types.
  for (ggemm_epilogue e : {GGEMM_EPILOGUE_STORE, GGEMM_EPILOGUE_ROW_SCALE, GGEMM_EPILOGUE_SWIGLU})
    for (ggemm_dtype t : {GGEMM_DTYPE_BF16, GGEMM_DTYPE_FP16})
      for (bool gather : {false, true}) {
        if (e != GGEMM_EPILOGUE_SWIGLU && (gather || t == GGEMM_DTYPE_FP16)) continue;
        Case c{std::string("decode_narrow_last_wave_") + (gather ? "gather_" : "") +
               (e == GGEMM_EPILOGUE_STORE ? "store_" : e == GGEMM_EPILOGUE_ROW_SCALE ? "row_scale_" : "swiglu_") +
               dtype_label(t)};
        c.rows = {1, 1, 0, 1, 1, 1, 1, 1, 1, 1};
        c.experts = {0, 1, 2, 3, -1, 5, 6, 7, 8, 9};
        c.num_experts = 10;
        c.n = 2800;
        c.k = 192;
        c.in = c.out = t;
        c.epilogue = e;
        c.gather_rows = gather ? 6 : 0;
        c.unowned_rows = 0;  // M = 9 <= 10 groups: decode (rows past the groups would make M 14)
        add(c);
      }
  for (ggemm_epilogue e : {GGEMM_EPILOGUE_STORE, GGEMM_EPILOGUE_ROW_SCALE, GGEMM_EPILOGUE_SWIGLU}) {
    Case c{std::string("gather_") +
           (e == GGEMM_EPILOGUE_STORE ? "store" : e == GGEMM_EPILOGUE_ROW_SCALE ? "row_scale" : "swiglu")};
    c.rows = {27, 400, 0, 150, 8};
    c.experts = {0, 1, 2, -1, 3};
    c.n = 384;
    c.k = 320;
    c.epilogue = e;
    c.gather_rows = 97;
    add(c);
  }
  {
    Case c{"gather_hostile_indices_fp16"};
    c.rows = {31, 64, 5};
    c.n = 256;
    c.k = 128;
    c.in = c.out = GGEMM_DTYPE_FP16;
    c.gather_rows = 40;
    c.hostile_index = true;
    add(c);
    c.name = "gather_swiglu_large_groups";
    c.rows = {600, 700, 513, 1100};
    c.n = 1536;
    c.k = 512;
    c.in = c.out = GGEMM_DTYPE_BF16;
    c.epilogue = GGEMM_EPILOGUE_SWIGLU;
    c.gather_rows = 2000;
    c.hostile_index = false;
    add(c);
    c.name = "gather_decode_tile16";
    c.rows = {1, 2, 1, 3, 1, 1, 1, 1};
    c.num_experts = 8;
    c.n = 512;
    c.k = 1024;
    c.epilogue = GGEMM_EPILOGUE_STORE;
    c.gather_rows = 3;
    add(c);
    // K <= 32, whose automatic swizzle without a gather is 64 or 32 bytes:
    // gathered rows land 128 bytes apart whatever K (a one-row box at a
    // 64-byte offset was a misaligned TMA destination), past K zero fill.
    for (int64_t k : {24, 16}) {
      c.name = "gather_short_k" + std::to_string(k);
      c.rows = {9, 40, 0, 3};
      c.num_experts = 4;
      c.n = 200;
      c.k = k;
      c.gather_rows = 50;
      c.hostile_index = true;
      add(c);
    }
  }
  // sm_90a's short-K kernel (K <= 128, K-major; the automatic config takes it
  // where its tiles fit one wave, as here): every output dtype and
  // epilogue, inactive (-1) and empty groups, K not a multiple of 16 (the
  // MMA's K is zero-filled), tiles of 8, 16 and 32 tokens, a partial
  // column block, fp16 operands, activation planes with segment views.
  // One case per output dtype and epilogue (fp16 operands for fp16 outputs,
  // bf16 otherwise), named prefix + epilogue + dtype.
  auto add_every_output_and_epilogue = [&](const std::string &prefix, std::vector<int64_t> rows,
                                           std::vector<int32_t> experts, int64_t n, int64_t k) {
    for (ggemm_dtype out : {GGEMM_DTYPE_BF16, GGEMM_DTYPE_FP16, GGEMM_DTYPE_FP32})
      for (ggemm_epilogue e : {GGEMM_EPILOGUE_STORE, GGEMM_EPILOGUE_ACCUMULATE, GGEMM_EPILOGUE_ROW_SCALE}) {
        Case c;
        c.name = prefix +
                 (e == GGEMM_EPILOGUE_ACCUMULATE ? "accumulate_" : e == GGEMM_EPILOGUE_ROW_SCALE ? "row_scale_" : "store_") +
                 dtype_label(out);
        c.rows = rows;
        c.experts = experts;
        c.n = n;
        c.k = k;
        c.in = out == GGEMM_DTYPE_FP16 ? GGEMM_DTYPE_FP16 : GGEMM_DTYPE_BF16;
        c.out = out;
        c.epilogue = e;
        add(c);
      }
  };
  add_every_output_and_epilogue("short_k_", {5, 0, 30, 3, 14}, {0, 1, -1, 2, 1}, 200, 24);
  add({"short_k_tile8_k8", {1, 7, 8, 2}, {}, 136, 8, 3, GGEMM_DTYPE_BF16, GGEMM_DTYPE_BF16, true});
  add({"short_k_tile32_k128", {20, 64, 33}, {}, 392, 128, 3, GGEMM_DTYPE_FP16, GGEMM_DTYPE_BF16, true});
  add({"short_k_planes_k72", {9, 30, 2}, {}, 584, 72, 3, GGEMM_DTYPE_BF16, GGEMM_DTYPE_BF16, true, 328, 456});
  // The split short-K kernel (a cluster of 8 CTAs a tile, each a slice of
  // K; decode groups with 128 < K <= 4096, few tiles: the automatic config
  // takes it here): every output dtype and epilogue at K 1000 (slices of
  // 128, the last one 104 long), -1 and empty groups; K 136 (slices of 32:
  // ranks 5-7 hold no K at all); K 4096 over two column blocks; fp16
  // operands; activation planes with segment views.
  add_every_output_and_epilogue("short_k_split_", {5, 0, 8, 3, 7}, {0, 1, -1, 2, 1}, 48, 1000);
  // The decode GEMV (ptx/sm90/decode_gemv.cuh; groups of at most 8 rows as
  // the caller's bound tells): K past a multiple of 256 (a lane's second
  // 256-element step only partly inside K), N past a multiple of 32 (a
  // partial last tile whose warps 1 to 3 hold no rows), groups of 0 to 8
  // rows (tiles of 4: the groups of 5 and 8 take two), an inactive group;
  // every output and epilogue. Then SwiGLU with a partial last tile (I 24:
  // tiles of 16 and 8 outputs), plain and gathering with hostile indices.
  // The GEMV runs them in the forced-plan suite (--decode_gemv=
  // where_possible, which puts it before the short-K kernels); the
  // automatic plan gives calls this small to the split short-K kernel.
  add_every_output_and_epilogue("decode_gemv_", {1, 0, 3, 8, 2, 5, 1}, {0, 1, -1, 2, 3, 0, 1}, 72, 264);
  for (bool gather : {false, true}) {
    Case c{std::string("decode_gemv_swiglu_i24_") + (gather ? "gather_hostile" : "plain")};
    c.rows = {1, 2, 0, 4, 1};
    c.experts = {0, 1, 2, -1, 3};
    c.n = 48;
    c.k = 520;
    c.epilogue = GGEMM_EPILOGUE_SWIGLU;
    c.gather_rows = gather ? 7 : 0;
    c.hostile_index = gather;
    c.unowned_rows = 0;
    add(c);
  }
  // Tiles of 1 row under the automatic plan (8 groups of 1 row, the bound
  // 1): Qwen3-30B-A3B's gate_up and down at one token, 384 and 512 tiles,
  // which on the H200's 132 SMs take the kernels of three and of four CTAs
  // an SM (decode_gemv_layout.h); store, row scale, fp32 accumulate.
  for (const auto &[n, k] : {std::pair<int64_t, int64_t>{1536, 2048}, {2048, 768}})
    for (const auto &[epilogue, out] : {std::pair{GGEMM_EPILOGUE_STORE, GGEMM_DTYPE_BF16},
                                        {GGEMM_EPILOGUE_ROW_SCALE, GGEMM_DTYPE_BF16},
                                        {GGEMM_EPILOGUE_ACCUMULATE, GGEMM_DTYPE_FP32}}) {
      Case c{"decode_gemv_one_row_n" + std::to_string(n) + "_" +
             (epilogue == GGEMM_EPILOGUE_STORE ? "store" : epilogue == GGEMM_EPILOGUE_ROW_SCALE ? "row_scale" : "accumulate")};
      c.rows = {1, 1, 1, 1, 1, 1, 1, 1};
      c.num_experts = 8;
      c.n = n;
      c.k = k;
      c.out = out;
      c.epilogue = epilogue;
      add(c);
    }
  add({"short_k_split_k136", {8, 2, 0, 6}, {}, 104, 136, 3, GGEMM_DTYPE_BF16, GGEMM_DTYPE_BF16, true});
  add({"short_k_split_k4096_two_col_blocks", {8, 5, 8, 1}, {}, 192, 4096, 3, GGEMM_DTYPE_BF16, GGEMM_DTYPE_FP32,
       true});
  add({"short_k_split_tile16_fp16", {16, 12, 9}, {}, 136, 512, 3, GGEMM_DTYPE_FP16, GGEMM_DTYPE_FP16, true});
  add({"short_k_split_planes_k512", {3, 8, 2}, {}, 584, 512, 3, GGEMM_DTYPE_BF16, GGEMM_DTYPE_BF16, true, 328,
       456});
  // Tiles of 64 features, one consumer warpgroup multiplying (narrow_tiles
  // in runtime/plan_rules.h; CPU test Sm90Plan.NarrowTilesWhere...): decode
  // groups of 1..16 rows, so few that tiles of 128 would fill at most half
  // the SMs, K past the split short-K kernel's 4096: every output dtype and
  // epilogue, -1 and empty groups, N 1096 (a last column block of 8).
  add_every_output_and_epilogue("narrow_tiles_", {1, 0, 16, 3}, {0, 1, -1, 2}, 1096, 4160);
  // A decode call listing every expert, as torch's offs do: 300 groups, 9 of
  // them routed, placed so that the warp walk (GroupedTileScheduler::
  // next_warp, 32 groups a step) stops at group 0, at a step's last and
  // first lanes, crosses steps of empty groups, and ends on the last group;
  // with narrow tiles (N 2048: M 28, 28 x 16 = 448 wide tiles, a last wave
  // of 52; N 512: 112, short of a wave), and with wide ones (N 2048 under a
  // config, which keeps tiles wide); all again as group ends (below).
  for (int64_t n : {2048, 512, -2048}) {
    Case c{"decode_listing_every_expert_n" + std::to_string(n < 0 ? -n : n) + (n < 0 ? "_wide" : "")};
    c.rows.assign(300, 0);
    for (int g : {0, 31, 32, 95, 96, 200, 263, 298, 299}) c.rows[size_t(g)] = 1 + g % 5;
    c.n = n < 0 ? -n : n;
    c.k = 768;
    c.num_experts = 16;  // group g multiplies expert g % 16
    if (n < 0) c.tile_m = 16;
    add(c);
  }
  // Its routing table holds 256 groups: exactly that many, and more (the
  // walk then reads global memory). One column block and groups of at most
  // 8 rows, so the rule takes the kernel for both (CPU test
  // Sm90ShortK.TakesManyDecodeGroupsPastItsRoutingTable).
  for (int groups : {256, 300}) {
    Case c{"short_k_" + std::to_string(groups) + "_groups"};
    for (int g = 0; g < groups; ++g) c.rows.push_back(g % 13 == 4 ? 0 : 1 + (g * 5) % 8);
    c.n = 120;
    c.k = 16;
    c.num_experts = 40;
    for (int g = 0; g < groups; ++g) c.experts.push_back(g % 11 == 5 ? -1 : (g * 7) % 40);
    add(c);
  }
  // Decode routing at its most fragmented: groups of one row or none (up to
  // 8 groups in one 8-token tile's rows), -1 and out-of-range expert ids;
  // and the decode expand's shape in small, 8 groups of 8 rows filling M =
  // 64 with no unowned rows, three segments of activation planes. (Written
  // for a resident short-K kernel that was refuted and not landed, see
  // docs/performance.md; they run on the tiled kernel, automatic and forced
  // where possible: ggemm_tests_forced_plan.)
  {
    Case c{"short_k_one_row_groups"};
    for (int g = 0; g < 60; ++g) c.rows.push_back(g % 7 == 3 ? 0 : 1);
    for (int g = 0; g < 60; ++g) c.experts.push_back(g % 9 == 4 ? -1 : g % 13 == 6 ? 99 : g % 40);
    c.n = 264;
    c.k = 16;
    c.num_experts = 40;
    c.unowned_rows = 3;
    add(c);
  }
  {
    Case c{"short_k_decode_expand_shape"};
    c.rows = {8, 8, 8, 8, 8, 8, 8, 8};
    c.experts = {3, 0, 7, 1, 6, 2, 5, 4};
    c.n = 1024 + 2 * 256;
    c.k = 16;
    c.num_experts = 8;
    c.split0 = 1024;
    c.split1 = 1280;
    c.unowned_rows = 0;
    add(c);
  }
  // Every tile_m the heuristic or an override can choose, both layouts.
  for (bool tb : {true, false})
    for (int tm : {16, 32, 64, 128, 256}) {
      Case c;
      c.name = std::string("tile_m") + std::to_string(tm) + (tb ? "_kmajor" : "_mnmajor");
      c.rows = {5, 300, 17, 600};
      c.n = 264;
      c.k = 200;
      c.transpose_b = tb;
      c.tile_m = tm;
      add(c);
    }
  // Pairs sharing their token tile through TMA multicast (cluster_m 2): odd
  // column-block counts (the second CTA's share of the last pair tile is
  // empty), inactive groups, segment splits with activation planes, both
  // layouts, every epilogue and output dtype the pair kernels have.
  for (bool tb : {true, false})
    for (int tm : {128, 256}) {
      Case c;
      c.name = std::string("cluster2_tile_m") + std::to_string(tm) + (tb ? "_kmajor" : "_mnmajor");
      c.rows = {5, 300, 0, 17, 600, 130};
      c.experts = {0, 1, 2, -1, 3, 1};
      c.n = 392;  // 4 column blocks, the last partial: pair tiles [0, 256) and [256, 392)
      c.k = 520;
      c.transpose_b = tb;
      c.tile_m = tm;
      c.cluster_m = 2;
      add(c);
    }
  {
    Case c{"cluster2_n136_second_share_partial"};
    c.rows = {129, 77, 256};
    c.n = 136;
    c.k = 64;
    c.tile_m = 128;
    c.cluster_m = 2;
    add(c);
  }
  for (bool tb : {true, false}) {
    Case c{std::string("cluster2_planes") + (tb ? "_kmajor" : "_mnmajor"), {37, 300, 5}, {}, 584, 128, 3,
           GGEMM_DTYPE_BF16, GGEMM_DTYPE_BF16, tb, 328, 456};
    c.tile_m = 128;
    c.cluster_m = 2;
    add(c);
  }
  for (ggemm_dtype out : {GGEMM_DTYPE_FP16, GGEMM_DTYPE_FP32})
    for (ggemm_epilogue e : {GGEMM_EPILOGUE_STORE, GGEMM_EPILOGUE_ACCUMULATE, GGEMM_EPILOGUE_ROW_SCALE}) {
      Case c;
      c.name = std::string("cluster2_") +
               (e == GGEMM_EPILOGUE_ACCUMULATE ? "accumulate_" : e == GGEMM_EPILOGUE_ROW_SCALE ? "row_scale_" : "store_") +
               dtype_label(out);
      c.rows = {27, 400, 0, 150};
      c.experts = {0, 1, 2, -1};
      c.n = 640;
      c.k = 256;
      c.out = out;
      c.epilogue = e;
      c.tile_m = 128;
      c.cluster_m = 2;
      add(c);
    }
  // Swizzle / tile_k overrides and a shallow pipeline.
  for (int sw : {32, 64, 128}) {
    Case c;
    c.name = "swizzle" + std::to_string(sw);
    c.rows = {90, 200};
    c.k = 328;
    c.swizzle = sw;
    add(c);
  }
  {
    Case c{"two_stages"};
    c.rows = {90, 200};
    c.k = 1024;
    c.stages = 2;
    add(c);
  }
  // Odd stage counts of small stages (32- and 64-byte rows, narrow weights)
  // end between two 1024-byte boundaries; the 128B-swizzled epilogue staging
  // after them must not (the stress test's n=120, k=24 call caught it).
  for (int stages : {3, 5}) {
    Case c;
    c.name = "odd_stages" + std::to_string(stages) + "_swizzle32_tile_m16";
    c.rows = {9, 14, 1, 16};
    c.n = 256;
    c.k = 40;
    c.swizzle = 32;
    c.tile_m = 16;
    c.stages = stages;
    add(c);
  }
  {
    Case c{"narrow_n120_k24"};
    c.rows = {1, 71, 80, 7};
    c.experts = {-1, 0, 1, 0};
    c.n = 120;
    c.k = 24;
    c.num_experts = 2;
    add(c);
  }
  // Group ends (torch._grouped_mm's offs) in place of a_offsets, on every
  // kind of kernel: the automatic persistent tiles, tile_m 256 of both
  // layouts and its pairs, SwiGLU's own tile_m 256 kernel, gather, the
  // short-K kernel (its routing table, and past it) and its split form,
  // activation planes, decode's narrow SwiGLU tiles; empty, inactive and
  // uncounted groups.
  for (const char *name :
       {"ragged_kmajor_bf16_bf16", "ragged_mnmajor_fp16_fp32", "empty_and_inactive_groups", "one_group",
        "large_groups_auto_tile", "active_count_below_groups", "zero_active_groups", "tile_m256_kmajor",
        "tile_m256_mnmajor", "cluster2_tile_m256_kmajor", "cluster2_tile_m128_mnmajor",
        "swiglu_i768_k2048_large_groups", "gather_swiglu_large_groups", "gather_decode_tile16", "decode_256_groups",
        "decode_listing_every_expert_n2048", "decode_listing_every_expert_n512",
        "decode_listing_every_expert_n2048_wide",
        "short_k_store_bf16", "short_k_300_groups", "short_k_split_accumulate_fp32", "planes_unaligned_kmajor",
        "row_scale_bf16", "decode_narrow_last_wave_gather_swiglu_bf16"}) {
    const auto found = std::find_if(v.begin(), v.end(), [&](const Case &c) { return c.name == name; });
    if (found == v.end()) continue;  // AreCallsTheAbiAccepts' count catches a renamed case
    Case c = *found;
    c.name += "_group_ends";
    c.group_ends = true;
    v.push_back(c);
  }
  return v;
}

INSTANTIATE_TEST_SUITE_P(Shapes, GroupedMatmulGpu, ::testing::ValuesIn(cases()), CaseName());

// Runs without a GPU: every case above is a call the C ABI accepts, so a
// case written wrong fails here, on the CPU, not on the GPU as a refused
// call (the split K 136 case once asked N 100 and was caught only on the
// H200). The arguments are checked before the handle, so with no handle a
// valid call stops at the handle.
TEST(GroupedMatmulCases, AreCallsTheAbiAccepts) {
  Rng rng(fresh_seed());
  const std::vector<Case> all = cases();
  // 24 from the group-ends list, token_major_group_ends_fp16 and
  // token_major_swiglu_group_ends_bf16_fp16.
  EXPECT_EQ(std::count_if(all.begin(), all.end(), [](const Case &c) { return c.group_ends; }), 26)
      << "a case the group-ends list names is gone";
  for (const Case &c : all) {
    SCOPED_TRACE(c.name);
    const Problem p(c, rng);
    const ggemm_config cfg = make_config(c);
    const bool override = c.tile_m || c.swizzle || c.stages || c.cluster_m;
    ggemm_grouped_matmul_args x = p.args(false, override ? &cfg : nullptr);
    std::vector<uint8_t> out = p.c_init;
    x.c = out.data();
    EXPECT_EQ(ggemm_grouped_matmul(nullptr, &x, nullptr), GGEMM_STATUS_INVALID_HANDLE) << ggemm_last_error_message();
  }
}

// A call captured in a CUDA graph, replayed with other offsets (or group
// ends), expert ids and active counts written to the same device arrays
// between replays, each replay checked against the reference. Prefill-sized
// groups with no row bound; or decode-sized ones (decode = true: groups of 0
// to 4 rows, the caller's bound 4 holding in every replay, Qwen3-30B-A3B's
// gate_up shape with the row-scale epilogue): the automatic plan runs them on the
// persistent kernel's narrow decode tiles (16 x 64 on the H200), the
// forced-plan suite's --decode_gemv=where_possible on the decode GEMV.
void run_graph_replay(ggemm_handle_t handle, bool group_ends, bool decode = false) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed) + (group_ends ? ", group ends" : "") + (decode ? ", decode" : ""));
  Rng rng(seed);
  Case c{"graph"};
  c.rows = decode ? std::vector<int64_t>{1, 2, 0, 4} : std::vector<int64_t>{100, 50, 200, 10};
  c.n = decode ? 1536 : 512;
  c.k = decode ? 2048 : 256;
  c.unowned_rows = decode ? 9 : 200;  // room for the replays' larger groups
  c.group_ends = group_ends;
  if (decode) c.epilogue = GGEMM_EPILOGUE_ROW_SCALE;
  Problem p(c, rng);
  ASSERT_NO_FATAL_FAILURE(upload(p));
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  ggemm_grouped_matmul_args dev = p.args(true, nullptr);
  dev.max_rows_per_group = decode ? 4 : 0;  // without a bound: the replays change the sizes
  CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  GGEMM_OK(ggemm_grouped_matmul(handle, &dev, stream));
  CUDA_OK(cudaStreamEndCapture(stream, &graph));
  CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));

  const std::vector<std::vector<int64_t>> replays =
      decode ? std::vector<std::vector<int64_t>>{{1, 2, 0, 4}, {4, 4, 4, 4}, {0, 1, 3, 2}, {2, 0, 0, 0}}
             : std::vector<std::vector<int64_t>>{{100, 50, 200, 10}, {0, 300, 1, 160}, {7, 7, 7, 7}, {400, 0, 0, 0}};
  const std::vector<uint32_t> actives = {4, 4, 2, 1};
  for (size_t r = 0; r < replays.size(); ++r) {
    std::vector<uint32_t> offsets = {0};
    for (int64_t x : replays[r]) offsets.push_back(uint32_t(offsets.back() + x));
    p.offsets = offsets;
    p.ids = {int32_t(r % 4), -1, int32_t((r + 1) % 4), 3};
    p.stats[1] = actives[r];
    CUDA_OK(cudaMemcpyAsync(p.d_offsets.get(), p.offsets.data(), p.offsets.size() * 4, cudaMemcpyHostToDevice, stream));
    if (group_ends)  // the ends only: the word before them keeps kNotAnOffset
      CUDA_OK(cudaMemcpyAsync(p.d_ends.as<uint32_t>() + 1, p.offsets.data() + 1, (p.offsets.size() - 1) * 4,
                              cudaMemcpyHostToDevice, stream));
    CUDA_OK(cudaMemcpyAsync(p.d_ids.get(), p.ids.data(), p.ids.size() * 4, cudaMemcpyHostToDevice, stream));
    CUDA_OK(cudaMemcpyAsync(p.d_stats.get(), p.stats, 8, cudaMemcpyHostToDevice, stream));
    CUDA_OK(cudaMemcpyAsync(p.d_c.get(), p.c_init.data(), p.c_init.size(), cudaMemcpyHostToDevice, stream));
    CUDA_OK(cudaGraphLaunch(exec, stream));
    std::vector<uint8_t> got(p.c_init.size());
    CUDA_OK(cudaMemcpyAsync(got.data(), p.d_c.get(), got.size(), cudaMemcpyDeviceToHost, stream));
    CUDA_OK(cudaStreamSynchronize(stream));
    const std::vector<uint8_t> expected = reference_output(p);
    EXPECT_TRUE(compare_matrix(c.out, expected.data(), got.data(), p.m, c.n, default_atol(c.out, c.k),
                               default_rtol(c.out)))
        << "replay " << r;
  }
  CUDA_OK(cudaGraphExecDestroy(exec));
  CUDA_OK(cudaGraphDestroy(graph));
  CUDA_OK(cudaStreamDestroy(stream));
}

// Back-to-back calls where each reads what the one before it wrote (the
// second call's A is the first's C, the first's C poisoned just before it):
// every launch is a programmatic dependent launch, so this fails if a kernel
// read global memory before waiting for the stream's earlier work. Both the
// persistent kernel (K 256) and the short-K kernel (K 64, decode rows).
TEST(GroupedMatmulGpuChained, EachCallSeesThePreviousOutput) {
  GGEMM_REQUIRE_GPU(handle);
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  Rng rng(seed);
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  for (const std::vector<int64_t> &rows : {std::vector<int64_t>{300, 0, 129, 40}, std::vector<int64_t>{1, 2, 0, 3}}) {
    for (int64_t k1 : {int64_t(256), int64_t(64)}) {
      Case c1{"first"};
      c1.rows = rows;
      c1.k = k1;
      c1.n = 64;  // the second call's K: the short-K kernel takes small rows
      c1.unowned_rows = 0;
      Case c2 = c1;
      c2.name = "second";
      c2.k = c1.n;
      c2.n = 192;
      Problem p1(c1, rng), p2(c2, rng);
      ASSERT_NO_FATAL_FAILURE(upload(p1));
      ASSERT_NO_FATAL_FAILURE(upload(p2));
      ggemm_grouped_matmul_args first = p1.args(true, nullptr), second = p2.args(true, nullptr);
      second.a = p1.d_c.get();
      for (int round = 0; round < 4; ++round) {
        CUDA_OK(cudaMemsetAsync(p1.d_c.get(), 0xff, p1.c_init.size(), stream));  // NaN until the first call writes
        CUDA_OK(cudaMemsetAsync(p2.d_c.get(), 0xff, p2.c_init.size(), stream));
        GGEMM_OK(ggemm_grouped_matmul(handle, &first, stream));
        GGEMM_OK(ggemm_grouped_matmul(handle, &second, stream));
      }
      std::vector<uint8_t> got1(p1.c_init.size()), got2(p2.c_init.size());
      CUDA_OK(cudaMemcpyAsync(got1.data(), p1.d_c.get(), got1.size(), cudaMemcpyDeviceToHost, stream));
      CUDA_OK(cudaMemcpyAsync(got2.data(), p2.d_c.get(), got2.size(), cudaMemcpyDeviceToHost, stream));
      CUDA_OK(cudaStreamSynchronize(stream));
      SCOPED_TRACE("k1 " + std::to_string(k1) + ", first group rows " + std::to_string(rows[0]));
      const std::vector<uint8_t> want1 = reference_output(p1);
      EXPECT_TRUE(compare_matrix(c1.out, want1.data(), got1.data(), p1.m, c1.n, default_atol(c1.out, c1.k),
                                 default_rtol(c1.out)));
      p2.a = got1;  // the second call's reference reads what the first wrote
      const std::vector<uint8_t> want2 = reference_output(p2);
      EXPECT_TRUE(compare_matrix(c2.out, want2.data(), got2.data(), p2.m, c2.n, default_atol(c2.out, c2.k),
                                 default_rtol(c2.out)));
    }
  }
  CUDA_OK(cudaStreamDestroy(stream));
}

TEST(GroupedMatmulGpuGraph, ReplayWithNewDeviceCounts) {
  GGEMM_REQUIRE_GPU(handle);
  run_graph_replay(handle, false);
}

TEST(GroupedMatmulGpuGraph, ReplayWithNewGroupEnds) {
  GGEMM_REQUIRE_GPU(handle);
  run_graph_replay(handle, true);
}

TEST(GroupedMatmulGpuGraph, DecodeReplayWithNewRouting) {
  GGEMM_REQUIRE_GPU(handle);
  run_graph_replay(handle, false, true);
  run_graph_replay(handle, true, true);
}

// One call of the hostile tests: C (`out`, between guard bands) set to the
// problem's initial bytes and the checked-mode word zeroed, the call into
// C; a failure for any write outside C or a C other than `expected`.
// Returns the word's bits in *status.
void call_into_guarded_c(ggemm_handle_t handle, ggemm_grouped_matmul_args dev, const Problem &p,
                         const std::vector<uint8_t> &expected, GuardedBuffer &out,
                         const DeviceBuffer &status_word, uint32_t *status) {
  out.upload(p.c_init.data());
  CUDA_OK(cudaMemset(status_word.get(), 0, 4));
  dev.c = out.get();
  GGEMM_OK(ggemm_grouped_matmul(handle, &dev, nullptr));
  CUDA_OK(cudaGetLastError());
  CUDA_OK(cudaDeviceSynchronize());
  CUDA_OK(cudaMemcpy(status, status_word.get(), 4, cudaMemcpyDeviceToHost));
  bool guards = false;
  const std::vector<uint8_t> got = out.download(&guards);
  EXPECT_TRUE(guards) << "a write outside C";
  EXPECT_TRUE(compare_matrix(p.c.out, expected.data(), got.data(), p.m, p.c_cols, default_atol(p.c.out, p.c.k),
                             default_rtol(p.c.out)));
}

// Malformed device-side routing arrays (what the host cannot check without a
// synchronisation): the kernel must compute what the reference's clamping
// rules say, write nothing outside C (guard bands of poison on both sides),
// and, in checked mode, report exactly the faults present.
// K 256 runs on the persistent kernel; K 64 (automatic config) on sm_90a's
// short-K kernel, which walks the routing on its own.
// With group_ends the scenarios whose a_offsets[0] is 0 run as group ends
// (the rest cannot be said that way), kNotAnOffset in the word before them.
void run_hostile_routing(int64_t k, bool group_ends = false) {
  ggemm_handle_t handle = nullptr;  // its own: checked mode is per handle
  GGEMM_OK(ggemm_create(&handle, 0));
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed) + ", k " + std::to_string(k) + (group_ends ? ", group ends" : ""));
  Rng rng(seed);
  Case c{"hostile"};
  c.rows = {50, 60, 70, 80};
  c.n = 264;
  c.k = k;
  c.unowned_rows = 40;
  c.group_ends = group_ends;
  Problem p(c, rng);
  ASSERT_NO_FATAL_FAILURE(upload(p));

  GuardedBuffer out(p.c_init.size());  // C between 64 KiB guard bands of poison
  DeviceBuffer d_status;
  ASSERT_TRUE(d_status.alloc(4));
  ASSERT_FALSE(::testing::Test::HasFailure()) << "cudaMalloc of C's guarded allocation";

  const uint32_t M = uint32_t(p.m), kPast = 0xFFFFFFF0u;
  struct Scenario {
    const char *name;
    std::vector<uint32_t> offsets;
    std::vector<int32_t> ids;
    uint32_t active;
    uint32_t faults;
  };
  const std::vector<Scenario> scenarios = {
      {"well_formed", {0, 50, 110, 180, 260}, {0, 1, 2, 3}, 4, 0},
      {"decreasing", {0, 120, 40, 200, 210}, {0, 1, 2, 3}, 4, GGEMM_DEVICE_FAULT_OFFSETS_NOT_MONOTONE},
      {"first_not_zero", {9, 50, 110, 180, 260}, {0, 1, 2, 3}, 4, GGEMM_DEVICE_FAULT_OFFSETS_NOT_MONOTONE},
      {"past_m", {0, 50, M - 10, kPast, 0xFFFFFFFFu}, {0, 1, 2, 3}, 4, GGEMM_DEVICE_FAULT_OFFSET_PAST_M},
      {"past_m_then_back", {0, M + 100, 60, 70, 80}, {3, 2, 1, 0}, 4,
       GGEMM_DEVICE_FAULT_OFFSET_PAST_M | GGEMM_DEVICE_FAULT_OFFSETS_NOT_MONOTONE},
      {"ids_out_of_range", {0, 50, 110, 180, 260}, {0, 4, -7, int32_t(0x7fffffff)}, 4,
       GGEMM_DEVICE_FAULT_ID_OUT_OF_RANGE},
      {"active_past_capacity", {0, 50, 110, 180, 260}, {0, 1, 2, 3}, 1000, GGEMM_DEVICE_FAULT_ACTIVE_COUNT},
      {"faults_past_active_count_ignored", {0, 50, 110, 5, 0xFFFFFFFFu}, {0, 1, 9, 9}, 2, 0},
      {"all_at_once", {3, 1u << 31, 0, 7, 7}, {-2, 0, 1, 99}, 77,
       GGEMM_DEVICE_FAULT_OFFSETS_NOT_MONOTONE | GGEMM_DEVICE_FAULT_OFFSET_PAST_M |
           GGEMM_DEVICE_FAULT_ID_OUT_OF_RANGE | GGEMM_DEVICE_FAULT_ACTIVE_COUNT},
  };
  // The automatic config, and pairs sharing their token tile (cluster_m 2):
  // n = 264 makes the last pair tile's second share empty.
  ggemm_config pair_config = make_config(c);
  pair_config.tile_m = 128;
  pair_config.cluster_m = 2;
  const ggemm_config *const configs[] = {nullptr, &pair_config};
  for (int run = 0; run < 4; ++run) {
    const ggemm_config *config = configs[run / 2];
    const bool checked = run % 2 == 0;
    GGEMM_OK(ggemm_set_device_status(handle, checked ? d_status.as<uint32_t>() : nullptr));
    for (const Scenario &s : scenarios) {
      if (group_ends && s.offsets[0] != 0) continue;
      SCOPED_TRACE(std::string(s.name) + (checked ? " (checked)" : " (unchecked)") + (config ? ", pairs" : ""));
      p.offsets = s.offsets;
      p.ids = s.ids;
      p.stats[1] = s.active;
      CUDA_OK(cudaMemcpy(p.d_offsets.get(), p.offsets.data(), p.offsets.size() * 4, cudaMemcpyHostToDevice));
      if (group_ends) {
        std::vector<uint32_t> ends = p.offsets;
        ends[0] = kNotAnOffset;
        CUDA_OK(cudaMemcpy(p.d_ends.get(), ends.data(), ends.size() * 4, cudaMemcpyHostToDevice));
      }
      CUDA_OK(cudaMemcpy(p.d_ids.get(), p.ids.data(), p.ids.size() * 4, cudaMemcpyHostToDevice));
      CUDA_OK(cudaMemcpy(p.d_stats.get(), p.stats, 8, cudaMemcpyHostToDevice));
      ggemm_grouped_matmul_args dev = p.args(true, config);
      dev.max_rows_per_group = 0;  // the hint would be wrong for clamped groups
      uint32_t status = 0;
      ASSERT_NO_FATAL_FAILURE(call_into_guarded_c(handle, dev, p, reference_output(p), out, d_status, &status));
      EXPECT_EQ(status, checked ? s.faults : 0u) << "device status bits";
    }
  }
  GGEMM_OK(ggemm_destroy(handle));
}

TEST(GroupedMatmulGpuHostile, MalformedRoutingIsClampedAndReported) {
  GGEMM_REQUIRE_GPU(shared_handle);
  (void)shared_handle;
  run_hostile_routing(256);
}

TEST(GroupedMatmulGpuHostile, MalformedRoutingIsClampedAndReportedAtShortK) {
  GGEMM_REQUIRE_GPU(shared_handle);
  (void)shared_handle;
  run_hostile_routing(64);
}

// The same through group_ends: the faults are those of the ends alone (the
// word before them, which is not 0, is never read nor reported).
TEST(GroupedMatmulGpuHostile, MalformedGroupEndsAreClampedAndReported) {
  GGEMM_REQUIRE_GPU(shared_handle);
  (void)shared_handle;
  run_hostile_routing(256, true);
  run_hostile_routing(64, true);
}

// Checked mode's gather check covers every row the walk reads: with
// decreasing offsets the walk's groups end where the largest stated end
// does (its clamp keeps the ends non-decreasing), not where the last group
// says. An index out of range in a row only the largest end covers is
// reported beside the offsets' own fault.
TEST(GroupedMatmulGpuHostile, GatherIndicesPastTheLastStatedEndAreChecked) {
  GGEMM_REQUIRE_GPU(shared_handle);
  (void)shared_handle;
  ggemm_handle_t handle = nullptr;  // its own: checked mode is per handle
  GGEMM_OK(ggemm_create(&handle, 0));
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  Rng rng(seed);
  Case c{"gather_decreasing_offsets"};
  c.rows = {100, 0};
  c.n = 256;
  c.k = 128;
  c.gather_rows = 40;
  Problem p(c, rng);
  p.offsets = {0, 100, 50};  // group 1 says it ends at 50; the walk reads rows [0, 100)
  p.row_index[70] = int32_t(c.gather_rows);
  ASSERT_NO_FATAL_FAILURE(upload(p));
  DeviceBuffer d_status;
  ASSERT_TRUE(d_status.alloc(4));
  CUDA_OK(cudaMemset(d_status.get(), 0, 4));
  GGEMM_OK(ggemm_set_device_status(handle, d_status.as<uint32_t>()));
  ggemm_grouped_matmul_args dev = p.args(true, nullptr);
  dev.max_rows_per_group = 0;
  GGEMM_OK(ggemm_grouped_matmul(handle, &dev, nullptr));
  CUDA_OK(cudaGetLastError());
  CUDA_OK(cudaDeviceSynchronize());
  GGEMM_OK(ggemm_destroy(handle));
  uint32_t status = 0;
  CUDA_OK(cudaMemcpy(&status, d_status.get(), 4, cudaMemcpyDeviceToHost));
  EXPECT_EQ(status, uint32_t(GGEMM_DEVICE_FAULT_OFFSETS_NOT_MONOTONE | GGEMM_DEVICE_FAULT_INDEX_OUT_OF_RANGE));
}

// Gather indices outside [0, a_rows) passed directly (-1, -7, a_rows,
// INT32_MAX in grouped rows, some in an inactive group's, which checked
// mode's index check covers too): the kernels read zeros for those rows,
// as the reference does, write nothing outside C (64 KiB guard bands of
// poison on both sides) and, in checked mode, report exactly
// GGEMM_DEVICE_FAULT_INDEX_OUT_OF_RANGE; unchecked, nothing. Prefill groups
// (the persistent kernel's one-row TMA boxes), store, row scale and SwiGLU;
// decode groups under a row bound (the persistent kernel's 16-row tiles in
// the automatic plan, the decode GEMV with --decode_gemv=where_possible);
// a K of 24 (the short-K swizzle's gathered rows).
void run_hostile_gather(const Case &c, int64_t row_bound) {
  ggemm_handle_t handle = nullptr;  // its own: checked mode is per handle
  GGEMM_OK(ggemm_create(&handle, 0));
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed) + ", " + c.name);
  Rng rng(seed);
  Problem p(c, rng);
  ASSERT_NO_FATAL_FAILURE(upload(p));
  GuardedBuffer out(p.c_init.size());  // C between 64 KiB guard bands of poison
  DeviceBuffer d_status;
  ASSERT_TRUE(d_status.alloc(4));
  ASSERT_FALSE(::testing::Test::HasFailure()) << "cudaMalloc of C's guarded allocation";
  const std::vector<uint8_t> expected = reference_output(p);
  for (bool checked : {true, false}) {
    SCOPED_TRACE(checked ? "checked" : "unchecked");
    GGEMM_OK(ggemm_set_device_status(handle, checked ? d_status.as<uint32_t>() : nullptr));
    ggemm_grouped_matmul_args dev = p.args(true, nullptr);
    dev.max_rows_per_group = row_bound;
    uint32_t status = 0;
    ASSERT_NO_FATAL_FAILURE(call_into_guarded_c(handle, dev, p, expected, out, d_status, &status));
    EXPECT_EQ(status, checked ? uint32_t(GGEMM_DEVICE_FAULT_INDEX_OUT_OF_RANGE) : 0u) << "device status bits";
  }
  GGEMM_OK(ggemm_destroy(handle));
}

TEST(GroupedMatmulGpuHostile, GatherIndicesOutOfRangeReadZerosAndAreReported) {
  GGEMM_REQUIRE_GPU(shared_handle);
  (void)shared_handle;
  for (ggemm_epilogue e : {GGEMM_EPILOGUE_STORE, GGEMM_EPILOGUE_ROW_SCALE, GGEMM_EPILOGUE_SWIGLU}) {
    Case c{std::string("prefill_") +
           (e == GGEMM_EPILOGUE_STORE ? "store" : e == GGEMM_EPILOGUE_ROW_SCALE ? "row_scale" : "swiglu")};
    c.rows = {31, 300, 0, 64};
    c.experts = {0, 1, -1, 2};
    c.n = 384;
    c.k = 320;
    c.epilogue = e;
    c.gather_rows = 97;
    c.hostile_index = true;
    run_hostile_gather(c, 0);
  }
  {
    Case c{"decode_swiglu_fp16"};
    c.rows = {1, 2, 0, 4, 1};
    c.experts = {0, 1, 2, -1, 3};
    c.n = 48;
    c.k = 520;
    c.in = c.out = GGEMM_DTYPE_FP16;
    c.epilogue = GGEMM_EPILOGUE_SWIGLU;
    c.gather_rows = 7;
    c.hostile_index = true;
    c.unowned_rows = 0;
    run_hostile_gather(c, 4);
  }
  {
    Case c{"short_k24"};
    c.rows = {9, 40, 0, 3};
    c.num_experts = 4;
    c.n = 200;
    c.k = 24;
    c.gather_rows = 50;
    c.hostile_index = true;
    run_hostile_gather(c, 0);
  }
}

TEST(AbiCheckedMode, SetDeviceStatusChecksItsArguments) {
  EXPECT_EQ(ggemm_set_device_status(nullptr, nullptr), GGEMM_STATUS_INVALID_HANDLE);
  GGEMM_REQUIRE_GPU(handle);
  alignas(4) static uint32_t word[2];
  EXPECT_EQ(ggemm_set_device_status(handle, reinterpret_cast<uint32_t *>(reinterpret_cast<char *>(word) + 2)),
            GGEMM_STATUS_MISALIGNED_POINTER);
  EXPECT_NE(std::string(ggemm_last_error_message()).find("device_status"), std::string::npos);
  EXPECT_EQ(ggemm_set_device_status(handle, nullptr), GGEMM_STATUS_SUCCESS);
}

}  // namespace
}  // namespace ggemm::testing
