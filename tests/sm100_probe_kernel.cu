// Assembly probe: proves the wrappers assemble for sm_100a; never launched.
//
// This is NOT a GEMM and computes nothing meaningful (shared memory is never
// filled). It calls every ptx/instr/sm100/tcgen05.h wrapper once, in the order the
// sm_100a kernel will (alloc -> mma -> commit -> mbarrier wait -> ld ->
// dealloc), with plausible descriptors (bf16 x bf16 -> f32, M 128, N 128,
// K-major 128B-swizzled tiles), so that tests/CMakeLists.txt can compile it to
// an sm_100a cubin and tests/check_sass_sm100.py can check the SASS for the
// tensor-core MMA, tensor-memory load and alloc instructions and no local
// memory. It is not part of libggemm.
#include <cstdint>

#include "ptx/instr/fence.h"
#include "ptx/instr/mbarrier.h"
#include "ptx/instr/sm100/tcgen05.h"

namespace {
constexpr uint32_t kM = 128, kN = 128, kK = 64;    // one 128B-swizzle span of bf16 along K
constexpr uint32_t kTileBytesA = kM * kK * 2;      // 16 KiB
constexpr uint32_t kTileBytesB = kN * kK * 2;      // 16 KiB
constexpr uint32_t kTmemCols = ggemm::sm100::tmem_alloc_columns_for(kN);  // one f32 accumulator
static_assert(ggemm::sm100::tmem_alloc_columns_valid(kTmemCols), "tcgen05.alloc column rule");
}  // namespace

// 128 threads: warp 0 allocates and issues, all four warps read their lane
// quarter of the accumulator.
extern "C" __global__ void __launch_bounds__(128) ggemm_sm100_probe(float *out) {
  using namespace ggemm::sm100;
  __shared__ alignas(1024) uint8_t smem_a[kTileBytesA];
  __shared__ alignas(1024) uint8_t smem_b[kTileBytesB];
  __shared__ alignas(8) uint64_t mma_done;
  __shared__ uint32_t tmem_base;

  const uint32_t warp = threadIdx.x / 32;
  if (warp == 0) {
    tcgen05_alloc(&tmem_base, kTmemCols);
    tcgen05_relinquish_alloc_permit();
  }
  if (threadIdx.x == 0) {
    ggemm::ptx::mbarrier_init(&mma_done, 1);
    ggemm::ptx::fence_mbarrier_init();
  }
  // The allocated address is written by the tensor core's allocator: fence
  // around the barrier that publishes it.
  tcgen05_fence_before_thread_sync();
  __syncthreads();
  tcgen05_fence_after_thread_sync();
  const uint32_t taddr = tmem_base;

  if (threadIdx.x == 0) {
    constexpr uint32_t idesc = UmmaInstrDescF16{UmmaDFormat::kF32, UmmaABFormat::kBF16, UmmaABFormat::kBF16, false,
                                                false, UmmaMajor::kK, UmmaMajor::kK, kM, kN}
                                   .encode();
    const uint32_t a = ggemm::ptx::smem_addr(smem_a), b = ggemm::ptx::smem_addr(smem_b);
    // K 64 = four MMAs of K 16 (32 bytes along each 128-byte row).
#pragma unroll
    for (uint32_t k = 0; k < kK / 16; ++k)
      tcgen05_mma_f16(taddr, make_kmajor_desc(a + 32 * k, 128), make_kmajor_desc(b + 32 * k, 128), idesc, k > 0);
    tcgen05_commit(&mma_done);
  }
  ggemm::ptx::mbarrier_wait_parity(&mma_done, 0);
  tcgen05_fence_after_thread_sync();

  // Warp w reads lanes 32w..32w+31, columns 0..7.
  uint32_t r[8];
  tcgen05_ld_32x32b_x8(taddr + make_tmem_addr(32 * warp, 0), r);
  tcgen05_wait_ld();
  float sum = 0.f;
#pragma unroll
  for (uint32_t x : r) sum += __uint_as_float(x);
  out[threadIdx.x] = sum;

  tcgen05_fence_before_thread_sync();
  __syncthreads();
  if (warp == 0) {
    tcgen05_fence_after_thread_sync();
    tcgen05_dealloc(taddr, kTmemCols);
  }
}
