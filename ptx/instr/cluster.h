// Thread-block clusters (PTX ISA 9.7.13 and the special registers of 10.x):
// the CTA's rank, shared-memory addresses of a peer CTA, cluster-wide
// barriers (remote mbarrier arrivals are in mbarrier.h). Used by the sm_100a
// cta_group::2 kernel (two CTAs of a cluster share one MMA) and the sm_90a
// cluster_m 2 kernel (two CTAs share a token tile through TMA multicast).
#pragma once
#include "cvta.h"

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

}  // namespace ggemm::ptx
#endif
