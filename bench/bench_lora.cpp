// bench_lora.cpp — multi-LoRA Q/K/V in ggemm_bench (issue 4): the expand
// (ggemm_lora_expand_qkv: P [3, M, R] x lora_b [G, q + 2 kv, R] -> q_out
// [M, q], kv_out [2M, kv]) and the shrink (ggemm_lora_shrink_qkv: X [M, K] x
// lora_a [G, 3R, K] -> P [3, M, R]) on Llama-3-8B projections (hidden 4096,
// q 4096, kv 1024), 8 adapters with balanced routing, ranks 16 and 64 at
// prefill (M = 4096) and rank 16 at decode (M = 64). bf16 in and out, store
// mode, except the expand's _accumulate rows: accumulate mode (the delta
// added into the base projection's outputs, as LoRA serving runs it), whose
// bytes count the outputs' reads too. Scale 0.5 (alpha / rank) on the
// expand, 1 on the shrink.
//
// Each shape runs lora_{expand,shrink}_qkv_<shape>/ggemm and
// .../cublas_loop_graph (two-part names, as bench/summarize.py reads them;
// --benchmark_filter=lora selects exactly these): per used
// adapter group, one cublasGemmEx per region (expand: q, k, v into q_out and
// the two halves of kv_out; shrink: one per plane of P, ldc = R), all
// captured once in a CUDA graph, so a replay pays one launch. Before timing,
// each implementation's output (on poisoned buffers; in accumulate mode on
// the same random base values) is checked once against the CPU reference
// (reference/lora_qkv_ref.cpp), so the baseline is shown to compute the same
// thing; a mismatch skips that benchmark with the reason.
//
// Timing as in bench_grouped.cpp: CUDA events around one call, L2 flushed
// before each (untimed); counters from the median of kIterations calls per
// repetition; read the _median rows.
// Counters: us_median; GB/s with bytes = P (expand) or X (shrink) read +
// the used adapters' weights + the outputs written (and read, in accumulate
// mode), 2 bytes each; frac_copy
// = achieved GB/s / copy bandwidth measured by this binary; TFLOP/s and
// frac_floor (docs/design.md §5); for the expand at decode goal_us (6) and
// meets_goal (1 if us_median < goal_us).
#include "bench_config.h"
#include "bench_lora.h"

#include <benchmark/benchmark.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "dtype.h"
#include "ggemm_reference.h"
#include "gpu_buffers.h"

namespace ggemm::bench {
namespace {

constexpr int kIterations = 20;
constexpr int kRepetitions = 5;
constexpr int kWarmup = 3;
constexpr double kDecodeExpandGoalUs = 6.0;

enum class LoraOp { kExpand, kShrink };
// kGgemmGraph replays the same ggemm call captured in a CUDA graph, as
// inference engines run decode: its time leaves out the host-side cost of a
// call (tensor-map encoding, launch), which kGgemm includes.
// kMemsetOutputs (probe shapes only) writes the outputs with cudaMemsetAsync:
// the time this timing method gives the same bytes written by the driver's
// own fill kernel.
enum class LoraImpl { kGgemm, kGgemmGraph, kCublasLoopGraph, kMemsetOutputs };
constexpr int kNumLoraImpls = 4;

const char* impl_name(LoraImpl i) {
  switch (i) {
    case LoraImpl::kGgemm: return "ggemm";
    case LoraImpl::kGgemmGraph: return "ggemm_graph";
    case LoraImpl::kCublasLoopGraph: return "cublas_loop_graph";
    default: return "memset_outputs";
  }
}

// Probe shapes split a call's time by taking parts of the work away (the
// device notes' "time variants that leave one stage out"): kNoGroups launches
// the kernel with zero active groups (launch, prologue and exit only);
// kInactive gives every group adapter -1, so the kernel writes the outputs'
// zeros without loading or multiplying anything (the store path alone);
// kOneGroup leaves only the first group active (one tile per CTA: the
// latency of one tile's chain, without the later tiles of a CTA). Any of
// them, the real call included, can be timed with a warm L2 (no flush: the
// operands, the routing arrays and the kernel's code stay in L2 from the
// call before; what cold memory costs the call, by difference).
enum class Probe { kNone, kNoGroups, kInactive, kOneGroup };

struct LoraShape {
  const char* name;  // after "lora_expand_qkv_" or "lora_shrink_qkv_"
  LoraOp op;
  int64_t m;         // tokens
  int adapters;      // G, every one used (balanced routing)
  int64_t rank;
  int64_t q_dim, kv_dim, hidden;
  bool decode_goal;  // report the < 6 us goal
  Probe probe = Probe::kNone;
  bool warm_l2 = false;  // timed without the L2 flush
  bool accumulate = false;  // add into the outputs (LoRA serving's expand) instead of storing
};

constexpr int64_t kLlamaQ = 4096, kLlamaKv = 1024, kLlamaHidden = 4096;
const LoraShape kLoraShapes[] = {
    {"llama3_8b_m4096_g8_r16", LoraOp::kExpand, 4096, 8, 16, kLlamaQ, kLlamaKv, kLlamaHidden, false},
    {"llama3_8b_m4096_g8_r64", LoraOp::kExpand, 4096, 8, 64, kLlamaQ, kLlamaKv, kLlamaHidden, false},
    {"llama3_8b_decode_m64_g8_r16", LoraOp::kExpand, 64, 8, 16, kLlamaQ, kLlamaKv, kLlamaHidden, true},
    {"llama3_8b_m4096_g8_r16", LoraOp::kShrink, 4096, 8, 16, kLlamaQ, kLlamaKv, kLlamaHidden, false},
    {"llama3_8b_m4096_g8_r64", LoraOp::kShrink, 4096, 8, 64, kLlamaQ, kLlamaKv, kLlamaHidden, false},
    {"llama3_8b_decode_m64_g8_r16", LoraOp::kShrink, 64, 8, 16, kLlamaQ, kLlamaKv, kLlamaHidden, false},
    {"llama3_8b_m4096_g8_r16_probe_inactive", LoraOp::kExpand, 4096, 8, 16, kLlamaQ, kLlamaKv, kLlamaHidden, false,
     Probe::kInactive},
    {"llama3_8b_decode_m64_g8_r16_probe_inactive", LoraOp::kExpand, 64, 8, 16, kLlamaQ, kLlamaKv, kLlamaHidden,
     false, Probe::kInactive},
    {"llama3_8b_m4096_g8_r16_probe_warm_l2", LoraOp::kExpand, 4096, 8, 16, kLlamaQ, kLlamaKv, kLlamaHidden, false,
     Probe::kNone, true},
    {"llama3_8b_m4096_g8_r16_probe_warm_l2", LoraOp::kShrink, 4096, 8, 16, kLlamaQ, kLlamaKv, kLlamaHidden, false,
     Probe::kNone, true},
    {"llama3_8b_m4096_g8_r64_probe_warm_l2", LoraOp::kShrink, 4096, 8, 64, kLlamaQ, kLlamaKv, kLlamaHidden, false,
     Probe::kNone, true},
    {"llama3_8b_decode_m64_g8_r16_probe_one_group", LoraOp::kExpand, 64, 8, 16, kLlamaQ, kLlamaKv, kLlamaHidden,
     false, Probe::kOneGroup},
    {"llama3_8b_decode_m64_g8_r16_probe_no_groups", LoraOp::kExpand, 64, 8, 16, kLlamaQ, kLlamaKv, kLlamaHidden,
     false, Probe::kNoGroups},
    // The decode expand's fixed cost (v0.13): a launch with nothing to do
    // takes ~1.65 us more than an empty kernel (harness rows); cold memory
    // (the routing arrays, tensor maps and code fetched from DRAM) or not?
    {"llama3_8b_decode_m64_g8_r16_probe_warm_l2", LoraOp::kExpand, 64, 8, 16, kLlamaQ, kLlamaKv, kLlamaHidden, false,
     Probe::kNone, true},
    {"llama3_8b_decode_m64_g8_r16_probe_no_groups_warm_l2", LoraOp::kExpand, 64, 8, 16, kLlamaQ, kLlamaKv,
     kLlamaHidden, false, Probe::kNoGroups, true},
    // The real expands again in accumulate mode, the way serving adds the
    // delta into the base projection. Last in the table: a shape's data seed
    // is its index, so the rows above keep their data. Timed calls keep
    // adding into the outputs: hundreds of deltas of order 1 stay far from
    // bf16's range, and the time does not depend on the values.
    {"llama3_8b_m4096_g8_r16_accumulate", LoraOp::kExpand, 4096, 8, 16, kLlamaQ, kLlamaKv, kLlamaHidden, false,
     Probe::kNone, false, true},
    {"llama3_8b_m4096_g8_r64_accumulate", LoraOp::kExpand, 4096, 8, 64, kLlamaQ, kLlamaKv, kLlamaHidden, false,
     Probe::kNone, false, true},
    {"llama3_8b_decode_m64_g8_r16_accumulate", LoraOp::kExpand, 64, 8, 16, kLlamaQ, kLlamaKv, kLlamaHidden, false,
     Probe::kNone, false, true},
    // Between decode and M 4096: where sm_90a's short-K kernel stops paying
    // (its rule: its own tiles in one wave; M 256 takes it, M 1024 does
    // not).
    {"llama3_8b_m256_g8_r16", LoraOp::kExpand, 256, 8, 16, kLlamaQ, kLlamaKv, kLlamaHidden, false},
    {"llama3_8b_m1024_g8_r16", LoraOp::kExpand, 1024, 8, 16, kLlamaQ, kLlamaKv, kLlamaHidden, false},
};
constexpr int kNumLoraShapes = static_cast<int>(sizeof kLoraShapes / sizeof kLoraShapes[0]);

std::string full_name(const LoraShape& s) {
  return std::string(s.op == LoraOp::kExpand ? "lora_expand_qkv_" : "lora_shrink_qkv_") + s.name;
}

// One LoRA call's data on the device (bf16), with host copies for the
// reference. Groups are the adapters that received rows, in adapter order;
// slots past them hold offset M and id -1 (as a router leaves them).
struct LoraProblem {
  LoraShape shape{};
  float scale = 1.0f;
  int64_t n = 0;  // expand: q + 2 kv; shrink: 3 R (fused weight rows)
  std::vector<uint32_t> offsets;
  std::vector<int32_t> ids;
  uint32_t usage[2] = {0, 0};
  int used_groups = 0;
  uint32_t max_rows = 0;
  std::vector<uint16_t> host_in, host_w;  // P or X; lora_b or lora_a
  DeviceBuffer in, w, out0, out1;         // out0: q_out or P; out1: kv_out (expand)
  DeviceBuffer d_offsets, d_ids, d_usage;
  // Accumulate shapes only: the outputs' values before a checked call (the
  // base projection's outputs), the same for every implementation.
  std::vector<uint16_t> host_base0, host_base1;

  bool expand() const { return shape.op == LoraOp::kExpand; }
  size_t in_count() const {
    return size_t(shape.m) * size_t(expand() ? 3 * shape.rank : shape.hidden);
  }
  size_t w_count() const {
    return size_t(shape.adapters) * size_t(n) * size_t(expand() ? shape.rank : shape.hidden);
  }
  size_t out0_count() const { return size_t(shape.m) * size_t(expand() ? shape.q_dim : 3 * shape.rank); }
  size_t out1_count() const { return expand() ? 2 * size_t(shape.m) * size_t(shape.kv_dim) : 0; }

  double flops() const {
    return 2.0 * double(shape.m) * double(n) * double(expand() ? shape.rank : shape.hidden);
  }
  // Fewest bytes a call must move: its activations, the weights of the
  // adapters that have rows, and its outputs (written once; in accumulate
  // mode also read once, the old values joining the sum), bf16.
  double bytes() const {
    const double depth = double(expand() ? shape.rank : shape.hidden);
    const double out_passes = shape.accumulate ? 2.0 : 1.0;
    return 2.0 * (double(in_count()) + used_groups * double(n) * depth +
                  out_passes * double(out0_count() + out1_count()));
  }

  ggemm_lora_expand_qkv_args expand_args() const {
    ggemm_lora_expand_qkv_args a{};
    a.struct_size = sizeof a;
    a.p_dtype = a.out_dtype = GGEMM_DTYPE_BF16;
    a.m = shape.m, a.rank = shape.rank, a.q_dim = shape.q_dim, a.kv_dim = shape.kv_dim;
    a.num_adapters = shape.adapters;
    a.p = in.get(), a.lora_b = w.get(), a.q_out = out0.get(), a.kv_out = out1.get();
    a.a_offsets = d_offsets.as<const uint32_t>();
    a.adapter_ids = d_ids.as<const int32_t>();
    a.expert_usage_stats = d_usage.as<const uint32_t>();
    a.num_groups = shape.adapters;
    a.max_rows_per_group = max_rows;
    a.scale = scale;
    a.accumulate = shape.accumulate ? 1 : 0;
    return a;
  }
  ggemm_lora_shrink_qkv_args shrink_args() const {
    ggemm_lora_shrink_qkv_args a{};
    a.struct_size = sizeof a;
    a.x_dtype = a.p_dtype = GGEMM_DTYPE_BF16;
    a.m = shape.m, a.k = shape.hidden, a.rank = shape.rank;
    a.num_adapters = shape.adapters;
    a.x = in.get(), a.lora_a = w.get(), a.p = out0.get();
    a.a_offsets = d_offsets.as<const uint32_t>();
    a.adapter_ids = d_ids.as<const int32_t>();
    a.expert_usage_stats = d_usage.as<const uint32_t>();
    a.num_groups = shape.adapters;
    a.max_rows_per_group = max_rows;
    a.scale = scale;
    a.accumulate = shape.accumulate ? 1 : 0;
    return a;
  }
};

std::unique_ptr<LoraProblem> make_lora_problem(const LoraShape& s, uint64_t seed) {
  auto p = std::make_unique<LoraProblem>();
  p->shape = s;
  p->scale = s.op == LoraOp::kExpand ? 0.5f : 1.0f;
  p->n = s.op == LoraOp::kExpand ? s.q_dim + 2 * s.kv_dim : 3 * s.rank;
  const std::vector<uint32_t> rows = route_rows(s.adapters, s.m, Routing::kBalanced, seed);
  p->offsets.assign(size_t(s.adapters) + 1, uint32_t(s.m));
  p->ids.assign(size_t(s.adapters), -1);
  p->offsets[0] = 0;
  int g = 0;
  for (int a = 0; a < s.adapters; ++a) {
    const uint32_t r = rows[size_t(a)];
    p->max_rows = std::max(p->max_rows, r);
    if (r == 0) continue;
    p->ids[size_t(g)] = s.probe == Probe::kInactive ? -1 : a;
    p->offsets[size_t(g) + 1] = p->offsets[size_t(g)] + r;
    ++g;
  }
  p->usage[0] = p->max_rows;
  p->usage[1] = s.probe == Probe::kNoGroups ? 0u : s.probe == Probe::kOneGroup ? 1u : uint32_t(g);
  // Probes that change the work read no weights (their byte counts leave
  // them out); a warm-L2 probe of the real call is the real call.
  p->used_groups = s.probe == Probe::kNone ? g : 0;

  p->host_in.resize(p->in_count());
  p->host_w.resize(p->w_count());
  fill_random_bf16(p->host_in.data(), p->host_in.size(), seed ^ 0x1111);
  fill_random_bf16(p->host_w.data(), p->host_w.size(), seed ^ 0x2222);
  p->in = upload(p->host_in.data(), p->host_in.size() * 2);
  p->w = upload(p->host_w.data(), p->host_w.size() * 2);
  if (s.accumulate) {
    p->host_base0.resize(p->out0_count());
    p->host_base1.resize(p->out1_count());
    fill_random_bf16(p->host_base0.data(), p->host_base0.size(), seed ^ 0x3333);
    fill_random_bf16(p->host_base1.data(), p->host_base1.size(), seed ^ 0x4444);
  }
  p->out0 = DeviceBuffer(p->out0_count() * 2);
  if (p->out1_count()) p->out1 = DeviceBuffer(p->out1_count() * 2);
  p->d_offsets = upload(p->offsets.data(), p->offsets.size() * 4);
  p->d_ids = upload(p->ids.data(), p->ids.size() * 4);
  p->d_usage = upload(p->usage, 8);
  return p;
}

// C = alpha * A_rows W^T + beta * C for one region, in gemm_rows_times_wt's
// mapping (cublas_baselines.h): m = n (weight rows), n = rows, k = depth;
// every operand dense, so lda = ldb = k and ldc = n (the region's row
// length). beta 0 stores, beta 1 accumulates (C joins the fp32 sum, one
// rounding, as ggemm's accumulate mode).
cublasStatus_t gemm_region(cublasHandle_t h, const void* w, const void* a, void* c, int rows, int n, int k,
                           float alpha, float beta) {
  return cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, n, rows, k, &alpha, w, CUDA_R_16BF, k, a, CUDA_R_16BF, k,
                      &beta, c, CUDA_R_16BF, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
}

// The baseline: per used group, three cublasGemmEx (q, k, v regions), in a
// CUDA graph. It needs the group sizes on the host, which ggemm does not.
// Constructing it runs the calls once (eagerly, before the capture).
class LoraCublasLoopGraph {
 public:
  LoraCublasLoopGraph(const CublasHandle& h, const LoraProblem& p, cudaStream_t stream) {
    const LoraShape& s = p.shape;
    const size_t M = size_t(s.m), R = size_t(s.rank), Q = size_t(s.q_dim), KV = size_t(s.kv_dim);
    const size_t K = size_t(s.hidden), N = size_t(p.n);
    const auto* in = p.in.as<const uint16_t>();
    const auto* w = p.w.as<const uint16_t>();
    auto* out0 = p.out0.as<uint16_t>();
    auto* out1 = p.out1.as<uint16_t>();
    const float expand_beta = s.accumulate ? 1.0f : 0.0f;  // the shrink has no accumulate rows
    auto enqueue_all = [&] {
      for (int g = 0; g < p.used_groups; ++g) {
        const size_t r0 = p.offsets[size_t(g)], a = size_t(p.ids[size_t(g)]);
        const int rows = int(p.offsets[size_t(g) + 1] - p.offsets[size_t(g)]);
        if (p.expand()) {
          const uint16_t* wa = w + a * N * R;  // lora_b[a]: q rows, k rows, v rows
          CUBLAS_CHECK(
              gemm_region(h.get(), wa, in + r0 * R, out0 + r0 * Q, rows, int(Q), int(R), p.scale, expand_beta));
          CUBLAS_CHECK(gemm_region(h.get(), wa + Q * R, in + (M + r0) * R, out1 + r0 * KV, rows, int(KV), int(R),
                                   p.scale, expand_beta));
          CUBLAS_CHECK(gemm_region(h.get(), wa + (Q + KV) * R, in + (2 * M + r0) * R, out1 + (M + r0) * KV, rows,
                                   int(KV), int(R), p.scale, expand_beta));
        } else {
          const uint16_t* wa = w + a * N * K;  // lora_a[a]: 3 planes of R rows
          for (size_t plane = 0; plane < 3; ++plane)
            CUBLAS_CHECK(gemm_region(h.get(), wa + plane * R * K, in + r0 * K, out0 + (plane * M + r0) * R, rows,
                                     int(R), int(K), p.scale, 0.0f));
        }
      }
    };
    enqueue_all();  // eager first: kernel loading and heuristics stay out of the capture
    CUDA_CHECK(cudaStreamSynchronize(stream));
    CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    enqueue_all();
    CUDA_CHECK(cudaStreamEndCapture(stream, &graph_));
    CUDA_CHECK(cudaGraphInstantiate(&exec_, graph_, 0));
  }
  ~LoraCublasLoopGraph() {
    if (exec_) cudaGraphExecDestroy(exec_);
    if (graph_) cudaGraphDestroy(graph_);
  }
  LoraCublasLoopGraph(const LoraCublasLoopGraph&) = delete;
  LoraCublasLoopGraph& operator=(const LoraCublasLoopGraph&) = delete;
  void launch(cudaStream_t stream) const { CUDA_CHECK(cudaGraphLaunch(exec_, stream)); }

 private:
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
};

// The shared state: one shape's data at a time (benchmarks run in
// registration order, a shape's rows one after the other).
struct LoraSession {
  LoraBenchEnv env;
  int shape_index = -1;
  std::unique_ptr<LoraProblem> problem;
  std::unique_ptr<LoraCublasLoopGraph> loop;
  cudaGraphExec_t ggemm_graph = nullptr;  // the ggemm call, captured (kGgemmGraph)
  std::vector<uint16_t> want0, want1;     // the CPU reference's outputs
  std::string verdict[kNumLoraImpls];     // per implementation: "" unchecked, "ok", else the failure

  LoraProblem& use_shape(int index) {
    if (index != shape_index) {
      loop.reset();
      if (ggemm_graph) CUDA_CHECK(cudaGraphExecDestroy(ggemm_graph));
      ggemm_graph = nullptr;
      problem.reset();
      want0.clear();
      want1.clear();
      for (std::string& v : verdict) v.clear();
      const LoraShape& s = kLoraShapes[index];
      std::fprintf(stderr, "ggemm_bench: preparing %s\n", full_name(s).c_str());
      problem = make_lora_problem(s, 0x10a40000u + uint64_t(index));
      shape_index = index;
    }
    return *problem;
  }

  // The CPU reference's outputs, computed once per shape (use_shape clears
  // them), on poisoned buffers (rows in no group would stay 0xFFFF: there
  // are none here), or in accumulate mode added into the shape's base values.
  void reference() {
    if (!want0.empty()) return;
    const LoraProblem& p = *problem;
    if (p.shape.accumulate) {
      want0 = p.host_base0;
      want1 = p.host_base1;
    } else {
      want0.assign(p.out0_count(), 0xFFFF);
      want1.assign(p.out1_count(), 0xFFFF);
    }
    if (p.expand()) {
      ggemm_lora_expand_qkv_args a = p.expand_args();
      a.p = p.host_in.data(), a.lora_b = p.host_w.data();
      a.q_out = want0.data(), a.kv_out = want1.data();
      a.a_offsets = p.offsets.data(), a.adapter_ids = p.ids.data(), a.expert_usage_stats = p.usage;
      ggemm::ref::lora_expand_qkv(a);
    } else {
      ggemm_lora_shrink_qkv_args a = p.shrink_args();
      a.x = p.host_in.data(), a.lora_a = p.host_w.data(), a.p = want0.data();
      a.a_offsets = p.offsets.data(), a.adapter_ids = p.ids.data(), a.expert_usage_stats = p.usage;
      ggemm::ref::lora_shrink_qkv(a);
    }
  }
};
LoraSession* g_lora = nullptr;

std::string enqueue_ggemm(LoraSession& s);

// The call under test on the session stream; "" or the library's error.
std::string enqueue(LoraSession& s, LoraImpl impl) {
  const LoraProblem& p = *s.problem;
  if (impl == LoraImpl::kMemsetOutputs) {
    CUDA_CHECK(cudaMemsetAsync(p.out0.get(), 0, p.out0_count() * 2, s.env.stream));
    if (p.out1_count()) CUDA_CHECK(cudaMemsetAsync(p.out1.get(), 0, p.out1_count() * 2, s.env.stream));
    return "";
  }
  if (impl == LoraImpl::kCublasLoopGraph) {
    if (!s.loop) s.loop = std::make_unique<LoraCublasLoopGraph>(*s.env.cublas, p, s.env.stream);
    s.loop->launch(s.env.stream);
    return "";
  }
  if (impl == LoraImpl::kGgemmGraph) {
    if (!s.ggemm_graph) {
      cudaGraph_t graph;
      CUDA_CHECK(cudaStreamBeginCapture(s.env.stream, cudaStreamCaptureModeThreadLocal));
      const std::string err = enqueue_ggemm(s);
      CUDA_CHECK(cudaStreamEndCapture(s.env.stream, &graph));
      if (!err.empty()) {
        CUDA_CHECK(cudaGraphDestroy(graph));
        return err;
      }
      CUDA_CHECK(cudaGraphInstantiate(&s.ggemm_graph, graph, 0));
      CUDA_CHECK(cudaGraphDestroy(graph));
    }
    CUDA_CHECK(cudaGraphLaunch(s.ggemm_graph, s.env.stream));
    return "";
  }
  return enqueue_ggemm(s);
}

// One direct ggemm call on the session stream; "" or the library's error.
std::string enqueue_ggemm(LoraSession& s) {
  const LoraProblem& p = *s.problem;
  ggemm_status st;
  if (p.expand()) {
    ggemm_lora_expand_qkv_args a = p.expand_args();
    a.config = bench_config_override();
    st = ggemm_lora_expand_qkv(s.env.ggemm, &a, s.env.stream);
  } else {
    ggemm_lora_shrink_qkv_args a = p.shrink_args();
    a.config = bench_config_override();
    st = ggemm_lora_shrink_qkv(s.env.ggemm, &a, s.env.stream);
  }
  if (st == GGEMM_STATUS_SUCCESS) return "";
  return std::string(ggemm_status_string(st)) + ": " + ggemm_last_error_message();
}

// |got - want| <= atol + rtol |want| on every bf16 element; "" or a report.
//  rtol = 2^-7: both sides round an fp32 sum to bf16; sums in another order
//    may round to neighbouring values, one bf16 ulp apart at most.
//  atol = |scale| * 2^-8 * sqrt(depth) / 3: half a bf16 ulp of a typical
//    output (operands uniform in [-1, 1]: products have rms 1/3), far above
//    the summation-order differences and far below a wrong region, plane,
//    adapter or scale (all off by the size of the output itself).
// `rounded_delta_over`: for an implementation that rounds the delta to bf16
// before adding it to the old outputs (these base values), half a bf16 ulp
// of the delta (want - base) more. The cuBLAS loop with beta = 1 does: on
// the H200 its accumulate rows missed the single-rounding bound in 0.04% of
// the elements, by up to that much, where delta and base cancel; ggemm
// rounds once and is held to the bound above.
std::string check(const char* what, const std::vector<uint16_t>& got, const std::vector<uint16_t>& want,
                  double depth, double scale, const std::vector<uint16_t>* rounded_delta_over = nullptr) {
  const double atol = std::fabs(scale) * std::ldexp(1.0, -8) * std::sqrt(depth) / 3.0, rtol = std::ldexp(1.0, -7);
  size_t bad = 0, first = 0;
  double first_got = 0, first_want = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double e = ref::bf16_to_float(want[i]), a = ref::bf16_to_float(got[i]);
    double allowed = atol + rtol * std::fabs(e);
    if (rounded_delta_over) {
      const double delta = std::fabs(e - ref::bf16_to_float((*rounded_delta_over)[i]));
      if (delta > 0) allowed += std::ldexp(1.0, std::ilogb(delta) - 8);
    }
    if (!(std::fabs(e - a) <= allowed) && !(std::isnan(e) && got[i] == want[i])) {
      if (bad++ == 0) first = i, first_got = a, first_want = e;
    }
  }
  if (bad == 0) return "";
  char buf[256];
  std::snprintf(buf, sizeof buf, "%s: %zu of %zu elements differ from the CPU reference (first at %zu: %g, want %g)",
                what, bad, want.size(), first, first_got, first_want);
  return buf;
}

std::vector<uint16_t> download(const DeviceBuffer& d, size_t count) {
  std::vector<uint16_t> h(count);
  if (count) CUDA_CHECK(cudaMemcpy(h.data(), d.get(), count * 2, cudaMemcpyDeviceToHost));
  return h;
}

// Runs `impl` once on poisoned outputs (accumulate mode: on the shape's base
// values, uploaded again for each implementation, since the one before added
// into them) and compares with the reference; "" if it matches, else why not.
std::string verify(LoraSession& s, LoraImpl impl) {
  LoraProblem& p = *s.problem;
  if (p.shape.accumulate) {
    // The baseline's constructor runs its calls once: build it before the
    // base goes up, or the checked launch would add its delta a second time.
    if (impl == LoraImpl::kCublasLoopGraph && !s.loop)
      s.loop = std::make_unique<LoraCublasLoopGraph>(*s.env.cublas, p, s.env.stream);
    // Async on the session stream (a non-blocking one, which a plain
    // cudaMemcpy would not order against), as store mode's memsets.
    CUDA_CHECK(cudaMemcpyAsync(p.out0.get(), p.host_base0.data(), p.out0_count() * 2, cudaMemcpyHostToDevice,
                               s.env.stream));
    if (p.out1_count())
      CUDA_CHECK(cudaMemcpyAsync(p.out1.get(), p.host_base1.data(), p.out1_count() * 2, cudaMemcpyHostToDevice,
                                 s.env.stream));
  } else {
    CUDA_CHECK(cudaMemsetAsync(p.out0.get(), 0xFF, p.out0_count() * 2, s.env.stream));
    if (p.out1_count()) CUDA_CHECK(cudaMemsetAsync(p.out1.get(), 0xFF, p.out1_count() * 2, s.env.stream));
  }
  const std::string err = enqueue(s, impl);
  if (!err.empty()) return err;
  CUDA_CHECK(cudaStreamSynchronize(s.env.stream));
  s.reference();
  const double depth = double(p.expand() ? p.shape.rank : p.shape.hidden);
  // The cuBLAS loop's accumulate rounds twice (check() says how it is held).
  const bool rounds_twice = p.shape.accumulate && impl == LoraImpl::kCublasLoopGraph;
  std::string bad = check(p.expand() ? "q_out" : "P", download(p.out0, p.out0_count()), s.want0, depth, p.scale,
                          rounds_twice ? &p.host_base0 : nullptr);
  if (bad.empty() && p.out1_count())
    bad = check("kv_out", download(p.out1, p.out1_count()), s.want1, depth, p.scale,
                rounds_twice ? &p.host_base1 : nullptr);
  return bad;
}

// Cold: one call after an L2 flush (none for the warm-L2 rows), beside the
// same call in a busy stream. Sustained: kLoraBackToBack calls back to back
// in one CUDA graph, warm L2 (the inputs stay in L2 from call to call), per
// call, each repetition after kLoraRestBeforeSustained of an idle GPU,
// with the SM clock and power read while each run is on the GPU
// (bench_grouped.cpp's modes).
enum class LoraMode { kCold, kSustained };
constexpr int kLoraBackToBack = 20;
constexpr std::chrono::milliseconds kLoraRestBeforeSustained{500};

void bench_lora(benchmark::State& state, int shape_index, LoraImpl impl, LoraMode mode) {
  LoraSession& s = *g_lora;
  s.use_shape(shape_index);
  const LoraProblem& p = *s.problem;
  std::string& verdict = s.verdict[static_cast<int>(impl)];
  if (verdict.empty()) {
    const std::string bad = verify(s, impl);
    verdict = bad.empty() ? "ok" : bad;
    std::fprintf(stderr, "ggemm_bench: %s/%s against the CPU reference: %s\n", full_name(p.shape).c_str(),
                 impl_name(impl), verdict.c_str());
  }
  if (verdict != "ok") {
    state.SkipWithError(verdict.c_str());
    return;
  }

  auto call = [&] { return enqueue(s, impl); };
  for (int i = 0; i < kWarmup; ++i) {
    const std::string err = call();
    if (!err.empty()) {
      state.SkipWithError(err.c_str());
      return;
    }
  }
  CUDA_CHECK(cudaStreamSynchronize(s.env.stream));

  EventTimer timer;
  std::vector<double> ms, mhz, watts;
  std::string err;
  BackToBack back_to_back;
  if (mode == LoraMode::kSustained) {
    err = back_to_back.prepare(s.env.stream, kLoraBackToBack, call);
    if (!err.empty()) {
      state.SkipWithError(err.c_str());
      return;
    }
    CUDA_CHECK(cudaStreamSynchronize(s.env.stream));
    std::this_thread::sleep_for(kLoraRestBeforeSustained);
  }
  auto read_monitor = [&] {
    if (!s.env.monitor || !s.env.monitor->ok()) return;
    mhz.push_back(s.env.monitor->sm_mhz());
    watts.push_back(s.env.monitor->power_w());
  };
  L2Flusher* flusher = p.shape.warm_l2 ? nullptr : s.env.flusher;
  for (auto _ : state) {
    const float t = mode == LoraMode::kCold
                        ? timer.time(s.env.stream, flusher, [&] { err = call(); })
                        : back_to_back.time_per_call(s.env.stream, timer, [&] { err = call(); }, read_monitor);
    if (!err.empty()) {
      state.SkipWithError(err.c_str());
      break;
    }
    state.SetIterationTime(t * 1e-3);
    ms.push_back(t);
  }
  if (ms.empty()) return;

  const double sec = median(ms) * 1e-3;
  state.counters["us_median"] = sec * 1e6;
  state.counters["GB/s"] = p.bytes() / sec * 1e-9;
  state.counters["frac_copy"] = p.bytes() / sec / s.env.ceilings.copy_bytes_per_s;
  state.counters["TFLOP/s"] = p.flops() / sec * 1e-12;
  state.counters["frac_floor"] = s.env.ceilings.floor_seconds(p.flops(), p.bytes()) / sec;
  state.counters["groups"] = p.used_groups;
  if (mode == LoraMode::kSustained) {
    state.counters["graph"] = back_to_back.captured() ? 1 : 0;
    if (!mhz.empty()) {
      state.counters["sm_mhz"] = median(mhz);
      state.counters["watts"] = median(watts);
    }
    return;
  }
  // The same call in a busy stream (timing.h, in_stream_ms): beside the
  // lone call's time, not instead of it; flushed rows only.
  const double in_stream_sec =
      p.shape.warm_l2 ? 0.0 : in_stream_ms(s.env.stream, *s.env.flusher, [&] { err = call(); }) * 1e-3;
  if (err.empty() && in_stream_sec > 0) {
    state.counters["us_in_stream"] = in_stream_sec * 1e6;
    state.counters["frac_copy_in_stream"] = p.bytes() / in_stream_sec / s.env.ceilings.copy_bytes_per_s;
  }
  if (p.shape.decode_goal) {
    state.counters["goal_us"] = kDecodeExpandGoalUs;
    state.counters["meets_goal"] = sec * 1e6 < kDecodeExpandGoalUs ? 1 : 0;
  }
}

// Which implementations a shape is timed with: real shapes every one but
// the memset; probes the graphed call, and with inactive adapters also the
// same zeros written by cudaMemsetAsync; warm-L2 rows the graphed call.
bool measured(const LoraShape& shape, LoraImpl impl) {
  if (shape.warm_l2) return impl == LoraImpl::kGgemmGraph;
  switch (shape.probe) {
    case Probe::kNone: return impl != LoraImpl::kMemsetOutputs;
    case Probe::kInactive: return impl == LoraImpl::kGgemmGraph || impl == LoraImpl::kMemsetOutputs;
    default: return impl == LoraImpl::kGgemmGraph;
  }
}

}  // namespace

void register_lora_benchmarks(const LoraBenchEnv& env) {
  static LoraSession session;
  session.env = env;
  g_lora = &session;
  auto add = [](const std::string& name, int shape, LoraImpl impl, LoraMode mode) {
    benchmark::RegisterBenchmark(name.c_str(), bench_lora, shape, impl, mode)
        ->UseManualTime()
        ->Iterations(kIterations)
        ->Repetitions(kRepetitions)
        ->ReportAggregatesOnly(true)
        ->Unit(benchmark::kMicrosecond);
  };
  for (int i = 0; i < kNumLoraShapes; ++i) {
    const LoraShape& shape = kLoraShapes[i];
    for (LoraImpl impl :
         {LoraImpl::kGgemm, LoraImpl::kGgemmGraph, LoraImpl::kCublasLoopGraph, LoraImpl::kMemsetOutputs})
      if (measured(shape, impl)) add(full_name(shape) + "/" + impl_name(impl), i, impl, LoraMode::kCold);
    // Back to back, ggemm's eager call, on the real shapes (not the probes,
    // nor the warm-L2 rows, whose point is one call). Not the cuBLAS loop:
    // its call is a graph launch, which a stream being captured refuses.
    if (!shape.warm_l2 && shape.probe == Probe::kNone)
      add(full_name(shape) + "/" + impl_name(LoraImpl::kGgemm) + "/sustained", i, LoraImpl::kGgemm,
          LoraMode::kSustained);
  }
}

void release_lora_benchmarks() {
  if (!g_lora) return;
  g_lora->loop.reset();
  if (g_lora->ggemm_graph) CUDA_CHECK(cudaGraphExecDestroy(g_lora->ggemm_graph));
  g_lora->ggemm_graph = nullptr;
  g_lora->problem.reset();
  g_lora->shape_index = -1;
}

}  // namespace ggemm::bench
