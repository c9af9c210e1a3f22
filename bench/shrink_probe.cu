// shrink_probe: what holds the LoRA shrink's stages back (NOTES v0.11, Next
// item 3). The M 4096, R 16 shrink runs 128 CTAs, each streaming its 32
// token rows of X [4096, 4096] (from DRAM) and its adapter's 48 weight rows
// of W [8 x 48, 4096] (the same rows for the 16 CTAs of an adapter: L2 after
// the first) through a ring of 10 stages of two 64-wide K slices per box,
// one X box and one W box a stage. ncu saw neither DRAM (45%) nor L2 (51%)
// busy and ~40 GB/s per SM, where bench/tma_probe.cu's one-box stages from
// L2 ran at 91 GB/s per SM. This probe streams exactly those stages with no
// compute, and takes them apart:
//   x        the X box alone (each CTA its own rows: DRAM)
//   w        the W box alone (16 CTAs per adapter's rows: L2 after the first)
//   w own    the W box alone, each CTA its own rows (DRAM, no sharing)
//   x+w      both boxes, one stage (the shrink's pattern)
//   x+w own  both, each CTA its own W rows
// each cold (L2 overwritten before the launch, as the benchmark harness
// does) and warm (the same launch again right after). One CTA per SM of the
// launch, a producer thread issuing, a consumer thread freeing each stage as
// it lands; median CTA.
//
//   nvcc -std=c++17 -O3 -arch=sm_90a -I. bench/shrink_probe.cu -o shrink_probe && ./shrink_probe
//   (scripts/h200_probe.sh shrink does this on the lent H200)
//
// Exit 77 (skipped) without an sm_90 GPU.
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "bench/probe_util.h"
#include "ptx/mbarrier.h"
#include "ptx/tma.h"

namespace {

constexpr int kM = 4096, kK = 4096;            // X [kM, kK] bf16: 32 MB
constexpr int kAdapters = 8, kWRows = 48;      // W [kAdapters * kWRows, kK]: 3 MB
constexpr int kTokenRows = 32, kSlices = 2;    // the shrink's box: 32 or 48 rows x 2 slices of 64
constexpr int kCtas = kM / kTokenRows;         // 128
constexpr int kCtasPerAdapter = kCtas / kAdapters;
constexpr int kStages = 10;
constexpr int kIters = kK / (64 * kSlices);    // stages per CTA: K walked once
constexpr uint32_t kXBox = kTokenRows * 128 * kSlices, kWBox = kWRows * 128 * kSlices;

struct Args {
  int load_x, load_w;
  int own_w;  // 1: CTA b reads W rows of "adapter" b (a [kCtas * 48, kK] tensor), not b / 16's
};

__global__ void __launch_bounds__(64, 1) shrink_probe_kernel(const __grid_constant__ CUtensorMap x_map,
                                                            const __grid_constant__ CUtensorMap w_map, Args a,
                                                            unsigned long long *ns_per_cta) {
  extern __shared__ __align__(1024) uint8_t smem_raw[];
  uint8_t *smem = reinterpret_cast<uint8_t *>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  constexpr uint32_t kStageBytes = kXBox + kWBox;  // both slots, whichever are loaded
  uint64_t *full = reinterpret_cast<uint64_t *>(smem + kStages * kStageBytes);
  uint64_t *empty = full + kStages;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      ggemm::ptx::mbarrier_init(&full[s], 1);
      ggemm::ptx::mbarrier_init(&empty[s], 1);
    }
    ggemm::ptx::fence_mbarrier_init();
    ggemm::ptx::prefetch_tensormap(&x_map);
    ggemm::ptx::prefetch_tensormap(&w_map);
  }
  __syncthreads();
  const uint32_t bytes = (a.load_x ? kXBox : 0) + (a.load_w ? kWBox : 0);
  const int x_row = int(blockIdx.x) * kTokenRows;
  const int w_row = (a.own_w ? int(blockIdx.x) : int(blockIdx.x) / kCtasPerAdapter) * kWRows;
  if (threadIdx.x == 0) {
    for (int i = 0; i < kIters; ++i) {
      const int s = i % kStages;
      ggemm::ptx::mbarrier_wait_parity(&empty[s], ((i / kStages) & 1) ^ 1);
      ggemm::ptx::mbarrier_arrive_expect_tx(&full[s], bytes);
      uint8_t *stage = smem + s * kStageBytes;
      // 3-D views {64, rows, K / 64}: coordinates (0, row, first slice).
      if (a.load_x) ggemm::ptx::tma_load_3d(stage, &x_map, &full[s], 0, x_row, i * kSlices);
      if (a.load_w) ggemm::ptx::tma_load_3d(stage + kXBox, &w_map, &full[s], 0, w_row, i * kSlices);
    }
  } else if (threadIdx.x == 32) {
    uint64_t start, end;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    for (int i = 0; i < kIters; ++i) {
      const int s = i % kStages;
      ggemm::ptx::mbarrier_wait_parity(&full[s], (i / kStages) & 1);
      ggemm::ptx::mbarrier_arrive(&empty[s]);
    }
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(end));
    ns_per_cta[blockIdx.x] = end - start;
  }
}

decltype(&cuTensorMapEncodeTiled) encode_tiled = nullptr;

// A [rows, kK] tensor in the kernels' K-sliced view, boxes of box_rows rows
// by kSlices slices.
CUtensorMap sliced_map(const void *base, int rows, int box_rows) {
  CUtensorMap map;
  const CUresult r = encode_k_sliced_bf16(encode_tiled, &map, base, uint64_t(rows), kK, uint32_t(box_rows), kSlices);
  if (r != CUDA_SUCCESS) {
    std::fprintf(stderr, "tensor map refused: CUresult %d\n", int(r));
    std::exit(1);
  }
  return map;
}

}  // namespace

int main() {
  const cudaDeviceProp prop = sm90_device_or_skip("shrink_probe");
  encode_tiled = tensor_map_encoder("shrink_probe");
  void *x = nullptr, *w = nullptr, *flush = nullptr;
  unsigned long long *d_ns = nullptr;
  const size_t x_bytes = size_t(kM) * kK * 2, w_bytes = size_t(kCtas) * kWRows * kK * 2;  // W: room for own rows
  const size_t flush_bytes = 2 * size_t(prop.l2CacheSize);
  PROBE_CHECK_CUDA(cudaMalloc(&x, x_bytes));
  PROBE_CHECK_CUDA(cudaMalloc(&w, w_bytes));
  PROBE_CHECK_CUDA(cudaMalloc(&flush, flush_bytes));
  PROBE_CHECK_CUDA(cudaMemset(x, 0x3c, x_bytes));
  PROBE_CHECK_CUDA(cudaMemset(w, 0x3c, w_bytes));
  PROBE_CHECK_CUDA(cudaMalloc(&d_ns, sizeof(unsigned long long) * kCtas));
  const CUtensorMap x_map = sliced_map(x, kM, kTokenRows);
  const CUtensorMap w_map = sliced_map(w, kCtas * kWRows, kWRows);
  const int smem = int(kStages * (kXBox + kWBox) + 16 * kStages + 2048);
  PROBE_CHECK_CUDA(cudaFuncSetAttribute(shrink_probe_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));

  std::printf("shrink_probe on %s: %d CTAs, %d stages of K 128 each (X box %u B, W box %u B), ring %d;\n"
              "median CTA: ns per stage, GB/s per SM, TB/s over the CTAs\n",
              prop.name, kCtas, kIters, kXBox, kWBox, kStages);
  std::printf("boxes     L2     |  ns/stage  GB/s/SM  TB/s all\n");
  struct Case {
    const char *name;
    Args args;
  };
  const Case cases[] = {{"x", {1, 0, 0}}, {"w", {0, 1, 0}}, {"w own", {0, 1, 1}}, {"x+w", {1, 1, 0}},
                        {"x+w own", {1, 1, 1}}};
  for (const Case &c : cases)
    for (bool warm : {false, true}) {
      std::vector<double> medians;
      for (int rep = 0; rep < 3; ++rep) {
        // Cold: L2 overwritten first (leaving dirty lines, as the benchmark
        // harness does); warm: the same launch once more before the timed one.
        if (warm) {
          shrink_probe_kernel<<<kCtas, 64, smem>>>(x_map, w_map, c.args, d_ns);
        } else {
          PROBE_CHECK_CUDA(cudaMemset(flush, rep, flush_bytes));
        }
        shrink_probe_kernel<<<kCtas, 64, smem>>>(x_map, w_map, c.args, d_ns);
        PROBE_CHECK_CUDA(cudaGetLastError());
        PROBE_CHECK_CUDA(cudaDeviceSynchronize());
        std::vector<unsigned long long> ns(kCtas);
        PROBE_CHECK_CUDA(cudaMemcpy(ns.data(), d_ns, sizeof(unsigned long long) * kCtas, cudaMemcpyDeviceToHost));
        std::sort(ns.begin(), ns.end());
        medians.push_back(double(ns[kCtas / 2]));
      }
      std::sort(medians.begin(), medians.end());
      const double median_ns = medians[1];
      const double bytes = double((c.args.load_x ? kXBox : 0) + (c.args.load_w ? kWBox : 0)) * kIters;
      std::printf("%-8s  %-5s  | %8.1f  %7.1f  %8.2f\n", c.name, warm ? "warm" : "cold", median_ns / kIters,
                  bytes / median_ns, bytes / median_ns * kCtas / 1000.0);
    }
  PROBE_CHECK_CUDA(cudaFree(x));
  PROBE_CHECK_CUDA(cudaFree(w));
  PROBE_CHECK_CUDA(cudaFree(flush));
  PROBE_CHECK_CUDA(cudaFree(d_ns));
  return 0;
}
