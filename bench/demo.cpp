// demo.cpp — ggemm_demo, the main job: one realistic MoE grouped GEMM,
// DeepSeek-V3 EP8 gate_up at prefill (32 local experts, 4096 routed rows,
// N 4096, K 7168, Zipf-skewed routing, bf16, weights [E, N, K]). It checks
// every output element against the CPU reference, proves the cuBLAS baseline
// computes the same product, then times both against the roofline floor.
//
// Usage: ggemm_demo [seed]   (fresh random data unless a seed is given)
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "ceilings.h"
#include "cublas_baselines.h"
#include "ggemm.h"
#include "ggemm_reference.h"
#include "gpu_buffers.h"
#include "timing.h"

ABSL_FLAG(uint64_t, seed, 0, "the random data's seed (0 = a fresh one each run)");

namespace {

using namespace ggemm::bench;

constexpr int kWarmup = 5;
constexpr int kReps = 30;  // median of these

void print_no_gpu(const GpuProbe& probe) {
  std::printf(
      "ggemm_demo: no usable GPU, so nothing was run. The demo looked for a CUDA device "
      "through the CUDA runtime (%s) and then for a ggemm handle on device 0 (%s). It needs "
      "an NVIDIA Hopper (sm_90) or Blackwell B200/GB200 (sm_100) GPU with a working driver; the GPU "
      "tests in tests/ skip their GPU cases the same way, with the same reason. Exiting with "
      "status 0 because a machine without a GPU is not an error.\n",
      probe.runtime_result.c_str(), probe.ggemm_result.c_str());
}

// |got - ref| <= atol + rtol * |ref| for every element.
//  rtol = 2^-7: both sides round an fp32 sum to bf16 (8 significant bits);
//    sums taken in a different order can round to neighbouring bf16 values,
//    and one bf16 ulp is at most 2^-7 of the value.
//  atol = 2^-8 * sqrt(K) * 1/3: A and W are uniform in [-1, 1], so a product
//    a*w has rms 1/3 and an output, a sum of K of them, is typically
//    sqrt(K)/3 in size; atol is half a bf16 ulp of such a typical output.
//    Summation differences (order, the tensor cores' internal alignment)
//    scale with the terms and partial sums, not with the result, so an
//    output that cancels to near zero still carries them where rtol*|ref|
//    vanishes. atol sits far above those (fp32: ~2^-24 of the partial sums)
//    and far below a real bug: one missing K-tile of 64 terms moves an
//    output by ~sqrt(64)/3 = 2.7, against atol = 0.11 at K = 7168.
struct Tolerance {
  double atol;
  double rtol;
};
Tolerance bf16_tolerance(int64_t k) {
  return {std::ldexp(1.0, -8) * std::sqrt(static_cast<double>(k)) / 3.0, std::ldexp(1.0, -7)};
}

struct CheckResult {
  double max_abs_err = 0, worst_err_over_limit = 0, rel_frobenius = 0;
  int64_t mismatches = 0;
};

// Compares row-major [rows, cols] bf16 matrices; prints the first mismatches
// with coordinates. A NaN (the 0xFF poison: an element never written) fails.
CheckResult compare(const char* label, const std::vector<uint16_t>& got,
                    const std::vector<uint16_t>& ref, int64_t cols, Tolerance tol) {
  using ggemm::ref::bf16_to_float;
  CheckResult r;
  double diff2 = 0, ref2 = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double want = bf16_to_float(ref[i]), have = bf16_to_float(got[i]);
    const double err = std::fabs(have - want), limit = tol.atol + tol.rtol * std::fabs(want);
    if (!(err <= limit)) {  // also true for NaN
      if (r.mismatches < 8)
        std::printf("  %s: C[%" PRId64 ", %" PRId64 "] = %.6g, reference %.6g, |err| %.3g > %.3g\n",
                    label, static_cast<int64_t>(i) / cols, static_cast<int64_t>(i) % cols, have,
                    want, err, limit);
      ++r.mismatches;
    }
    if (std::isfinite(err)) {
      r.max_abs_err = std::max(r.max_abs_err, err);
      r.worst_err_over_limit = std::max(r.worst_err_over_limit, err / limit);
      diff2 += err * err;
    }
    ref2 += want * want;
  }
  r.rel_frobenius = ref2 > 0 ? std::sqrt(diff2 / ref2) : 0.0;
  return r;
}

std::vector<uint16_t> download(const DeviceBuffer& buf, size_t count) {
  std::vector<uint16_t> host(count);
  CUDA_CHECK(cudaMemcpy(host.data(), buf.get(), count * 2, cudaMemcpyDeviceToHost));
  return host;
}

void run_ggemm(ggemm_handle_t h, const ggemm_grouped_matmul_args& args, cudaStream_t stream) {
  const ggemm_status st = ggemm_grouped_matmul(h, &args, stream);
  if (st != GGEMM_STATUS_SUCCESS) {
    std::printf("FAIL: ggemm_grouped_matmul returned %s: %s\n", ggemm_status_string(st),
                ggemm_last_error_message());
    std::exit(1);
  }
}

void print_row(const char* name, double ms, const MoeProblem& p, const Ceilings& ceil) {
  const double s = ms * 1e-3;
  std::printf("%-22s %10.1f %9.1f %9.1f %9.3f\n", name, ms * 1e3, p.flops() / s * 1e-12,
              p.bytes() / s * 1e-9, ceil.floor_seconds(p.flops(), p.bytes()) / s);
}

// Everything after the GPU probe; returns the exit status. Its objects
// (cuBLAS handle, graph) are gone before main destroys their stream.
int run_demo(ggemm_handle_t gg, cudaStream_t stream, uint64_t seed) {
  MoeShape shape = *find_shape("deepseek_v3_ep8_gate_up_prefill");
  shape.name = "deepseek_v3_ep8_gate_up_prefill_zipf";
  shape.routing = Routing::kZipf;

  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("ggemm_demo: %s — %d experts, %" PRId64 " routed rows, N %" PRId64 ", K %" PRId64
              ", %s routing, bf16 in/out, weights [E, N, K]\n",
              shape.name, shape.experts, shape.rows, shape.n, shape.k, routing_name(shape.routing));
  std::printf("device: %s (sm_%d%d, %d SMs, L2 %d MiB); seed %" PRIu64 "\n", prop.name,
              prop.major, prop.minor, prop.multiProcessorCount, prop.l2CacheSize >> 20, seed);

  const MoeProblem p = make_moe_problem(shape, seed, /*keep_host=*/true);
  std::printf("rows per expert:");
  for (uint32_t r : p.rows_per_expert) std::printf(" %u", r);
  std::printf("\n  (%d experts used, at most %u rows in one)\n", p.used_groups, p.max_rows);

  const size_t c_count = static_cast<size_t>(shape.rows) * static_cast<size_t>(shape.n);
  const ggemm_grouped_matmul_args args = p.args();

  // ggemm on a poisoned C (0xFF = NaN): an unwritten element cannot pass.
  CUDA_CHECK(cudaMemsetAsync(p.c.get(), 0xFF, c_count * 2, stream));
  run_ggemm(gg, args, stream);
  CUDA_CHECK(cudaGetLastError());
  CUDA_CHECK(cudaStreamSynchronize(stream));
  const std::vector<uint16_t> got_ggemm = download(p.c, c_count);

  // The graphed cuBLAS loop, also on a poisoned C: the baseline must be shown
  // to compute the same product (every group, not just one), or beating it
  // proves nothing.
  CublasHandle cublas(stream);
  CublasLoopGraph loop(cublas, p, stream);
  CUDA_CHECK(cudaMemsetAsync(p.c.get(), 0xFF, c_count * 2, stream));
  loop.launch(stream);
  CUDA_CHECK(cudaStreamSynchronize(stream));
  const std::vector<uint16_t> got_cublas = download(p.c, c_count);

  // The CPU reference: the same arguments with every pointer on the host.
  std::vector<uint16_t> want(c_count, 0xFFFF);
  ggemm_grouped_matmul_args host = args;
  host.a = p.host_a.data();
  host.b = p.host_b.data();
  host.c = want.data();
  host.a_offsets = p.offsets.data();
  host.expert_ids = p.expert_of.data();
  host.expert_usage_stats = p.usage;
  const auto t0 = std::chrono::steady_clock::now();
  ggemm::ref::grouped_matmul(host);
  const double ref_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("CPU reference: %.1f s\n", ref_s);

  const Tolerance tol = bf16_tolerance(shape.k);
  std::printf("check: |out - ref| <= %.4g + %.4g * |ref| on all %zu elements\n", tol.atol, tol.rtol,
              c_count);
  auto check = [&](const char* label, const std::vector<uint16_t>& got) {
    const CheckResult r = compare(label, got, want, shape.n, tol);
    std::printf("%-12s max |err| %.4g, worst err/limit %.3f, rel Frobenius %.3g, %" PRId64
                " mismatches: %s\n",
                label, r.max_abs_err, r.worst_err_over_limit, r.rel_frobenius, r.mismatches,
                r.mismatches == 0 ? "PASS" : "FAIL");
    return r.mismatches == 0;
  };
  const bool ggemm_ok = check("ggemm", got_ggemm);
  const bool cublas_ok = check("cuBLAS loop", got_cublas);
  if (!ggemm_ok || !cublas_ok) {
    std::printf("FAIL\n");
    return 1;
  }

  // Timing: median of kReps event-timed calls, L2 flushed before each.
  const Ceilings ceil = measure_ceilings(cublas, stream);
  L2Flusher flusher;
  const double ms_ggemm =
      median_ms(stream, &flusher, kWarmup, kReps, [&] { run_ggemm(gg, args, stream); });
  const double ms_loop = median_ms(stream, &flusher, kWarmup, kReps, [&] { loop.launch(stream); });

  const double floor_s = ceil.floor_seconds(p.flops(), p.bytes());
  const bool compute_bound =
      p.flops() / ceil.dense_flops_per_s >= p.bytes() / ceil.copy_bytes_per_s;
  std::printf("\nceilings measured in this binary: dense bf16 %.0f TFLOP/s (cuBLAS %d^3), "
              "copy %.0f GB/s (%zu MiB device-to-device, read + write)\n",
              ceil.dense_flops_per_s * 1e-12, kCeilingGemmDim, ceil.copy_bytes_per_s * 1e-9,
              kCeilingCopyBytes >> 20);
  std::printf("roofline floor: %.1f us (%.4g GFLOP, %.1f MB; %s-bound)\n", floor_s * 1e6,
              p.flops() * 1e-9, p.bytes() * 1e-6, compute_bound ? "compute" : "memory");
  std::printf("timing: median of %d runs after %d warm-up, L2 flushed (%zu MiB: %s) before each\n\n",
              kReps, kWarmup, flusher.bytes() >> 20, flusher.describe());
  std::printf("%-22s %10s %9s %9s %9s\n", "", "time (us)", "TFLOP/s", "GB/s", "of floor");
  print_row("ggemm", ms_ggemm, p, ceil);
  print_row("cuBLAS loop (graph)", ms_loop, p, ceil);
  std::printf("\nspeed ratio: ggemm is %.2fx the speed of the cuBLAS loop (its time / ggemm's)\n",
              ms_loop / ms_ggemm);
  std::printf("PASS\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const GpuProbe probe = probe_gpu();
  if (!probe.handle) {
    print_no_gpu(probe);
    return 0;
  }
  std::random_device rd;
  const uint64_t seed = absl::GetFlag(FLAGS_seed) != 0 ? absl::GetFlag(FLAGS_seed)
                                                       : (uint64_t{rd()} << 32) ^ uint64_t{rd()};
  CUDA_CHECK(cudaSetDevice(0));
  cudaStream_t stream = nullptr;
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const int rc = run_demo(probe.handle, stream, seed);
  CUDA_CHECK(cudaStreamDestroy(stream));
  ggemm_destroy(probe.handle);
  return rc;
}
