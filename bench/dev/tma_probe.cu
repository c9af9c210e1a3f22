// tma_probe: what one SM's TMA loads cost, by box shape — the question the
// LoRA shrink left open (traced: per stage ~0.2 us whatever its bytes;
// halving the box doubles the time, two boxes per stage do not halve it).
//
// One CTA per SM (or a few): a producer thread streams TMA boxes of a bf16
// [rows, K] tensor into a ring of shared-memory stages, a consumer thread
// waits for each stage and frees it. Nothing computes: the time is the TMA
// path's alone. Per configuration it prints the median CTA's time per stage
// and per box, and the bytes per SM and in total per second.
//
//   nvcc -std=c++17 -O3 -arch=sm_90a -I. bench/dev/tma_probe.cu -o tma_probe && ./tma_probe
//   (bench/dev/run.sh probe tma does this)
//
// Boxes are {64 elements of K (128 bytes), R rows} with the 128-byte
// swizzle, as the kernels load them; "spans" S > 1 uses a 3-D view
// {64, rows, K / 64} (strides: a row, then 128 bytes) so one box carries S
// consecutive 64-wide slices of K for R rows — the kernels' stage layout of S
// k-slices, in one TMA instruction instead of S.
// Exit 77 (skipped) without a GPU. The driver's tensor-map encoder comes
// through the runtime's entry-point query, so the binary starts (and skips)
// on a machine with no driver.
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "bench/dev/probe_util.h"
#include "ptx/instr/mbarrier.h"
#include "ptx/instr/tma.h"

namespace {

constexpr int kRows = 16384, kK = 4096;  // bf16: 128 MB, past the 60 MB L2

struct Probe {
  int ctas;
  int rows;            // R: rows per box
  int spans;           // S: 64-wide K slices per box (3-D view when > 1)
  int boxes_per_stage;
  int stages;
  bool fresh_rows;     // each CTA its own rows, K walked once (DRAM); else CTA rows re-read (L2)
};

struct Args {
  int rows, spans, boxes_per_stage, stages, iters;
  uint32_t box_bytes;
  int fresh_rows;
};

__global__ void __launch_bounds__(64, 1) tma_probe_kernel(const __grid_constant__ CUtensorMap map, Args a,
                                                         unsigned long long *ns_per_cta) {
  extern __shared__ __align__(1024) uint8_t smem_raw[];
  uint8_t *smem = reinterpret_cast<uint8_t *>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  const uint32_t stage_bytes = a.box_bytes * a.boxes_per_stage;
  uint64_t *full = reinterpret_cast<uint64_t *>(smem + a.stages * stage_bytes);
  uint64_t *empty = full + a.stages;
  if (threadIdx.x == 0) {
    probe_ring_init(full, empty, a.stages);
    ggemm::ptx::prefetch_tensormap(&map);
  }
  __syncthreads();
  const int k_slices = kK / 64;
  if (threadIdx.x == 0) {
    for (int i = 0; i < a.iters; ++i) {
      const int s = i % a.stages;
      const uint32_t phase = (i / a.stages) & 1;
      ggemm::ptx::mbarrier_wait_parity(&empty[s], phase ^ 1);
      ggemm::ptx::mbarrier_arrive_expect_tx(&full[s], stage_bytes);
      for (int b = 0; b < a.boxes_per_stage; ++b) {
        const int first = (i * a.boxes_per_stage + b) * a.spans;
        const int slice = first % k_slices;
        // Rows: one band every CTA re-reads (L2), or after each walk over K
        // the next band no CTA has read (DRAM).
        const int pass = first / k_slices;
        const int row0 = a.fresh_rows ? (int(blockIdx.x) + pass * int(gridDim.x)) * a.rows % kRows : 0;
        uint8_t *dst = smem + s * stage_bytes + b * a.box_bytes;
        if (a.spans > 1)
          ggemm::ptx::tma_load_3d(dst, &map, &full[s], 0, row0, slice);
        else
          ggemm::ptx::tma_load_2d(dst, &map, &full[s], slice * 64, row0);
      }
    }
  } else if (threadIdx.x == 32) {
    ns_per_cta[blockIdx.x] = probe_drain_timed(full, empty, a.stages, a.iters);
  }
}

decltype(&cuTensorMapEncodeTiled) encode_tiled = nullptr;

bool encode(const void *base, int rows, int spans, CUtensorMap *map) {
  CUresult r;
  if (spans == 1) {
    const cuuint64_t dims[2] = {kK, kRows};
    const cuuint64_t strides[1] = {kK * 2};
    const cuuint32_t box[2] = {64, cuuint32_t(rows)};
    const cuuint32_t elem[2] = {1, 1};
    r = encode_tiled(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<void *>(base), dims, strides,
                               box, elem, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                               CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  } else {
    r = encode_k_sliced_bf16(encode_tiled, map, base, kRows, kK, uint32_t(rows), uint32_t(spans));
  }
  if (r != CUDA_SUCCESS) {
    std::printf("  (tensor map R %d S %d refused: CUresult %d)\n", rows, spans, int(r));
    return false;
  }
  return true;
}

void run(const Probe &p, const void *tensor, unsigned long long *d_ns, int max_smem) {
  CUtensorMap map;
  if (!encode(tensor, p.rows, p.spans, &map)) return;
  Args a{};
  a.rows = p.rows;
  a.spans = p.spans;
  a.boxes_per_stage = p.boxes_per_stage;
  a.stages = p.stages;
  a.box_bytes = uint32_t(p.rows) * 128 * p.spans;
  a.fresh_rows = p.fresh_rows;
  // About 4 MB per CTA (fresh rows: K walked about once).
  const long stage_bytes = long(a.box_bytes) * a.boxes_per_stage;
  a.iters = int(std::max(64L, (4L << 20) / stage_bytes));
  const int smem = int(a.stages * stage_bytes + 16 * a.stages + 2048);
  if (smem > max_smem) {
    std::printf("  (R %d S %d x%d, %d stages: %d bytes of shared memory, too many)\n", p.rows, p.spans,
                p.boxes_per_stage, p.stages, smem);
    return;
  }
  PROBE_CHECK_CUDA(cudaFuncSetAttribute(tma_probe_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  std::vector<double> per_cta;
  for (int rep = 0; rep < 3; ++rep) {
    tma_probe_kernel<<<p.ctas, 64, smem>>>(map, a, d_ns);
    PROBE_CHECK_CUDA(cudaGetLastError());
    PROBE_CHECK_CUDA(cudaDeviceSynchronize());
  }
  std::vector<unsigned long long> ns(p.ctas);
  PROBE_CHECK_CUDA(cudaMemcpy(ns.data(), d_ns, sizeof(unsigned long long) * p.ctas, cudaMemcpyDeviceToHost));
  std::sort(ns.begin(), ns.end());
  const double median_ns = double(ns[p.ctas / 2]);
  const double per_stage = median_ns / a.iters;
  const double bytes = double(stage_bytes) * a.iters;
  std::printf("%5d  %4d  %2d  %5d  %6d  %-5s | %8.1f  %8.1f  %7.1f  %7.2f\n", p.ctas, p.rows, p.spans,
              p.boxes_per_stage, p.stages, p.fresh_rows ? "dram" : "l2", per_stage, per_stage / p.boxes_per_stage,
              bytes / median_ns, bytes / median_ns * p.ctas / 1000.0);
}

}  // namespace

int main() {
  const cudaDeviceProp prop = sm90_device_or_skip("tma_probe");
  encode_tiled = tensor_map_encoder("tma_probe");
  void *tensor = nullptr;
  unsigned long long *d_ns = nullptr;
  PROBE_CHECK_CUDA(cudaMalloc(&tensor, size_t(kRows) * kK * 2));
  PROBE_CHECK_CUDA(cudaMemset(tensor, 0x3c, size_t(kRows) * kK * 2));
  PROBE_CHECK_CUDA(cudaMalloc(&d_ns, sizeof(unsigned long long) * 1024));
  const int sms = prop.multiProcessorCount;
  std::printf("tma_probe on %s (%d SMs): median CTA; per stage and per box in ns, GB/s per SM, TB/s in all\n",
              prop.name, sms);
  std::printf(" ctas  rows   S  boxes  stages  src   |  ns/stage    ns/box  GB/s/SM  TB/s all\n");
  std::vector<Probe> probes;
  for (int ctas : {8, sms})
    for (bool fresh : {false, true}) {
      for (int rows : {16, 32, 48, 64, 128, 256}) probes.push_back({ctas, rows, 1, 1, 8, fresh});
      // The shrink's stage today: two boxes (48 weight + 32 token rows ~ 2 x 32..48).
      probes.push_back({ctas, 48, 1, 2, 8, fresh});
      // Fewer, larger boxes: S slices of K per box, and deeper rings.
      for (int spans : {2, 4}) probes.push_back({ctas, 48, spans, 1, 8, fresh});
      probes.push_back({ctas, 32, 4, 1, 8, fresh});
      probes.push_back({ctas, 48, 1, 1, 16, fresh});
      probes.push_back({ctas, 16, 1, 1, 16, fresh});
    }
  for (const Probe &p : probes) run(p, tensor, d_ns, int(prop.sharedMemPerBlockOptin));
  PROBE_CHECK_CUDA(cudaFree(tensor));
  PROBE_CHECK_CUDA(cudaFree(d_ns));
  return 0;
}
