// TMA: bulk tensor copies between global and shared memory through a
// CUtensorMap (PTX ISA 9.7.9.25 "cp.async.bulk.tensor").
#pragma once
#include <cuda.h>

#include <cstdio>

#include "cvta.h"

#if defined(__CUDACC__)
namespace ggemm::ptx {

// cp.async.bulk.prefetch.L2.global — starts `bytes` (a multiple of 16, from
// a 16-byte aligned address, inside an allocation) on their way into L2; a
// hint that nothing waits for.
GGEMM_DEVICE void bulk_prefetch_l2(const void *src, uint32_t bytes) {
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(reinterpret_cast<uint64_t>(src)), "r"(bytes)
               : "memory");
}

// cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes — a
// plain copy of `bytes` (a multiple of 16; both addresses 16-byte aligned)
// from global into this CTA's shared memory, completing them on `bar`. Any
// thread; no tensor map.
GGEMM_DEVICE void bulk_copy_g2s(void *smem_dst, const void *src, uint32_t bytes, uint64_t *bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
          smem_addr(smem_dst)),
      "l"(reinterpret_cast<uint64_t>(src)), "r"(bytes), "r"(smem_addr(bar))
      : "memory");
}

// cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes —
// `bytes` (a multiple of 16) of this CTA's shared memory into a peer's, at
// shared::cluster address `remote_dst`, completing them on the peer's
// mbarrier `remote_bar` (both from map_shared_to_rank). The source must stay
// as it is until the peer has seen the bytes land. One thread.
GGEMM_DEVICE void bulk_copy_s2cluster(uint32_t remote_dst, const void *smem_src, uint32_t bytes,
                                      uint32_t remote_bar) {
  asm volatile("cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                   remote_dst),
               "r"(smem_addr(smem_src)), "r"(bytes), "r"(remote_bar)
               : "memory");
}

// prefetch.tensormap — warms the descriptor cache; any thread, once.
GGEMM_DEVICE void prefetch_tensormap(const CUtensorMap *map) {
  asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
}

// cp.async.bulk.tensor.3d global -> shared, completing `bytes` on `bar`.
// Issued by one thread. Coordinates are in elements, innermost first;
// out-of-bounds elements are filled with zeros.
GGEMM_DEVICE void tma_load_3d(void *smem_dst, const CUtensorMap *map, uint64_t *bar, int32_t c0,
                              int32_t c1, int32_t c2) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4, %5}], [%2];" ::"r"(smem_addr(smem_dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(smem_addr(bar)), "r"(c0), "r"(c1), "r"(c2)
      : "memory");
}

// cp.async.bulk.tensor.{2,3}d ... .cta_group::2 — as tma_load_{2,3}d into this
// CTA's shared memory, but completing the bytes on the barrier at the
// shared::cluster address `pair_bar`, which may lie in the peer CTA of a
// cta_group::2 pair (sm_100a; map_shared_to_rank gives the address).
GGEMM_DEVICE void tma_load_3d_to_pair_barrier(void *smem_dst, const CUtensorMap *map, uint32_t pair_bar, int32_t c0,
                                              int32_t c1, int32_t c2) {
#if GGEMM_SM100A
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.cta_group::2"
      " [%0], [%1, {%3, %4, %5}], [%2];" ::"r"(smem_addr(smem_dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(pair_bar), "r"(c0), "r"(c1), "r"(c2)
      : "memory");
#else
  GGEMM_ARCH_TRAP("cp.async.bulk.tensor .cta_group::2");
#endif
}
GGEMM_DEVICE void tma_load_2d_to_pair_barrier(void *smem_dst, const CUtensorMap *map, uint32_t pair_bar, int32_t c0,
                                              int32_t c1) {
#if GGEMM_SM100A
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.cta_group::2"
      " [%0], [%1, {%3, %4}], [%2];" ::"r"(smem_addr(smem_dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(pair_bar), "r"(c0), "r"(c1)
      : "memory");
#else
  GGEMM_ARCH_TRAP("cp.async.bulk.tensor .cta_group::2");
#endif
}

// cp.async.bulk.tensor.4d global -> shared; see tma_load_3d.
GGEMM_DEVICE void tma_load_4d(void *smem_dst, const CUtensorMap *map, uint64_t *bar, int32_t c0,
                              int32_t c1, int32_t c2, int32_t c3) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4, %5, %6}], [%2];" ::"r"(smem_addr(smem_dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(smem_addr(bar)), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
      : "memory");
}

// cp.async.bulk.tensor.5d global -> shared; see tma_load_3d.
GGEMM_DEVICE void tma_load_5d(void *smem_dst, const CUtensorMap *map, uint64_t *bar, int32_t c0, int32_t c1,
                              int32_t c2, int32_t c3, int32_t c4) {
  asm volatile(
      "cp.async.bulk.tensor.5d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4, %5, %6, %7}], [%2];" ::"r"(smem_addr(smem_dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(smem_addr(bar)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(c4)
      : "memory");
}

// cp.async.bulk.tensor.2d global -> shared; see tma_load_3d.
GGEMM_DEVICE void tma_load_2d(void *smem_dst, const CUtensorMap *map, uint64_t *bar, int32_t c0,
                              int32_t c1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4}], [%2];" ::"r"(smem_addr(smem_dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(smem_addr(bar)), "r"(c0), "r"(c1)
      : "memory");
}

// cp.async.bulk.tensor.2d ... .multicast::cluster — as tma_load_2d, but the
// box lands at the same shared-memory offset in every CTA of the cluster
// whose bit is set in `cta_mask`, completing its bytes on each one's barrier
// at `bar`'s offset (sm_90a and later).
GGEMM_DEVICE void tma_load_2d_multicast(void *smem_dst, const CUtensorMap *map, uint64_t *bar, int32_t c0,
                                        int32_t c1, uint16_t cta_mask) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
      " [%0], [%1, {%3, %4}], [%2], %5;" ::"r"(smem_addr(smem_dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(smem_addr(bar)), "r"(c0), "r"(c1), "h"(cta_mask)
      : "memory");
}

// cp.async.bulk.tensor.3d ... .multicast::cluster — tma_load_3d's box landing
// at the same shared-memory offset in every CTA of the cluster whose bit is
// set in `cta_mask`, as tma_load_2d_multicast.
GGEMM_DEVICE void tma_load_3d_multicast(void *smem_dst, const CUtensorMap *map, uint64_t *bar, int32_t c0,
                                        int32_t c1, int32_t c2, uint16_t cta_mask) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
      " [%0], [%1, {%3, %4, %5}], [%2], %6;" ::"r"(smem_addr(smem_dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(smem_addr(bar)), "r"(c0), "r"(c1), "r"(c2), "h"(cta_mask)
      : "memory");
}

// cp.async.bulk.tensor.2d shared -> global, in the calling thread's bulk
// group. Elements out of the tensor's bounds are not written. The shared
// memory must have been fenced (fence_proxy_async_shared_cta) by its writers.
GGEMM_DEVICE void tma_store_2d(const CUtensorMap *map, const void *smem_src, int32_t c0,
                               int32_t c1) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];" ::"l"(
                   reinterpret_cast<uint64_t>(map)),
               "r"(smem_addr(smem_src)), "r"(c0), "r"(c1)
               : "memory");
}

// cp.async.bulk.commit_group — closes the calling thread's bulk group.
GGEMM_DEVICE void tma_store_commit_group() {
  asm volatile("cp.async.bulk.commit_group;" ::: "memory");
}

// cp.async.bulk.wait_group.read N — waits until at most N of the calling
// thread's bulk groups still read their shared-memory source.
template <int N>
GGEMM_DEVICE void tma_store_wait_group_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(N) : "memory");
}

}  // namespace ggemm::ptx
#endif
