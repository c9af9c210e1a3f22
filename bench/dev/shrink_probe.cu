// shrink_probe: what holds the LoRA shrinks' stages back, and which stage
// shape streams their bytes fastest.
//
// The M 4096, R 16 shrink runs 128 CTAs, each streaming its 32 token rows of
// X [4096, 4096] (from DRAM) and its adapter's 48 weight rows of W (the same
// rows for the 16 CTAs of an adapter: L2 after the first), one X box and one
// W box of two 64-wide K slices a stage, through a ring of 10 stages. The
// R 64 shrink runs 128 CTAs of 64 tokens x 128 weight rows (its 192 rows are
// two column tiles, 128 + 64, each streaming X), one slice a stage, 8 stages:
// 1.5 MB into each SM, 192 MB for the call, at ~330 ns a 24 KB stage (as
// traced), the warm x+w rate of this probe (~10 TB/s into the SMs).
//
// What the H200 runs of this probe settled: the stages stream,
// with no compute, at the kernels' own stage period; X's cold rate does not
// change with box size, ring depth, L2 promotion or staggered K walks; it was
// held at 2.9 TB/s by the flush's dirty lines, whose write-back the timed
// call paid (3.8 TB/s after a clean flush). The open question: is the R 64
// shrink bound by what each SM takes in (then only fewer bytes per SM help:
// wider or split tiles), or by what the L2 sends out (then W multicast to the
// 2-4 CTAs of a cluster that share it, or X multicast to the pair of column
// tiles that share it, would help)? The "mc" rows load each shared box in c
// parts, one per CTA of a cluster, multicast to all c.
//
// Each row is one launch shape, timed cold (the L2 overwritten and, unless
// "dirty", written back: as the benchmark harness flushes since v0.13) and
// warm (the same launch once more right before). One producer thread issues,
// one thread frees each stage as it lands (in every CTA of its cluster);
// median CTA.
//
//   nvcc -std=c++17 -O3 -gencode arch=compute_90a,code=sm_90a -I. bench/dev/shrink_probe.cu -o shrink_probe && ./shrink_probe
//   (bench/dev/run.sh probe shrink does this)
//
// Exit 77 (skipped) without an sm_90 GPU.
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "bench/dev/probe_util.h"
#include "ptx/instr/cluster.h"
#include "ptx/instr/mbarrier.h"
#include "ptx/instr/tma.h"

namespace {

constexpr int kM = 4096, kK = 4096;  // X [kM, kK] bf16: 32 MB
constexpr int kAdapters = 8;         // 512 token rows each
constexpr int kWRowsAllocated = 4096;  // W [kWRowsAllocated, kK]: room for every shape's rows
constexpr int kMaxCtas = 256;
constexpr int kMaxStages = 32;

enum Multicast { kNone, kMulticastW, kMulticastX };

// One launch shape.
struct Shape {
  const char *name;
  int token_rows;      // a CTA's tokens (X box rows)
  int w_rows;          // a CTA's weight rows (W box rows)
  int adapter_w_rows;  // an adapter's weight rows (3R)
  int col_tiles;       // CTAs per token tile, each w_rows of the adapter's rows
  int slices;          // 64-wide K slices per box
  int stages;          // ring depth
  int load_x, load_w;
  int cluster;         // CTAs per cluster sharing a box by multicast (1: none)
  Multicast multicast; // which box they share: W (along token tiles) or X (along column tiles)
  int dirty;           // 1: the cold flush leaves its dirty lines (the harness before v0.13)
};

// Kernel arguments derived from a Shape.
struct Args {
  int stages, slices, iters, token_rows, w_rows, adapter_w_rows, col_tiles, cluster, multicast;
  uint32_t x_box, w_box;  // bytes a stage; 0 = not loaded
};

__global__ void __launch_bounds__(64, 1) shrink_probe_kernel(const __grid_constant__ CUtensorMap x_map,
                                                            const __grid_constant__ CUtensorMap x_part_map,
                                                            const __grid_constant__ CUtensorMap w_map,
                                                            const __grid_constant__ CUtensorMap w_part_map, Args a,
                                                            unsigned long long *ns_per_cta) {
  extern __shared__ __align__(1024) uint8_t smem_raw[];
  uint8_t *smem = reinterpret_cast<uint8_t *>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  const uint32_t stage_bytes = a.x_box + a.w_box;  // multiples of 1024 (8 rows x 128 B at least)
  uint64_t *full = reinterpret_cast<uint64_t *>(smem + a.stages * stage_bytes);
  uint64_t *empty = full + a.stages;
  const int c = a.cluster;
  if (threadIdx.x == 0) {
    probe_ring_init(full, empty, a.stages, uint32_t(c));
    ggemm::ptx::prefetch_tensormap(a.multicast == kMulticastX ? &x_part_map : &x_map);
    ggemm::ptx::prefetch_tensormap(a.multicast == kMulticastW ? &w_part_map : &w_map);
  }
  if (c > 1) {
    ggemm::ptx::cluster_sync();  // the peers' barriers are initialised before any multicast reaches them
  } else {
    __syncthreads();
  }
  // Which token tile and column tile: the c CTAs of a cluster (consecutive
  // blocks) hold consecutive token tiles of one column tile when they share
  // W, the column tiles of one token tile when they share X.
  const int rank = c > 1 ? int(ggemm::ptx::cluster_ctarank()) : 0;
  int token_tile, col;
  if (a.multicast == kMulticastX) {
    token_tile = int(blockIdx.x) / a.col_tiles, col = int(blockIdx.x) % a.col_tiles;
  } else {
    const int per_group = a.col_tiles * c, group = int(blockIdx.x) / per_group, rem = int(blockIdx.x) % per_group;
    col = rem / c, token_tile = group * c + rem % c;
  }
  const int x_row = token_tile * a.token_rows;
  const int adapter = x_row / (kM / kAdapters);
  const int w_row = adapter * a.adapter_w_rows + col * a.w_rows;
  const uint16_t mask = uint16_t((1u << c) - 1);
  if (threadIdx.x == 0) {
    for (int i = 0; i < a.iters; ++i) {
      const int s = i % a.stages;
      ggemm::ptx::mbarrier_wait_parity(&empty[s], ((i / a.stages) & 1) ^ 1);
      ggemm::ptx::mbarrier_arrive_expect_tx(&full[s], stage_bytes);  // every part lands in every CTA
      uint8_t *stage = smem + s * stage_bytes;
      // 3-D views {64, rows, K / 64}: coordinates (0, row, first slice).
      const int slice = i * a.slices;
      if (a.x_box) {
        if (a.multicast == kMulticastX)
          ggemm::ptx::tma_load_3d_multicast(stage + rank * (a.x_box / c), &x_part_map, &full[s], 0,
                                            x_row + rank * (a.token_rows / c), slice, mask);
        else
          ggemm::ptx::tma_load_3d(stage, &x_map, &full[s], 0, x_row, slice);
      }
      if (a.w_box) {
        if (a.multicast == kMulticastW)
          ggemm::ptx::tma_load_3d_multicast(stage + a.x_box + rank * (a.w_box / c), &w_part_map, &full[s], 0,
                                            w_row + rank * (a.w_rows / c), slice, mask);
        else
          ggemm::ptx::tma_load_3d(stage + a.x_box, &w_map, &full[s], 0, w_row, slice);
      }
    }
  } else if (threadIdx.x == 32) {
    ns_per_cta[blockIdx.x] = probe_drain_timed(full, empty, a.stages, a.iters, uint32_t(c));
  }
  if (c > 1) {
    // No CTA leaves while a peer may still multicast into it or arrive on
    // its barriers.
    __syncwarp();
    ggemm::ptx::cluster_sync();
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

// The cold flush: L2 overwritten (a different value each `rep`) and, unless
// `dirty`, read back so that its dirty lines are written back before the
// timed launch (as the benchmark harness flushes since v0.13).
void cold_flush(void *flush, size_t flush_bytes, int rep, bool dirty, int sms, unsigned *sink) {
  PROBE_CHECK_CUDA(cudaMemset(flush, rep, flush_bytes));
  if (!dirty) plain_read_kernel<<<sms * 2, 1024>>>(static_cast<const uint4 *>(flush), flush_bytes / 16, sink);
}

decltype(&cuTensorMapEncodeTiled) encode_tiled = nullptr;

// A [rows, kK] bf16 tensor in the kernels' K-sliced view {64, rows, K / 64},
// boxes of box_rows rows by `slices` slices.
CUtensorMap sliced_map(const void *base, int rows, int box_rows, int slices) {
  CUtensorMap map;
  const CUresult r =
      encode_k_sliced_bf16(encode_tiled, &map, base, uint64_t(rows), kK, uint32_t(box_rows), uint32_t(slices));
  if (r != CUDA_SUCCESS) {
    std::fprintf(stderr, "tensor map refused (%d rows, box %d x %d slices): CUresult %d\n", rows, box_rows, slices,
                 int(r));
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
  const size_t x_bytes = size_t(kM) * kK * 2, w_bytes = size_t(kWRowsAllocated) * kK * 2;
  const size_t flush_bytes = 2 * size_t(prop.l2CacheSize);
  PROBE_CHECK_CUDA(cudaMalloc(&x, x_bytes));
  PROBE_CHECK_CUDA(cudaMalloc(&w, w_bytes));
  PROBE_CHECK_CUDA(cudaMalloc(&flush, flush_bytes));
  PROBE_CHECK_CUDA(cudaMemset(x, 0x3c, x_bytes));
  PROBE_CHECK_CUDA(cudaMemset(w, 0x3c, w_bytes));
  PROBE_CHECK_CUDA(cudaMalloc(&d_ns, sizeof(unsigned long long) * kMaxCtas));
  const int smem_max = int(prop.sharedMemPerBlockOptin);
  PROBE_CHECK_CUDA(cudaFuncSetAttribute(shrink_probe_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_max));

  // name, tokens, W rows, adapter's W rows, column tiles, slices, ring, x, w, cluster, multicast, dirty
  const Shape shapes[] = {
      // R 16: the kernel's stage (v0.13: 10 stages), with the old flush, X alone.
      {"r16 kernel", 32, 48, 48, 1, 2, 10, 1, 1, 1, kNone, 0},
      {"r16 kernel dirty", 32, 48, 48, 1, 2, 10, 1, 1, 1, kNone, 1},
      {"r16 x alone", 32, 48, 48, 1, 2, 10, 1, 0, 1, kNone, 0},
      {"r16 x alone 32x4", 32, 48, 48, 1, 4, 5, 1, 0, 1, kNone, 0},
      // R 16: W multicast to the 2 / 4 CTAs (token tiles) that share it.
      {"r16 w mc 2", 32, 48, 48, 1, 2, 10, 1, 1, 2, kMulticastW, 0},
      {"r16 w mc 4", 32, 48, 48, 1, 2, 10, 1, 1, 4, kMulticastW, 0},
      // R 64: the kernel's stage (64 tokens x 128 of 192 rows, 2 column tiles).
      {"r64 kernel", 64, 128, 192, 2, 1, 8, 1, 1, 1, kNone, 0},
      {"r64 w alone", 64, 128, 192, 2, 1, 8, 0, 1, 1, kNone, 0},
      {"r64 x alone", 64, 128, 192, 2, 1, 8, 1, 0, 1, kNone, 0},
      {"r64 2 slices", 64, 128, 192, 2, 2, 4, 1, 1, 1, kNone, 0},
      // R 64: W multicast along token tiles; X multicast to its column pair.
      {"r64 w mc 2", 64, 128, 192, 2, 1, 8, 1, 1, 2, kMulticastW, 0},
      {"r64 w mc 4", 64, 128, 192, 2, 1, 8, 1, 1, 4, kMulticastW, 0},
      {"r64 x mc 2 (pair)", 64, 128, 192, 2, 1, 8, 1, 1, 2, kMulticastX, 0},
  };

  std::printf("shrink_probe on %s: X [%d, %d] bf16 and each adapter's W rows, K-sliced boxes (rows x 64-wide slices);\n"
              "median CTA: ns per stage, GB/s into each SM, TB/s into all; cold = L2 flushed (and written back\n"
              "unless dirty), warm = the same launch just before\n",
              prop.name, kM, kK);
  std::printf("%-18s %5s %3s %6s %8s %6s | %8s %7s %7s | %8s %7s %7s\n", "shape", "ctas", "mc", "stage", "in fl",
              "iters", "cold ns", "GB/s/SM", "TB/s", "warm ns", "GB/s/SM", "TB/s");
  for (const Shape &sh : shapes) {
    Args a{};
    a.stages = sh.stages, a.slices = sh.slices, a.token_rows = sh.token_rows, a.w_rows = sh.w_rows,
    a.adapter_w_rows = sh.adapter_w_rows, a.col_tiles = sh.col_tiles, a.cluster = sh.cluster,
    a.multicast = sh.multicast;
    a.iters = kK / (64 * sh.slices);
    const int ctas = kM / sh.token_rows * sh.col_tiles;
    a.x_box = sh.load_x ? uint32_t(sh.token_rows * 128 * sh.slices) : 0;
    a.w_box = sh.load_w ? uint32_t(sh.w_rows * 128 * sh.slices) : 0;
    const uint32_t stage_bytes = a.x_box + a.w_box;
    const int smem = int(sh.stages * stage_bytes + 16 * sh.stages + 1024);
    if (ctas > kMaxCtas || sh.stages > kMaxStages || smem > smem_max || ctas % sh.cluster != 0) {
      std::printf("%-18s does not fit (%d CTAs, %d B of shared memory)\n", sh.name, ctas, smem);
      continue;
    }
    // The shared box's parts: 1 / cluster of its rows each (at 1024-byte
    // multiples in the stage for every shape above).
    const int x_part_rows = sh.multicast == kMulticastX ? sh.token_rows / sh.cluster : sh.token_rows;
    const int w_part_rows = sh.multicast == kMulticastW ? sh.w_rows / sh.cluster : sh.w_rows;
    const CUtensorMap x_map = sliced_map(x, kM, sh.token_rows, sh.slices);
    const CUtensorMap x_part_map = sliced_map(x, kM, x_part_rows, sh.slices);
    const CUtensorMap w_map = sliced_map(w, kWRowsAllocated, sh.w_rows, sh.slices);
    const CUtensorMap w_part_map = sliced_map(w, kWRowsAllocated, w_part_rows, sh.slices);
    cudaLaunchAttribute cluster_attr{};
    cluster_attr.id = cudaLaunchAttributeClusterDimension;
    cluster_attr.val.clusterDim.x = unsigned(sh.cluster), cluster_attr.val.clusterDim.y = 1;
    cluster_attr.val.clusterDim.z = 1;
    cudaLaunchConfig_t cfg{};
    cfg.gridDim = dim3(unsigned(ctas)), cfg.blockDim = dim3(64), cfg.dynamicSmemBytes = size_t(smem);
    cfg.attrs = &cluster_attr, cfg.numAttrs = sh.cluster > 1 ? 1 : 0;
    auto launch = [&] {
      PROBE_CHECK_CUDA(cudaLaunchKernelEx(&cfg, shrink_probe_kernel, x_map, x_part_map, w_map, w_part_map, a, d_ns));
    };
    double stage_ns[2];
    for (bool warm : {false, true}) {
      std::vector<double> medians;
      for (int rep = 0; rep < 3; ++rep) {
        if (warm) {
          launch();
        } else {
          cold_flush(flush, flush_bytes, rep, sh.dirty, prop.multiProcessorCount, reinterpret_cast<unsigned *>(d_ns));
        }
        launch();
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
    std::printf("%-18s %5d %3d %5uK %7uK %6d | %8.1f %7.1f %7.2f | %8.1f %7.1f %7.2f\n", sh.name, ctas,
                sh.multicast == kNone ? 1 : sh.cluster, stage_bytes / 1024, stage_bytes * sh.stages / 1024, a.iters,
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
        cold_flush(flush, flush_bytes, rep, !clean, prop.multiProcessorCount, reinterpret_cast<unsigned *>(d_ns));
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
