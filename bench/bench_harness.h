// bench_harness.h — what the timing harness itself costs (bench_harness.cpp):
// an empty kernel timed exactly as the LoRA rows time ggemm, and the parts
// of a kernel's start (its parameters, dependent loads from cold memory).
#ifndef GGEMM_BENCH_BENCH_HARNESS_H
#define GGEMM_BENCH_BENCH_HARNESS_H

#include <cuda_runtime.h>

#include "timing.h"

namespace ggemm::bench {

// Registers the "harness_*" rows (--benchmark_filter=harness; the list is
// at the top of bench_harness.cpp).
void register_harness_benchmarks(cudaStream_t stream, L2Flusher* flusher);

// Frees their graphs, modules and buffers; call before the stream is destroyed.
void release_harness_benchmarks();

}  // namespace ggemm::bench

#endif  // GGEMM_BENCH_BENCH_HARNESS_H
