// mbarrier: shared-memory barriers with transaction counts (PTX ISA 9.7.13.15).
#pragma once
#include "cvta.h"

#if defined(__CUDACC__)
namespace ggemm::ptx {

// mbarrier.init.shared::cta.b64 — one thread, before any other use.
GGEMM_DEVICE void mbarrier_init(uint64_t *bar, uint32_t arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(bar)), "r"(arrivals)
               : "memory");
}

// mbarrier.arrive.shared::cta.b64 — one arrival by the calling thread.
GGEMM_DEVICE void mbarrier_arrive(uint64_t *bar) {
  asm volatile("{\n.reg .b64 st;\nmbarrier.arrive.shared::cta.b64 st, [%0];\n}\n" ::"r"(
                   smem_addr(bar))
               : "memory");
}

// mbarrier.arrive.expect_tx.shared::cta.b64 — one arrival that also expects
// `bytes` of asynchronous transactions (TMA loads) before the phase completes.
GGEMM_DEVICE void mbarrier_arrive_expect_tx(uint64_t *bar, uint32_t bytes) {
  asm volatile(
      "{\n.reg .b64 st;\nmbarrier.arrive.expect_tx.shared::cta.b64 st, [%0], %1;\n}\n" ::"r"(
          smem_addr(bar)),
      "r"(bytes)
      : "memory");
}

// mbarrier.try_wait.parity.shared::cta.b64 — true once the phase with the
// given parity has completed.
GGEMM_DEVICE bool mbarrier_try_wait_parity(uint64_t *bar, uint32_t parity) {
  uint32_t done;
  asm volatile(
      "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
      "selp.u32 %0, 1, 0, p;\n}\n"
      : "=r"(done)
      : "r"(smem_addr(bar)), "r"(parity)
      : "memory");
  return done != 0;
}

// mbarrier.arrive.shared::cluster.b64 (release at CTA scope, the default) —
// one arrival on the barrier at shared::cluster address `remote_bar` (see
// map_shared_to_rank), in any CTA of the cluster. Not .release.cluster: that
// orders every earlier memory access of the thread cluster-wide, which ptxas
// implements as MEMBAR.ALL.CTA + MEMBAR.ALL.GPU, waiting for the thread's
// outstanding global stores, once per pipeline stage. These arrivals only
// say "done reading":
// a stage whose wgmmas wgmma.wait_group retired, an accumulator whose
// tcgen05.ld wait::ld completed (and tcgen05.fence::before_thread_sync
// ordered).
GGEMM_DEVICE void mbarrier_arrive_remote(uint32_t remote_bar) {
  asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];" ::"r"(remote_bar) : "memory");
}

// Blocks until the phase of `parity` completes. A pipeline bug must not hang
// the caller's process: after GGEMM_WAIT_TIMEOUT_NS (default 10 s) of waiting
// the kernel traps, which the host sees as a launch failure.
#ifndef GGEMM_WAIT_TIMEOUT_NS
#define GGEMM_WAIT_TIMEOUT_NS 10000000000ull
#endif
//
// kTrapCall: the trap sits in a function of its own (called, never
// inlined) instead of in the caller's code. Observed with nvcc 13.0's
// ptxas: a `trap` inlined anywhere in a setmaxnreg.inc region (a wait
// outside the mainloop too) and the region allocates nothing above ~R218
// whatever the budget (224-256); a consumer with 192 accumulator registers
// then spills and has its wgmmas serialised (C7512). Without the trap, or
// with it called, ptx/sm90/token_major_gemm.cuh's consumers fit in R0-R215
// (no spill) at setmaxnreg 224 and up. The other kernels keep the inline
// trap (their SASS is unchanged).
inline __device__ __noinline__ void mbarrier_wait_timed_out() { asm volatile("trap;"); }

template <bool kTrapCall = false>
GGEMM_DEVICE void mbarrier_wait_parity(uint64_t *bar, uint32_t parity) {
  if (mbarrier_try_wait_parity(bar, parity)) return;
  uint64_t start;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  while (!mbarrier_try_wait_parity(bar, parity)) {
    uint64_t now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    // No printf here: a call inside the pipeline would serialise wgmma (the
    // trap's call did not in token_major_gemm.cuh: a callee of no registers).
    if (now - start > GGEMM_WAIT_TIMEOUT_NS) {
      if constexpr (kTrapCall) {
        mbarrier_wait_timed_out();
      } else {
        asm volatile("trap;");
      }
    }
  }
}

}  // namespace ggemm::ptx
#endif
