// wgmma: warpgroup-level asynchronous MMA on sm_90a (PTX ISA 9.7.15).
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "../arch.h"
#include "wgmma_desc.h"

#if defined(__CUDACC__)
namespace ggemm::sm90 {

// wgmma.fence.sync.aligned — orders register accesses to the accumulators
// before the next wgmma.mma_async; one whole warpgroup.
GGEMM_DEVICE void wgmma_fence() {
#if GGEMM_SM90A
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#else
  GGEMM_ARCH_TRAP("wgmma");
#endif
}

// wgmma.commit_group.sync.aligned — closes a group of issued wgmmas.
GGEMM_DEVICE void wgmma_commit_group() {
#if GGEMM_SM90A
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
#else
  GGEMM_ARCH_TRAP("wgmma");
#endif
}

// wgmma.wait_group.sync.aligned N — waits until at most N groups are pending.
template <int N>
GGEMM_DEVICE void wgmma_wait_group() {
  static_assert(N >= 0 && N <= 7, "wgmma.wait_group takes 0..7");
#if GGEMM_SM90A
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
#else
  GGEMM_ARCH_TRAP("wgmma");
#endif
}

// Keeps the compiler from moving accumulator reads/writes across wgmma
// (the registers are read asynchronously by the tensor cores).
template <int R>
GGEMM_DEVICE void fence_accumulators(float (&d)[R]) {
#pragma unroll
  for (int i = 0; i < R; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

#if GGEMM_SM90A
#include "wgmma_mma.inc"
#else
template <int N, typename Elem, int TransA>
struct WgmmaM64K16 {
  GGEMM_DEVICE static void run(float (&)[N / 2], uint64_t, uint64_t, uint32_t) {
    GGEMM_ARCH_TRAP("wgmma");
  }
};
template <int N, typename Elem, int TransA>
struct WgmmaM64K16Overwrite {
  GGEMM_DEVICE static void run(float (&)[N / 2], uint64_t, uint64_t) { GGEMM_ARCH_TRAP("wgmma"); }
};
#endif

}  // namespace ggemm::sm90
#endif
