// gpu_buffers.cpp — see gpu_buffers.h.
#include "gpu_buffers.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <utility>

#include "dtype.h"

namespace ggemm::bench {

void cuda_fail(cudaError_t err, const char* expr, const char* file, int line) {
  std::fprintf(stderr, "%s:%d: %s -> %s: %s\n", file, line, expr, cudaGetErrorName(err),
               cudaGetErrorString(err));
  std::abort();
}

GpuProbe probe_gpu() {
  GpuProbe p;
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  p.runtime_result = err == cudaSuccess
                         ? "cudaGetDeviceCount found " + std::to_string(count) + " device(s)"
                         : std::string("cudaGetDeviceCount returned ") + cudaGetErrorName(err) +
                               " (" + cudaGetErrorString(err) + ")";
  // Asked even when the runtime saw nothing: its message says why (no driver,
  // no device, unsupported architecture).
  ggemm_handle_t handle = nullptr;
  const ggemm_status st = ggemm_create(&handle, 0);
  p.ggemm_result = std::string("ggemm_create(device 0) returned ") + ggemm_status_string(st);
  if (st != GGEMM_STATUS_SUCCESS) p.ggemm_result += std::string(": ") + ggemm_last_error_message();
  if (err == cudaSuccess && count > 0 && st == GGEMM_STATUS_SUCCESS)
    p.handle = handle;
  else if (handle)
    ggemm_destroy(handle);
  return p;
}

// ---- DeviceBuffer -----------------------------------------------------------

DeviceBuffer::DeviceBuffer(size_t bytes) : bytes_(bytes) {
  if (bytes > 0) CUDA_CHECK(cudaMalloc(&ptr_, bytes));
}

DeviceBuffer::~DeviceBuffer() {
  if (ptr_) cudaFree(ptr_);  // no abort in a destructor; a failure here is reported by the next call
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : ptr_(std::exchange(other.ptr_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    if (ptr_) cudaFree(ptr_);
    ptr_ = std::exchange(other.ptr_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

DeviceBuffer upload(const void* host, size_t bytes) {
  DeviceBuffer buf(bytes);
  if (bytes > 0) CUDA_CHECK(cudaMemcpy(buf.get(), host, bytes, cudaMemcpyHostToDevice));
  // From pageable memory cudaMemcpy may return before its DMA lands, and our
  // work runs on a non-blocking stream that does not wait for it.
  CUDA_CHECK(cudaDeviceSynchronize());
  return buf;
}

// ---- routing ----------------------------------------------------------------

namespace {

// SplitMix64: tiny, fast, and the same on every platform (unlike the
// standard distributions, whose algorithms are implementation-defined).
uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

[[noreturn]] void bad_argument(const char* what) {
  std::fprintf(stderr, "ggemm bench: %s\n", what);
  std::abort();
}

}  // namespace

const char* routing_name(Routing r) { return r == Routing::kZipf ? "zipf1.2" : "balanced"; }

std::vector<uint32_t> route_rows(int experts, int64_t total_rows, Routing r, uint64_t seed) {
  if (experts <= 0) bad_argument("route_rows: experts must be positive");
  if (total_rows < 0 || total_rows > int64_t{UINT32_MAX})
    bad_argument("route_rows: total_rows must be in [0, 2^32)");
  const size_t e_count = static_cast<size_t>(experts);
  std::vector<uint32_t> rows(e_count);

  if (r == Routing::kBalanced) {
    const int64_t base = total_rows / experts, extra = total_rows % experts;
    for (size_t e = 0; e < e_count; ++e)
      rows[e] = static_cast<uint32_t>(base + (static_cast<int64_t>(e) < extra ? 1 : 0));
    return rows;
  }

  // Zipf: rank i (1-based) has weight i^-1.2; a seeded Fisher-Yates shuffle
  // decides which expert holds which rank, so the hot expert moves around.
  std::vector<size_t> expert_at_rank(e_count);
  for (size_t i = 0; i < e_count; ++i) expert_at_rank[i] = i;
  uint64_t state = seed;
  for (size_t i = e_count - 1; i > 0; --i)
    std::swap(expert_at_rank[i], expert_at_rank[splitmix64(state) % (i + 1)]);

  std::vector<double> weight(e_count);
  double weight_sum = 0.0;
  for (size_t rank = 0; rank < e_count; ++rank) {
    weight[expert_at_rank[rank]] = std::pow(static_cast<double>(rank + 1), -1.2);
    weight_sum += weight[expert_at_rank[rank]];
  }

  // Largest-remainder rounding: floor every share, then hand the rows still
  // missing (fewer than `experts`) to the largest fractional parts, so the
  // sum is exact and no expert is off by more than one row from its share.
  std::vector<std::pair<double, size_t>> remainder(e_count);
  int64_t assigned = 0;
  for (size_t e = 0; e < e_count; ++e) {
    const double share = static_cast<double>(total_rows) * weight[e] / weight_sum;
    const double whole = std::floor(share);
    rows[e] = static_cast<uint32_t>(whole);
    assigned += static_cast<int64_t>(whole);
    remainder[e] = {share - whole, e};
  }
  std::stable_sort(remainder.begin(), remainder.end(),
                   [](const auto& x, const auto& y) { return x.first > y.first; });
  for (int64_t i = 0; i < total_rows - assigned; ++i) rows[remainder[static_cast<size_t>(i)].second] += 1;
  return rows;
}

// ---- shapes -----------------------------------------------------------------

// Issue 3's table. Experts and dims are per GPU (DeepSeek-V3 with 8-way
// expert parallelism keeps 32 of its 256 experts); gate_up fuses the two
// projections (N = 2 * ffn).
const std::array<MoeShape, 10> kMoeShapes = {{
    {"mixtral_gate_up_prefill", 8, 8192, 28672, 4096, Routing::kBalanced},
    {"mixtral_down_prefill", 8, 8192, 4096, 14336, Routing::kBalanced},
    {"deepseek_v3_ep8_gate_up_prefill", 32, 4096, 4096, 7168, Routing::kBalanced},
    {"deepseek_v3_ep8_down_prefill", 32, 4096, 7168, 2048, Routing::kBalanced},
    {"qwen3_30b_a3b_gate_up_prefill", 128, 32768, 1536, 2048, Routing::kBalanced},
    {"qwen3_30b_a3b_gate_up_prefill_zipf", 128, 32768, 1536, 2048, Routing::kZipf},
    {"qwen3_30b_a3b_down_prefill", 128, 32768, 2048, 768, Routing::kBalanced},
    {"qwen3_30b_a3b_gate_up_decode", 128, 512, 1536, 2048, Routing::kBalanced},
    {"deepseek_v3_ep8_gate_up_decode", 32, 256, 4096, 7168, Routing::kBalanced},
    {"mixtral_gate_up_decode", 8, 128, 28672, 4096, Routing::kBalanced},
}};

const MoeShape* find_shape(const char* name) {
  for (const MoeShape& s : kMoeShapes)
    if (std::strcmp(s.name, name) == 0) return &s;
  return nullptr;
}

// ---- random data ------------------------------------------------------------

void fill_random_bf16(uint16_t* host, size_t count, uint64_t seed, DataDistribution distribution, float scale) {
  // Fixed-size chunks, each with its own generator seeded from (seed, chunk):
  // threads only decide who fills a chunk, never what goes in it.
  constexpr size_t kChunk = size_t{1} << 20;
  const size_t chunks = (count + kChunk - 1) / kChunk;
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t c; (c = next.fetch_add(1)) < chunks;) {
      uint64_t state = seed ^ (0xd1b54a32d192ed03ull * (c + 1));
      splitmix64(state);
      const size_t end = std::min(count, (c + 1) * kChunk);
      // 24 random bits -> a float in (-1, 1), symmetric about 0.
      auto uniform = [&state] {
        const uint32_t bits = static_cast<uint32_t>(splitmix64(state) >> 40);
        return (static_cast<float>(bits) + 0.5f) * 0x1p-23f - 1.0f;
      };
      for (size_t i = c * kChunk; i < end; ++i) {
        if (distribution == DataDistribution::kUniform) {
          host[i] = ref::float_to_bf16(uniform());
          continue;
        }
        // Box-Muller: two uniforms in (0, 1) -> one standard normal.
        const float u1 = 0.5f * (uniform() + 1.0f), u2 = 0.5f * (uniform() + 1.0f);
        const float normal = std::sqrt(-2.0f * std::log(u1)) * std::cos(6.28318530718f * u2);
        host[i] = ref::float_to_bf16(scale * normal);
      }
    }
  };
  const size_t workers =
      std::max<size_t>(1, std::min<size_t>(chunks, std::thread::hardware_concurrency()));
  std::vector<std::thread> pool;
  for (size_t t = 1; t < workers; ++t) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
}

// ---- MoE problem ------------------------------------------------------------

ggemm_grouped_matmul_args MoeProblem::args() const {
  ggemm_grouped_matmul_args g{};
  g.struct_size = sizeof(g);
  g.a_dtype = g.b_dtype = g.c_dtype = GGEMM_DTYPE_BF16;
  g.m = shape.rows;
  g.n = shape.n;
  g.k = shape.k;
  g.num_experts = shape.experts;
  g.a = a.get();
  g.b = b.get();
  g.c = c.get();
  g.transpose_b = 1;
  g.a_offsets = a_offsets.as<const uint32_t>();
  g.expert_ids = expert_ids.as<const int32_t>();
  g.expert_usage_stats = usage_stats.as<const uint32_t>();
  g.num_groups = shape.experts;
  g.max_rows_per_group = max_rows;
  g.epilogue = GGEMM_EPILOGUE_STORE;
  return g;
}

double MoeProblem::flops() const {
  return 2.0 * static_cast<double>(shape.rows) * static_cast<double>(shape.n) *
         static_cast<double>(shape.k);
}

double MoeProblem::bytes() const {
  const double n = static_cast<double>(shape.n), k = static_cast<double>(shape.k);
  const double m = static_cast<double>(shape.rows);
  return 2.0 * (used_groups * n * k + m * k + m * n);
}

MoeProblem make_moe_problem(const MoeShape& shape, uint64_t seed, bool keep_host, DataDistribution distribution) {
  MoeProblem p;
  p.shape = shape;
  p.rows_per_expert = route_rows(shape.experts, shape.rows, shape.routing, seed);

  const size_t e_count = static_cast<size_t>(shape.experts);
  p.offsets.assign(e_count + 1, static_cast<uint32_t>(shape.rows));
  p.expert_of.assign(e_count, -1);
  p.offsets[0] = 0;
  size_t g = 0;
  for (size_t e = 0; e < e_count; ++e) {
    const uint32_t r = p.rows_per_expert[e];
    p.max_rows = std::max(p.max_rows, r);
    if (r == 0) continue;  // a router lists only experts that got tokens
    p.expert_of[g] = static_cast<int32_t>(e);
    p.offsets[g + 1] = p.offsets[g] + r;
    ++g;
  }
  p.used_groups = static_cast<int>(g);
  p.usage[0] = p.max_rows;
  p.usage[1] = static_cast<uint32_t>(g);

  uint64_t seeds = seed;
  const size_t a_count = static_cast<size_t>(shape.rows) * static_cast<size_t>(shape.k);
  const size_t b_count = e_count * static_cast<size_t>(shape.n) * static_cast<size_t>(shape.k);
  p.host_a.resize(a_count);
  p.host_b.resize(b_count);
  fill_random_bf16(p.host_a.data(), a_count, splitmix64(seeds), distribution, 1.0f);
  fill_random_bf16(p.host_b.data(), b_count, splitmix64(seeds), distribution,
                   1.0f / std::sqrt(static_cast<float>(shape.k)));
  p.a = upload(p.host_a.data(), a_count * 2);
  p.b = upload(p.host_b.data(), b_count * 2);
  if (!keep_host) {
    std::vector<uint16_t>().swap(p.host_a);
    std::vector<uint16_t>().swap(p.host_b);
  }
  p.c = DeviceBuffer(static_cast<size_t>(shape.rows) * static_cast<size_t>(shape.n) * 2);
  p.a_offsets = upload(p.offsets.data(), p.offsets.size() * sizeof(uint32_t));
  p.expert_ids = upload(p.expert_of.data(), p.expert_of.size() * sizeof(int32_t));
  p.usage_stats = upload(p.usage, sizeof(p.usage));
  return p;
}

}  // namespace ggemm::bench
