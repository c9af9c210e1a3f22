// bench_harness.cpp — the floor under the decode rows' times. The LoRA
// decode goal (expand under 6 us) is measured as one graph launch between
// two events with the L2 flushed before it; a ggemm launch with no work
// takes ~4 us there on the H200. These rows time kernels that do
// (next to) nothing (PTX, JIT-loaded through the driver), one CTA per SM of
// 384 threads like ggemm's, from a CUDA graph, the same way:
//   harness_null_kernel_smem_0/graph    no dynamic shared memory
//   harness_null_kernel_smem_max/graph  the opt-in maximum, as ggemm's
//                                       kernels take (the SMs must switch
//                                       their L1 / shared-memory split after
//                                       the flush)
//   harness_null_kernel_smem_max_warm_l2/graph  the same without the flush
//                                       (beside the LoRA probes' warm-L2
//                                       rows: what a cold L2 costs a launch)
//   harness_params_smem_max/graph       an empty kernel taking as many
//                                       bytes of parameters as ggemm's
//                                       sm_90a kernels (kHarnessParamBytes)
//   harness_load_chain_{1,3}_smem_max/graph  thread 0 of every CTA follows
//                                       a chain of 1 or 3 dependent loads
//                                       through cold memory: what each link
//                                       of a kernel's start path costs
//   harness_read_32mib_smem_max/graph   4 CTAs an SM, every thread streaming
//                                       16-byte loads (4 in flight) over 32 MiB from a
//                                       cold L2: the M 4096 LoRA shrink's
//                                       activations X [4096, 4096] bf16
//   harness_read_32mib_16_in_flight_smem_max/graph  the same, 16 loads in
//                                       flight a thread
//   harness_read_256mib_smem_max/graph  the same over 256 MiB: the read
//                                       rate past the launch's ramp
//   harness_write_48mib_smem_max/graph  the same with 16-byte stores over
//                                       48 MiB: the M 4096 LoRA expand's
//                                       outputs [4096, 6144] bf16
//   harness_memcpy_32mib/graph          the driver's device-to-device copy
//                                       of 32 MiB (the copy ceiling's kind
//                                       of transfer, at the LoRA rows' size)
// so what ggemm adds over the harness, and which part of its start is what,
// can be read off one run; and the streaming rows say what the
// LoRA rows' bytes take through the same harness with nothing else to do
// (their "of copy bw" figures count the whole graphed time).
#include "bench_harness.h"

#include <benchmark/benchmark.h>
#include <cuda.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "gpu_buffers.h"
#include "harness_ptx.h"
#include "ptx_kernel.h"

namespace ggemm::bench {
namespace {

constexpr int kIterations = 20, kRepetitions = 5, kWarmup = 3;
constexpr unsigned kThreads = 384;  // ggemm's sm_90a CTA: a producer and two consumer warpgroups


// kStream{4,16}: the streaming kernel with 4 or 16 vectors in flight a
// thread; kMemcpy: a captured cudaMemcpyAsync device to device (no kernel
// of ours: the driver's copy).
enum class Kind { kNull, kParams, kLoadChain, kStream4, kStream16, kMemcpy };
constexpr int kKernels = int(Kind::kMemcpy);  // the kinds before kMemcpy have a PTX kernel

struct Row {
  const char* name;
  Kind kind;
  bool smem_max, warm_l2;
  uint32_t links;       // kLoadChain
  uint64_t bytes = 0;   // kStream*: bytes streamed; kMemcpy: bytes copied
  bool write = false;   // kStream*: stores instead of loads
};
constexpr Row kRows[] = {
    {"harness_null_kernel_smem_0/graph", Kind::kNull, false, false, 0},
    {"harness_null_kernel_smem_max/graph", Kind::kNull, true, false, 0},
    {"harness_null_kernel_smem_max_warm_l2/graph", Kind::kNull, true, true, 0},
    {"harness_params_smem_max/graph", Kind::kParams, true, false, 0},
    {"harness_load_chain_1_smem_max/graph", Kind::kLoadChain, true, false, 1},
    {"harness_load_chain_3_smem_max/graph", Kind::kLoadChain, true, false, 3},
    {"harness_read_32mib_smem_max/graph", Kind::kStream4, true, false, 0, uint64_t(32) << 20, false},
    {"harness_read_32mib_16_in_flight_smem_max/graph", Kind::kStream16, true, false, 0, uint64_t(32) << 20, false},
    {"harness_read_256mib_smem_max/graph", Kind::kStream4, true, false, 0, uint64_t(256) << 20, false},
    {"harness_write_48mib_smem_max/graph", Kind::kStream4, true, false, 0, uint64_t(48) << 20, true},
    {"harness_memcpy_32mib/graph", Kind::kMemcpy, false, false, 0, uint64_t(32) << 20, false},
};
constexpr int kNumRows = static_cast<int>(sizeof kRows / sizeof kRows[0]);

// The chain's links sit 64 KiB apart (separate lines and DRAM pages); the
// last points back at the first.
constexpr size_t kChainStride = 64 << 10, kChainLinks = 4;
// The streaming rows' buffer (the largest row's bytes; the memcpy row's
// source and destination) and grid: 4 CTAs of kThreads an SM (4 vectors in
// flight a thread: ~13 MB over the GPU).
constexpr size_t kStreamBytes = size_t(256) << 20;
constexpr unsigned kStreamCtasPerSm = 4;

struct Harness {
  cudaStream_t stream = nullptr;
  L2Flusher* flusher = nullptr;
  PtxKernel kernels[kKernels];  // [Kind]
  DeviceBuffer chain, sink, streamed;
  cudaGraphExec_t graphs[kNumRows] = {};
  int smem_max = 0, sm_count = 0;
  // load() ran to the end (it lays the chain out last).
  bool loaded() const { return chain.get() != nullptr; }
  std::string error;  // why the rows cannot run ("" = they can)
};
Harness* g_harness = nullptr;

// Loads the kernels and lays out the load chain; "" or why not.
std::string load(Harness& h) {
  static const std::string stream4 = stream_ptx(4), stream16 = stream_ptx(16);
  const char* ptx[kKernels] = {kNullPtx, kParamsPtx, kLoadChainPtx, stream4.c_str(), stream16.c_str()};
  const char* entry[kKernels] = {"ggemm_bench_null_kernel", "ggemm_bench_params_kernel", "ggemm_bench_load_chain",
                                 "ggemm_bench_stream", "ggemm_bench_stream"};
  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&h.smem_max, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  CUDA_CHECK(cudaDeviceGetAttribute(&h.sm_count, cudaDevAttrMultiProcessorCount, device));
  for (int k = 0; k < kKernels; ++k) {
    const std::string error = h.kernels[k].load(ptx[k], entry[k]);
    if (!error.empty()) return error;
    const CUresult r = h.kernels[k].set_max_dynamic_smem(h.smem_max);
    if (r != CUDA_SUCCESS) return "cuFuncSetAttribute returned CUresult " + std::to_string(int(r));
  }
  h.streamed = DeviceBuffer(kStreamBytes);
  // Every word 0x5A5A5A5A: no XOR of them is the kernel's key (0x9E3779B9).
  CUDA_CHECK(cudaMemset(h.streamed.get(), 0x5A, kStreamBytes));
  h.sink = DeviceBuffer(8);
  h.chain = DeviceBuffer(kChainStride * kChainLinks);
  std::vector<uint8_t> host(h.chain.bytes(), 0);
  const uintptr_t base = reinterpret_cast<uintptr_t>(h.chain.get());
  for (size_t i = 0; i < kChainLinks; ++i) {
    const uint64_t next = base + (i + 1) % kChainLinks * kChainStride;
    std::memcpy(&host[i * kChainStride], &next, sizeof next);
  }
  CUDA_CHECK(cudaMemcpy(h.chain.get(), host.data(), host.size(), cudaMemcpyHostToDevice));
  return "";
}

// The graph of one launch of row `r`'s kernel, captured on the harness stream.
cudaGraphExec_t capture(Harness& h, const Row& row) {
  const unsigned smem = row.smem_max ? unsigned(h.smem_max) : 0u;
  alignas(64) uint8_t param_block[kHarnessParamBytes] = {};
  void* start = h.chain.get();
  uint32_t links = row.links;
  void* sink = h.sink.get();
  void* chain_args[] = {&start, &links, &sink};
  void* params_args[] = {param_block};
  void* buffer = h.streamed.get();
  uint64_t vectors = row.bytes / 16;
  uint32_t write = row.write ? 1u : 0u;
  void* stream_args[] = {&buffer, &vectors, &write, &sink};
  const bool stream = row.kind == Kind::kStream4 || row.kind == Kind::kStream16;
  void** args = row.kind == Kind::kLoadChain ? chain_args
                : row.kind == Kind::kParams  ? params_args
                : stream                     ? stream_args
                                             : nullptr;
  const unsigned grid = unsigned(h.sm_count) * (stream ? kStreamCtasPerSm : 1u);
  cudaGraph_t graph;
  CUDA_CHECK(cudaStreamBeginCapture(h.stream, cudaStreamCaptureModeThreadLocal));
  CUresult r = CUDA_SUCCESS;
  if (row.kind == Kind::kMemcpy) {
    uint8_t* base = h.streamed.as<uint8_t>();
    CUDA_CHECK(cudaMemcpyAsync(base + kStreamBytes / 2, base, row.bytes, cudaMemcpyDeviceToDevice, h.stream));
  } else {
    r = h.kernels[int(row.kind)].launch(grid, kThreads, smem, h.stream, args);
  }
  CUDA_CHECK(cudaStreamEndCapture(h.stream, &graph));
  if (r != CUDA_SUCCESS) {
    std::fprintf(stderr, "ggemm_bench: cuLaunchKernel for %s returned CUresult %d\n", row.name, int(r));
    std::exit(1);
  }
  cudaGraphExec_t exec;
  CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  CUDA_CHECK(cudaGraphDestroy(graph));
  return exec;
}

void bench_row(benchmark::State& state, int index) {
  Harness& h = *g_harness;
  const Row& row = kRows[index];
  if (h.error.empty() && !h.loaded()) h.error = load(h);
  if (!h.error.empty()) {
    state.SkipWithError(h.error.c_str());
    return;
  }
  cudaGraphExec_t& graph = h.graphs[index];
  if (!graph) graph = capture(h, row);
  for (int i = 0; i < kWarmup; ++i) CUDA_CHECK(cudaGraphLaunch(graph, h.stream));
  CUDA_CHECK(cudaStreamSynchronize(h.stream));
  EventTimer timer;
  std::vector<double> ms;
  for (auto _ : state) {
    const float t =
        timer.time(h.stream, row.warm_l2 ? nullptr : h.flusher, [&] { CUDA_CHECK(cudaGraphLaunch(graph, h.stream)); });
    state.SetIterationTime(t * 1e-3);
    ms.push_back(t);
  }
  state.counters["us_median"] = median(ms) * 1e3;
  state.counters["smem_bytes"] = row.smem_max ? h.smem_max : 0;
  // Bytes moved a second: a copy counts what it reads and what it writes,
  // as the copy ceiling (ceilings.h) does.
  if (row.bytes)
    state.counters["GBps"] = (row.kind == Kind::kMemcpy ? 2.0 : 1.0) * double(row.bytes) / (median(ms) * 1e-3) / 1e9;
  // What the empty kernel costs in a busy stream (timing.h): the floor of
  // every row's us_in_stream, as the lone-call time is of us_median.
  if (!row.warm_l2)
    state.counters["us_in_stream"] = in_stream_ms(h.stream, *h.flusher, [&] {
                                       CUDA_CHECK(cudaGraphLaunch(graph, h.stream));
                                     }) * 1e3;
}

}  // namespace

void register_harness_benchmarks(cudaStream_t stream, L2Flusher* flusher) {
  static Harness harness;
  harness.stream = stream;
  harness.flusher = flusher;
  g_harness = &harness;
  for (int i = 0; i < kNumRows; ++i) {
    benchmark::RegisterBenchmark(kRows[i].name, bench_row, i)
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
  for (PtxKernel& k : g_harness->kernels) k.unload();
  g_harness->chain = DeviceBuffer();
  g_harness->sink = DeviceBuffer();
  g_harness->streamed = DeviceBuffer();
}

}  // namespace ggemm::bench
