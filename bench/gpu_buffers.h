// gpu_buffers.h — device memory, routing and MoE problem data shared by
// ggemm_demo and ggemm_bench.
#ifndef GGEMM_BENCH_GPU_BUFFERS_H
#define GGEMM_BENCH_GPU_BUFFERS_H

#include <cuda_runtime.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ggemm.h"

namespace ggemm::bench {

// Prints "file:line: expr -> cudaErrorName: description" and aborts: a
// benchmark that carries on past a failed call measures nothing.
[[noreturn]] void cuda_fail(cudaError_t err, const char* expr, const char* file, int line);

#define CUDA_CHECK(expr)                                                            \
  do {                                                                              \
    const cudaError_t cuda_check_err_ = (expr);                                     \
    if (cuda_check_err_ != cudaSuccess)                                             \
      ::ggemm::bench::cuda_fail(cuda_check_err_, #expr, __FILE__, __LINE__);        \
  } while (0)

// Whether there is a GPU to run on: the CUDA runtime's device count, then a
// ggemm handle on device 0 (the same two steps the GPU tests take to skip).
struct GpuProbe {
  ggemm_handle_t handle = nullptr;  // non-null iff usable; the caller destroys it
  std::string runtime_result;       // what cudaGetDeviceCount said
  std::string ggemm_result;         // what ggemm_create said (status and message)
};
GpuProbe probe_gpu();

// One cudaMalloc, freed on scope exit. Move-only.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* get() const { return ptr_; }
  size_t bytes() const { return bytes_; }
  template <typename T>
  T* as() const { return static_cast<T*>(ptr_); }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

// Upload of `bytes` host bytes into a new device buffer, complete on return.
DeviceBuffer upload(const void* host, size_t bytes);

// How routed tokens spread over the experts.
enum class Routing {
  kBalanced,  // equal split; the remainder goes one row each to the first experts
  kZipf,      // weights 1 / rank^1.2 over a random permutation of the experts
};
const char* routing_name(Routing r);

// Rows per expert, summing exactly to total_rows. `seed` picks the Zipf
// permutation (unused for kBalanced).
std::vector<uint32_t> route_rows(int experts, int64_t total_rows, Routing r, uint64_t seed);

// One benchmark shape (issue 3's table): `rows` routed token rows in all
// groups, output [rows, n], weights [experts, n, k].
struct MoeShape {
  const char* name;
  int experts;
  int64_t rows;
  int64_t n;
  int64_t k;
  Routing routing;
};
extern const std::array<MoeShape, 10> kMoeShapes;
const MoeShape* find_shape(const char* name);  // nullptr if unknown

// `count` values uniform in [-1, 1], rounded to bf16; deterministic for a
// seed, whatever the number of threads that fill it.
// How random operands are drawn. kUniform: uniform in (-1, 1), the
// benchmark's default. kModel: as a model's tensors are, normal with
// standard deviation `scale` (activations 1, weights 1 / sqrt(K)). The
// power an MMA draws follows the bits it multiplies, and at the H200's power
// cap the clock follows the power, so both are measured.
enum class DataDistribution { kUniform, kModel };

void fill_random_bf16(uint16_t* host, size_t count, uint64_t seed,
                      DataDistribution distribution = DataDistribution::kUniform, float scale = 1.0f);

// A whole MoE grouped GEMM on the device, laid out as a router would leave
// it: groups are the experts that received rows, in expert order (group g
// uses expert expert_of[g]); array slots past the used groups hold offset M
// and expert -1, and usage_stats[1] counts only the used groups.
struct MoeProblem {
  MoeShape shape{};
  std::vector<uint32_t> rows_per_expert;  // [experts]
  std::vector<uint32_t> offsets;          // [experts + 1] host copy of a_offsets
  std::vector<int32_t> expert_of;         // [experts] host copy of expert_ids
  uint32_t usage[2] = {0, 0};             // host copy of usage_stats
  int used_groups = 0;                    // experts with at least one row
  uint32_t max_rows = 0;                  // true maximum rows in a group

  std::vector<uint16_t> host_a, host_b;   // kept only when asked (for a reference)
  DeviceBuffer a, b, c;                   // bf16 [M, K], [E, N, K], [M, N]
  DeviceBuffer a_offsets, expert_ids, usage_stats;

  // Arguments for ggemm_grouped_matmul over the device buffers: bf16 in and
  // out, transpose_b = 1, plain store, max_rows_per_group = the true maximum.
  ggemm_grouped_matmul_args args() const;
  double flops() const;  // 2 * rows * N * K
  // Fewest bytes a call must move: the weights of the used experts, A and C.
  double bytes() const;
};

// Fresh random A and B (distinct seeds derived from `seed`); C is left
// uninitialised. keep_host keeps host copies of A and B for a CPU reference.
MoeProblem make_moe_problem(const MoeShape& shape, uint64_t seed, bool keep_host,
                            DataDistribution distribution = DataDistribution::kUniform);

}  // namespace ggemm::bench

#endif  // GGEMM_BENCH_GPU_BUFFERS_H
