// Memory fences between the generic and async proxies (PTX ISA 9.7.13,
// parallel synchronization and communication, "membar / fence").
#pragma once
#include "arch.h"

#if defined(__CUDACC__)
namespace ggemm::ptx {

// fence.proxy.async.shared::cta — makes this thread's generic-proxy writes to
// shared memory (st.shared, stmatrix) visible to the async proxy (TMA, wgmma).
GGEMM_DEVICE void fence_proxy_async_shared_cta() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

// fence.mbarrier_init.release.cluster — publishes mbarrier.init to the async
// proxy (TMA complete_tx) before the barriers are used.
GGEMM_DEVICE void fence_mbarrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

}  // namespace ggemm::ptx
#endif
