// moe_grouped.cpp: ggemm from C++, found with find_package(ggemm).
//
// A MoE "down" projection on device 0: 4 experts, 6 ragged groups (one empty,
// one inactive), bf16 activations and weights W[E, N, K], fp32 output scaled
// per row by the routing weight (GGEMM_EPILOGUE_ROW_SCALE). Device memory
// comes from the CUDA runtime; every output element is checked against a
// host computation. Exit status: 0 on success and when there is no usable
// GPU (it prints why), 1 on a mismatch or an error.
#include <ggemm.h>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

constexpr int kExperts = 4, kN = 128, kK = 256;
constexpr std::array<uint32_t, 6> kRows = {33, 1, 5, 0, 64, 17};
constexpr std::array<int32_t, 6> kIds = {1, 3, -1, 0, 2, 3};  // -1: inactive, rows zeroed
constexpr int kGroups = int(kRows.size());

void cuda_check(cudaError_t e, const char *what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

// Device memory owned by a scope.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t bytes) : bytes_(bytes) { cuda_check(cudaMalloc(&ptr_, bytes), "cudaMalloc"); }
  ~DeviceBuffer() { cudaFree(ptr_); }
  DeviceBuffer(const DeviceBuffer &) = delete;
  DeviceBuffer &operator=(const DeviceBuffer &) = delete;
  template <typename T>
  void upload(const std::vector<T> &v) {
    cuda_check(cudaMemcpy(ptr_, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice), "cudaMemcpy H2D");
  }
  template <typename T>
  std::vector<T> download() const {
    std::vector<T> v(bytes_ / sizeof(T));
    cuda_check(cudaMemcpy(v.data(), ptr_, bytes_, cudaMemcpyDeviceToHost), "cudaMemcpy D2H");
    return v;
  }
  template <typename T>
  T *as() const {
    return static_cast<T *>(ptr_);
  }

 private:
  void *ptr_ = nullptr;
  size_t bytes_;
};

uint16_t float_to_bf16(float f) {  // round to nearest even; inputs are finite
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  u += 0x7FFFu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}
float bf16_to_float(uint16_t h) {
  uint32_t u = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// Multiples of 1/8 in [-1, 1] (exact in bf16) and routing weights that are
// multiples of 1/4: the kernel's fp32 result is then exact, as is the host's.
struct Lcg {
  uint32_t s = 2024u;
  float value() {
    s = s * 1664525u + 1013904223u;
    return float(int((s >> 16) % 17u) - 8) / 8.0f;
  }
  float weight() {
    s = s * 1664525u + 1013904223u;
    return float(1 + (s >> 16) % 4u) / 4.0f;
  }
};

int run() {
  ggemm_handle_t handle = nullptr;
  const ggemm_status created = ggemm_create(&handle, 0);
  if (created == GGEMM_STATUS_DRIVER_NOT_FOUND || created == GGEMM_STATUS_NO_DEVICE ||
      created == GGEMM_STATUS_UNSUPPORTED_DEVICE) {
    std::printf("SKIPPED: no usable GPU, nothing to run: %s: %s\n", ggemm_status_string(created),
                ggemm_last_error_message());
    return 0;
  }
  if (created != GGEMM_STATUS_SUCCESS) {
    std::fprintf(stderr, "ggemm_create: %s: %s\n", ggemm_status_string(created), ggemm_last_error_message());
    return 1;
  }
  // Destroys the handle however run() leaves.
  struct HandleGuard {
    ggemm_handle_t h;
    ~HandleGuard() { ggemm_destroy(h); }
  } guard{handle};

  std::vector<uint32_t> offsets(kGroups + 1, 0);
  uint32_t max_rows = 0;
  for (int g = 0; g < kGroups; ++g) {
    offsets[g + 1] = offsets[g] + kRows[g];
    max_rows = std::max(max_rows, kRows[g]);
  }
  const int64_t m = offsets[kGroups];
  const std::vector<uint32_t> stats = {max_rows, uint32_t(kGroups)};
  const std::vector<int32_t> ids(kIds.begin(), kIds.end());

  Lcg rng;
  std::vector<uint16_t> a(size_t(m) * kK), w(size_t(kExperts) * kN * kK);
  std::vector<float> scale(static_cast<size_t>(m));
  for (auto &x : a) x = float_to_bf16(rng.value());
  for (auto &x : w) x = float_to_bf16(rng.value());
  for (auto &x : scale) x = rng.weight();

  cuda_check(cudaSetDevice(0), "cudaSetDevice");  // the primary context, as ggemm's
  cudaStream_t stream = nullptr;
  cuda_check(cudaStreamCreate(&stream), "cudaStreamCreate");
  DeviceBuffer d_a(a.size() * 2), d_w(w.size() * 2), d_c(size_t(m) * kN * 4), d_scale(scale.size() * 4),
      d_offsets(offsets.size() * 4), d_ids(ids.size() * 4), d_stats(stats.size() * 4);
  d_a.upload(a);
  d_w.upload(w);
  d_scale.upload(scale);
  d_offsets.upload(offsets);
  d_ids.upload(ids);
  d_stats.upload(stats);
  cuda_check(cudaMemset(d_c.as<void>(), 0xFF, size_t(m) * kN * 4), "cudaMemset");  // NaN poison

  ggemm_grouped_matmul_args args{};
  args.struct_size = sizeof args;
  args.a_dtype = args.b_dtype = GGEMM_DTYPE_BF16;
  args.c_dtype = GGEMM_DTYPE_FP32;
  args.m = m;
  args.n = kN;
  args.k = kK;
  args.num_experts = kExperts;
  args.a = d_a.as<void>();
  args.b = d_w.as<void>();
  args.c = d_c.as<void>();
  args.transpose_b = 1;  // W is [E, N, K]
  args.a_offsets = d_offsets.as<uint32_t>();
  args.expert_ids = d_ids.as<int32_t>();
  args.expert_usage_stats = d_stats.as<uint32_t>();
  args.num_groups = kGroups;
  args.max_rows_per_group = max_rows;
  args.epilogue = GGEMM_EPILOGUE_ROW_SCALE;
  args.row_scale = d_scale.as<float>();
  if (ggemm_status s = ggemm_grouped_matmul(handle, &args, stream); s != GGEMM_STATUS_SUCCESS) {
    std::fprintf(stderr, "ggemm_grouped_matmul: %s: %s\n", ggemm_status_string(s), ggemm_last_error_message());
    return 1;
  }
  cuda_check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  cuda_check(cudaStreamDestroy(stream), "cudaStreamDestroy");
  const std::vector<float> c = d_c.download<float>();

  // C[r, n] = scale[r] * sum_k A[r, k] * W[e][n, k]; rows of inactive groups are 0.
  int bad = 0;
  double max_err = 0;
  for (int g = 0; g < kGroups; ++g) {
    for (uint32_t r = offsets[g]; r < offsets[g + 1]; ++r) {
      for (int n = 0; n < kN; ++n) {
        double ref = 0;
        if (kIds[g] >= 0) {
          const uint16_t *wr = &w[(size_t(kIds[g]) * kN + n) * kK];
          for (int k = 0; k < kK; ++k) ref += double(bf16_to_float(a[size_t(r) * kK + k])) * bf16_to_float(wr[k]);
          ref *= scale[r];
        }
        const double got = c[size_t(r) * kN + n], err = std::fabs(got - ref);
        if (!(err <= 1e-5 + 1e-6 * std::fabs(ref))) {
          if (bad++ < 10)
            std::fprintf(stderr, "MISMATCH at row %u (group %d, expert %d) col %d: got %g, expected %g\n", r, g,
                         kIds[g], n, got, ref);
        } else {
          max_err = std::max(max_err, err);
        }
      }
    }
  }
  if (bad) {
    std::fprintf(stderr, "FAILED: %d of %lld elements differ from the host computation\n", bad,
                 (long long)(m * kN));
    return 1;
  }
  std::printf("OK: %lld x %d fp32 output (row-scaled) of %d groups over %d experts matches the host "
              "(max abs error %.3g)\n",
              (long long)m, kN, kGroups, kExperts, max_err);
  return 0;
}

}  // namespace

int main() {
  std::printf("ggemm %d (header %d)\n", ggemm_version(), GGEMM_VERSION);
  try {
    return run();
  } catch (const std::exception &e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
