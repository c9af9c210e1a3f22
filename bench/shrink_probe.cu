// shrink_probe: what holds the LoRA shrink's stages back, and which stage
// shape streams its bytes fastest (NOTES v0.11 item 3, v0.12).
//
// The M 4096, R 16 shrink runs 128 CTAs, each streaming its 32 token rows of
// X [4096, 4096] (from DRAM) and its adapter's 48 weight rows of W
// [8 x 48, 4096] (the same rows for the 16 CTAs of an adapter: L2 after the
// first), one X box and one W box of two 64-wide K slices a stage, through a
// ring of 7 stages. v0.11's run of this probe (ring 10) streamed those
// stages, with no compute at all, at 391 ns each cold: the kernel's own
// stage period (the trace: ~395 ns). So the shrink is as fast as its loads
// stream, and the question is what streams them faster. X from DRAM is the
// slow part (8 KB boxes: 358 ns a stage alone, 159 warm).
//
// Each row of the table is one launch shape, timed cold (L2 overwritten
// before the launch, as the benchmark harness does) and warm (the same
// launch once more right before): the stage's boxes (token rows x slices,
// with or without the W box), the ring depth, the CTAs (a K split of 2 gives
// 64-row tiles 128 CTAs), each CTA's own W rows or its adapter's, and the
// X map's L2 promotion. The rows vary one thing at a time from the kernel's
// shape: X box bytes at a fixed ~80 KB in flight, bytes in flight at a fixed
// box, then the kernel's alternatives. One producer thread issues, one
// consumer thread frees each stage as it lands; median CTA.
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

constexpr int kM = 4096, kK = 4096;        // X [kM, kK] bf16: 32 MB
constexpr int kAdapters = 8, kWRows = 48;  // W [kAdapters * kWRows, kK]: 3 MB (R 16: 3R rows)
constexpr int kMaxCtas = 256;
constexpr int kMaxStages = 32;

// One launch shape.
struct Shape {
  const char *name;
  int token_rows;  // X box rows (a CTA's tokens)
  int slices;      // 64-wide K slices per box
  int stages;      // ring depth
  int load_x, load_w;
  int own_w;       // 1: each CTA its own W rows (no sharing), else its adapter's
  int k_split;     // CTAs per token tile, each a K range
  CUtensorMapL2promotion x_promotion;
  int stagger;     // 1: CTA b starts its K walk b * 5 stages in (mod its stages), wrapping
  int clean;       // 1: the cold flush also reads its buffer back, leaving the L2 clean
};

// Kernel arguments derived from a Shape.
struct Args {
  int stages, slices, iters, k_split, ctas_per_adapter, token_rows, own_w, stagger;
  uint32_t x_box, w_box;  // bytes; 0 = not loaded
};

__global__ void __launch_bounds__(64, 1) shrink_probe_kernel(const __grid_constant__ CUtensorMap x_map,
                                                            const __grid_constant__ CUtensorMap w_map, Args a,
                                                            unsigned long long *ns_per_cta) {
  extern __shared__ __align__(1024) uint8_t smem_raw[];
  uint8_t *smem = reinterpret_cast<uint8_t *>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  const uint32_t stage_bytes = a.x_box + a.w_box;  // multiples of 1024 (16 rows x 128 B at least)
  uint64_t *full = reinterpret_cast<uint64_t *>(smem + a.stages * stage_bytes);
  uint64_t *empty = full + a.stages;
  if (threadIdx.x == 0) {
    probe_ring_init(full, empty, a.stages);
    ggemm::ptx::prefetch_tensormap(&x_map);
    ggemm::ptx::prefetch_tensormap(&w_map);
  }
  __syncthreads();
  const int tile = int(blockIdx.x) / a.k_split;
  const int first_slice = int(blockIdx.x) % a.k_split * a.iters * a.slices;
  const int x_row = tile * a.token_rows;
  const int w_row = (a.own_w ? int(blockIdx.x) : int(blockIdx.x) / a.ctas_per_adapter) * kWRows;
  if (threadIdx.x == 0) {
    for (int i = 0; i < a.iters; ++i) {
      const int s = i % a.stages;
      ggemm::ptx::mbarrier_wait_parity(&empty[s], ((i / a.stages) & 1) ^ 1);
      ggemm::ptx::mbarrier_arrive_expect_tx(&full[s], stage_bytes);
      uint8_t *stage = smem + s * stage_bytes;
      // 3-D views {64, rows, K / 64}: coordinates (0, row, first slice).
      // Staggered: CTAs read different K columns at the same moment, so their
      // addresses are not all congruent modulo X's 8 KB row pitch.
      const int step = a.stagger ? (i + int(blockIdx.x) * 5) % a.iters : i;
      const int slice = first_slice + step * a.slices;
      if (a.x_box) ggemm::ptx::tma_load_3d(stage, &x_map, &full[s], 0, x_row, slice);
      if (a.w_box) ggemm::ptx::tma_load_3d(stage + a.x_box, &w_map, &full[s], 0, w_row, slice);
    }
  } else if (threadIdx.x == 32) {
    ns_per_cta[blockIdx.x] = probe_drain_timed(full, empty, a.stages, a.iters);
  }
}

// The read ceiling to hold the TMA rows against: every thread of a full grid
// reads 16 B at a time, consecutive threads consecutive addresses.
__global__ void plain_read_kernel(const uint4 *x, size_t n, unsigned *sink) {
  uint32_t acc = 0;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const uint4 v = __ldg(x + i);
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x12345678u) *sink = acc;  // keeps the loads
}

decltype(&cuTensorMapEncodeTiled) encode_tiled = nullptr;

// A [rows, kK] bf16 tensor in the kernels' K-sliced view {64, rows, K / 64},
// boxes of box_rows rows by `slices` slices.
CUtensorMap sliced_map(const void *base, int rows, int box_rows, int slices, CUtensorMapL2promotion promotion) {
  CUtensorMap map;
  const CUresult r =
      encode_k_sliced_bf16(encode_tiled, &map, base, uint64_t(rows), kK, uint32_t(box_rows), uint32_t(slices), promotion);
  if (r != CUDA_SUCCESS) {
    std::fprintf(stderr, "tensor map refused (%d rows, box %d x %d slices): CUresult %d\n", rows, box_rows, slices,
                 int(r));
    std::exit(1);
  }
  return map;
}

const char *promotion_name(CUtensorMapL2promotion p) {
  switch (p) {
    case CU_TENSOR_MAP_L2_PROMOTION_NONE: return "none";
    case CU_TENSOR_MAP_L2_PROMOTION_L2_64B: return "64B";
    case CU_TENSOR_MAP_L2_PROMOTION_L2_128B: return "128B";
    default: return "256B";
  }
}

}  // namespace

int main() {
  const cudaDeviceProp prop = sm90_device_or_skip("shrink_probe");
  encode_tiled = tensor_map_encoder("shrink_probe");
  void *x = nullptr, *w = nullptr, *flush = nullptr;
  unsigned long long *d_ns = nullptr;
  const size_t x_bytes = size_t(kM) * kK * 2, w_bytes = size_t(kMaxCtas) * kWRows * kK * 2;  // W: room for own rows
  const size_t flush_bytes = 2 * size_t(prop.l2CacheSize);
  PROBE_CHECK_CUDA(cudaMalloc(&x, x_bytes));
  PROBE_CHECK_CUDA(cudaMalloc(&w, w_bytes));
  PROBE_CHECK_CUDA(cudaMalloc(&flush, flush_bytes));
  PROBE_CHECK_CUDA(cudaMemset(x, 0x3c, x_bytes));
  PROBE_CHECK_CUDA(cudaMemset(w, 0x3c, w_bytes));
  PROBE_CHECK_CUDA(cudaMalloc(&d_ns, sizeof(unsigned long long) * kMaxCtas));
  const int smem_max = int(prop.sharedMemPerBlockOptin);
  PROBE_CHECK_CUDA(cudaFuncSetAttribute(shrink_probe_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_max));

  constexpr CUtensorMapL2promotion k256 = CU_TENSOR_MAP_L2_PROMOTION_L2_256B;
  const Shape shapes[] = {
      // The kernel's shape (v0.12: ring 7), and v0.11's ring 10.
      {"kernel: x+w 32x2", 32, 2, 7, 1, 1, 0, 1, k256},
      {"x+w 32x2 ring 10", 32, 2, 10, 1, 1, 0, 1, k256},
      // X alone: box bytes at ~64-80 KB in flight.
      {"x 32x1 ring 20", 32, 1, 20, 1, 0, 0, 1, k256},
      {"x 32x2 ring 10", 32, 2, 10, 1, 0, 0, 1, k256},
      {"x 32x4 ring 5", 32, 4, 5, 1, 0, 0, 1, k256},
      {"x 32x8 ring 2", 32, 8, 2, 1, 0, 0, 1, k256},
      // X alone: bytes in flight at 8 KB boxes.
      {"x 32x2 ring 4", 32, 2, 4, 1, 0, 0, 1, k256},
      {"x 32x2 ring 7", 32, 2, 7, 1, 0, 0, 1, k256},
      {"x 32x2 ring 16", 32, 2, 16, 1, 0, 0, 1, k256},
      {"x 32x2 ring 24", 32, 2, 24, 1, 0, 0, 1, k256},
      // X alone: L2 promotion.
      {"x 32x2 ring 10 prom", 32, 2, 10, 1, 0, 0, 1, CU_TENSOR_MAP_L2_PROMOTION_NONE},
      {"x 32x2 ring 10 prom", 32, 2, 10, 1, 0, 0, 1, CU_TENSOR_MAP_L2_PROMOTION_L2_128B},
      // The kernel's alternatives: 4 slices; 64-row tiles split over K.
      {"x+w 32x4 ring 4", 32, 4, 4, 1, 1, 0, 1, k256},
      {"x+w 64x2 split 2 r 5", 64, 2, 5, 1, 1, 0, 2, k256},
      {"x 64x2 split 2 r 10", 64, 2, 10, 1, 0, 0, 2, k256},
      {"x+w own 32x2 ring 7", 32, 2, 7, 1, 1, 1, 1, k256},
      // Every CTA at a different K column (v0.13): DRAM channel camping?
      {"x 32x2 ring 10 stagger", 32, 2, 10, 1, 0, 0, 1, k256, 1},
      {"kernel stagger", 32, 2, 7, 1, 1, 0, 1, k256, 1},
      {"x 32x4 ring 5 stagger", 32, 4, 5, 1, 0, 0, 1, k256, 1},
      // The flush's dirty lines written back before the launch (v0.13): how
      // much of the cold rate was their write-back?
      {"kernel clean", 32, 2, 7, 1, 1, 0, 1, k256, 0, 1},
      {"x+w 32x2 ring 10 clean", 32, 2, 10, 1, 1, 0, 1, k256, 0, 1},
      {"x 32x2 ring 10 clean", 32, 2, 10, 1, 0, 0, 1, k256, 0, 1},
      {"x 32x4 ring 5 clean", 32, 4, 5, 1, 0, 0, 1, k256, 0, 1},
  };

  std::printf("shrink_probe on %s: X [%d, %d] and W [%d x %d, %d] bf16, K-sliced boxes (rows x 64-wide slices);\n"
              "median CTA: ns per stage, GB/s per SM, TB/s over the CTAs\n",
              prop.name, kM, kK, kAdapters, kWRows, kK);
  std::printf("%-22s %5s %6s %8s %8s %6s | %8s %7s %7s | %8s %7s %7s\n", "shape", "ctas", "stage", "in fl", "x L2",
              "iters", "cold ns", "GB/s/SM", "TB/s", "warm ns", "GB/s/SM", "TB/s");
  for (const Shape &sh : shapes) {
    Args a{};
    a.stages = sh.stages, a.slices = sh.slices, a.k_split = sh.k_split, a.token_rows = sh.token_rows,
    a.own_w = sh.own_w, a.stagger = sh.stagger;
    a.iters = kK / (64 * sh.slices) / sh.k_split;
    const int ctas = kM / sh.token_rows * sh.k_split;
    a.ctas_per_adapter = ctas / kAdapters;
    a.x_box = sh.load_x ? uint32_t(sh.token_rows * 128 * sh.slices) : 0;
    a.w_box = sh.load_w ? uint32_t(kWRows * 128 * sh.slices) : 0;
    const uint32_t stage_bytes = a.x_box + a.w_box;
    const int smem = int(sh.stages * stage_bytes + 16 * sh.stages + 1024);
    if (ctas > kMaxCtas || sh.stages > kMaxStages || smem > smem_max) {
      std::printf("%-22s does not fit (%d CTAs, %d B of shared memory)\n", sh.name, ctas, smem);
      continue;
    }
    const CUtensorMap x_map = sliced_map(x, kM, sh.token_rows, sh.slices, sh.x_promotion);
    const CUtensorMap w_map = sliced_map(w, kMaxCtas * kWRows, kWRows, sh.slices, k256);
    double stage_ns[2];
    for (bool warm : {false, true}) {
      std::vector<double> medians;
      for (int rep = 0; rep < 3; ++rep) {
        // Cold: L2 overwritten first (leaving dirty lines, as the benchmark
        // harness does); warm: the same launch once more before the timed one.
        if (warm) {
          shrink_probe_kernel<<<ctas, 64, smem>>>(x_map, w_map, a, d_ns);
        } else {
          PROBE_CHECK_CUDA(cudaMemset(flush, rep, flush_bytes));
          if (sh.clean)
            plain_read_kernel<<<prop.multiProcessorCount * 2, 1024>>>(static_cast<const uint4 *>(flush),
                                                                        flush_bytes / 16,
                                                                        reinterpret_cast<unsigned *>(d_ns));
        }
        shrink_probe_kernel<<<ctas, 64, smem>>>(x_map, w_map, a, d_ns);
        PROBE_CHECK_CUDA(cudaGetLastError());
        PROBE_CHECK_CUDA(cudaDeviceSynchronize());
        std::vector<unsigned long long> ns(ctas);
        PROBE_CHECK_CUDA(cudaMemcpy(ns.data(), d_ns, sizeof(unsigned long long) * ctas, cudaMemcpyDeviceToHost));
        std::sort(ns.begin(), ns.end());
        medians.push_back(double(ns[ctas / 2]));
      }
      std::sort(medians.begin(), medians.end());
      stage_ns[warm] = medians[1] / a.iters;
    }
    std::printf("%-22s %5d %5uK %7uK %8s %6d | %8.1f %7.1f %7.2f | %8.1f %7.1f %7.2f\n", sh.name, ctas,
                stage_bytes / 1024, stage_bytes * sh.stages / 1024, promotion_name(sh.x_promotion), a.iters,
                stage_ns[0], stage_bytes / stage_ns[0], stage_bytes / stage_ns[0] * ctas / 1000.0, stage_ns[1],
                stage_bytes / stage_ns[1], stage_bytes / stage_ns[1] * ctas / 1000.0);
  }
  {  // The plain-load read ceiling for X, cold (L2 left dirty, then clean), median of 5.
    cudaEvent_t t0, t1;
    PROBE_CHECK_CUDA(cudaEventCreate(&t0));
    PROBE_CHECK_CUDA(cudaEventCreate(&t1));
    for (bool clean : {false, true}) {
      std::vector<float> ms;
      for (int rep = 0; rep < 5; ++rep) {
        PROBE_CHECK_CUDA(cudaMemset(flush, rep, flush_bytes));
        if (clean)
          plain_read_kernel<<<prop.multiProcessorCount * 2, 1024>>>(static_cast<const uint4 *>(flush), flush_bytes / 16,
                                                                      reinterpret_cast<unsigned *>(d_ns));
        PROBE_CHECK_CUDA(cudaEventRecord(t0));
        plain_read_kernel<<<prop.multiProcessorCount * 2, 1024>>>(static_cast<const uint4 *>(x), x_bytes / 16,
                                                                    reinterpret_cast<unsigned *>(d_ns));
        PROBE_CHECK_CUDA(cudaEventRecord(t1));
        PROBE_CHECK_CUDA(cudaEventSynchronize(t1));
        float m = 0;
        PROBE_CHECK_CUDA(cudaEventElapsedTime(&m, t0, t1));
        ms.push_back(m);
      }
      std::sort(ms.begin(), ms.end());
      std::printf("plain loads of X, cold, L2 left %s (%d x 1024 threads, 16 B each): %.1f us, %.2f TB/s\n",
                  clean ? "clean" : "dirty", prop.multiProcessorCount * 2, ms[2] * 1e3,
                  x_bytes / (ms[2] * 1e-3) / 1e12);
    }
    PROBE_CHECK_CUDA(cudaEventDestroy(t0));
    PROBE_CHECK_CUDA(cudaEventDestroy(t1));
  }
  PROBE_CHECK_CUDA(cudaFree(x));
  PROBE_CHECK_CUDA(cudaFree(w));
  PROBE_CHECK_CUDA(cudaFree(flush));
  PROBE_CHECK_CUDA(cudaFree(d_ns));
  return 0;
}
