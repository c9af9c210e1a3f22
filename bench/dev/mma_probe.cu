// mma_probe: does the tensor cores' rate on one SM depend on what else uses
// that SM's shared memory? The question behind it: the MoE
// prefill rows stop near 0.86-0.88 of the dense ceiling, and ping-pong
// consumers (one warpgroup's epilogue under the other's MMAs) ran slower, as
// if wgmma operand reads, TMA writes and epilogue staging shared one budget
// (~128 B/clk per SM; at 128 x 256 the mainloop alone would need ~127).
//
// One CTA per SM, 384 threads as in the kernels. Warpgroups 1 and 2 issue
// wgmma from a fixed operand tile in shared memory in the mainloop's pattern
// (per stage 4 k16 steps over a 64-wide slice of K, commit, wait for the
// stage before), for a fixed number of stages, and time themselves:
//   coop N  both warpgroups, m64nNk16 each (the kernels' cooperative split)
//   solo N  warpgroup 1 alone, both 64-row halves (2 x m64nNk16 per k-step:
//           a ping-pong mainloop with the other warpgroup idle)
// Warpgroup 0 meanwhile makes traffic until they finish:
//   none    nothing
//   tma     one thread streams TMA loads of an L2-resident tensor into a
//           ring of four 32 KB slots, as fast as they land (a producer)
//   stsm    stmatrix of a 16 KB staging tile, then its TMA store, back to
//           back (an epilogue)
//   both    tma and stsm at once
// It prints the tensor rate over all SMs (median CTA) and each row's rate
// against the same schedule without traffic.
//
//   nvcc -std=c++17 -O3 -arch=sm_90a -I. bench/dev/mma_probe.cu -o mma_probe && ./mma_probe
//   (bench/dev/run.sh probe mma does this)
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
#include "ptx/instr/fence.h"
#include "ptx/instr/mbarrier.h"
#include "ptx/instr/setmaxnreg.h"
#include "ptx/instr/sm90/wgmma.h"
#include "ptx/instr/stmatrix.h"
#include "ptx/instr/tma.h"

namespace {

using ggemm::sm90::make_kmajor_desc;

enum Traffic : int { kNone = 0, kTma = 1, kStsm = 2, kBoth = 3 };
const char *traffic_name(int t) { return t == kNone ? "none" : t == kTma ? "tma" : t == kStsm ? "stsm" : "both"; }

constexpr int kStages = 4000;                    // mainloop stages each consumer warpgroup issues
constexpr uint32_t kRowBytes = 128;              // one 64-wide bf16 K slice, 128B-swizzled
constexpr uint32_t kABytes = 128 * kRowBytes;    // 128 weight rows
constexpr uint32_t kBBytes = 256 * kRowBytes;    // up to 256 token rows
constexpr uint32_t kRingSlots = 4, kRingBytes = 256 * kRowBytes;  // TMA traffic: 4 boxes of 256 x 64
constexpr uint32_t kStagingBytes = 128 * kRowBytes;               // stsm traffic: 128 tokens x 64 features
constexpr uint32_t kSmemBytes = kABytes + kBBytes + kRingSlots * kRingBytes + kStagingBytes + 1024 + 1024;
constexpr int kInRows = 256, kInK = 512;  // the TMA source: 256 KB, stays in L2

struct Shared {  // after the 1024-aligned tiles
  uint64_t ring_full[kRingSlots];
  uint32_t finished;  // consumer warpgroups done
  uint32_t stop;      // stsm traffic: broadcast of `finished` to the warpgroup
};

__device__ uint64_t now_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

template <int N, bool Solo>
__device__ void consume(uint8_t *a_tile, uint8_t *b_tile, uint32_t cw, Shared *sh, unsigned long long *ns_out,
                        float *sink) {
  constexpr int kHalves = Solo ? 2 : 1;
  float acc[kHalves][N / 2];
#pragma unroll
  for (int h = 0; h < kHalves; ++h)
#pragma unroll
    for (int i = 0; i < N / 2; ++i) acc[h][i] = 0.f;
  const uint32_t a = ggemm::ptx::smem_addr(a_tile), b = ggemm::ptx::smem_addr(b_tile);
  const uint64_t start = now_ns();
  for (int s = 0; s < kStages; ++s) {
    ggemm::sm90::wgmma_fence();
#pragma unroll
    for (uint32_t kk = 0; kk < 4; ++kk)
#pragma unroll
      for (int h = 0; h < kHalves; ++h) {
        const uint32_t rows = Solo ? uint32_t(h) : cw;  // which 64 weight rows
        ggemm::sm90::WgmmaM64K16<N, __nv_bfloat16, 0>::run(acc[h], make_kmajor_desc(a + rows * 64 * kRowBytes + kk * 32, 128),
                                                            make_kmajor_desc(b + kk * 32, 128), 1u);
      }
    ggemm::sm90::wgmma_commit_group();
    ggemm::sm90::wgmma_wait_group<1>();
#pragma unroll
    for (int h = 0; h < kHalves; ++h) ggemm::sm90::fence_accumulators(acc[h]);
  }
  ggemm::sm90::wgmma_wait_group<0>();
#pragma unroll
  for (int h = 0; h < kHalves; ++h) ggemm::sm90::fence_accumulators(acc[h]);
  const uint64_t end = now_ns();
  if (threadIdx.x % 128 == 0) {
    atomicMax(&ns_out[blockIdx.x], (unsigned long long)(end - start));
    atomicAdd(&sh->finished, 1u);
  }
  // Keep the accumulators observable (never true for these operands).
  float sum = 0.f;
#pragma unroll
  for (int h = 0; h < kHalves; ++h)
#pragma unroll
    for (int i = 0; i < N / 2; ++i) sum += acc[h][i];
  if (sum == 1234.5f) sink[0] = sum;
}

// Warpgroup 0, thread 0: TMA loads into the ring, each slot reloaded as soon
// as its previous load has landed, until the consumers are done.
__device__ void tma_traffic(const CUtensorMap *in, uint8_t *ring, Shared *sh, uint32_t consumers) {
  uint32_t i = 0;
  for (;; ++i) {
    const uint32_t slot = i % kRingSlots, lap = i / kRingSlots;
    if (lap > 0) ggemm::ptx::mbarrier_wait_parity(&sh->ring_full[slot], (lap - 1) & 1);
    if (*static_cast<volatile uint32_t *>(&sh->finished) >= consumers) break;
    ggemm::ptx::mbarrier_arrive_expect_tx(&sh->ring_full[slot], kRingBytes);
    ggemm::ptx::tma_load_2d(ring + slot * kRingBytes, in, &sh->ring_full[slot], int32_t((i % (kInK / 64)) * 64), 0);
  }
  // The loads still in flight land before the CTA may exit.
  for (uint32_t j = i >= kRingSlots ? i - kRingSlots + 1 : 0; j < i; ++j)
    ggemm::ptx::mbarrier_wait_parity(&sh->ring_full[j % kRingSlots], (j / kRingSlots) & 1);
}

// The epilogue's shared-memory traffic, back to back, by `threads` threads
// of warpgroup 0 (tid 0 .. threads - 1 of them; a named barrier of that
// many): each warp stmatrix-es 4 KB of the 16 KB staging tile, then one
// thread TMA-stores the tile and waits for it to be read before the next.
__device__ void stsm_traffic(const CUtensorMap *out, uint8_t *staging, Shared *sh, uint32_t consumers, uint32_t tid,
                             uint32_t threads, uint32_t barrier_id) {
  const uint32_t warp = tid / 32, lane = tid % 32, base = ggemm::ptx::smem_addr(staging);
  uint32_t v = lane * 0x00010001u;
  for (;;) {
    if (tid == 0) {
      ggemm::ptx::tma_store_wait_group_read<0>();
      sh->stop = *static_cast<volatile uint32_t *>(&sh->finished) >= consumers;
    }
    ggemm::ptx::bar_sync(barrier_id, threads);
    if (*static_cast<volatile uint32_t *>(&sh->stop)) break;
    // Rows 32w..32w+31 of warp w; each x4 covers 8 rows x 4 16-byte chunks.
#pragma unroll
    for (uint32_t q = 0; q < 8; ++q) {
      const uint32_t row = 32 * warp + 8 * (q / 2) + lane % 8, chunk = 4 * (q % 2) + lane / 8;
      ggemm::ptx::stmatrix_x4_trans(base + ggemm::swizzle128_offset(row, chunk), v, v + 1, v + 2, v + 3);
      v += 0x00040004u;
    }
    ggemm::ptx::fence_proxy_async_shared_cta();
    ggemm::ptx::bar_sync(barrier_id, threads);
    if (tid == 0) {
      ggemm::ptx::tma_store_2d(out, staging, 0, 0);
      ggemm::ptx::tma_store_commit_group();
    }
  }
  if (tid == 0) ggemm::ptx::tma_store_wait_group_read<0>();
}

template <int N, bool Solo>
__global__ void __launch_bounds__(384, 1) mma_probe_kernel(const __grid_constant__ CUtensorMap in,
                                                          const __grid_constant__ CUtensorMap out, int traffic,
                                                          unsigned long long *ns_out, float *sink) {
  extern __shared__ uint8_t smem_raw[];
  uint8_t *smem = reinterpret_cast<uint8_t *>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  uint8_t *a_tile = smem, *b_tile = a_tile + kABytes, *ring = b_tile + kBBytes, *staging = ring + kRingSlots * kRingBytes;
  Shared *sh = reinterpret_cast<Shared *>(staging + kStagingBytes);
  const uint32_t consumers = Solo ? 1 : 2;
  // Operands: bf16 values of both signs, so the tensor cores switch bits as
  // they would on real data.
  for (uint32_t i = threadIdx.x; i < (kABytes + kBBytes) / 4; i += blockDim.x) {
    const uint32_t h = i * 2654435761u + blockIdx.x;
    reinterpret_cast<uint32_t *>(a_tile)[i] = (0x3c00u | (h & 0x80ffu)) | ((0x3c00u | ((h >> 16) & 0x80ffu)) << 16);
  }
  if (threadIdx.x == 0) {
    for (uint32_t s = 0; s < kRingSlots; ++s) ggemm::ptx::mbarrier_init(&sh->ring_full[s], 1);
    sh->finished = 0;
    sh->stop = 0;
    ggemm::ptx::fence_mbarrier_init();
  }
  __syncthreads();
  const uint32_t warpgroup = threadIdx.x / 128;
  if (warpgroup == 0) {
    ggemm::ptx::setmaxnreg_dec<40>();
    if ((traffic & kTma) && threadIdx.x == 0) tma_traffic(&in, ring, sh, consumers);
    // Both kinds: warp 0 streams the loads, warps 1-3 stage and store.
    if (traffic == kStsm) stsm_traffic(&out, staging, sh, consumers, threadIdx.x, 128, 1);
    if (traffic == kBoth && threadIdx.x >= 32) stsm_traffic(&out, staging, sh, consumers, threadIdx.x - 32, 96, 1);
  } else {
    ggemm::ptx::setmaxnreg_inc<232>();
    const uint32_t cw = warpgroup - 1;
    if (!Solo || cw == 0) consume<N, Solo>(a_tile, b_tile, cw, sh, ns_out, sink);
  }
}

decltype(&cuTensorMapEncodeTiled) encode_tiled = nullptr;

// A 2-D bf16 map [rows, k] with a {64, box_rows} box and the 128B swizzle.
CUtensorMap map_2d(void *base, int rows, int k, int box_rows) {
  CUtensorMap map;
  const cuuint64_t dims[2] = {cuuint64_t(k), cuuint64_t(rows)};
  const cuuint64_t strides[1] = {cuuint64_t(k) * 2};
  const cuuint32_t box[2] = {64, cuuint32_t(box_rows)};
  const cuuint32_t elem[2] = {1, 1};
  const CUresult r = encode_tiled(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, base, dims, strides, box, elem,
                                  CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                  CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    std::fprintf(stderr, "mma_probe: cuTensorMapEncodeTiled returned %d\n", int(r));
    std::exit(1);
  }
  return map;
}

struct Result {
  double tflops;  // all SMs, from the median CTA
};

template <int N, bool Solo>
Result run(int sms, const CUtensorMap &in, const CUtensorMap &out, int traffic, unsigned long long *d_ns, float *sink) {
  auto kernel = mma_probe_kernel<N, Solo>;
  PROBE_CHECK_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kSmemBytes)));
  const double ns = probe_median_cta_ns([&] { kernel<<<sms, 384, kSmemBytes>>>(in, out, traffic, d_ns, sink); }, sms, d_ns);
  // Per CTA: 128 weight rows x N tokens x 64 of K per stage, 2 FLOPs each.
  const double flops = 2.0 * 128 * N * 64 * kStages;
  return Result{flops * sms / ns / 1e3};
}

}  // namespace

int main() {
  const cudaDeviceProp prop = sm90_device_or_skip("mma_probe");
  encode_tiled = tensor_map_encoder("mma_probe");
  void *in_buf = nullptr, *out_buf = nullptr;
  unsigned long long *d_ns = nullptr;
  float *sink = nullptr;
  PROBE_CHECK_CUDA(cudaMalloc(&in_buf, size_t(kInRows) * kInK * 2));
  PROBE_CHECK_CUDA(cudaMemset(in_buf, 0x3c, size_t(kInRows) * kInK * 2));
  PROBE_CHECK_CUDA(cudaMalloc(&out_buf, 128 * 64 * 2));
  PROBE_CHECK_CUDA(cudaMalloc(&d_ns, sizeof(unsigned long long) * 1024));
  PROBE_CHECK_CUDA(cudaMalloc(&sink, sizeof(float)));
  const CUtensorMap in = map_2d(in_buf, kInRows, kInK, 256);
  const CUtensorMap out = map_2d(out_buf, 128, 64, 128);
  const int sms = prop.multiProcessorCount;

  std::printf("mma_probe on %s (%d SMs): wgmma from shared memory, %d stages of 4 k16 steps per warpgroup;\n"
              "TFLOP/s over all SMs (median CTA of 3 runs), and against the same schedule without traffic\n",
              prop.name, sms, kStages);
  std::printf("schedule   N  traffic | TFLOP/s  of none\n");
  auto row = [&](const char *schedule, int n, auto runner) {
    double none = 0;
    for (int t : {kNone, kTma, kStsm, kBoth}) {
      const Result r = runner(t);
      if (t == kNone) none = r.tflops;
      std::printf("%-8s %3d  %-7s | %7.1f  %6.2f\n", schedule, n, traffic_name(t), r.tflops, r.tflops / none);
    }
  };
  row("coop", 256, [&](int t) { return run<256, false>(sms, in, out, t, d_ns, sink); });
  row("coop", 128, [&](int t) { return run<128, false>(sms, in, out, t, d_ns, sink); });
  row("solo", 128, [&](int t) { return run<128, true>(sms, in, out, t, d_ns, sink); });
  row("coop", 64, [&](int t) { return run<64, false>(sms, in, out, t, d_ns, sink); });
  PROBE_CHECK_CUDA(cudaFree(in_buf));
  PROBE_CHECK_CUDA(cudaFree(out_buf));
  PROBE_CHECK_CUDA(cudaFree(d_ns));
  PROBE_CHECK_CUDA(cudaFree(sink));
  return 0;
}
