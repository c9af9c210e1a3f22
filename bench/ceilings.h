// ceilings.h — the two device ceilings of the roofline floor (docs/design.md §5),
// measured by the binary that reports against them.
// Header-only: ggemm_demo's sources are fixed to demo.cpp + gpu_buffers.cpp.
#ifndef GGEMM_BENCH_CEILINGS_H
#define GGEMM_BENCH_CEILINGS_H

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <vector>

#include "cublas_baselines.h"
#include "gpu_buffers.h"
#include "timing.h"

namespace ggemm::bench {

struct Ceilings {
  double dense_flops_per_s = 0;  // cuBLAS bf16 GEMM, fp32 accumulate, 8192^3
  double copy_bytes_per_s = 0;   // device-to-device copy, bytes read + bytes written
  // cudaMemsetAsync of the same buffer: bytes written only. Not part of the
  // floor (docs/design.md §5 uses copy bandwidth); reported as context, because
  // outputs-only calls (LoRA expand) are bounded by it.
  double write_bytes_per_s = 0;

  // The roofline floor of a call: no kernel can beat the slower of doing its
  // arithmetic at the dense rate and moving its bytes at copy bandwidth.
  double floor_seconds(double flops, double bytes) const {
    return std::max(flops / dense_flops_per_s, bytes / copy_bytes_per_s);
  }
};

inline constexpr int kCeilingGemmDim = 8192;
inline constexpr size_t kCeilingCopyBytes = size_t{2} << 30;  // 2 GiB each way

// Median of several runs each. The GEMM runs on random bf16 data (zeros run
// faster on the tensor cores and would inflate the ceiling); both operands
// K-major (the same cuBLAS op pair as the baselines) so it is the layout
// ggemm's weights use.
inline double measure_dense_flops_per_s(const CublasHandle& cublas, cudaStream_t stream) {
  const size_t d = kCeilingGemmDim, elems = d * d;
  std::vector<uint16_t> host(elems);
  fill_random_bf16(host.data(), elems, 0x5eed0001);
  DeviceBuffer a = upload(host.data(), elems * 2);
  fill_random_bf16(host.data(), elems, 0x5eed0002);
  DeviceBuffer b = upload(host.data(), elems * 2);
  DeviceBuffer out(elems * 2);
  const int n = kCeilingGemmDim;
  const double ms = median_ms(stream, nullptr, 3, 10, [&] {
    CUBLAS_CHECK(gemm_rows_times_wt(cublas.get(), b.get(), a.get(), out.get(), n, n, n));
  });
  return 2.0 * static_cast<double>(d) * d * d / (ms * 1e-3);
}

inline Ceilings measure_ceilings(const CublasHandle& cublas, cudaStream_t stream) {
  Ceilings c;
  c.dense_flops_per_s = measure_dense_flops_per_s(cublas, stream);
  {
    DeviceBuffer src(kCeilingCopyBytes), dst(kCeilingCopyBytes);
    CUDA_CHECK(cudaMemsetAsync(src.get(), 0x3c, kCeilingCopyBytes, stream));
    const double ms = median_ms(stream, nullptr, 2, 10, [&] {
      CUDA_CHECK(cudaMemcpyAsync(dst.get(), src.get(), kCeilingCopyBytes, cudaMemcpyDeviceToDevice,
                                 stream));
    });
    c.copy_bytes_per_s = 2.0 * static_cast<double>(kCeilingCopyBytes) / (ms * 1e-3);
    const double fill_ms = median_ms(stream, nullptr, 2, 10, [&] {
      CUDA_CHECK(cudaMemsetAsync(dst.get(), 0x5a, kCeilingCopyBytes, stream));
    });
    c.write_bytes_per_s = static_cast<double>(kCeilingCopyBytes) / (fill_ms * 1e-3);
  }
  return c;
}

}  // namespace ggemm::bench

#endif  // GGEMM_BENCH_CEILINGS_H
