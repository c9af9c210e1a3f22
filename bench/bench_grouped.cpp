// bench_grouped.cpp — ggemm_bench: ggemm beside two cuBLAS baselines on
// issue 3's MoE shapes (Google Benchmark). main() also registers the LoRA
// Q/K/V benchmarks of bench_lora.cpp (issue 4), named lora_expand_qkv_... and
// lora_shrink_qkv_... (--benchmark_filter=lora runs only those).
//
// Each shape runs <shape>/ggemm, <shape>/cublas_grouped
// (cublasGemmGroupedBatchedEx, one group per expert) and
// <shape>/cublas_loop_graph (one cublasGemmEx per expert in a CUDA graph).
//
// Timing: every benchmark iteration is one call between two CUDA events,
// with a 2x-L2 memset before the start event (outside the timed region);
// that event time is the manual iteration time. A repetition is kIterations
// calls and its counters come from the MEDIAN of those calls; there are
// kRepetitions repetitions and only aggregates are reported, so read the
// "_median" rows: the median over repetitions of the per-repetition medians.
//
// Counters: us_median; TFLOP/s (2 * rows * N * K); GB/s (bytes = weights of
// the experts that have rows + A + C, 2 bytes each); frac_floor = floor /
// measured, floor = max(FLOPs / dense rate, bytes / copy bandwidth), both
// ceilings measured once by this process and printed in the context.
#include <benchmark/benchmark.h>

#include "absl/flags/parse.h"

#include <chrono>
#include <cstdlib>
#include <cuda_runtime.h>

#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bench_config.h"
#include "bench_harness.h"
#include "bench_host.h"
#include "gpu_monitor.h"
#include "bench_lora.h"
#include "ceilings.h"
#include "cublas_baselines.h"
#include "ggemm.h"
#include "gpu_buffers.h"
#include "timing.h"

namespace {

using namespace ggemm::bench;

constexpr int kIterations = 20;
constexpr int kRepetitions = 5;
constexpr int kWarmup = 3;

enum class Impl { kGgemm, kCublasGrouped, kCublasLoopGraph };

const char* impl_name(Impl impl) {
  switch (impl) {
    case Impl::kGgemm: return "ggemm";
    case Impl::kCublasGrouped: return "cublas_grouped";
    case Impl::kCublasLoopGraph: return "cublas_loop_graph";
  }
  return "?";
}

// What every benchmark shares, made once in main after the GPU probe.
struct Session {
  ggemm_handle_t ggemm = nullptr;
  cudaStream_t stream = nullptr;
  std::unique_ptr<CublasHandle> cublas;
  std::unique_ptr<L2Flusher> flusher;
  std::unique_ptr<GpuMonitor> monitor;  // SM clock and power (NVML), for the sustained rows
  Ceilings ceilings;

  // The current shape's data. Benchmarks run in registration order, one
  // shape's three after another, so one shape's data is kept at a time (the
  // largest weight set, Mixtral gate_up, is 1.9 GB).
  int shape_index = -1;
  std::unique_ptr<MoeProblem> problem;
  std::unique_ptr<CublasGrouped> grouped;
  std::unique_ptr<CublasLoopGraph> loop;
  DeviceBuffer zero_ids;  // --one_expert: every group on expert 0
  DeviceBuffer row_scale;  // --epilogue=row_scale: a weight per row

  MoeProblem& use_shape(int index) {
    if (index != shape_index) {
      zero_ids = DeviceBuffer();
      row_scale = DeviceBuffer();
      loop.reset();
      grouped.reset();
      problem.reset();
      std::fprintf(stderr, "ggemm_bench: preparing %s\n", kMoeShapes[index].name);
      // A fixed seed per shape: the routing (and so the numbers) reproduce.
      problem = std::make_unique<MoeProblem>(make_moe_problem(
          kMoeShapes[index], 0xb5e70000u + static_cast<uint64_t>(index), false, bench_data_distribution()));
      shape_index = index;
    }
    return *problem;
  }
};
Session* g_session = nullptr;

// The call under test, enqueued on the session stream; "" on success, else
// the library's error.
std::string enqueue_call(Session& s, const MoeProblem& p, Impl impl,
                         const ggemm_grouped_matmul_args& args) {
  switch (impl) {
    case Impl::kGgemm: {
      const ggemm_status st = ggemm_grouped_matmul(s.ggemm, &args, s.stream);
      if (st == GGEMM_STATUS_SUCCESS) return "";
      return std::string(ggemm_status_string(st)) + ": " + ggemm_last_error_message();
    }
    case Impl::kCublasGrouped: {
      if (!s.grouped) s.grouped = std::make_unique<CublasGrouped>(p);
      const cublasStatus_t st = s.grouped->run(s.cublas->get());
      return st == CUBLAS_STATUS_SUCCESS ? "" : cublasGetStatusName(st);
    }
    case Impl::kCublasLoopGraph:
      if (!s.loop) s.loop = std::make_unique<CublasLoopGraph>(*s.cublas, p, s.stream);
      s.loop->launch(s.stream);
      return "";
  }
  return "unknown implementation";
}


// Calls per back-to-back run of the sustained rows.
constexpr int kBackToBack = 20;

// Cold: one call after an L2 flush (what a call costs on its own).
// Sustained: kBackToBack calls back to back in one CUDA graph, no flush (how
// a forward pass calls it; compute-bound rows run at the power cap there),
// per call, with the SM clock and power read while each run is on the GPU;
// each repetition after kRestBeforeSustained of an idle GPU, so that none
// starts at the clock the one before it left (bench/graph_timing.py, REST_S).
enum class Mode { kCold, kSustained };
constexpr std::chrono::milliseconds kRestBeforeSustained{500};

void bench_shape(benchmark::State& state, int shape_index, Impl impl, Mode mode) {
  Session& s = *g_session;
  const MoeProblem& p = s.use_shape(shape_index);
  // Device arrays (offsets, expert ids, usage stats) were uploaded with the
  // problem; nothing but the call itself is inside the timed region.
  ggemm_grouped_matmul_args args = p.args();
  args.config = bench_config_override();
  // C's contents do not matter to the time: the accumulate experiment adds
  // into whatever the buffer holds.
  const bool accumulate = impl == Impl::kGgemm && bench_accumulate_override();
  if (accumulate) args.epilogue = GGEMM_EPILOGUE_ACCUMULATE;
  const bool row_scale = impl == Impl::kGgemm && bench_row_scale_override();
  if (row_scale) {
    if (!s.row_scale.get()) {
      const std::vector<float> weights(size_t(p.shape.rows), 0.125f);
      s.row_scale = upload(weights.data(), weights.size() * sizeof(float));
    }
    args.epilogue = GGEMM_EPILOGUE_ROW_SCALE;
    args.row_scale = static_cast<const float*>(s.row_scale.get());
  }
  if (impl == Impl::kGgemm && bench_one_expert_override()) {
    if (!s.zero_ids.get()) {
      const std::vector<int32_t> zeros(size_t(args.num_groups), 0);
      s.zero_ids = upload(zeros.data(), zeros.size() * sizeof(int32_t));
    }
    args.expert_ids = static_cast<const int32_t*>(s.zero_ids.get());
  }
  const double bytes = p.bytes() + (accumulate ? 2.0 * double(p.shape.rows) * double(p.shape.n) : 0.0) +
                       (row_scale ? 4.0 * double(p.shape.rows) : 0.0);

  // Warm-up: module loading, cuBLAS heuristics, graph upload; a call that is
  // refused outright skips the benchmark with the library's message.
  for (int i = 0; i < kWarmup; ++i) {
    const std::string err = enqueue_call(s, p, impl, args);
    if (!err.empty()) {
      state.SkipWithError(err.c_str());
      return;
    }
  }
  CUDA_CHECK(cudaStreamSynchronize(s.stream));

  EventTimer timer;
  std::vector<double> ms, mhz, watts;
  std::string err;
  auto call = [&] { return enqueue_call(s, p, impl, args); };
  BackToBack back_to_back;
  if (mode == Mode::kSustained) {
    err = back_to_back.prepare(s.stream, kBackToBack, call);
    if (!err.empty()) {
      state.SkipWithError(err.c_str());
      return;
    }
    CUDA_CHECK(cudaStreamSynchronize(s.stream));
    std::this_thread::sleep_for(kRestBeforeSustained);
  }
  // The clock and power, read while a back-to-back run is on the GPU.
  auto read_monitor = [&] {
    if (!s.monitor || !s.monitor->ok()) return;
    mhz.push_back(s.monitor->sm_mhz());
    watts.push_back(s.monitor->power_w());
  };
  for (auto _ : state) {
    const float t = mode == Mode::kCold
                        ? timer.time(s.stream, s.flusher.get(), [&] { err = call(); })
                        : back_to_back.time_per_call(s.stream, timer, [&] { err = call(); }, read_monitor);
    if (!err.empty()) {
      state.SkipWithError(err.c_str());
      break;
    }
    state.SetIterationTime(t * 1e-3);
    ms.push_back(t);
  }
  if (ms.empty()) return;
  if (mode == Mode::kSustained) {
    state.counters["graph"] = back_to_back.captured() ? 1 : 0;  // 0: back to back on the stream, not captured
    if (!mhz.empty()) {
      state.counters["sm_mhz"] = median(mhz);
      state.counters["watts"] = median(watts);
    }
  }

  const double sec = median(ms) * 1e-3;
  state.counters["us_median"] = sec * 1e6;
  state.counters["TFLOP/s"] = p.flops() / sec * 1e-12;
  state.counters["GB/s"] = bytes / sec * 1e-9;
  state.counters["frac_floor"] = s.ceilings.floor_seconds(p.flops(), bytes) / sec;
  state.counters["groups"] = p.used_groups;
  state.counters["max_rows"] = p.max_rows;
}

std::string fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

// The dense ceiling again, last in the run: the floor uses the one measured
// at the start (~20 ms of GEMMs before ~6 min of rows), and that rate moved
// 760-830 TFLOP/s across runs on the H200. Context only, not in any floor:
// how far the clocks drifted between the two says how much of a run's
// fractions is the ceiling's moment.
void bench_dense_ceiling_at_end(benchmark::State& state) {
  Session& s = *g_session;
  double flops_per_s = 0;
  for (auto _ : state) {
    flops_per_s = measure_dense_flops_per_s(*s.cublas, s.stream);
    state.SetIterationTime(2.0 * kCeilingGemmDim * double(kCeilingGemmDim) * kCeilingGemmDim / flops_per_s);
  }
  state.counters["tflops"] = flops_per_s * 1e-12;
  state.counters["tflops_at_start"] = s.ceilings.dense_flops_per_s * 1e-12;
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);  // takes the --benchmark_* flags out of argv
  absl::ParseCommandLine(argc, argv);  // the rest: bench_flags.h (unknown flags are errors)

  const GpuProbe probe = probe_gpu();
  if (!probe.handle) {
    std::printf("ggemm_bench: skipped, no usable GPU (%s; %s). The benchmarks need an NVIDIA "
                "Hopper (sm_90) or Blackwell B200/GB200 (sm_100) GPU; nothing was measured.\n",
                probe.runtime_result.c_str(), probe.ggemm_result.c_str());
    return 0;
  }

  Session s;
  s.ggemm = probe.handle;
  CUDA_CHECK(cudaSetDevice(0));
  CUDA_CHECK(cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking));
  s.cublas = std::make_unique<CublasHandle>(s.stream);
  s.flusher = std::make_unique<L2Flusher>();
  s.monitor = std::make_unique<GpuMonitor>(0);

  // The two ceilings of the roofline floor, measured once on this device.
  std::fprintf(stderr, "ggemm_bench: measuring the ceilings\n");
  s.ceilings = measure_ceilings(*s.cublas, s.stream);
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  benchmark::AddCustomContext("device", prop.name);
  benchmark::AddCustomContext("dense_bf16_tflops", fmt("%.1f", s.ceilings.dense_flops_per_s * 1e-12));
  benchmark::AddCustomContext("copy_gbps", fmt("%.1f", s.ceilings.copy_bytes_per_s * 1e-9));
  benchmark::AddCustomContext("write_gbps", fmt("%.1f", s.ceilings.write_bytes_per_s * 1e-9));
  benchmark::AddCustomContext(
      "ceilings", "measured by this process: median cuBLAS 8192^3 bf16 GEMM (fp32 accumulate, "
                  "random data); median 2 GiB device-to-device cudaMemcpy, read + write bytes; "
                  "write_gbps: median 2 GiB cudaMemsetAsync (context only, not in the floor)");
  benchmark::AddCustomContext(
      "timing", "per iteration: CUDA events around one call, L2 flushed before it (" +
                    fmt("%.0f", static_cast<double>(s.flusher->bytes() >> 20)) +
                    " MiB: " + s.flusher->describe() + ", untimed); counters from the median of " +
                    std::to_string(kIterations) + " iterations per repetition; read _median rows");
  std::fprintf(stderr, "ggemm_bench: dense bf16 %.1f TFLOP/s, copy %.1f GB/s, write %.1f GB/s\n",
               s.ceilings.dense_flops_per_s * 1e-12, s.ceilings.copy_bytes_per_s * 1e-9,
               s.ceilings.write_bytes_per_s * 1e-9);

  for (size_t i = 0; i < kMoeShapes.size(); ++i) {
    for (Mode mode : {Mode::kCold, Mode::kSustained})
    for (Impl impl : {Impl::kGgemm, Impl::kCublasGrouped, Impl::kCublasLoopGraph}) {
      // Not the cuBLAS loop back to back: its call is a graph launch, which
      // a stream being captured refuses (the capture aborted the whole run).
      if (mode == Mode::kSustained && impl == Impl::kCublasLoopGraph) continue;
      const std::string name =
          std::string(kMoeShapes[i].name) + "/" + impl_name(impl) + (mode == Mode::kSustained ? "/sustained" : "");
      benchmark::RegisterBenchmark(name.c_str(), bench_shape, static_cast<int>(i), impl, mode)
          ->UseManualTime()
          ->Iterations(kIterations)
          ->Repetitions(bench_repetitions_override(kRepetitions))
          ->ReportAggregatesOnly(true)
          ->Unit(benchmark::kMicrosecond);
    }
  }

  LoraBenchEnv lora_env;
  lora_env.ggemm = s.ggemm;
  lora_env.stream = s.stream;
  lora_env.cublas = s.cublas.get();
  lora_env.flusher = s.flusher.get();
  lora_env.monitor = s.monitor.get();
  lora_env.ceilings = s.ceilings;
  register_lora_benchmarks(lora_env);
  register_harness_benchmarks(s.stream, s.flusher.get());
  register_host_benchmarks(s.ggemm, s.stream);
  benchmark::RegisterBenchmark("ceiling_dense_8192_at_end", bench_dense_ceiling_at_end)
      ->UseManualTime()
      ->Iterations(1)
      ->Unit(benchmark::kMicrosecond);

  g_session = &s;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();

  // Release cuBLAS objects and buffers before their stream and handle.
  release_lora_benchmarks();
  release_harness_benchmarks();
  release_host_benchmarks();
  s.loop.reset();
  s.grouped.reset();
  s.problem.reset();
  s.cublas.reset();
  s.flusher.reset();
  CUDA_CHECK(cudaStreamDestroy(s.stream));
  ggemm_destroy(s.ggemm);
  return 0;
}
