// GPU tests of 64-bit addressing (issue 6): weights past 4 GiB, and
// activations / outputs whose element offsets pass 2^31 (byte offsets past
// 4 GiB and 8 GiB), against the CPU reference run on just the rows that
// compute.
//
// - LargeGpu.GroupedWeightsPast4GiB: B of 160 experts of 4096 x 4096 bf16
//   (5 GiB), groups routed to experts below 4 GiB, at exactly 4 GiB, past it
//   (including 133 = 128 + 5, which a 32-bit byte offset would alias to
//   expert 5) and the last one, both weight layouts. Unused experts hold a
//   constant pattern (cudaMemset), the used ones fresh random data.
// - LargeGpu.GroupedRowOffsetsPast2To31Elements: M = 1.1M rows of K = N =
//   2048 (A 4.5 GB, C up to 9 GB), groups that compute straddling the rows
//   where byte offsets pass 4 GiB (fp32 C) and element offsets pass 2^31
//   (A and C), and near the end; store (bf16), accumulate (fp16, B[E,K,N])
//   and row-scale (fp32) epilogues.
// - LargeGpu.LoraShrinkExpandPlanesPast2To31Elements: M = 8.6M tokens, rank
//   128: P's plane 2 starts past element 2^31 (plane 1 crosses it), X, q_out
//   and kv_out's V rows (kv_out[M + m]) pass it too; a shrink, then an
//   expand (store) of its P, then a second expand accumulating onto the
//   first's outputs.
//
// Layouts: a_offsets[0] must be 0, so the rows before the first computing
// group belong to inactive groups (id -1), which STORE / ROW_SCALE zero and
// ACCUMULATE leaves untouched; rows after the active groups (a group past the
// active count, then a tail) are in no group and must keep their poison.
// Every such row is downloaded (in chunks) and checked: zero (+-0) or the
// 0xFF poison, bit for bit. Inputs outside the computing rows hold a constant
// pattern (0x3F bytes): a wrongly addressed read gives a wrong result.
//
// Device memory: up to ~20 GB (the LoRA test). A test whose allocations do
// not fit skips with the reason. Skipped, with the reason, without a GPU.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <ctime>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "dtype.h"
#include "ggemm_reference.h"
#include "gpu_env.h"
#include "test_util.h"

namespace ggemm::testing {
namespace {

constexpr int64_t k2To31 = int64_t(1) << 31;

// Allocates a large buffer; skips on out-of-memory, fails on other errors.
#define ALLOC_OR_SKIP(buf, bytes)                                                                          \
  do {                                                                                                     \
    const size_t bytes_ = (bytes);                                                                         \
    if (!(buf).alloc(bytes_)) {                                                                            \
      const cudaError_t e_ = cudaGetLastError();                                                           \
      if (e_ == cudaErrorMemoryAllocation)                                                                 \
        GTEST_SKIP() << "cudaMalloc of " << bytes_ << " bytes (" #buf "): out of device memory";           \
      FAIL() << "cudaMalloc of " << bytes_ << " bytes (" #buf ") -> " << cudaGetErrorName(e_);             \
    }                                                                                                      \
  } while (0)

uint8_t *at(const DeviceBuffer &d, size_t byte_offset) { return d.as<uint8_t>() + byte_offset; }

// ---------------------------------------------------------------------------
// Layouts: groups over M rows, and the runs of rows they make.

struct Group {
  int64_t rows;
  int32_t id;  // expert / adapter; -1 inactive
};

struct Layout {
  int64_t m = 0;
  std::vector<Group> groups;
  int64_t active = 0;  // expert_usage_stats[1]

  std::vector<uint32_t> offsets() const {
    std::vector<uint32_t> o = {0};
    for (const Group &g : groups) o.push_back(uint32_t(o.back() + uint32_t(g.rows)));
    return o;
  }
  std::vector<int32_t> ids() const {
    std::vector<int32_t> v;
    for (const Group &g : groups) v.push_back(g.id);
    return v;
  }
  uint32_t max_rows() const {
    int64_t r = 0;
    for (const Group &g : groups) r = std::max(r, g.rows);
    return uint32_t(r);
  }
};

enum class RunKind { kComputed, kInactive, kNoGroup };

struct RowRun {
  int64_t begin, end;
  RunKind kind;
  int32_t id;
};

// The rows [0, m) in order: one run per non-empty active group (computed or
// inactive), then one run of the rows in no group.
std::vector<RowRun> runs_of(const Layout &l) {
  std::vector<RowRun> v;
  int64_t row = 0;
  for (int64_t g = 0; g < l.active; ++g) {
    const Group &gr = l.groups[size_t(g)];
    if (gr.rows > 0) v.push_back({row, row + gr.rows, gr.id >= 0 ? RunKind::kComputed : RunKind::kInactive, gr.id});
    row += gr.rows;
  }
  if (row < l.m) v.push_back({row, l.m, RunKind::kNoGroup, -1});
  return v;
}

// The computed runs packed into rows [0, m) of a small problem for the
// reference, with their ids mapped through `remap` (identity if empty).
struct Compact {
  std::vector<RowRun> runs;  // the computed runs of the full layout
  std::vector<uint32_t> offsets;
  std::vector<int32_t> ids;
  uint32_t stats[2] = {0, 0};
  int64_t m = 0;
};

Compact compact_of(const std::vector<RowRun> &runs, const std::map<int32_t, int32_t> &remap = {}) {
  Compact c;
  c.offsets.push_back(0);
  for (const RowRun &r : runs) {
    if (r.kind != RunKind::kComputed) continue;
    c.runs.push_back(r);
    c.offsets.push_back(uint32_t(c.offsets.back() + uint32_t(r.end - r.begin)));
    c.ids.push_back(remap.empty() ? r.id : remap.at(r.id));
    c.stats[0] = std::max(c.stats[0], uint32_t(r.end - r.begin));
  }
  c.stats[1] = uint32_t(c.ids.size());
  c.m = c.offsets.back();
  return c;
}

// Copies the compact rows to / from the computed runs of a device matrix
// whose row m of plane s is at row s * plane_rows + m.
void upload_runs(const Compact &c, const DeviceBuffer &dev, size_t row_bytes, int64_t plane_row0, const uint8_t *host) {
  int64_t row = 0;
  for (const RowRun &r : c.runs) {
    CUDA_OK(cudaMemcpy(at(dev, size_t(plane_row0 + r.begin) * row_bytes), host + size_t(row) * row_bytes,
                       size_t(r.end - r.begin) * row_bytes, cudaMemcpyHostToDevice));
    row += r.end - r.begin;
  }
}

void download_runs(const Compact &c, const DeviceBuffer &dev, size_t row_bytes, int64_t plane_row0, uint8_t *host) {
  int64_t row = 0;
  for (const RowRun &r : c.runs) {
    CUDA_OK(cudaMemcpy(host + size_t(row) * row_bytes, at(dev, size_t(plane_row0 + r.begin) * row_bytes),
                       size_t(r.end - r.begin) * row_bytes, cudaMemcpyDeviceToHost));
    row += r.end - r.begin;
  }
}

// ---------------------------------------------------------------------------
// Checking rows that must be zero or keep their poison, chunk by chunk.

enum class Fill { kZero, kPoison };

class Scanner {
 public:
  static constexpr size_t kStageBytes = size_t(256) << 20;

  Scanner() {
    if (cudaMallocHost(&stage_, kStageBytes) != cudaSuccess) {
      (void)cudaGetLastError();
      stage_ = nullptr;
      fallback_.resize(kStageBytes);
    }
    threads_ = std::max(1u, std::min(16u, std::thread::hardware_concurrency()));
  }
  ~Scanner() {
    if (stage_) cudaFreeHost(stage_);
  }
  Scanner(const Scanner &) = delete;
  Scanner &operator=(const Scanner &) = delete;

  size_t scanned_bytes() const { return scanned_; }

  // Every element of rows [begin, end) (row_bytes bytes each, elements of
  // elem_bytes) of the device matrix at `dev` must be +-0 (kZero) or all 0xFF
  // bytes (kPoison).
  ::testing::AssertionResult check(const uint8_t *dev, size_t row_bytes, int64_t begin, int64_t end, Fill fill,
                                   size_t elem_bytes, const std::string &what) {
    uint8_t *stage = stage_ ? static_cast<uint8_t *>(stage_) : fallback_.data();
    const int64_t rows_per_chunk = std::max<int64_t>(1, int64_t(kStageBytes / row_bytes));
    // Row bytes are multiples of 16 (dims are multiples of 8), so whole
    // 8-byte words hold whole elements.
    const uint64_t zero_mask = elem_bytes == 2 ? 0x7FFF7FFF7FFF7FFFull : 0x7FFFFFFF7FFFFFFFull;
    for (int64_t r0 = begin; r0 < end; r0 += rows_per_chunk) {
      const int64_t rows = std::min(rows_per_chunk, end - r0);
      const size_t bytes = size_t(rows) * row_bytes;
      const cudaError_t e = cudaMemcpy(stage, dev + size_t(r0) * row_bytes, bytes, cudaMemcpyDeviceToHost);
      if (e != cudaSuccess)
        return ::testing::AssertionFailure() << what << ": cudaMemcpy -> " << cudaGetErrorName(e);
      scanned_ += bytes;
      const size_t words = bytes / 8;
      std::atomic<size_t> first_bad{words};
      std::atomic<size_t> bad_words{0};
      auto work = [&](unsigned t) {
        const size_t w0 = words * t / threads_, w1 = words * (t + 1) / threads_;
        const uint64_t *p = reinterpret_cast<const uint64_t *>(stage);
        size_t bad = 0, first = words;
        for (size_t i = w0; i < w1; ++i) {
          const bool ok = fill == Fill::kZero ? (p[i] & zero_mask) == 0 : p[i] == ~uint64_t(0);
          if (!ok) {
            if (first == words) first = i;
            ++bad;
          }
        }
        bad_words += bad;
        size_t cur = first_bad.load();
        while (first < cur && !first_bad.compare_exchange_weak(cur, first)) {
        }
      };
      std::vector<std::thread> pool;
      for (unsigned t = 1; t < threads_; ++t) pool.emplace_back(work, t);
      work(0);
      for (std::thread &t : pool) t.join();
      if (bad_words.load() == 0) continue;
      // Report the first wrong element.
      size_t byte = first_bad.load() * 8;
      while (byte < bytes) {
        bool ok = true;
        if (fill == Fill::kPoison) {
          for (size_t i = 0; i < elem_bytes; ++i) ok = ok && stage[byte + i] == 0xFF;
        } else {
          for (size_t i = 0; i < elem_bytes; ++i)
            ok = ok && (stage[byte + i] & (i + 1 == elem_bytes ? 0x7F : 0xFF)) == 0;  // little endian: sign last
        }
        if (!ok) break;
        byte += elem_bytes;
      }
      if (byte >= bytes) byte = first_bad.load() * 8;  // (not reached: a wrong word holds a wrong element)
      std::ostringstream bits;
      bits << "0x" << std::hex;
      for (size_t i = elem_bytes; i-- > 0;) bits << (stage[byte + i] >> 4) << (stage[byte + i] & 15);
      return ::testing::AssertionFailure()
             << what << ": rows [" << begin << ", " << end << ") must be "
             << (fill == Fill::kZero ? "zero" : "untouched (0xFF poison)") << "; row " << r0 + int64_t(byte / row_bytes)
             << ", element " << (byte % row_bytes) / elem_bytes << " holds " << bits.str() << " ("
             << bad_words.load() << " wrong 8-byte words in rows [" << r0 << ", " << r0 + rows << "))";
    }
    return ::testing::AssertionSuccess();
  }

  // Checks every run of `runs` that does not compute: rows of inactive groups
  // must hold `inactive` (zero after a store, untouched after an
  // accumulate), rows in no group their poison.
  ::testing::AssertionResult check_runs(const DeviceBuffer &dev, size_t row_bytes, int64_t plane_row0,
                                        const std::vector<RowRun> &runs, Fill inactive, size_t elem_bytes,
                                        const std::string &what) {
    for (const RowRun &r : runs) {
      if (r.kind == RunKind::kComputed) continue;
      const Fill f = r.kind == RunKind::kInactive ? inactive : Fill::kPoison;
      ::testing::AssertionResult res =
          check(at(dev, 0), row_bytes, plane_row0 + r.begin, plane_row0 + r.end, f, elem_bytes,
                what + (r.kind == RunKind::kInactive ? " (inactive group)" : " (rows in no group)"));
      if (!res) return res;
    }
    return ::testing::AssertionSuccess();
  }

 private:
  void *stage_ = nullptr;
  Bytes fallback_;
  unsigned threads_ = 1;
  size_t scanned_ = 0;
};

// ---------------------------------------------------------------------------
// Weights past 4 GiB.

TEST(LargeGpu, GroupedWeightsPast4GiB) {
  GGEMM_REQUIRE_GPU(handle);
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  Rng rng(seed);

  constexpr int64_t N = 4096, K = 4096, E = 160;
  const size_t expert_bytes = size_t(N * K) * 2;  // 32 MiB
  const size_t b_bytes = size_t(E) * expert_bytes;  // 5 GiB
  static_assert(int64_t(128) * N * K * 2 == (int64_t(1) << 32), "expert 128 starts at 4 GiB");
  const std::vector<int32_t> used = {5, 128, 133, 159};
  std::map<int32_t, int32_t> remap = {{-1, -1}};
  for (size_t i = 0; i < used.size(); ++i) remap[used[i]] = int32_t(i);

  Layout l;
  l.groups = {{33, 5}, {64, 128}, {0, 7}, {17, -1}, {100, 133}, {40, 159}};
  l.active = int64_t(l.groups.size());
  l.m = 254 + 7;  // 7 rows in no group
  const std::vector<uint32_t> offsets = l.offsets();
  std::vector<int32_t> ids = l.ids();
  const uint32_t stats[2] = {l.max_rows(), uint32_t(l.active)};

  REQUIRE_FREE_DEVICE_MEMORY(b_bytes);
  DeviceBuffer d_b, d_a, d_c, d_off, d_ids, d_stats;
  ALLOC_OR_SKIP(d_b, b_bytes);
  // Unused experts: a constant (bf16 0x3F3F, 0.746); used: fresh random data.
  CUDA_OK(cudaMemset(d_b.get(), 0x3F, b_bytes));
  Bytes b(used.size() * expert_bytes);
  fill_random(kBf16, b.data(), used.size() * size_t(N * K), rng);
  for (size_t i = 0; i < used.size(); ++i)
    CUDA_OK(cudaMemcpy(at(d_b, size_t(used[i]) * expert_bytes), b.data() + i * expert_bytes, expert_bytes,
                       cudaMemcpyHostToDevice));

  Bytes a(size_t(l.m * K) * 2);
  fill_random(kBf16, a.data(), size_t(l.m * K), rng);
  ASSERT_TRUE(d_a.alloc(a.size()));
  ASSERT_TRUE(d_c.alloc(size_t(l.m * N) * 4));
  ASSERT_TRUE(d_off.alloc(offsets.size() * 4));
  ASSERT_TRUE(d_ids.alloc(ids.size() * 4));
  ASSERT_TRUE(d_stats.alloc(8));
  CUDA_OK(cudaMemcpy(d_a.get(), a.data(), a.size(), cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(d_off.get(), offsets.data(), offsets.size() * 4, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(d_ids.get(), ids.data(), ids.size() * 4, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(d_stats.get(), stats, 8, cudaMemcpyHostToDevice));

  // The reference's B holds the used experts only; its ids are remapped.
  std::vector<int32_t> ref_ids;
  for (int32_t id : ids) ref_ids.push_back(remap.count(id) ? remap[id] : -1);  // (7: an empty group)

  for (const bool tb : {true, false}) {
    const ggemm_dtype out = tb ? kBf16 : kFp32;
    SCOPED_TRACE(std::string(tb ? "B[E,N,K]" : "B[E,K,N]") + " bf16->" + dtype_label(out));
    Bytes c(size_t(l.m * N) * esize(out));
    poison(c.data(), c.size());
    CUDA_OK(cudaMemcpy(d_c.get(), c.data(), c.size(), cudaMemcpyHostToDevice));

    ggemm_grouped_matmul_args x;
    std::memset(&x, 0, sizeof x);
    x.struct_size = sizeof x;
    x.a_dtype = x.b_dtype = kBf16;
    x.c_dtype = out;
    x.m = l.m, x.n = N, x.k = K, x.num_experts = E;
    x.a = d_a.get(), x.b = d_b.get(), x.c = d_c.get();
    x.transpose_b = tb ? 1 : 0;
    x.a_offsets = d_off.as<uint32_t>(), x.expert_ids = d_ids.as<int32_t>(), x.expert_usage_stats = d_stats.as<uint32_t>();
    x.num_groups = int64_t(ids.size());
    x.max_rows_per_group = stats[0];
    x.epilogue = GGEMM_EPILOGUE_STORE;
    GGEMM_OK(ggemm_grouped_matmul(handle, &x, nullptr));
    CUDA_OK(cudaGetLastError());
    CUDA_OK(cudaDeviceSynchronize());
    Bytes got(c.size());
    CUDA_OK(cudaMemcpy(got.data(), d_c.get(), got.size(), cudaMemcpyDeviceToHost));

    Bytes want = c;
    ggemm_grouped_matmul_args h = x;
    h.a = a.data(), h.b = b.data(), h.c = want.data();
    h.num_experts = int64_t(used.size());
    h.a_offsets = offsets.data(), h.expert_ids = ref_ids.data(), h.expert_usage_stats = stats;
    ref::grouped_matmul(h);
    EXPECT_TRUE(compare_matrix(out, want.data(), got.data(), l.m, N, default_atol(out, K), default_rtol(out)));
  }
}

// ---------------------------------------------------------------------------
// Activation and output rows past element 2^31.

TEST(LargeGpu, GroupedRowOffsetsPast2To31Elements) {
  GGEMM_REQUIRE_GPU(handle);
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  Rng rng(seed);

  constexpr int64_t K = 2048, N = 2048, E = 3, M = 1100000;
  static_assert(M * K > k2To31 && M * N > k2To31, "A and C pass element 2^31");
  // Row 524288: byte 2^32 of an fp32 C; row 1048576: element 2^31 of A and C.
  Layout l;
  l.groups = {{524200, -1},  // [0, 524200)
              {200, 0},      // [524200, 524400): C fp32 bytes cross 4 GiB
              {524100, -1},  // [524400, 1048500)
              {200, 1},      // [1048500, 1048700): A and C elements cross 2^31
              {50300, -1},   // [1048700, 1099000)
              {300, 2},      // [1099000, 1099300)
              {1, 0},        // 1099300
              {0, 1},        // empty
              {689, 1}};     // [1099301, 1099990): past the active count, in no group
  l.active = 8;
  l.m = M;  // rows [1099301, 1100000) are in no group
  ASSERT_EQ(int64_t(l.offsets()[9]), M - 10);
  const std::vector<uint32_t> offsets = l.offsets();
  const std::vector<int32_t> ids = l.ids();
  const uint32_t stats[2] = {l.max_rows(), uint32_t(l.active)};
  const std::vector<RowRun> runs = runs_of(l);
  const Compact cp = compact_of(runs);

  const size_t a_bytes = size_t(M * K) * 2, c_bytes = size_t(M * N) * 4;  // C: room for fp32
  REQUIRE_FREE_DEVICE_MEMORY(a_bytes + c_bytes);
  DeviceBuffer d_a, d_c, d_b, d_scale, d_off, d_ids, d_stats;
  ALLOC_OR_SKIP(d_a, a_bytes);
  ALLOC_OR_SKIP(d_c, c_bytes);
  ASSERT_TRUE(d_b.alloc(size_t(E * N * K) * 2));
  ASSERT_TRUE(d_scale.alloc(size_t(M) * 4));
  ASSERT_TRUE(d_off.alloc(offsets.size() * 4));
  ASSERT_TRUE(d_ids.alloc(ids.size() * 4));
  ASSERT_TRUE(d_stats.alloc(8));
  CUDA_OK(cudaMemcpy(d_off.get(), offsets.data(), offsets.size() * 4, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(d_ids.get(), ids.data(), ids.size() * 4, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(d_stats.get(), stats, 8, cudaMemcpyHostToDevice));

  // A: a constant pattern, fresh random data in the rows that compute
  // (compact copy a_c for the reference). B and row_scale: random.
  const size_t a_row = size_t(K) * 2;
  CUDA_OK(cudaMemset(d_a.get(), 0x3F, a_bytes));
  Bytes a_c(size_t(cp.m) * a_row);
  fill_random(kBf16, a_c.data(), size_t(cp.m * K), rng);
  ASSERT_NO_FATAL_FAILURE(upload_runs(cp, d_a, a_row, 0, a_c.data()));
  Bytes b(size_t(E * N * K) * 2);
  fill_random(kBf16, b.data(), size_t(E * N * K), rng);
  CUDA_OK(cudaMemcpy(d_b.get(), b.data(), b.size(), cudaMemcpyHostToDevice));
  Bytes scale(size_t(M) * 4);
  fill_random(kFp32, scale.data(), size_t(M), rng, -1.0f, 1.0f);
  CUDA_OK(cudaMemcpy(d_scale.get(), scale.data(), scale.size(), cudaMemcpyHostToDevice));
  std::vector<float> scale_c;
  for (const RowRun &r : cp.runs)
    for (int64_t m = r.begin; m < r.end; ++m) scale_c.push_back(reinterpret_cast<const float *>(scale.data())[m]);

  struct Variant {
    ggemm_epilogue epilogue;
    ggemm_dtype out;
    bool transpose_b;
    const char *name;
  };
  const Variant variants[] = {{GGEMM_EPILOGUE_STORE, kBf16, true, "store bf16->bf16 B[E,N,K]"},
                              {GGEMM_EPILOGUE_ACCUMULATE, kFp16, false, "accumulate bf16->fp16 B[E,K,N]"},
                              {GGEMM_EPILOGUE_ROW_SCALE, kFp32, true, "row_scale bf16->fp32 B[E,N,K]"}};
  Scanner scanner;
  for (const Variant &v : variants) {
    SCOPED_TRACE(v.name);
    const size_t os = esize(v.out), c_row = size_t(N) * os, c_used = size_t(M) * c_row;
    const bool acc = v.epilogue == GGEMM_EPILOGUE_ACCUMULATE;
    // C: poison everywhere (past its end too); accumulate: the rows that
    // compute start from random values.
    CUDA_OK(cudaMemset(d_c.get(), 0xFF, c_bytes));
    Bytes c_init(size_t(cp.m) * c_row);
    poison(c_init.data(), c_init.size());
    if (acc) {
      fill_random(v.out, c_init.data(), size_t(cp.m * N), rng);
      ASSERT_NO_FATAL_FAILURE(upload_runs(cp, d_c, c_row, 0, c_init.data()));
    }

    ggemm_grouped_matmul_args x;
    std::memset(&x, 0, sizeof x);
    x.struct_size = sizeof x;
    x.a_dtype = x.b_dtype = kBf16;
    x.c_dtype = v.out;
    x.m = M, x.n = N, x.k = K, x.num_experts = E;
    x.a = d_a.get(), x.b = d_b.get(), x.c = d_c.get();
    x.transpose_b = v.transpose_b ? 1 : 0;
    x.a_offsets = d_off.as<uint32_t>(), x.expert_ids = d_ids.as<int32_t>(), x.expert_usage_stats = d_stats.as<uint32_t>();
    x.num_groups = int64_t(ids.size());
    x.max_rows_per_group = stats[0];
    x.epilogue = v.epilogue;
    x.row_scale = d_scale.as<float>();
    GGEMM_OK(ggemm_grouped_matmul(handle, &x, nullptr));
    CUDA_OK(cudaGetLastError());
    CUDA_OK(cudaDeviceSynchronize());

    // The rows that compute, against the reference on just those rows.
    Bytes got(c_init.size());
    ASSERT_NO_FATAL_FAILURE(download_runs(cp, d_c, c_row, 0, got.data()));
    Bytes want = c_init;
    ggemm_grouped_matmul_args h = x;
    h.m = cp.m;
    h.a = a_c.data(), h.b = b.data(), h.c = want.data();
    h.a_offsets = cp.offsets.data(), h.expert_ids = cp.ids.data(), h.expert_usage_stats = cp.stats;
    h.num_groups = int64_t(cp.ids.size());
    h.row_scale = scale_c.data();
    ref::grouped_matmul(h);
    EXPECT_TRUE(compare_matrix(v.out, want.data(), got.data(), cp.m, N, default_atol(v.out, K), default_rtol(v.out)))
        << "rows that compute (compact: the computing groups' rows in order)";
    // Every other row, and 64 MiB past the end of C.
    EXPECT_TRUE(scanner.check_runs(d_c, c_row, 0, runs, acc ? Fill::kPoison : Fill::kZero, os, "C"));
    const size_t past = std::min(c_bytes - c_used, size_t(64) << 20);
    if (past > 0) {
      EXPECT_TRUE(scanner.check(at(d_c, c_used), c_row, 0, int64_t(past / c_row), Fill::kPoison, os,
                                "the bytes after C"));
    }
  }
  std::printf("[ large    ] scanned %.1f GB of rows outside the computing groups\n", double(scanner.scanned_bytes()) / 1e9);
}

// ---------------------------------------------------------------------------
// LoRA: P planes, X, q_out and kv_out's V rows past element 2^31.

TEST(LargeGpu, LoraShrinkExpandPlanesPast2To31Elements) {
  GGEMM_REQUIRE_GPU(handle);
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  Rng rng(seed);

  constexpr int64_t M = 8600000, K = 256, R = 128, Q = 256, KV = 128, G = 4, N = Q + 2 * KV;
  static_assert(2 * M * R > k2To31, "P's plane 2 starts past element 2^31");
  static_assert(M * K > k2To31 && M * Q > k2To31 && 2 * M * KV > k2To31, "X, q_out, kv_out pass 2^31");
  static_assert(3 * M < k2To31, "the expand's 3 * M rows of P stay below 2^31");
  // m = 8177216: (M + m) * 128 = 2^31 (P plane 1, kv_out V rows);
  // m = 8388608: m * 256 = 2^31 (X, q_out).
  Layout l;
  l.groups = {{1000, -1},     // [0, 1000)
              {100, 0},       // [1000, 1100): all offsets small
              {8176000, -1},  // [1100, 8177100)
              {300, 1},       // [8177100, 8177400): P plane 1 and V rows cross 2^31
              {211100, -1},   // [8177400, 8388500)
              {200, 2},       // [8388500, 8388700): X and q_out cross 2^31
              {210900, -1},   // [8388700, 8599600)
              {300, 3},       // [8599600, 8599900): the last rows
              {50, 1}};       // [8599900, 8599950): past the active count
  l.active = 8;
  l.m = M;
  ASSERT_EQ(int64_t(l.offsets()[9]), M - 50);
  const std::vector<uint32_t> offsets = l.offsets();
  const std::vector<int32_t> ids = l.ids();
  const uint32_t stats[2] = {l.max_rows(), uint32_t(l.active)};
  const std::vector<RowRun> runs = runs_of(l);
  const Compact cp = compact_of(runs);
  const int64_t cm = cp.m;

  const ggemm_dtype in = kFp16, out = kBf16;  // X, lora_a, P, lora_b fp16; q_out, kv_out bf16
  const float shrink_scale = 0.5f, expand_scale = 1.0f, acc_scale = 0.5f;
  const size_t x_row = size_t(K) * 2, p_row = size_t(R) * 2, q_row = size_t(Q) * 2, kv_row = size_t(KV) * 2;
  const size_t x_bytes = size_t(M) * x_row, p_bytes = size_t(3 * M) * p_row, q_bytes = size_t(M) * q_row,
               kv_bytes = size_t(2 * M) * kv_row;
  REQUIRE_FREE_DEVICE_MEMORY(x_bytes + p_bytes + q_bytes + kv_bytes);
  DeviceBuffer d_x, d_p, d_q, d_kv, d_la, d_lb, d_off, d_ids, d_stats;
  ALLOC_OR_SKIP(d_x, x_bytes);
  ALLOC_OR_SKIP(d_p, p_bytes);
  ALLOC_OR_SKIP(d_q, q_bytes);
  ALLOC_OR_SKIP(d_kv, kv_bytes);
  ASSERT_TRUE(d_la.alloc(size_t(G * 3 * R * K) * 2));
  ASSERT_TRUE(d_lb.alloc(size_t(G * N * R) * 2));
  ASSERT_TRUE(d_off.alloc(offsets.size() * 4));
  ASSERT_TRUE(d_ids.alloc(ids.size() * 4));
  ASSERT_TRUE(d_stats.alloc(8));
  CUDA_OK(cudaMemcpy(d_off.get(), offsets.data(), offsets.size() * 4, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(d_ids.get(), ids.data(), ids.size() * 4, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(d_stats.get(), stats, 8, cudaMemcpyHostToDevice));

  // X: a constant pattern, random in the rows that compute; P, q_out,
  // kv_out: poison.
  CUDA_OK(cudaMemset(d_x.get(), 0x3F, x_bytes));
  CUDA_OK(cudaMemset(d_p.get(), 0xFF, p_bytes));
  CUDA_OK(cudaMemset(d_q.get(), 0xFF, q_bytes));
  CUDA_OK(cudaMemset(d_kv.get(), 0xFF, kv_bytes));
  Bytes x_c(size_t(cm) * x_row), la(size_t(G * 3 * R * K) * 2), lb(size_t(G * N * R) * 2);
  fill_random(in, x_c.data(), size_t(cm * K), rng);
  fill_random(in, la.data(), size_t(G * 3 * R * K), rng);
  fill_random(in, lb.data(), size_t(G * N * R), rng);
  ASSERT_NO_FATAL_FAILURE(upload_runs(cp, d_x, x_row, 0, x_c.data()));
  CUDA_OK(cudaMemcpy(d_la.get(), la.data(), la.size(), cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(d_lb.get(), lb.data(), lb.size(), cudaMemcpyHostToDevice));

  Scanner scanner;

  // ---- Shrink (store).
  ggemm_lora_shrink_qkv_args s;
  std::memset(&s, 0, sizeof s);
  s.struct_size = sizeof s;
  s.x_dtype = in, s.p_dtype = in;
  s.m = M, s.k = K, s.rank = R, s.num_adapters = G;
  s.x = d_x.get(), s.lora_a = d_la.get(), s.p = d_p.get();
  s.a_offsets = d_off.as<uint32_t>(), s.adapter_ids = d_ids.as<int32_t>(), s.expert_usage_stats = d_stats.as<uint32_t>();
  s.num_groups = int64_t(ids.size());
  s.max_rows_per_group = stats[0];
  s.scale = shrink_scale;
  s.accumulate = 0;
  GGEMM_OK(ggemm_lora_shrink_qkv(handle, &s, nullptr));
  CUDA_OK(cudaGetLastError());
  CUDA_OK(cudaDeviceSynchronize());

  // P's computing rows, compact [3, cm, R], against the reference shrink.
  Bytes got_p(size_t(3 * cm) * p_row);
  for (int64_t plane = 0; plane < 3; ++plane)
    ASSERT_NO_FATAL_FAILURE(download_runs(cp, d_p, p_row, plane * M, got_p.data() + size_t(plane * cm) * p_row));
  {
    Bytes want_p(got_p.size());
    poison(want_p.data(), want_p.size());
    ggemm_lora_shrink_qkv_args h = s;
    h.m = cm;
    h.x = x_c.data(), h.lora_a = la.data(), h.p = want_p.data();
    h.a_offsets = cp.offsets.data(), h.adapter_ids = cp.ids.data(), h.expert_usage_stats = cp.stats;
    h.num_groups = int64_t(cp.ids.size());
    h.max_rows_per_group = cp.stats[0];
    ref::lora_shrink_qkv(h);
    EXPECT_TRUE(compare_matrix(in, want_p.data(), got_p.data(), 3 * cm, R, lora_atol(in, K, shrink_scale),
                               default_rtol(in)))
        << "P: planes 0..2 of the computing rows (compact)";
  }
  for (int64_t plane = 0; plane < 3; ++plane)
    EXPECT_TRUE(scanner.check_runs(d_p, p_row, plane * M, runs, Fill::kZero, 2, "P plane " + std::to_string(plane)));

  // ---- Expand (store) of the device's P, then expand (accumulate) onto it.
  Bytes got_q(size_t(cm) * q_row), got_kv(size_t(2 * cm) * kv_row);  // kv: K rows, then V rows
  Bytes prev_q(got_q.size()), prev_kv(got_kv.size());
  poison(prev_q.data(), prev_q.size());
  poison(prev_kv.data(), prev_kv.size());
  const double product_bound = std::max(1.0, max_abs(in, got_p));
  for (const bool acc : {false, true}) {
    SCOPED_TRACE(acc ? "expand accumulate (onto the store's outputs)" : "expand store");
    const float scale = acc ? acc_scale : expand_scale;
    ggemm_lora_expand_qkv_args e;
    std::memset(&e, 0, sizeof e);
    e.struct_size = sizeof e;
    e.p_dtype = in, e.out_dtype = out;
    e.m = M, e.rank = R, e.q_dim = Q, e.kv_dim = KV, e.num_adapters = G;
    e.p = d_p.get(), e.lora_b = d_lb.get(), e.q_out = d_q.get(), e.kv_out = d_kv.get();
    e.a_offsets = d_off.as<uint32_t>(), e.adapter_ids = d_ids.as<int32_t>(), e.expert_usage_stats = d_stats.as<uint32_t>();
    e.num_groups = int64_t(ids.size());
    e.max_rows_per_group = stats[0];
    e.scale = scale;
    e.accumulate = acc ? 1 : 0;
    GGEMM_OK(ggemm_lora_expand_qkv(handle, &e, nullptr));
    CUDA_OK(cudaGetLastError());
    CUDA_OK(cudaDeviceSynchronize());

    ASSERT_NO_FATAL_FAILURE(download_runs(cp, d_q, q_row, 0, got_q.data()));
    ASSERT_NO_FATAL_FAILURE(download_runs(cp, d_kv, kv_row, 0, got_kv.data()));                         // K
    ASSERT_NO_FATAL_FAILURE(download_runs(cp, d_kv, kv_row, M, got_kv.data() + size_t(cm) * kv_row));  // V
    Bytes want_q = prev_q, want_kv = prev_kv;
    ggemm_lora_expand_qkv_args h = e;
    h.m = cm;
    h.p = got_p.data(), h.lora_b = lb.data(), h.q_out = want_q.data(), h.kv_out = want_kv.data();
    h.a_offsets = cp.offsets.data(), h.adapter_ids = cp.ids.data(), h.expert_usage_stats = cp.stats;
    h.num_groups = int64_t(cp.ids.size());
    h.max_rows_per_group = cp.stats[0];
    ref::lora_expand_qkv(h);
    const double atol = lora_atol(out, R, scale, product_bound), rtol = default_rtol(out);
    EXPECT_TRUE(compare_matrix(out, want_q.data(), got_q.data(), cm, Q, atol, rtol)) << "q_out (computing rows)";
    EXPECT_TRUE(compare_matrix(out, want_kv.data(), got_kv.data(), 2 * cm, KV, atol, rtol))
        << "kv_out (computing rows: K rows, then V rows at M + m)";
    // Inactive rows: zeros (the store wrote them; the accumulate leaves them).
    EXPECT_TRUE(scanner.check_runs(d_q, q_row, 0, runs, Fill::kZero, 2, "q_out"));
    EXPECT_TRUE(scanner.check_runs(d_kv, kv_row, 0, runs, Fill::kZero, 2, "kv_out K rows"));
    EXPECT_TRUE(scanner.check_runs(d_kv, kv_row, M, runs, Fill::kZero, 2, "kv_out V rows"));
    prev_q = got_q, prev_kv = got_kv;
  }
  std::printf("[ large    ] scanned %.1f GB of rows outside the computing groups\n", double(scanner.scanned_bytes()) / 1e9);
}

}  // namespace
}  // namespace ggemm::testing
