// bar.sync: named CTA barriers (PTX ISA 9.7.13, parallel synchronization
// and communication, "bar, barrier").
#pragma once
#include "arch.h"

#if defined(__CUDACC__)
namespace ggemm::ptx {

// bar.sync id, count — named barrier over `count` threads (a multiple of 32).
// Every participating warp must execute it with the same id and count.
GGEMM_DEVICE void bar_sync(uint32_t id, uint32_t count) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(count) : "memory");
}

// bar.arrive id, count — arrives on named barrier `id` without waiting; the
// threads that bar_sync on it (count in all, arrivals included) go on once
// every arrival is in (a one-way signal between warpgroups).
GGEMM_DEVICE void bar_arrive(uint32_t id, uint32_t count) {
  asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(count) : "memory");
}

}  // namespace ggemm::ptx
#endif
