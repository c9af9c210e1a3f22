// What the microbenchmarks under bench/ (tma_, tma_store_, mma_, shrink_probe.cu) share:
// a checked CUDA call, the sm_90 device check that skips elsewhere (exit 77,
// as ctest's SKIP_RETURN_CODE expects), the driver's tensor-map encoder
// through the runtime's entry-point query (so the binary starts, and skips,
// on a machine with no driver), and the load probes' ring of stages (its
// barriers, and the timed drain that frees each stage as it lands).
#pragma once
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "ptx/instr/cluster.h"
#include "ptx/instr/fence.h"
#include "ptx/instr/mbarrier.h"

#define PROBE_CHECK_CUDA(x)                                                                    \
  do {                                                                                         \
    cudaError_t e = (x);                                                                       \
    if (e != cudaSuccess) {                                                                    \
      std::fprintf(stderr, "%s: %s (%s:%d)\n", #x, cudaGetErrorString(e), __FILE__, __LINE__); \
      std::exit(1);                                                                            \
    }                                                                                          \
  } while (0)

// Device 0 if it is an sm_90 GPU (the probes are sm_90a code); otherwise
// prints why `probe` is skipped and exits 77.
inline cudaDeviceProp sm90_device_or_skip(const char *probe) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("%s: no CUDA device: skipped\n", probe);
    std::exit(77);
  }
  cudaDeviceProp prop{};
  PROBE_CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  if (prop.major != 9) {
    std::printf("%s: %s is sm_%d%d; this sm_90a code needs sm_90: skipped\n", probe, prop.name, prop.major,
                prop.minor);
    std::exit(77);
  }
  return prop;
}

// cuTensorMapEncodeTiled from the driver; exits if the driver lacks it.
inline decltype(&cuTensorMapEncodeTiled) tensor_map_encoder(const char *probe) {
  decltype(&cuTensorMapEncodeTiled) encode = nullptr;
  cudaDriverEntryPointQueryResult found{};
  PROBE_CHECK_CUDA(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", reinterpret_cast<void **>(&encode),
                                                    12000, cudaEnableDefault, &found));
  if (found != cudaDriverEntryPointSuccess || !encode) {
    std::fprintf(stderr, "%s: the driver has no cuTensorMapEncodeTiled\n", probe);
    std::exit(1);
  }
  return encode;
}

// The kernels' K-sliced view of a bf16 [rows, k] tensor, 128B-swizzled:
// {64, rows, k / 64}, a row k * 2 bytes apart, a slice 128; boxes
// {64, box_rows, slices} (box_rows rows of `slices` 64-wide slices of K).
inline CUresult encode_k_sliced_bf16(decltype(&cuTensorMapEncodeTiled) encode, CUtensorMap *map, const void *base,
                                     uint64_t rows, uint64_t k, uint32_t box_rows, uint32_t slices) {
  const cuuint64_t dims[3] = {64, rows, k / 64};
  const cuuint64_t strides[2] = {k * 2, 128};
  const cuuint32_t box[3] = {64, box_rows, slices};
  const cuuint32_t elem[3] = {1, 1, 1};
  return encode(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 3, const_cast<void *>(base), dims, strides, box, elem,
                CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
}

// The load probes' ring: `stages` slots, a full and an empty barrier each
// (the producer's expect_tx; the drains' releases: one, or one from each CTA
// of a cluster whose loads multicast into the slot). One thread, before the
// CTA's (or cluster's) barrier that publishes them.
__device__ inline void probe_ring_init(uint64_t *full, uint64_t *empty, int stages, uint32_t empty_arrivals = 1) {
  for (int s = 0; s < stages; ++s) {
    ggemm::ptx::mbarrier_init(&full[s], 1);
    ggemm::ptx::mbarrier_init(&empty[s], empty_arrivals);
  }
  ggemm::ptx::fence_mbarrier_init();
}

// One thread frees each of `iters` stages as it lands, in ring order (in a
// cluster of `cluster` CTAs whose loads multicast into each other's slots:
// on every CTA's empty barrier); returns the nanoseconds from its first wait
// to its last release.
__device__ inline unsigned long long probe_drain_timed(uint64_t *full, uint64_t *empty, int stages, int iters,
                                                       uint32_t cluster = 1) {
  uint64_t start, end;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  for (int i = 0; i < iters; ++i) {
    const int s = i % stages;
    ggemm::ptx::mbarrier_wait_parity(&full[s], (i / stages) & 1);
    if (cluster == 1) {
      ggemm::ptx::mbarrier_arrive(&empty[s]);
    } else {
      for (uint32_t r = 0; r < cluster; ++r)
        ggemm::ptx::mbarrier_arrive_remote(ggemm::ptx::map_shared_to_rank(&empty[s], r));
    }
  }
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(end));
  return end - start;
}

// The probes' timing: `launch()` enqueues a kernel of `ctas` CTAs that
// writes (or atomicMax-es) each CTA's nanoseconds into d_ns[blockIdx.x].
// Three runs; the median over them of each run's median CTA.
template <typename Launch>
double probe_median_cta_ns(Launch launch, int ctas, unsigned long long *d_ns) {
  std::vector<unsigned long long> ns(static_cast<size_t>(ctas));
  std::vector<double> medians;
  for (int rep = 0; rep < 3; ++rep) {
    PROBE_CHECK_CUDA(cudaMemset(d_ns, 0, sizeof(unsigned long long) * size_t(ctas)));
    launch();
    PROBE_CHECK_CUDA(cudaGetLastError());
    PROBE_CHECK_CUDA(cudaDeviceSynchronize());
    PROBE_CHECK_CUDA(cudaMemcpy(ns.data(), d_ns, sizeof(unsigned long long) * size_t(ctas), cudaMemcpyDeviceToHost));
    std::sort(ns.begin(), ns.end());
    medians.push_back(double(ns[size_t(ctas) / 2]));
  }
  std::sort(medians.begin(), medians.end());
  return medians[1];
}
