// Thread-block clusters (PTX ISA 9.7.13 and the special registers of 10.x):
// the CTA's rank, shared-memory addresses of a peer CTA, cluster-wide
// barriers and remote mbarrier arrivals. Used by the sm_100a cta_group::2
// kernel (two CTAs of a cluster share one MMA) and the sm_90a cluster_m 2
// kernel (two CTAs share a token tile through TMA multicast).
#pragma once
#include "fence.h"

#if defined(__CUDACC__)
namespace ggemm::ptx {

// %cluster_ctarank — this CTA's rank in its cluster.
GGEMM_DEVICE uint32_t cluster_ctarank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}

// mapa.shared::cluster.u32 — the shared::cluster address of this CTA's
// shared variable `p` as it lies in CTA `rank` of the cluster.
GGEMM_DEVICE uint32_t map_shared_to_rank(const void *p, uint32_t rank) {
  uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(smem_addr(p)), "r"(rank));
  return remote;
}

// barrier.cluster.arrive.release + barrier.cluster.wait.acquire — every
// thread of every CTA of the cluster; orders shared-memory writes (and
// mbarrier inits) before any CTA of the cluster proceeds.
GGEMM_DEVICE void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}

// barrier.cluster.arrive.relaxed / barrier.cluster.wait — the two halves of
// a cluster barrier, work between them. Relaxed: no MEMBAR.ALL.GPU (what the
// release form costs); what needs publishing before it (mbarrier.init) is
// fenced by fence_mbarrier_init. Every thread of the cluster arrives once,
// then waits.
GGEMM_DEVICE void cluster_arrive_relaxed() {
  asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
}
GGEMM_DEVICE void cluster_wait() { asm volatile("barrier.cluster.wait.aligned;" ::: "memory"); }

// mbarrier.arrive.shared::cluster.b64 (release at CTA scope, the default) —
// one arrival on the barrier at shared::cluster address `remote_bar` (see
// map_shared_to_rank), in any CTA of the cluster. Not .release.cluster: that
// orders every earlier memory access of the thread cluster-wide, which ptxas
// implements as MEMBAR.ALL.CTA + MEMBAR.ALL.GPU, waiting for the thread's
// outstanding global stores — per pipeline stage it made the sm_90a pair
// kernel 2.4x slower (NOTES v0.6). These arrivals only say "done reading":
// a stage whose wgmmas wgmma.wait_group retired, an accumulator whose
// tcgen05.ld wait::ld completed (and tcgen05.fence::before_thread_sync
// ordered).
GGEMM_DEVICE void mbarrier_arrive_remote(uint32_t remote_bar) {
  asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];" ::"r"(remote_bar) : "memory");
}

}  // namespace ggemm::ptx
#endif
