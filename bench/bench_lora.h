// bench_lora.h — the LoRA Q/K/V benchmarks of ggemm_bench (bench_lora.cpp):
// ggemm_lora_expand_qkv / ggemm_lora_shrink_qkv beside a per-adapter cuBLAS
// loop captured in a CUDA graph. main() (bench_grouped.cpp) owns the stream,
// handles and ceilings and lends them here.
#ifndef GGEMM_BENCH_BENCH_LORA_H
#define GGEMM_BENCH_BENCH_LORA_H

#include <cuda_runtime.h>

#include "ceilings.h"
#include "cublas_baselines.h"
#include "ggemm.h"
#include "gpu_monitor.h"
#include "timing.h"

namespace ggemm::bench {

struct LoraBenchEnv {
  ggemm_handle_t ggemm = nullptr;
  cudaStream_t stream = nullptr;
  const CublasHandle* cublas = nullptr;  // bound to `stream`
  L2Flusher* flusher = nullptr;
  GpuMonitor* monitor = nullptr;  // SM clock and power for the sustained rows, or null
  Ceilings ceilings;
};

// Registers every "lora_expand_qkv_<shape>/<impl>" and
// "lora_shrink_qkv_<shape>/<impl>" benchmark (so --benchmark_filter=lora
// selects them), and "<...>/ggemm/sustained" for the real shapes (eager
// calls back to back in one CUDA graph, as a forward pass calls them; the
// inputs stay in L2 from call to call).
void register_lora_benchmarks(const LoraBenchEnv& env);

// Frees the LoRA problem data and cuBLAS graph; call before the stream and
// the cuBLAS handle are destroyed.
void release_lora_benchmarks();

}  // namespace ggemm::bench

#endif  // GGEMM_BENCH_BENCH_LORA_H
