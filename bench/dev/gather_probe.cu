// gather_probe: can cp.async gathers by the producer warpgroup's spare warps
// feed the token-major kernel's mainloop? The question behind it: the MoE
// layer copies its tokens into expert order before the prefill gate_up GEMM
// (the expand copy, ~38 us of Qwen3-30B-A3B's 4096-token layer), because
// every sm_90a gather inside the GEMM measured so far lost (docs/
// performance.md, "A cp.async gather (sm_90a) lost at every size": two
// warps of 40 registers feeding 256-row stages, 2.6-2.9x slower), and which
// resource bounds such a gather was never measured.
//
// One CTA per SM, 384 threads as in the token-major kernel. Warpgroup 1
// runs the token-major mainloop (per stage of 128 token rows x 64 of K: four
// k16 steps of two m64n192k16 on a fixed weight tile) over a ring of four
// 16 KB token stages, waiting for each stage, releasing it after its MMAs.
// Warpgroup 0 (40 registers) fills the ring:
//   none      nothing: the mainloop on a fixed token tile (the MMA's rate)
//   tma       one thread, a TMA box of 128 contiguous rows a stage (the
//             ungathered kernel)
//   gather G  G warps gather the stage's 128 rows (random tokens of an
//             L2-resident [4096, 2048] bf16 x) by cp.async, 16 bytes a lane,
//             eight lanes a row (a warp instruction moves four whole 128-byte
//             rows), into the 128B-swizzled layout, and end the stage with
//             cp.async.mbarrier.arrive.noinc (no wait_group); each tile's
//             row tokens are read once into shared memory. The consumer
//             fences each stage for the async proxy before its MMAs.
// Each mode also runs with the consumer releasing stages unread (no MMA):
// the loads' own rate. Prints the tensor rate over all SMs (median CTA) and
// the token bytes per SM per microsecond.
//
//   bench/dev/run.sh probe gather
//
// Exit 77 (skipped) without an sm_90 GPU.
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "bench/dev/probe_util.h"
#include "ptx/blocks/swizzle.h"
#include "ptx/instr/barrier.h"
#include "ptx/instr/cp_async.h"
#include "ptx/instr/fence.h"
#include "ptx/instr/mbarrier.h"
#include "ptx/instr/setmaxnreg.h"
#include "ptx/instr/sm90/wgmma.h"
#include "ptx/instr/tma.h"

namespace {

using ggemm::sm90::make_kmajor_desc;

constexpr int kTokens = 4096, kHidden = 2048;  // x: 16 MB, L2-resident
constexpr int kKIters = kHidden / 64;          // stages a tile
constexpr int kTilesPerCta = 48;               // 1536 stages a CTA
constexpr uint32_t kStages = 4, kStageBytes = 128 * 128;
constexpr uint32_t kWeightBytes = 192 * 128;
constexpr uint32_t kSmemBytes = kStages * kStageBytes + kWeightBytes + 1024 + 1024;

enum Mode : int { kNone = 0, kTma = 1, kGather = 2 };

struct Shared {
  uint64_t full[kStages], empty[kStages];
  int32_t tokens[2][128];  // the rows' tokens of the gather warps' current tile (by tile parity)
};

__device__ uint64_t now_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__device__ __forceinline__ void cp_async_mbarrier_arrive_noinc(uint64_t *bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(ggemm::ptx::smem_addr(bar)) : "memory");
}

// Warp w of `warps` gather warps: stage i's 128 rows, rows 4 (w + warps j) + lane / 8.
__device__ void gather(const __nv_bfloat16 *x, const int32_t *row_token, uint8_t *ring, Shared *sh, uint32_t warp,
                       uint32_t warps) {
  const uint32_t lane = threadIdx.x % 32, chunk = lane % 8;
  const int tile0 = int(blockIdx.x) * kTilesPerCta;
  for (int i = 0; i < kTilesPerCta * kKIters; ++i) {
    const int tile = i / kKIters, kc = i % kKIters;
    const uint32_t s = uint32_t(i) % kStages;
    if (kc == 0) {  // this tile's tokens, read once (the other parity's are the last tile's)
      for (uint32_t r = warp * 32 + lane; r < 128; r += warps * 32)
        sh->tokens[tile & 1][r] = row_token[(tile0 + tile) * 128 + int(r)];
      ggemm::ptx::bar_sync(1, warps * 32);
    }
    if (i >= int(kStages)) ggemm::ptx::mbarrier_wait_parity(&sh->empty[s], ((i / kStages) - 1) & 1);
    const uint32_t base = ggemm::ptx::smem_addr(ring + s * kStageBytes);
    for (uint32_t j = warp; j < 32; j += warps) {
      const uint32_t row = 4 * j + lane / 8;
      const int32_t token = sh->tokens[tile & 1][row];
      const __nv_bfloat16 *src = x + size_t(token) * kHidden + kc * 64 + chunk * 8;
      ggemm::ptx::cp_async_16(base + ggemm::swizzle128_offset(row, chunk), src, true);
    }
    cp_async_mbarrier_arrive_noinc(&sh->full[s]);
  }
}

// One thread: a TMA box of 128 contiguous rows a stage.
__device__ void tma_load(const CUtensorMap *map, uint8_t *ring, Shared *sh) {
  const int tile0 = int(blockIdx.x) * kTilesPerCta;
  for (int i = 0; i < kTilesPerCta * kKIters; ++i) {
    const int tile = i / kKIters, kc = i % kKIters;
    const uint32_t s = uint32_t(i) % kStages;
    if (i >= int(kStages)) ggemm::ptx::mbarrier_wait_parity(&sh->empty[s], ((i / kStages) - 1) & 1);
    ggemm::ptx::mbarrier_arrive_expect_tx(&sh->full[s], kStageBytes);
    ggemm::ptx::tma_load_2d(ring + s * kStageBytes, map, &sh->full[s], kc * 64, ((tile0 + tile) * 128) % kTokens);
  }
}

template <bool kMma>
__device__ void consume(uint8_t *ring, uint8_t *weights, Shared *sh, int mode, unsigned long long *ns_out,
                        float *sink) {
  float lo[96], hi[96];
#pragma unroll
  for (int i = 0; i < 96; ++i) lo[i] = hi[i] = 0.f;
  const uint32_t w = ggemm::ptx::smem_addr(weights);
  const uint64_t start = now_ns();
  for (int i = 0; i < kTilesPerCta * kKIters; ++i) {
    const uint32_t s = uint32_t(i) % kStages;
    if (mode != kNone) {
      ggemm::ptx::mbarrier_wait_parity(&sh->full[s], (i / kStages) & 1);
      if (mode == kGather) ggemm::ptx::fence_proxy_async_shared_cta();  // cp.async wrote it (generic proxy)
    }
    if constexpr (kMma) {
      const uint32_t x = ggemm::ptx::smem_addr(ring + (mode == kNone ? 0 : s) * kStageBytes);
      ggemm::sm90::wgmma_fence();
#pragma unroll
      for (uint32_t kk = 0; kk < 4; ++kk) {
        const uint64_t dw = make_kmajor_desc(w + kk * 32, 128);
        ggemm::sm90::WgmmaM64K16<192, __nv_bfloat16, 0>::run(lo, make_kmajor_desc(x + kk * 32, 128), dw, 1u);
        ggemm::sm90::WgmmaM64K16<192, __nv_bfloat16, 0>::run(hi, make_kmajor_desc(x + 64 * 128 + kk * 32, 128), dw,
                                                             1u);
      }
      ggemm::sm90::wgmma_commit_group();
      ggemm::sm90::wgmma_wait_group<1>();
      ggemm::sm90::fence_accumulators(lo);
      ggemm::sm90::fence_accumulators(hi);
    }
    // Release the stage before (its MMAs are done); without MMAs, this one.
    if (mode != kNone && threadIdx.x % 128 == 0) {
      if (!kMma) ggemm::ptx::mbarrier_arrive(&sh->empty[s]);
      else if (i > 0) ggemm::ptx::mbarrier_arrive(&sh->empty[(uint32_t(i) + kStages - 1) % kStages]);
    }
  }
  ggemm::sm90::wgmma_wait_group<0>();
  ggemm::sm90::fence_accumulators(lo);
  ggemm::sm90::fence_accumulators(hi);
  const uint64_t end = now_ns();
  if (threadIdx.x % 128 == 0) ns_out[blockIdx.x] = end - start;
  float sum = 0.f;
#pragma unroll
  for (int i = 0; i < 96; ++i) sum += lo[i] + hi[i];
  if (sum == 1234.5f) sink[0] = sum;
}

template <bool kMma>
__global__ void __launch_bounds__(384, 1)
    gather_probe_kernel(const __grid_constant__ CUtensorMap map, const __nv_bfloat16 *x, const int32_t *row_token,
                        int mode, int gather_warps, unsigned long long *ns_out, float *sink) {
  extern __shared__ uint8_t smem_raw[];
  uint8_t *ring = reinterpret_cast<uint8_t *>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  uint8_t *weights = ring + kStages * kStageBytes;
  Shared *sh = reinterpret_cast<Shared *>(weights + kWeightBytes);
  for (uint32_t i = threadIdx.x; i < (kStages * kStageBytes + kWeightBytes) / 4; i += blockDim.x) {
    const uint32_t h = i * 2654435761u + blockIdx.x;
    reinterpret_cast<uint32_t *>(ring)[i] = (0x3c00u | (h & 0x80ffu)) | ((0x3c00u | ((h >> 16) & 0x80ffu)) << 16);
  }
  if (threadIdx.x == 0) {
    // full: the TMA thread's expect_tx, or one noinc arrival per gather thread.
    for (uint32_t s = 0; s < kStages; ++s) {
      ggemm::ptx::mbarrier_init(&sh->full[s], mode == kGather ? uint32_t(gather_warps) * 32 : 1u);
      ggemm::ptx::mbarrier_init(&sh->empty[s], 1);
    }
    ggemm::ptx::fence_mbarrier_init();
  }
  __syncthreads();
  const uint32_t warpgroup = threadIdx.x / 128, warp = threadIdx.x / 32;
  if (warpgroup == 0) {
    ggemm::ptx::setmaxnreg_dec<40>();
    if (mode == kTma && threadIdx.x == 0) tma_load(&map, ring, sh);
    if (mode == kGather && warp < uint32_t(gather_warps)) gather(x, row_token, ring, sh, warp, gather_warps);
  } else {
    ggemm::ptx::setmaxnreg_inc<232>();
    if (warpgroup == 1) consume<kMma>(ring, weights, sh, mode, ns_out, sink);
  }
}

decltype(&cuTensorMapEncodeTiled) encode_tiled = nullptr;

double median_run(bool mma, int sms, const CUtensorMap &map, const __nv_bfloat16 *x, const int32_t *idx, int mode,
                  int warps, unsigned long long *d_ns, float *sink) {
  auto kernel = mma ? gather_probe_kernel<true> : gather_probe_kernel<false>;
  PROBE_CHECK_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kSmemBytes)));
  return probe_median_cta_ns([&] { kernel<<<sms, 384, kSmemBytes>>>(map, x, idx, mode, warps, d_ns, sink); }, sms,
                             d_ns);
}

}  // namespace

int main() {
  const cudaDeviceProp prop = sm90_device_or_skip("gather_probe");
  encode_tiled = tensor_map_encoder("gather_probe");
  const int sms = prop.multiProcessorCount;
  const int rows = sms * kTilesPerCta * 128;
  __nv_bfloat16 *x = nullptr;
  int32_t *idx = nullptr;
  unsigned long long *d_ns = nullptr;
  float *sink = nullptr;
  PROBE_CHECK_CUDA(cudaMalloc(&x, size_t(kTokens) * kHidden * 2));
  PROBE_CHECK_CUDA(cudaMemset(x, 0x3c, size_t(kTokens) * kHidden * 2));
  std::vector<int32_t> h_idx(static_cast<size_t>(rows));
  uint32_t state = 12345u;
  for (auto &v : h_idx) {
    state = state * 1664525u + 1013904223u;
    v = int32_t((state >> 8) % kTokens);
  }
  PROBE_CHECK_CUDA(cudaMalloc(&idx, h_idx.size() * 4));
  PROBE_CHECK_CUDA(cudaMemcpy(idx, h_idx.data(), h_idx.size() * 4, cudaMemcpyHostToDevice));
  PROBE_CHECK_CUDA(cudaMalloc(&d_ns, sizeof(unsigned long long) * 1024));
  PROBE_CHECK_CUDA(cudaMalloc(&sink, sizeof(float)));
  CUtensorMap map;
  {
    const cuuint64_t dims[2] = {cuuint64_t(kHidden), cuuint64_t(kTokens)};
    const cuuint64_t strides[1] = {cuuint64_t(kHidden) * 2};
    const cuuint32_t box[2] = {64, 128}, elem[2] = {1, 1};
    if (encode_tiled(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, x, dims, strides, box, elem,
                     CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                     CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS) {
      std::fprintf(stderr, "gather_probe: cuTensorMapEncodeTiled failed\n");
      return 1;
    }
  }
  const double stages = double(kTilesPerCta) * kKIters;
  const double flops = 2.0 * 128 * 192 * 64 * stages;  // per CTA
  std::printf("gather_probe: %s, %d SMs; a CTA %d tiles x %d stages of 128 rows x 64 of K; x [%d, %d] bf16\n",
              prop.name, sms, kTilesPerCta, kKIters, kTokens, kHidden);
  std::printf("%-12s %14s %16s %14s %16s\n", "loads", "MMA TFLOP/s", "MMA B/us/SM", "alone B/us/SM", "alone / tma");
  struct Row {
    const char *name;
    int mode, warps;
  };
  const Row rows_[] = {{"none", kNone, 0}, {"tma", kTma, 0},        {"gather 1", kGather, 1},
                       {"gather 2", kGather, 2}, {"gather 3", kGather, 3}, {"gather 4", kGather, 4}};
  double tma_alone = 0;
  for (const Row &r : rows_) {
    // (gather 4 takes warp 0 too: the TMA producer's warp in the real kernel.)
    const double ns_mma = median_run(true, sms, map, x, idx, r.mode, r.warps, d_ns, sink);
    const double ns_alone = r.mode == kNone ? 0 : median_run(false, sms, map, x, idx, r.mode, r.warps, d_ns, sink);
    const double bytes = stages * kStageBytes;
    if (r.mode == kTma) tma_alone = bytes / ns_alone;
    std::printf("%-12s %14.1f %16.0f %14.0f %16.2f\n", r.name, flops * sms / ns_mma / 1e3,
                r.mode == kNone ? 0.0 : bytes / ns_mma * 1e3, r.mode == kNone ? 0.0 : bytes / ns_alone * 1e3,
                r.mode == kNone || tma_alone == 0 ? 0.0 : (bytes / ns_alone) / tma_alone);
  }
  return 0;
}
