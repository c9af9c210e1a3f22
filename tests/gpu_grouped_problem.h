// gpu_grouped_problem.h: one ggemm_grouped_matmul call as the GPU tests
// (tests/test_gpu_grouped*.cpp) describe it (Case) and build it (Problem:
// fresh random inputs, C poisoned with 0xFF but for the accumulate rows the
// groups own, host and device copies), its upload, its CPU reference output
// and its config override.
#pragma once
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <ostream>
#include <string>
#include <vector>

#include "ggemm_reference.h"
#include "dtype.h"
#include "gpu_env.h"
#include "test_util.h"

namespace ggemm::testing {

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

inline constexpr uint32_t kNotAnOffset = 0x7FFFFFFFu;

inline std::ostream &operator<<(std::ostream &os, const Case &c) { return os << c.name; }

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

inline void upload(Problem &p) {
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
inline std::vector<uint8_t> reference_output(const Problem &p) {
  std::vector<uint8_t> expected = p.c_init;
  ggemm_grouped_matmul_args host = p.args(false, nullptr);
  host.a_offsets = p.offsets.data();
  host.group_ends = nullptr;
  host.c = expected.data();
  ref::grouped_matmul(host);
  return expected;
}

inline ggemm_config make_config(const Case &c) {
  ggemm_config cfg;
  std::memset(&cfg, 0, sizeof cfg);
  cfg.struct_size = sizeof cfg;
  cfg.tile_m = c.tile_m;
  cfg.a_swizzle = cfg.b_swizzle = c.swizzle;
  cfg.stages = c.stages;
  cfg.cluster_m = c.cluster_m;
  return cfg;
}

}  // namespace ggemm::testing
