// bench_harness.cpp — the floor under the decode rows' times. The LoRA
// decode goal (expand under 6 us) is measured as one graph launch between
// two events with the L2 flushed before it; a ggemm launch with no work
// takes ~4.4 us there (NOTES v0.7-v0.9). These rows time a kernel that does
// nothing (PTX, JIT-loaded through the driver), one CTA per SM of 384
// threads like ggemm's, from a CUDA graph, the same way:
//   harness_null_kernel_smem_0/graph    no dynamic shared memory
//   harness_null_kernel_smem_max/graph  the opt-in maximum, as ggemm's
//                                       kernels take (the SMs must switch
//                                       their L1 / shared-memory split after
//                                       the flush's memset)
//   harness_null_kernel_smem_max_warm_l2/graph  the same without the flush
//                                       (beside the LoRA probes' warm-L2
//                                       rows: what a cold L2 costs a launch)
// so what ggemm adds over the harness, and what the shared-memory carve-out
// costs, can be read off one run.
#include "bench_harness.h"

#include <benchmark/benchmark.h>
#include <cuda.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "gpu_buffers.h"
#include "ptx_kernel.h"

namespace ggemm::bench {
namespace {

constexpr int kIterations = 20, kRepetitions = 5, kWarmup = 3;
constexpr unsigned kThreads = 384;  // ggemm's sm_90a CTA: a producer and two consumer warpgroups

// Plain sm_90 (not sm_90a) PTX, so the driver also JIT-compiles it for later
// architectures.
constexpr char kNullPtx[] =
    ".version 8.0\n"
    ".target sm_90\n"
    ".address_size 64\n"
    ".visible .entry ggemm_bench_null_kernel()\n"
    "{\n"
    "  ret;\n"
    "}\n";

struct Harness {
  cudaStream_t stream = nullptr;
  L2Flusher* flusher = nullptr;
  PtxKernel kernel;
  cudaGraphExec_t graphs[2] = {nullptr, nullptr};  // [smem_max]
  int smem_max = 0, sm_count = 0;
  std::string error;  // why the rows cannot run ("" = they can)
};
Harness* g_harness = nullptr;

// Loads the null kernel; "" or why not.
std::string load(Harness& h) {
  std::string error = h.kernel.load(kNullPtx, "ggemm_bench_null_kernel");
  if (!error.empty()) return error;
  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&h.smem_max, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  CUDA_CHECK(cudaDeviceGetAttribute(&h.sm_count, cudaDevAttrMultiProcessorCount, device));
  const CUresult r = h.kernel.set_max_dynamic_smem(h.smem_max);
  if (r != CUDA_SUCCESS) return "cuFuncSetAttribute returned CUresult " + std::to_string(int(r));
  return "";
}

// The graph of one null-kernel launch with `smem` bytes of dynamic shared
// memory, captured on the harness stream.
cudaGraphExec_t capture(Harness& h, unsigned smem) {
  cudaGraph_t graph;
  CUDA_CHECK(cudaStreamBeginCapture(h.stream, cudaStreamCaptureModeThreadLocal));
  const CUresult r = h.kernel.launch(unsigned(h.sm_count), kThreads, smem, h.stream, nullptr);
  CUDA_CHECK(cudaStreamEndCapture(h.stream, &graph));
  if (r != CUDA_SUCCESS) {
    std::fprintf(stderr, "ggemm_bench: cuLaunchKernel of the null kernel returned CUresult %d\n", int(r));
    std::exit(1);
  }
  cudaGraphExec_t exec;
  CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  CUDA_CHECK(cudaGraphDestroy(graph));
  return exec;
}

void bench_null_kernel(benchmark::State& state, bool smem_max, bool warm_l2) {
  Harness& h = *g_harness;
  if (h.error.empty() && !h.kernel.loaded()) h.error = load(h);
  if (!h.error.empty()) {
    state.SkipWithError(h.error.c_str());
    return;
  }
  cudaGraphExec_t& graph = h.graphs[smem_max];
  if (!graph) graph = capture(h, smem_max ? unsigned(h.smem_max) : 0u);
  for (int i = 0; i < kWarmup; ++i) CUDA_CHECK(cudaGraphLaunch(graph, h.stream));
  CUDA_CHECK(cudaStreamSynchronize(h.stream));
  EventTimer timer;
  std::vector<double> ms;
  for (auto _ : state) {
    const float t =
        timer.time(h.stream, warm_l2 ? nullptr : h.flusher, [&] { CUDA_CHECK(cudaGraphLaunch(graph, h.stream)); });
    state.SetIterationTime(t * 1e-3);
    ms.push_back(t);
  }
  state.counters["us_median"] = median(ms) * 1e3;
  state.counters["smem_bytes"] = smem_max ? h.smem_max : 0;
}

}  // namespace

void register_harness_benchmarks(cudaStream_t stream, L2Flusher* flusher) {
  static Harness harness;
  harness.stream = stream;
  harness.flusher = flusher;
  g_harness = &harness;
  const struct {
    const char* name;
    bool smem_max, warm_l2;
  } rows[] = {{"harness_null_kernel_smem_0/graph", false, false},
              {"harness_null_kernel_smem_max/graph", true, false},
              {"harness_null_kernel_smem_max_warm_l2/graph", true, true}};
  for (const auto& row : rows) {
    benchmark::RegisterBenchmark(row.name, bench_null_kernel, row.smem_max, row.warm_l2)
        ->UseManualTime()
        ->Iterations(kIterations)
        ->Repetitions(kRepetitions)
        ->ReportAggregatesOnly(true)
        ->Unit(benchmark::kMicrosecond);
  }
}

void release_harness_benchmarks() {
  if (!g_harness) return;
  for (cudaGraphExec_t& g : g_harness->graphs) {
    if (g) CUDA_CHECK(cudaGraphExecDestroy(g));
    g = nullptr;
  }
  g_harness->kernel.unload();
}

}  // namespace ggemm::bench
