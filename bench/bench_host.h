// bench_host.h — the host time of one ggemm call (bench_host.cpp): how long
// the calling thread spends in ggemm_grouped_matmul on a problem too small
// for the GPU to matter, split into its parts.
#ifndef GGEMM_BENCH_BENCH_HOST_H
#define GGEMM_BENCH_BENCH_HOST_H

#include <cuda_runtime.h>

#include "ggemm.h"

namespace ggemm::bench {

// Registers the "host_call/..." rows (--benchmark_filter=host_call).
void register_host_benchmarks(ggemm_handle_t handle, cudaStream_t stream);
void release_host_benchmarks();

}  // namespace ggemm::bench

#endif  // GGEMM_BENCH_BENCH_HOST_H
