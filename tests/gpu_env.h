// GPU test environment: one shared ggemm handle, device buffers (guarded ones
// for outputs), and the skip that GPU tests take (with its reason) when
// there is no usable GPU.
#pragma once
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <ctime>
#include <random>
#include <string>
#include <vector>

#include "ggemm.h"

namespace ggemm::testing {

// The process-wide handle on device 0, or nullptr with the reason why not.
ggemm_handle_t gpu_handle(std::string *why_not);

#define GGEMM_REQUIRE_GPU(handle_var)                                            \
  std::string ggemm_why_not_;                                                    \
  ggemm_handle_t handle_var = ::ggemm::testing::gpu_handle(&ggemm_why_not_);     \
  if (!handle_var) GTEST_SKIP() << "no usable GPU: " << ggemm_why_not_

#define CUDA_OK(expr)                                                                   \
  do {                                                                                  \
    cudaError_t e_ = (expr);                                                            \
    ASSERT_EQ(e_, cudaSuccess) << #expr << " -> " << cudaGetErrorName(e_) << ": " << cudaGetErrorString(e_); \
  } while (0)

// Skips the test when the device has less than `bytes` (plus 1 GiB of
// headroom) free.
#define REQUIRE_FREE_DEVICE_MEMORY(bytes)                                                                  \
  do {                                                                                                     \
    size_t free_ = 0, total_ = 0;                                                                          \
    CUDA_OK(cudaMemGetInfo(&free_, &total_));                                                              \
    const size_t need_ = (bytes) + (size_t(1) << 30);                                                      \
    if (free_ < need_)                                                                                     \
      GTEST_SKIP() << "needs " << need_ / (1 << 20) << " MiB of device memory, " << free_ / (1 << 20)    \
                   << " MiB free of " << total_ / (1 << 20);                                               \
  } while (0)

#define GGEMM_OK(expr)                                                                  \
  do {                                                                                  \
    ggemm_status s_ = (expr);                                                           \
    ASSERT_EQ(s_, GGEMM_STATUS_SUCCESS) << #expr << " -> " << ggemm_status_string(s_) << ": " \
                                        << ggemm_last_error_message();                 \
  } while (0)

// A seed for fresh data every run; GPU tests print it with any failure so
// the run can be reproduced.
inline uint64_t fresh_seed() { return uint64_t(std::random_device{}()) << 32 | uint64_t(time(nullptr)); }

// The dtype's name in test case descriptions.
inline const char *dtype_label(ggemm_dtype t) {
  return t == GGEMM_DTYPE_BF16 ? "bf16" : t == GGEMM_DTYPE_FP16 ? "fp16" : "fp32";
}

// A device allocation freed on scope exit.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes) { alloc(bytes); }
  ~DeviceBuffer() { if (ptr_) cudaFree(ptr_); }
  DeviceBuffer(const DeviceBuffer &) = delete;
  DeviceBuffer &operator=(const DeviceBuffer &) = delete;
  bool alloc(size_t bytes) {
    if (ptr_) cudaFree(ptr_);
    ptr_ = nullptr;
    bytes_ = bytes;
    return cudaMalloc(&ptr_, bytes ? bytes : 16) == cudaSuccess;
  }
  void *get() const { return ptr_; }
  size_t bytes() const { return bytes_; }
  template <typename T> T *as() const { return static_cast<T *>(ptr_); }

 private:
  void *ptr_ = nullptr;
  size_t bytes_ = 0;
};

// Bytes of guard band on each side of an output (a multiple of 256, so the
// output keeps the allocation's alignment): 64 KiB, as the grouped GEMM's
// tests of malformed routing, so a write a tile or a row away is caught.
constexpr size_t kGuardBytes = 64 << 10;

// A device array of `bytes` between two guard bands, all poisoned.
class GuardedBuffer {
 public:
  explicit GuardedBuffer(size_t bytes) : bytes_(bytes), buf_(bytes + 2 * kGuardBytes) {
    EXPECT_NE(buf_.get(), nullptr);
    EXPECT_EQ(cudaMemset(buf_.get(), 0xFF, bytes + 2 * kGuardBytes), cudaSuccess);
  }
  template <typename T = void>
  T *get() const {
    return reinterpret_cast<T *>(static_cast<char *>(buf_.get()) + kGuardBytes);
  }
  size_t bytes() const { return bytes_; }
  // The contents, and whether both guard bands still hold poison.
  std::vector<uint8_t> download(bool *guards_intact) const {
    std::vector<uint8_t> all(bytes_ + 2 * kGuardBytes);
    EXPECT_EQ(cudaMemcpy(all.data(), buf_.get(), all.size(), cudaMemcpyDeviceToHost), cudaSuccess);
    *guards_intact = std::all_of(all.begin(), all.begin() + kGuardBytes, [](uint8_t b) { return b == 0xFF; }) &&
                     std::all_of(all.end() - kGuardBytes, all.end(), [](uint8_t b) { return b == 0xFF; });
    return std::vector<uint8_t>(all.begin() + kGuardBytes, all.end() - kGuardBytes);
  }
  void upload(const void *host) {
    if (bytes_) EXPECT_EQ(cudaMemcpy(get(), host, bytes_, cudaMemcpyHostToDevice), cudaSuccess);
  }

 private:
  size_t bytes_;
  DeviceBuffer buf_;
};

}  // namespace ggemm::testing
