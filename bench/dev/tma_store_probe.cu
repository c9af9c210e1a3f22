// tma_store_probe: how fast TMA stores from shared memory write a LoRA
// expand's outputs, by box shape and by how many boxes a thread keeps in
// flight — the question the expand's store path leaves open (on the H200
// the M 4096 expand with every adapter -1, nothing but its epilogue's
// stores, takes 16.6 us where a kernel of plain 16-byte stores writes the
// same 48 MiB in 14.0).
//
// The output is the expand's: bf16 [4096, 6144] (q 4096 + k 1024 + v 1024
// columns, one matrix here), 48 MiB, past what the L2 keeps dirty. One CTA
// per SM walks the expand's tiles in the kernel's order (groups of 512
// rows = two 256-row blocks, the row block fastest, then the 48 column
// blocks of 128) from blockIdx.x by gridDim.x, and stores each tile from
// shared memory as the epilogue does: per 64-column half (a consumer
// warpgroup's), boxes of {64 columns, R rows}, 128B-swizzled, by one
// thread per half, each keeping at most B bulk groups in flight
// (cp.async.bulk.wait_group.read B - 1 before reusing a buffer). The
// shared memory is never written: what is stored is whatever it holds,
// which costs the TMA the same. Then both halves as one box of 256-byte
// rows from one thread (the kinds: Box, below). Beside them, the same bytes written by
// plain 16-byte stores (the harness's write row: 4 CTAs of 384 threads an
// SM; and one CTA of 256 threads an SM, the persistent kernel's shape).
//
// Each configuration: the median over 30 launches back to back (the L2's
// dirty lines from the launch before are written back during the next, as
// in any stream of store-bound calls), less the median of an empty kernel
// timed the same way; GB/s is the 48 MiB over that in-kernel time.
//
//   nvcc -std=c++17 -O3 -arch=sm_90a -I. bench/dev/tma_store_probe.cu -o p && ./p
//   (bench/dev/run.sh probe tma_store does this)
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "bench/dev/probe_util.h"
#include "ptx/instr/fence.h"
#include "ptx/instr/tma.h"

namespace {

constexpr int kRows = 4096, kCols = 6144;  // the Llama-3-8B expand at M 4096
constexpr int kTileRows = 256, kTileCols = 128, kGroupRows = 512;
constexpr int kRowBlocksPerGroup = kGroupRows / kTileRows;
constexpr int kColBlocks = kCols / kTileCols;
constexpr int kTiles = (kRows / kTileRows) * kColBlocks;
constexpr int kHalfCols = 64;  // one consumer warpgroup's columns: 128 bytes, one swizzle row
constexpr size_t kBytes = size_t(kRows) * kCols * 2;

// How a chunk of a tile goes out: as the kernel stores it (each 64-column
// half its own 2-D box {64, R}, from its own thread), or as one box of both
// halves from thread 0: 2-D {128, R} without swizzle (TMA's 128B swizzle
// stops at 128-byte rows), 3-D {64, 2, R} over the view {64 columns, halves,
// rows} (128B swizzle; a token's halves side by side), or 3-D {64, R, 2}
// over {64 columns, rows, halves} (the halves outermost, each a [R][128 B]
// block: the bytes two 2-D boxes write, in their order).
enum class Box { kHalves, kRows2d, kRowPairs3d, kHalvesOuter3d };

struct Args {
  int box_rows;  // R
  int buffers;   // B: boxes (bulk groups) in flight per issuing thread, 1..4
  Box box;
};

__device__ void tma_store_3d(const CUtensorMap *map, const uint8_t *src, int c0, int c1, int c2) {
  asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [%0, {%2, %3, %4}], [%1];" ::"l"(
                   reinterpret_cast<uint64_t>(map)),
               "r"(ggemm::ptx::smem_addr(src)), "r"(c0), "r"(c1), "r"(c2)
               : "memory");
}

// The kernel's tile order (ptx/blocks/tile_scheduler.h, one band per group here).
__device__ void tile_origin(int t, int *row0, int *col0) {
  const int per_group = kRowBlocksPerGroup * kColBlocks;
  const int group = t / per_group, local = t % per_group;
  *row0 = group * kGroupRows + (local % kRowBlocksPerGroup) * kTileRows;
  *col0 = (local / kRowBlocksPerGroup) * kTileCols;
}

template <int B>
__device__ void wait_read() {
  ggemm::ptx::tma_store_wait_group_read<B>();
}

__global__ void __launch_bounds__(64, 1) tma_store_kernel(const __grid_constant__ CUtensorMap map, Args a) {
  extern __shared__ __align__(1024) uint8_t smem_raw[];
  uint8_t *smem = reinterpret_cast<uint8_t *>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  // Thread 0 stores the first 64-column half of each tile, thread 32 the
  // second (two warps, as the two consumer warpgroups' issuing threads).
  const bool both_halves = a.box != Box::kHalves;
  if (threadIdx.x % 32 != 0 || (both_halves && threadIdx.x != 0)) return;
  const int half = threadIdx.x / 32;
  if (half == 0) ggemm::ptx::prefetch_tensormap(&map);
  const uint32_t box_bytes = uint32_t(a.box_rows) * 128 * (both_halves ? 2 : 1);
  uint8_t *buffers = smem + half * a.buffers * box_bytes;
  ggemm::ptx::fence_proxy_async_shared_cta();
  int n = 0;
  for (int t = blockIdx.x; t < kTiles; t += gridDim.x) {
    int row0, col0;
    tile_origin(t, &row0, &col0);
    for (int r = 0; r < kTileRows; r += a.box_rows, ++n) {
      // Before buffer n % B is reused, the group that last read it is done.
      switch (a.buffers) {
        case 1: wait_read<0>(); break;
        case 2: wait_read<1>(); break;
        case 3: wait_read<2>(); break;
        default: wait_read<3>(); break;
      }
      const uint8_t *src = buffers + (n % a.buffers) * box_bytes;
      switch (a.box) {
        case Box::kHalves: ggemm::ptx::tma_store_2d(&map, src, col0 + half * kHalfCols, row0 + r); break;
        case Box::kRows2d: ggemm::ptx::tma_store_2d(&map, src, col0, row0 + r); break;
        case Box::kRowPairs3d: tma_store_3d(&map, src, 0, col0 / kHalfCols, row0 + r); break;
        case Box::kHalvesOuter3d: tma_store_3d(&map, src, 0, row0 + r, col0 / kHalfCols); break;
      }
      ggemm::ptx::tma_store_commit_group();
    }
  }
  asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
}

// Plain 16-byte stores over the whole output, grid-stride.
__global__ void plain_store_kernel(uint4 *out, size_t vectors) {
  const uint4 v = make_uint4(threadIdx.x, blockIdx.x, 0x3c003c00u, 0x3c003c00u);
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < vectors; i += size_t(gridDim.x) * blockDim.x)
    out[i] = v;
}

__global__ void empty_kernel() {}

template <typename Launch>
double median_us(Launch launch) {
  cudaEvent_t e0, e1;
  PROBE_CHECK_CUDA(cudaEventCreate(&e0));
  PROBE_CHECK_CUDA(cudaEventCreate(&e1));
  for (int i = 0; i < 3; ++i) launch();  // warm-up
  std::vector<float> ms;
  for (int i = 0; i < 30; ++i) {
    PROBE_CHECK_CUDA(cudaEventRecord(e0));
    launch();
    PROBE_CHECK_CUDA(cudaEventRecord(e1));
    PROBE_CHECK_CUDA(cudaEventSynchronize(e1));
    float m = 0;
    PROBE_CHECK_CUDA(cudaEventElapsedTime(&m, e0, e1));
    ms.push_back(m);
  }
  PROBE_CHECK_CUDA(cudaGetLastError());
  PROBE_CHECK_CUDA(cudaEventDestroy(e0));
  PROBE_CHECK_CUDA(cudaEventDestroy(e1));
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2] * 1000.0;
}

void report(const char *what, double us, double empty_us) {
  const double in_kernel = us - empty_us;
  std::printf("%-60s | %7.2f  %7.2f  %7.0f\n", what, us, in_kernel, double(kBytes) / (in_kernel * 1e3));
}

}  // namespace

int main() {
  const cudaDeviceProp prop = sm90_device_or_skip("tma_store_probe");
  const auto encode = tensor_map_encoder("tma_store_probe");
  void *out = nullptr;
  PROBE_CHECK_CUDA(cudaMalloc(&out, kBytes));
  const int sms = prop.multiProcessorCount;
  std::printf("tma_store_probe on %s (%d SMs): %zu MiB of bf16 [%d, %d]; median of 30 launches\n", prop.name, sms,
              kBytes >> 20, kRows, kCols);
  std::printf("%-60s | %7s  %7s  %7s\n", "writer", "us", "less empty", "GB/s");

  const double empty_us = median_us([] { empty_kernel<<<1, 32>>>(); });
  std::printf("%-60s | %7.2f\n", "empty kernel", empty_us);

  const size_t vectors = kBytes / 16;
  char label[96];
  for (int threads : {384, 256})
    for (int ctas_per_sm : {4, 1}) {
      if (threads == 256 && ctas_per_sm == 4) continue;
      const int grid = sms * ctas_per_sm;
      const double us = median_us([&] { plain_store_kernel<<<grid, threads>>>(static_cast<uint4 *>(out), vectors); });
      std::snprintf(label, sizeof label, "plain 16 B stores, %d CTA(s) x %d an SM", ctas_per_sm, threads);
      report(label, us, empty_us);
    }

  for (int box_rows : {64, 128, 256}) {
    CUtensorMap map;
    const cuuint64_t dims[2] = {kCols, kRows};
    const cuuint64_t strides[1] = {kCols * 2};
    const cuuint32_t box[2] = {kHalfCols, cuuint32_t(box_rows)};
    const cuuint32_t elem[2] = {1, 1};
    const CUresult r = encode(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, out, dims, strides, box, elem,
                              CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_NONE,
                              CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS) {
      std::printf("  (tensor map R %d refused: CUresult %d)\n", box_rows, int(r));
      continue;
    }
    for (int buffers : {1, 2, 4}) {
      const int smem = 2 * buffers * box_rows * 128 + 1024;
      if (smem > int(prop.sharedMemPerBlockOptin)) continue;
      PROBE_CHECK_CUDA(cudaFuncSetAttribute(tma_store_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
      const Args a{box_rows, buffers, Box::kHalves};
      const double us = median_us([&] { tma_store_kernel<<<sms, 64, smem>>>(map, a); });
      std::snprintf(label, sizeof label, "TMA boxes of %3d rows x 128 B, %d in flight x 2", box_rows, buffers);
      report(label, us, empty_us);
    }
  }
  // Both halves in one box, 256 B a row, from one thread (Box).
  for (Box kind : {Box::kRows2d, Box::kRowPairs3d, Box::kHalvesOuter3d})
    for (int box_rows : {64, 128}) {
      CUtensorMap map;
      CUresult r;
      const cuuint32_t elem[3] = {1, 1, 1};
      if (kind == Box::kRows2d) {
        const cuuint64_t d[2] = {kCols, kRows};
        const cuuint64_t st[1] = {kCols * 2};
        const cuuint32_t box[2] = {2 * kHalfCols, cuuint32_t(box_rows)};
        r = encode(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, out, d, st, box, elem, CU_TENSOR_MAP_INTERLEAVE_NONE,
                   CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
      } else if (kind == Box::kHalvesOuter3d) {
        const cuuint64_t d[3] = {kHalfCols, kRows, kCols / kHalfCols};
        const cuuint64_t st[2] = {kCols * 2, kHalfCols * 2};
        const cuuint32_t box[3] = {kHalfCols, cuuint32_t(box_rows), 2};
        r = encode(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 3, out, d, st, box, elem, CU_TENSOR_MAP_INTERLEAVE_NONE,
                   CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
      } else {
        const cuuint64_t d[3] = {kHalfCols, kCols / kHalfCols, kRows};
        const cuuint64_t st[2] = {kHalfCols * 2, kCols * 2};
        const cuuint32_t box[3] = {kHalfCols, 2, cuuint32_t(box_rows)};
        r = encode(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 3, out, d, st, box, elem, CU_TENSOR_MAP_INTERLEAVE_NONE,
                   CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
      }
      if (r != CUDA_SUCCESS) {
        std::printf("  (wide tensor map %d, R %d refused: CUresult %d)\n", int(kind), box_rows, int(r));
        continue;
      }
      for (int buffers : {2, 4}) {
        const int smem = 2 * buffers * box_rows * 128 + 1024;
        PROBE_CHECK_CUDA(cudaFuncSetAttribute(tma_store_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
        const Args a{box_rows, buffers, kind};
        const double us = median_us([&] { tma_store_kernel<<<sms, 64, smem>>>(map, a); });
        std::snprintf(label, sizeof label, "TMA %s boxes of %3d rows x 256 B, %d in flight",
                      kind == Box::kRows2d ? "2-D" : kind == Box::kRowPairs3d ? "3-D" : "3-D halves-outer", box_rows,
                      buffers);
        report(label, us, empty_us);
      }
    }
  PROBE_CHECK_CUDA(cudaFree(out));
  return 0;
}
