// The host time of one ggemm call, on the host clock: a tiny grouped matmul
// (8 experts of 8 rows, N 128, K 128: the GPU's share is a few microseconds)
// enqueued again and again, each call timed alone; the stream is drained
// between batches, untimed, so the queue never fills and blocks a call.
// Rows:
//   host_call/validation_only  m = 0: the argument checks and the handle's,
//                              then the early return (what every call pays first)
//   host_call/grouped_matmul   the whole call: checks, plan, tensor maps,
//                              kernel lookup, the launch
//   host_call/cuda_launch      an empty kernel through cuLaunchKernel (the
//                              harness's null kernel): the driver's launch floor
// The difference of the first two is the plan, the tensor maps and the launch.
#include "bench_host.h"

#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "gpu_buffers.h"
#include "harness_ptx.h"
#include "ptx_kernel.h"

namespace ggemm::bench {
namespace {

struct HostProblem {
  static constexpr int64_t kExperts = 8, kRows = 8, kN = 128, kK = 128;
  DeviceBuffer a{kExperts * kRows * kK * 2}, b{kExperts * kN * kK * 2}, c{kExperts * kRows * kN * 2};
  DeviceBuffer offsets, ids, usage;
  ggemm_grouped_matmul_args args{};

  HostProblem() {
    std::vector<uint32_t> off(kExperts + 1);
    std::vector<int32_t> id(kExperts);
    for (int64_t e = 0; e <= kExperts; ++e) off[e] = uint32_t(e * kRows);
    for (int64_t e = 0; e < kExperts; ++e) id[e] = int32_t(e);
    const uint32_t stats[2] = {uint32_t(kRows), uint32_t(kExperts)};
    offsets = upload(off.data(), off.size() * sizeof(uint32_t));
    ids = upload(id.data(), id.size() * sizeof(int32_t));
    usage = upload(stats, sizeof stats);
    CUDA_CHECK(cudaMemset(a.get(), 0, a.bytes()));
    CUDA_CHECK(cudaMemset(b.get(), 0, b.bytes()));
    args.struct_size = sizeof args;
    args.a_dtype = args.b_dtype = args.c_dtype = GGEMM_DTYPE_BF16;
    args.m = kExperts * kRows, args.n = kN, args.k = kK, args.num_experts = kExperts;
    args.a = a.get(), args.b = b.get(), args.c = c.get();
    args.transpose_b = 1;
    args.a_offsets = static_cast<const uint32_t*>(offsets.get());
    args.expert_ids = static_cast<const int32_t*>(ids.get());
    args.expert_usage_stats = static_cast<const uint32_t*>(usage.get());
    args.num_groups = kExperts;
  }
};

ggemm_handle_t g_handle = nullptr;
cudaStream_t g_stream = nullptr;
std::unique_ptr<HostProblem> g_problem;
std::unique_ptr<PtxKernel> g_null_kernel;

enum class HostRow { kValidationOnly, kGroupedMatmul, kCudaLaunch };

void bench_host_call(benchmark::State& state, HostRow row) {
  if (!g_problem) g_problem = std::make_unique<HostProblem>();
  if (row == HostRow::kCudaLaunch && !g_null_kernel) {
    g_null_kernel = std::make_unique<PtxKernel>();
    const std::string error = g_null_kernel->load(kNullPtx, "ggemm_bench_null_kernel");
    if (!error.empty()) {
      g_null_kernel.reset();
      state.SkipWithError(error.c_str());
      return;
    }
  }
  ggemm_grouped_matmul_args args = g_problem->args;
  if (row == HostRow::kValidationOnly) args.m = 0;
  auto enqueue = [&] {
    if (row == HostRow::kCudaLaunch) return g_null_kernel->launch(1, 32, 0, g_stream, nullptr) == CUDA_SUCCESS;
    return ggemm_grouped_matmul(g_handle, &args, reinterpret_cast<ggemm_stream_t>(g_stream)) == GGEMM_STATUS_SUCCESS;
  };
  if (!enqueue()) {  // the first call loads the kernel: untimed
    state.SkipWithError(ggemm_last_error_message());
    return;
  }
  CUDA_CHECK(cudaStreamSynchronize(g_stream));
  int64_t in_batch = 0;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    const bool ok = enqueue();
    const auto t1 = std::chrono::steady_clock::now();
    if (!ok) {
      state.SkipWithError(ggemm_last_error_message());
      break;
    }
    state.SetIterationTime(std::chrono::duration<double>(t1 - t0).count());
    if (++in_batch == 256) {  // drain, untimed: a full queue would block the next launch
      CUDA_CHECK(cudaStreamSynchronize(g_stream));
      in_batch = 0;
    }
  }
  CUDA_CHECK(cudaStreamSynchronize(g_stream));
}

}  // namespace

void register_host_benchmarks(ggemm_handle_t handle, cudaStream_t stream) {
  g_handle = handle;
  g_stream = stream;
  const struct {
    const char* name;
    HostRow row;
  } rows[] = {{"host_call/validation_only", HostRow::kValidationOnly},
              {"host_call/grouped_matmul", HostRow::kGroupedMatmul},
              {"host_call/cuda_launch", HostRow::kCudaLaunch}};
  for (const auto& r : rows)
    benchmark::RegisterBenchmark(r.name, bench_host_call, r.row)
        ->UseManualTime()
        ->Iterations(4096)
        ->Repetitions(3)
        ->ReportAggregatesOnly(true)
        ->Unit(benchmark::kMicrosecond);
}

void release_host_benchmarks() {
  g_problem.reset();
  g_null_kernel.reset();
}

}  // namespace ggemm::bench
