// Thread-block clusters (PTX ISA 9.7.13 and the special registers of 10.x):
// the CTA's rank, shared-memory addresses of a peer CTA, cluster-wide
// barriers and remote mbarrier arrivals. Used by the sm_100a cta_group::2
// kernel (two CTAs of a cluster share one MMA).
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

// mbarrier.arrive.release.cluster.shared::cluster.b64 — one arrival on the
// barrier at shared::cluster address `remote_bar` (see map_shared_to_rank).
GGEMM_DEVICE void mbarrier_arrive_cluster(uint32_t remote_bar) {
  asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];" ::"r"(remote_bar) : "memory");
}

}  // namespace ggemm::ptx
#endif
