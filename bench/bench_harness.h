// bench_harness.h — what the timing harness itself costs (bench_harness.cpp):
// an empty kernel timed exactly as the LoRA rows time ggemm.
#ifndef GGEMM_BENCH_BENCH_HARNESS_H
#define GGEMM_BENCH_BENCH_HARNESS_H

#include <cuda_runtime.h>

#include "timing.h"

namespace ggemm::bench {

// Registers "harness_null_kernel_smem_0/graph" and
// "harness_null_kernel_smem_max/graph" (--benchmark_filter=harness).
void register_harness_benchmarks(cudaStream_t stream, L2Flusher* flusher);

// Frees their graphs and module; call before the stream is destroyed.
void release_harness_benchmarks();

}  // namespace ggemm::bench

#endif  // GGEMM_BENCH_BENCH_HARNESS_H
