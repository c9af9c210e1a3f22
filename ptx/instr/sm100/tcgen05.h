// tcgen05: the 5th-generation tensor core and tensor memory on sm_100a
// (PTX ISA 9.7.16 in 9.1/9.2; 9.7.17/9.7.18 in later releases). One wrapper
// per instruction, named after it; alloc, dealloc, relinquish and mma take
// the cta_group (1 or 2) as a template argument, commit has a pair form. Subsection numbers follow the
// 9.7.18.x listing of a newer ISA shifted to 9.7.16 (the chapter renumbers, its
// inside has not); each mnemonic was checked by ptxas (CUDA 13.0) assembling
// tests/sm100_probe_kernel.cu for sm_100a.
//
// The asm bodies compile only for sm_100a (GGEMM_SM100A); anywhere else each
// wrapper traps with a message (STYLE.md, practice 3).
#pragma once
#include <cstdio>

#include "../cvta.h"
#include "umma_desc.h"

#if defined(__CUDACC__)
namespace ggemm::sm100 {

// tcgen05.alloc.cta_group::N.sync.aligned.shared::cta.b32 (9.7.16.7.1) — one
// whole warp (with cta_group::2, one warp in each CTA of the pair, together);
// ncols satisfies tmem_alloc_columns_valid; writes the allocated
// tensor-memory address to *dst (shared memory); blocks until columns are free.
template <int CtaGroup = 1>
GGEMM_DEVICE void tcgen05_alloc(uint32_t *dst, uint32_t ncols) {
  static_assert(CtaGroup == 1 || CtaGroup == 2, "cta_group is 1 or 2");
#if GGEMM_SM100A
  if constexpr (CtaGroup == 1) {
    asm volatile("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%0], %1;" ::"r"(ptx::smem_addr(dst)),
                 "r"(ncols)
                 : "memory");
  } else {
    asm volatile("tcgen05.alloc.cta_group::2.sync.aligned.shared::cta.b32 [%0], %1;" ::"r"(ptx::smem_addr(dst)),
                 "r"(ncols)
                 : "memory");
  }
#else
  GGEMM_ARCH_TRAP("tcgen05.alloc");
#endif
}

// tcgen05.relinquish_alloc_permit.cta_group::N.sync.aligned (9.7.16.7.1) —
// as tcgen05_alloc; no tcgen05.alloc by this CTA may follow.
template <int CtaGroup = 1>
GGEMM_DEVICE void tcgen05_relinquish_alloc_permit() {
#if GGEMM_SM100A
  if constexpr (CtaGroup == 1) {
    asm volatile("tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;" ::: "memory");
  } else {
    asm volatile("tcgen05.relinquish_alloc_permit.cta_group::2.sync.aligned;" ::: "memory");
  }
#else
  GGEMM_ARCH_TRAP("tcgen05.relinquish_alloc_permit");
#endif
}

// tcgen05.dealloc.cta_group::N.sync.aligned.b32 (9.7.16.7.1) — the warp(s)
// that allocated; taddr and ncols exactly as allocated; every MMA and
// tcgen05.ld on those columns (in both CTAs of a pair) has completed.
template <int CtaGroup = 1>
GGEMM_DEVICE void tcgen05_dealloc(uint32_t taddr, uint32_t ncols) {
#if GGEMM_SM100A
  if constexpr (CtaGroup == 1) {
    asm volatile("tcgen05.dealloc.cta_group::1.sync.aligned.b32 %0, %1;" ::"r"(taddr), "r"(ncols) : "memory");
  } else {
    asm volatile("tcgen05.dealloc.cta_group::2.sync.aligned.b32 %0, %1;" ::"r"(taddr), "r"(ncols) : "memory");
  }
#else
  GGEMM_ARCH_TRAP("tcgen05.dealloc");
#endif
}

// tcgen05.mma.cta_group::N.kind::f16 (9.7.16.10, "tcgen05.mma") — one thread
// issues it (with cta_group::2, one thread of the pair: the A and B
// descriptors then name the same shared-memory offsets in both CTAs, each
// holding half of A's M rows and half of B's N rows, and each CTA's tensor
// memory receives its M half of D);
// D[d_tmem] = A(a_desc) * B(b_desc) + (accumulate ? D : 0), shape and formats
// from idesc (UmmaInstrDescF16); asynchronous until tcgen05.commit's barrier.
template <int CtaGroup = 1>
GGEMM_DEVICE void tcgen05_mma_f16(uint32_t d_tmem, uint64_t a_desc, uint64_t b_desc, uint32_t idesc,
                                  bool accumulate) {
#if GGEMM_SM100A
  if constexpr (CtaGroup == 1) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %4, 0;\n"
        "tcgen05.mma.cta_group::1.kind::f16 [%0], %1, %2, %3, p;\n}\n" ::"r"(d_tmem),
        "l"(a_desc), "l"(b_desc), "r"(idesc), "r"(uint32_t(accumulate))
        : "memory");
  } else {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %4, 0;\n"
        "tcgen05.mma.cta_group::2.kind::f16 [%0], %1, %2, %3, p;\n}\n" ::"r"(d_tmem),
        "l"(a_desc), "l"(b_desc), "r"(idesc), "r"(uint32_t(accumulate))
        : "memory");
  }
#else
  GGEMM_ARCH_TRAP("tcgen05.mma");
#endif
}

// tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64
// (9.7.16.12.1) — the issuing thread; one arrival on *bar (this CTA's shared
// memory) once all its prior tcgen05 async operations have completed.
GGEMM_DEVICE void tcgen05_commit(uint64_t *bar) {
#if GGEMM_SM100A
  asm volatile("tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [%0];" ::"r"(
                   ptx::smem_addr(bar))
               : "memory");
#else
  GGEMM_ARCH_TRAP("tcgen05.commit");
#endif
}

// tcgen05.commit.cta_group::2.mbarrier::arrive::one.shared::cluster
// .multicast::cluster.b64 (9.7.16.12.1) — the thread that issued the pair's
// MMAs; one arrival on the barrier at *bar's offset in every CTA of
// cta_mask once those MMAs have completed.
GGEMM_DEVICE void tcgen05_commit_pair(uint64_t *bar, uint16_t cta_mask) {
#if GGEMM_SM100A
  asm volatile(
      "tcgen05.commit.cta_group::2.mbarrier::arrive::one.shared::cluster.multicast::cluster.b64 [%0], %1;" ::"r"(
          ptx::smem_addr(bar)),
      "h"(cta_mask)
      : "memory");
#else
  GGEMM_ARCH_TRAP("tcgen05.commit");
#endif
}

// tcgen05.ld.sync.aligned.32x32b.x8.b32 (9.7.16.8.3) — one whole warp; warp w
// of its warpgroup may only address lanes 32*(w%4) .. 32*(w%4)+31; thread t
// gets columns taddr..taddr+7 of lane (taddr's lane + t). Not usable until
// tcgen05_wait_ld.
GGEMM_DEVICE void tcgen05_ld_32x32b_x8(uint32_t taddr, uint32_t (&r)[8]) {
#if GGEMM_SM100A
  asm volatile("tcgen05.ld.sync.aligned.32x32b.x8.b32 {%0, %1, %2, %3, %4, %5, %6, %7}, [%8];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]), "=r"(r[4]), "=r"(r[5]), "=r"(r[6]), "=r"(r[7])
               : "r"(taddr)
               : "memory");
#else
  for (uint32_t &x : r) x = 0;
  GGEMM_ARCH_TRAP("tcgen05.ld");
#endif
}

// tcgen05.wait::ld.sync.aligned (9.7.16.8.5) — one whole warp; waits for all
// its prior tcgen05.ld, after which their registers may be read.
GGEMM_DEVICE void tcgen05_wait_ld() {
#if GGEMM_SM100A
  asm volatile("tcgen05.wait::ld.sync.aligned;" ::: "memory");
#else
  GGEMM_ARCH_TRAP("tcgen05.wait");
#endif
}

// tcgen05.fence::before_thread_sync (9.7.16.11.1) — orders this thread's prior
// tcgen05 operations before a following barrier / mbarrier arrive.
GGEMM_DEVICE void tcgen05_fence_before_thread_sync() {
#if GGEMM_SM100A
  asm volatile("tcgen05.fence::before_thread_sync;" ::: "memory");
#else
  GGEMM_ARCH_TRAP("tcgen05.fence");
#endif
}

// tcgen05.fence::after_thread_sync (9.7.16.11.1) — orders this thread's later
// tcgen05 operations after a preceding barrier / mbarrier wait.
GGEMM_DEVICE void tcgen05_fence_after_thread_sync() {
#if GGEMM_SM100A
  asm volatile("tcgen05.fence::after_thread_sync;" ::: "memory");
#else
  GGEMM_ARCH_TRAP("tcgen05.fence");
#endif
}

}  // namespace ggemm::sm100
#endif
