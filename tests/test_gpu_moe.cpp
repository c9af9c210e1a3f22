// The MoE layer on the GPU against the CPU reference (reference/
// moe_reference.h), on fresh random data each run (the seed is printed with
// any failure). Every output is allocated between guard bands and poisoned
// (0xFF bytes) before the call, so an entry the kernels should have written
// and did not, or a byte written outside the outputs, fails the test.
// Skips, saying why, without a usable GPU.
//
// ggemm_moe_ffn needs the SwiGLU epilogue and gather on load of the grouped
// matmul (runtime/launch_grouped.h: GroupedShape::gather, a_row_index); its
// tests fail until those kernels exist.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "dtype.h"
#include "ggemm.h"
#include "gpu_env.h"
#include "moe_reference.h"
#include "test_util.h"

namespace ggemm::testing {
namespace {

template <typename T>
std::vector<T> as_vector(const Bytes &b) {
  std::vector<T> v(b.size() / sizeof(T));
  if (!v.empty()) std::memcpy(v.data(), b.data(), b.size());
  return v;
}

// Turns checked mode on for a scope (a fresh zeroed word) and off after.
class CheckedMode {
 public:
  explicit CheckedMode(ggemm_handle_t h) : h_(h), word_(sizeof(uint32_t)) {
    EXPECT_EQ(cudaMemset(word_.get(), 0, sizeof(uint32_t)), cudaSuccess);
    EXPECT_EQ(ggemm_set_device_status(h_, word_.as<uint32_t>()), GGEMM_STATUS_SUCCESS);
  }
  ~CheckedMode() { ggemm_set_device_status(h_, nullptr); }
  uint32_t bits() const {
    uint32_t v = 0;
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(&v, word_.get(), sizeof v, cudaMemcpyDeviceToHost), cudaSuccess);
    return v;
  }

 private:
  ggemm_handle_t h_;
  DeviceBuffer word_;
};

// ---- routing data ---------------------------------------------------------------

enum class Pattern { kBalanced, kZipf, kDuplicates, kMinusOne, kEvenExpertsOnly, kOneExpert, kHostile };

struct Routing {
  int64_t tokens, k, num_experts;
  std::vector<int32_t> ids;
  std::vector<float> weights;
};

Routing make_routing(Pattern pattern, int64_t tokens, int64_t k, int64_t num_experts, Rng &rng) {
  Routing r{tokens, k, num_experts, {}, {}};
  const size_t slots = size_t(tokens * k);
  r.ids.resize(slots);
  r.weights.resize(slots);
  std::vector<double> zipf_cdf;
  if (pattern == Pattern::kZipf) {
    double sum = 0;
    for (int64_t e = 0; e < num_experts; ++e) zipf_cdf.push_back(sum += 1.0 / std::pow(double(e + 1), 1.2));
    for (double &c : zipf_cdf) c /= sum;
  }
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t j = 0; j < k; ++j) {
      const size_t s = size_t(t * k + j);
      int32_t id = int32_t(rng.uniform_int(0, num_experts - 1));
      switch (pattern) {
        case Pattern::kBalanced:  // distinct experts per token where there are enough
          if (k <= num_experts)
            while (std::find(r.ids.begin() + t * k, r.ids.begin() + int64_t(s), id) != r.ids.begin() + int64_t(s))
              id = int32_t(rng.uniform_int(0, num_experts - 1));
          break;
        case Pattern::kZipf: {
          const double u = rng.uniform(0.f, 1.f);
          id = int32_t(std::lower_bound(zipf_cdf.begin(), zipf_cdf.end(), u) - zipf_cdf.begin());
          id = std::min<int32_t>(id, int32_t(num_experts - 1));
          break;
        }
        case Pattern::kDuplicates: id = int32_t(rng.uniform_int(0, std::min<int64_t>(num_experts, 3) - 1)); break;
        case Pattern::kMinusOne: if (rng.uniform_int(0, 2) == 0) id = -1; break;
        case Pattern::kEvenExpertsOnly: id &= ~1; break;
        case Pattern::kOneExpert: id = int32_t(num_experts / 2); break;
        case Pattern::kHostile: {
          const int64_t pick = rng.uniform_int(0, 9);
          if (pick == 0) id = -2 - int32_t(rng.uniform_int(0, 100));
          if (pick == 1) id = int32_t(num_experts + rng.uniform_int(0, 100));
          if (pick == 2) id = std::numeric_limits<int32_t>::min();
          if (pick == 3) id = -1;
          break;
        }
      }
      r.ids[s] = id;
      r.weights[s] = rng.uniform(0.01f, 1.f);
      if (pattern == Pattern::kHostile) {
        const int64_t pick = rng.uniform_int(0, 9);
        if (pick == 0) r.weights[s] = std::numeric_limits<float>::quiet_NaN();
        if (pick == 1) r.weights[s] = -std::numeric_limits<float>::infinity();
      }
    }
  }
  return r;
}

// ---- route ------------------------------------------------------------------------

// The routing's outputs on the device, guarded and poisoned, and a workspace.
struct DeviceRoute {
  GuardedBuffer ids, weights, a_offsets, expert_ids, stats, row_token, row_slot, row_weight, slot_row;
  DeviceBuffer workspace;
  ggemm_moe_route_args args{};

  DeviceRoute(const Routing &r, int64_t first, int64_t local)
      : ids(r.ids.size() * 4), weights(r.weights.size() * 4), a_offsets(size_t(local + 1) * 4),
        expert_ids(size_t(local) * 4), stats(8), row_token(r.ids.size() * 4), row_slot(r.ids.size() * 4),
        row_weight(r.ids.size() * 4), slot_row(r.ids.size() * 4) {
    ids.upload(r.ids.data());
    weights.upload(r.weights.data());
    args.struct_size = sizeof args;
    args.num_tokens = r.tokens, args.top_k = r.k, args.num_experts = r.num_experts;
    args.first_expert = first, args.local_experts = local;
    args.topk_ids = ids.get<int32_t>(), args.topk_weights = weights.get<float>();
    args.a_offsets = a_offsets.get<uint32_t>(), args.expert_ids = expert_ids.get<int32_t>();
    args.expert_usage_stats = stats.get<uint32_t>();
    args.row_token = row_token.get<int32_t>(), args.row_slot = row_slot.get<int32_t>();
    args.row_weight = row_weight.get<float>(), args.slot_row = slot_row.get<int32_t>();
    size_t bytes = 0;
    EXPECT_EQ(ggemm_moe_route_workspace_size(&args, &bytes), GGEMM_STATUS_SUCCESS) << ggemm_last_error_message();
    // Poisoned too: the kernels must not rely on a zeroed workspace.
    EXPECT_TRUE(workspace.alloc(bytes));
    EXPECT_EQ(cudaMemset(workspace.get(), 0xFF, bytes ? bytes : 16), cudaSuccess);
    args.workspace = workspace.get(), args.workspace_bytes = bytes;
  }
};

// Every output of a routing, as downloaded or as the reference writes it.
struct RouteResult {
  std::vector<uint32_t> a_offsets, stats;
  std::vector<int32_t> expert_ids, row_token, row_slot, slot_row;
  std::vector<uint32_t> row_weight_bits;
  bool guards_intact = true;
  bool operator==(const RouteResult &o) const {
    return a_offsets == o.a_offsets && stats == o.stats && expert_ids == o.expert_ids && row_token == o.row_token &&
           row_slot == o.row_slot && slot_row == o.slot_row && row_weight_bits == o.row_weight_bits;
  }
};

RouteResult download(const DeviceRoute &d) {
  RouteResult r;
  bool ok[8];
  r.a_offsets = as_vector<uint32_t>(d.a_offsets.download(&ok[0]));
  r.expert_ids = as_vector<int32_t>(d.expert_ids.download(&ok[1]));
  r.stats = as_vector<uint32_t>(d.stats.download(&ok[2]));
  r.row_token = as_vector<int32_t>(d.row_token.download(&ok[3]));
  r.row_slot = as_vector<int32_t>(d.row_slot.download(&ok[4]));
  r.row_weight_bits = as_vector<uint32_t>(d.row_weight.download(&ok[5]));
  r.slot_row = as_vector<int32_t>(d.slot_row.download(&ok[6]));
  ok[7] = true;
  r.guards_intact = std::all_of(ok, ok + 8, [](bool b) { return b; });
  return r;
}

RouteResult reference_route(const Routing &rt, int64_t first, int64_t local, uint32_t *faults) {
  RouteResult r;
  const size_t slots = rt.ids.size();
  r.a_offsets.resize(size_t(local + 1)), r.expert_ids.resize(size_t(local)), r.stats.resize(2);
  r.row_token.resize(slots), r.row_slot.resize(slots), r.slot_row.resize(slots);
  std::vector<float> row_weight(slots);
  ggemm_moe_route_args a{};
  a.struct_size = sizeof a;
  a.num_tokens = rt.tokens, a.top_k = rt.k, a.num_experts = rt.num_experts, a.first_expert = first;
  a.local_experts = local;
  a.topk_ids = rt.ids.data(), a.topk_weights = rt.weights.data();
  a.a_offsets = r.a_offsets.data(), a.expert_ids = r.expert_ids.data(), a.expert_usage_stats = r.stats.data();
  a.row_token = r.row_token.data(), a.row_slot = r.row_slot.data(), a.row_weight = row_weight.data();
  a.slot_row = r.slot_row.data();
  *faults = ref::moe_route(a);
  r.row_weight_bits.resize(slots);
  if (slots) std::memcpy(r.row_weight_bits.data(), row_weight.data(), slots * 4);
  return r;
}

// Where two results first differ, for the failure message.
std::string first_difference(const RouteResult &got, const RouteResult &want) {
  auto diff = [](const char *name, const auto &g, const auto &w) -> std::string {
    if (g == w) return "";
    for (size_t i = 0; i < std::min(g.size(), w.size()); ++i)
      if (g[i] != w[i])
        return std::string(name) + "[" + std::to_string(i) + "]: got " + std::to_string(g[i]) + ", want " +
               std::to_string(w[i]);
    return std::string(name) + ": sizes differ";
  };
  for (std::string s : {diff("a_offsets", got.a_offsets, want.a_offsets), diff("stats", got.stats, want.stats),
                        diff("expert_ids", got.expert_ids, want.expert_ids),
                        diff("row_token", got.row_token, want.row_token), diff("row_slot", got.row_slot, want.row_slot),
                        diff("slot_row", got.slot_row, want.slot_row),
                        diff("row_weight bits", got.row_weight_bits, want.row_weight_bits)})
    if (!s.empty()) return s;
  return "none";
}

struct RouteCase {
  const char *name;
  Pattern pattern;
  int64_t tokens, k, num_experts, first, local;
};

const RouteCase kRouteCases[] = {
    {"Balanced", Pattern::kBalanced, 300, 4, 16, 0, 16},
    {"ZipfSkewed", Pattern::kZipf, 5000, 8, 128, 0, 128},
    {"DuplicateExpertsInTopK", Pattern::kDuplicates, 257, 6, 16, 0, 16},
    {"MinusOneSlots", Pattern::kMinusOne, 1000, 4, 32, 0, 32},
    {"ExpertsWithNoTokens", Pattern::kEvenExpertsOnly, 777, 2, 64, 0, 64},
    {"OneExpertTakesEveryToken", Pattern::kOneExpert, 4096, 8, 16, 0, 16},
    {"NoTokens", Pattern::kBalanced, 0, 8, 16, 0, 16},
    {"OneToken", Pattern::kBalanced, 1, 8, 16, 0, 16},
    {"OneTokenTopOne", Pattern::kBalanced, 1, 1, 1, 0, 1},
    {"Experts384", Pattern::kZipf, 3000, 8, 384, 0, 384},
    {"ExpertParallelFirstRank", Pattern::kBalanced, 2000, 8, 256, 0, 32},
    {"ExpertParallelMiddleRank", Pattern::kZipf, 2000, 8, 256, 96, 32},
    {"ExpertParallelLastRank", Pattern::kBalanced, 2000, 8, 256, 224, 32},
    {"TopK64", Pattern::kDuplicates, 100, 64, 8, 0, 8},
    // One chunk (<= 512 slots) routes in one CTA, a thread a slot, up to
    // 512 local experts (ggemm_moe_route_one_cta), else on the scatter pass
    // alone; these mirror the cases above that take two launches
    // (tests/check_layer_routing_in_gemv.sh checks which kernel each runs).
    {"OneChunkZipf", Pattern::kZipf, 50, 8, 128, 0, 128},
    {"OneChunkFullExperts512", Pattern::kZipf, 64, 8, 600, 40, 512},
    {"OneChunkOneExpertFullChunk", Pattern::kOneExpert, 64, 8, 16, 0, 16},
    {"OneChunkMinusOneSlots", Pattern::kMinusOne, 100, 4, 32, 0, 32},
    {"OneChunkExperts384", Pattern::kZipf, 64, 8, 384, 0, 384},
    {"OneChunkExpertParallelMiddleRank", Pattern::kZipf, 60, 8, 256, 96, 32},
    {"OneChunkTopK64", Pattern::kDuplicates, 8, 64, 8, 0, 8},
    {"OneChunkExperts4096", Pattern::kBalanced, 64, 8, 4096, 0, 4096},
    // More experts than a scatter CTA's tables hold (kRouteWindowExperts):
    // one walk of the chunk per window of experts, in one chunk and in many.
    {"OneChunkExperts8192Windows", Pattern::kBalanced, 64, 8, 8192, 0, 8192},
    {"ChunksExperts4097Windows", Pattern::kZipf, 5000, 8, 4097, 0, 4097},
    // The chunk boundaries: the most one chunk holds, and eight slots past
    // it (a second chunk whose warps are empty but one).
    {"OneChunkFull", Pattern::kZipf, 64, 8, 128, 0, 128},
    {"TwoChunksSecondNearlyEmpty", Pattern::kZipf, 65, 8, 128, 0, 128},
    // Qwen3-30B-A3B's prefill: 4096 tokens, top-8 of 128 (64 chunks); and
    // past 128 chunks of 512, chunks of two slots a thread.
    {"Qwen3PrefillZipf", Pattern::kZipf, 4096, 8, 128, 0, 128},
    {"ChunksOfTwoSlotsAThread", Pattern::kZipf, 9000, 8, 128, 0, 128},
    // At most 32 slots (and 1024 experts) take the one-warp path; NoTokens,
    // OneToken and OneTokenTopOne above do too.
    {"OneWarpZipfFullWarp", Pattern::kZipf, 4, 8, 128, 0, 128},
    {"OneWarpDuplicates", Pattern::kDuplicates, 5, 6, 16, 0, 16},
    {"OneWarpMinusOneSlots", Pattern::kMinusOne, 7, 4, 32, 0, 32},
    {"OneWarpOneExpert", Pattern::kOneExpert, 4, 8, 16, 0, 16},
    {"OneWarpExpertParallelMiddleRank", Pattern::kZipf, 4, 8, 256, 96, 32},
    {"OneWarpExperts1024", Pattern::kBalanced, 3, 8, 1024, 0, 1024},
    {"OneWarpTopOneFullWarp", Pattern::kZipf, 32, 1, 16, 0, 16},
    {"OneWarpEveryExpertActive", Pattern::kBalanced, 1, 32, 32, 0, 32},
    {"OneWarpExpertParallelFirstRank", Pattern::kBalanced, 4, 8, 256, 0, 32},
    {"OneWarpExpertParallelLastRank", Pattern::kBalanced, 4, 8, 256, 224, 32},
    {"OneChunkFewSlotsExperts1025", Pattern::kBalanced, 4, 8, 1025, 0, 1025},
    {"OneChunkFewSlotsExperts4096", Pattern::kBalanced, 2, 8, 4096, 0, 4096},
    {"OneChunkThirtyThreeSlots", Pattern::kZipf, 11, 3, 64, 0, 64},
    // Many chunks, and many chunks with many experts (the count matrix).
    {"ManyChunks", Pattern::kZipf, 200000, 8, 256, 0, 256},
    {"MaxGroupsExperts", Pattern::kBalanced, 50000, 8, GGEMM_MAX_GROUPS, 0, GGEMM_MAX_GROUPS},
    {"MillionTokens", Pattern::kBalanced, 1 << 20, 8, 256, 0, 256},
};

class GpuMoeRoute : public ::testing::TestWithParam<RouteCase> {};

TEST_P(GpuMoeRoute, MatchesReference) {
  GGEMM_REQUIRE_GPU(h);
  const RouteCase &c = GetParam();
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  Rng rng(seed);
  const Routing rt = make_routing(c.pattern, c.tokens, c.k, c.num_experts, rng);
  uint32_t want_faults = 0;
  const RouteResult want = reference_route(rt, c.first, c.local, &want_faults);
  DeviceRoute d(rt, c.first, c.local);
  GGEMM_OK(ggemm_moe_route(h, &d.args, nullptr));
  CUDA_OK(cudaDeviceSynchronize());
  const RouteResult got = download(d);
  EXPECT_TRUE(got.guards_intact) << "a write outside the outputs";
  EXPECT_TRUE(got == want) << "first difference: " << first_difference(got, want);
}

INSTANTIATE_TEST_SUITE_P(Cases, GpuMoeRoute, ::testing::ValuesIn(kRouteCases), CaseName());

// Hostile ids and weights: the same results as the reference (they act as
// -1 / drop their slot), and checked mode reports both kinds.
// 3000 tokens take the two-launch path, 50 the one-chunk path (one CTA, a
// thread a slot), 4 (32 slots) the one-warp path.
class GpuMoeRouteChecked : public ::testing::TestWithParam<int64_t> {};

TEST_P(GpuMoeRouteChecked, HostileIdsAndWeightsAreReported) {
  GGEMM_REQUIRE_GPU(h);
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  Rng rng(seed);
  Routing rt = make_routing(Pattern::kHostile, GetParam(), 8, 64, rng);
  // At a few tokens the random picks may miss a kind: one of each, always
  // (an id past the experts; a NaN weight on a slot of this rank).
  rt.ids[0] = 64 + 5;
  rt.ids[1] = 20;
  rt.weights[1] = std::numeric_limits<float>::quiet_NaN();
  uint32_t want_faults = 0;
  const RouteResult want = reference_route(rt, 16, 32, &want_faults);
  ASSERT_EQ(want_faults, uint32_t(GGEMM_DEVICE_FAULT_ID_OUT_OF_RANGE | GGEMM_DEVICE_FAULT_WEIGHT_NOT_FINITE));
  DeviceRoute d(rt, 16, 32);
  CheckedMode checked(h);
  GGEMM_OK(ggemm_moe_route(h, &d.args, nullptr));
  EXPECT_EQ(checked.bits(), want_faults);
  const RouteResult got = download(d);
  EXPECT_TRUE(got.guards_intact);
  EXPECT_TRUE(got == want) << "first difference: " << first_difference(got, want);
}

// Clean routing under checked mode writes nothing to the word.
TEST_P(GpuMoeRouteChecked, CleanRoutingReportsNothing) {
  GGEMM_REQUIRE_GPU(h);
  Rng rng(fresh_seed());
  const Routing rt = make_routing(Pattern::kMinusOne, GetParam(), 4, 16, rng);
  DeviceRoute d(rt, 0, 16);
  CheckedMode checked(h);
  GGEMM_OK(ggemm_moe_route(h, &d.args, nullptr));
  EXPECT_EQ(checked.bits(), 0u);
}

INSTANTIATE_TEST_SUITE_P(Tokens, GpuMoeRouteChecked, ::testing::Values(int64_t(3000), int64_t(50), int64_t(4)));

// The same routing 20 times: bitwise the same outputs every time.
TEST(GpuMoeRouteDeterminism, TwentyRunsBitwiseEqual) {
  GGEMM_REQUIRE_GPU(h);
  Rng rng(fresh_seed());
  const Routing rt = make_routing(Pattern::kZipf, 100000, 8, 128, rng);
  DeviceRoute d(rt, 0, 128);
  GGEMM_OK(ggemm_moe_route(h, &d.args, nullptr));
  CUDA_OK(cudaDeviceSynchronize());
  const RouteResult first = download(d);
  for (int run = 1; run < 20; ++run) {
    GGEMM_OK(ggemm_moe_route(h, &d.args, nullptr));
    CUDA_OK(cudaDeviceSynchronize());
    const RouteResult again = download(d);
    ASSERT_TRUE(again == first) << "run " << run << ": " << first_difference(again, first);
  }
}

// Captured once, replayed with new ids and weights in the same buffers: each
// replay matches the reference of its own routing.
class GpuMoeRouteGraph : public ::testing::TestWithParam<int64_t> {};

TEST_P(GpuMoeRouteGraph, ReplayWithNewRouting) {
  GGEMM_REQUIRE_GPU(h);
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  Rng rng(seed);
  const int64_t tokens = GetParam();
  Routing rt = make_routing(Pattern::kBalanced, tokens, 8, 64, rng);
  DeviceRoute d(rt, 0, 64);
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaGraph_t graph;
  CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  const ggemm_status captured = ggemm_moe_route(h, &d.args, stream);
  CUDA_OK(cudaStreamEndCapture(stream, &graph));
  GGEMM_OK(captured);
  cudaGraphExec_t exec;
  CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
  for (Pattern p : {Pattern::kZipf, Pattern::kMinusOne, Pattern::kOneExpert}) {
    rt = make_routing(p, tokens, 8, 64, rng);
    d.ids.upload(rt.ids.data());
    d.weights.upload(rt.weights.data());
    CUDA_OK(cudaGraphLaunch(exec, stream));
    CUDA_OK(cudaStreamSynchronize(stream));
    uint32_t faults = 0;
    const RouteResult want = reference_route(rt, 0, 64, &faults);
    const RouteResult got = download(d);
    EXPECT_TRUE(got == want) << first_difference(got, want);
  }
  CUDA_OK(cudaGraphExecDestroy(exec));
  CUDA_OK(cudaGraphDestroy(graph));
  CUDA_OK(cudaStreamDestroy(stream));
}

INSTANTIATE_TEST_SUITE_P(Tokens, GpuMoeRouteGraph, ::testing::Values(int64_t(3000), int64_t(50), int64_t(3)));

// ---- combine ------------------------------------------------------------------------

struct CombineCase {
  const char *name;
  ggemm_dtype y_dtype, out_dtype;
  int64_t tokens, k, hidden;
  bool accumulate;
  bool bad_indices;  // slot_row entries < -1 or >= y_rows (checked mode must report them)
};

const CombineCase kCombineCases[] = {
    {"Bf16", kBf16, kBf16, 300, 4, 256, false, false},
    {"Fp16", kFp16, kFp16, 300, 4, 256, false, false},
    {"Bf16ToFp32", kBf16, kFp32, 129, 8, 1024, false, false},
    {"Fp16ToFp32", kFp16, kFp32, 77, 2, 7168, false, false},
    {"Fp16ToFp32Accumulate", kFp16, kFp32, 77, 2, 7168, true, false},
    {"Bf16AccumulateFp32", kBf16, kFp32, 200, 6, 4096, true, false},
    {"OneToken", kBf16, kBf16, 1, 8, 8, false, false},
    {"NarrowRows", kFp16, kFp16, 1000, 3, 24, false, false},
    {"TopK64", kBf16, kBf16, 50, 64, 512, false, false},
    {"BadIndicesReadNothing", kBf16, kBf16, 300, 4, 256, false, true},
};

class GpuMoeCombine : public ::testing::TestWithParam<CombineCase> {};

TEST_P(GpuMoeCombine, MatchesReference) {
  GGEMM_REQUIRE_GPU(h);
  const CombineCase &c = GetParam();
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  Rng rng(seed);
  const int64_t y_rows = c.tokens * c.k, slots = c.tokens * c.k;
  Bytes y(size_t(y_rows * c.hidden) * esize(c.y_dtype));
  fill_random(c.y_dtype, y.data(), size_t(y_rows * c.hidden), rng);
  // Each token's slots: a random row, or -1 (about one in five); with
  // bad_indices also rows past y_rows and below -1.
  std::vector<int32_t> slot_row(static_cast<size_t>(slots));
  for (auto &r : slot_row) {
    r = int32_t(rng.uniform_int(0, y_rows - 1));
    if (rng.uniform_int(0, 4) == 0) r = -1;
    if (c.bad_indices && rng.uniform_int(0, 9) == 0) r = rng.uniform_int(0, 1) ? int32_t(y_rows + 3) : -7;
  }
  Bytes out_init(size_t(c.tokens * c.hidden) * esize(c.out_dtype));
  if (c.accumulate)
    fill_random(c.out_dtype, out_init.data(), size_t(c.tokens * c.hidden), rng);
  else
    poison(out_init.data(), out_init.size());

  GuardedBuffer d_y(y.size()), d_rows(slot_row.size() * 4), d_out(out_init.size());
  d_y.upload(y.data());
  d_rows.upload(slot_row.data());
  d_out.upload(out_init.data());
  ggemm_moe_combine_args a{};
  a.struct_size = sizeof a;
  a.y_dtype = c.y_dtype, a.out_dtype = c.out_dtype;
  a.num_tokens = c.tokens, a.top_k = c.k, a.hidden = c.hidden, a.y_rows = y_rows;
  a.y = d_y.get(), a.slot_row = d_rows.get<int32_t>(), a.out = d_out.get();
  a.accumulate = c.accumulate ? 1 : 0;
  CheckedMode checked(h);
  GGEMM_OK(ggemm_moe_combine(h, &a, nullptr));
  const uint32_t faults = checked.bits();

  Bytes want = out_init;
  ggemm_moe_combine_args r = a;
  r.y = y.data(), r.slot_row = slot_row.data(), r.out = want.data();
  const uint32_t want_faults = ref::moe_combine(r);
  EXPECT_EQ(faults, want_faults);
  if (c.bad_indices) EXPECT_EQ(want_faults, uint32_t(GGEMM_DEVICE_FAULT_INDEX_OUT_OF_RANGE));
  bool guards = false;
  const Bytes got = d_out.download(&guards);
  EXPECT_TRUE(guards) << "a write outside out";
  // The same fp32 sum in the same order, rounded once: bitwise equal.
  EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size()), 0)
      << compare_matrix(c.out_dtype, want.data(), got.data(), c.tokens, c.hidden, 0, 0);
}

INSTANTIATE_TEST_SUITE_P(Cases, GpuMoeCombine, ::testing::ValuesIn(kCombineCases), CaseName());

// ---- the whole layer ---------------------------------------------------------------------

struct FfnCase {
  const char *name;
  ggemm_dtype dtype;
  int64_t tokens, hidden, intermediate, k, num_experts, first, local;
  Pattern pattern;
};

const FfnCase kFfnCases[] = {
    {"Bf16E8K2", kBf16, 300, 256, 128, 2, 8, 0, 8, Pattern::kBalanced},
    {"Fp16E16K4", kFp16, 200, 256, 128, 4, 16, 0, 16, Pattern::kBalanced},
    {"Bf16Zipf", kBf16, 257, 256, 128, 4, 16, 0, 16, Pattern::kZipf},
    {"Fp16Duplicates", kFp16, 100, 256, 128, 4, 8, 0, 8, Pattern::kDuplicates},
    {"Bf16MinusOne", kBf16, 150, 256, 128, 2, 8, 0, 8, Pattern::kMinusOne},
    {"Bf16ExpertsWithNoTokens", kBf16, 64, 256, 128, 2, 16, 0, 16, Pattern::kEvenExpertsOnly},
    {"Fp16OneExpert", kFp16, 128, 256, 128, 4, 8, 0, 8, Pattern::kOneExpert},
    {"Bf16OneToken", kBf16, 1, 256, 128, 2, 8, 0, 8, Pattern::kBalanced},
    {"Bf16ExpertParallel", kBf16, 300, 256, 128, 4, 32, 8, 8, Pattern::kBalanced},
    {"Fp16Hostile", kFp16, 120, 256, 128, 4, 16, 0, 16, Pattern::kHostile},
    {"Bf16Experts384", kBf16, 200, 256, 128, 8, 384, 0, 384, Pattern::kZipf},
    // More than one routing chunk (512 slots): the two-launch routing.
    {"Bf16TwoLaunchRouting", kBf16, 1100, 256, 128, 4, 16, 0, 16, Pattern::kZipf},
    // Up to 512 slots of up to 512 local experts the routing and the token
    // copy are one launch (ggemm_moe_route_expand; the cases above of at
    // most 512 slots take it too): a full chunk at DeepSeek-V3's row width
    // (each of the grid's CTAs routes, then copies its share of 1.8 MB);
    // past 512 local experts the one-chunk scatter pass and the copy
    // launch (tests/check_layer_routing_in_gemv.sh checks which).
    {"Bf16RouteExpandFullChunkWideRows", kBf16, 64, 7168, 128, 8, 32, 0, 32, Pattern::kZipf},
    {"Bf16OneChunkExperts640", kBf16, 40, 256, 128, 4, 640, 0, 640, Pattern::kZipf},
    // Decode at Qwen3-30B-A3B's widths (16 of its experts): the gate_up
    // GEMV routes the slots in its prologue (at most 32 slots; the CPU plan
    // tests and tests/check_layer_routing_in_gemv.sh check that it is
    // planned so), tiles of 1, 2 and 4 rows.
    {"Bf16DecodeRoutedInGemv", kBf16, 1, 2048, 768, 8, 16, 0, 16, Pattern::kBalanced},
    {"Fp16DecodeRoutedInGemvHostile", kFp16, 2, 2048, 768, 8, 16, 0, 16, Pattern::kHostile},
    {"Bf16DecodeRoutedInGemvDuplicates", kBf16, 3, 2048, 768, 8, 16, 0, 16, Pattern::kDuplicates},
    {"Bf16DecodeRoutedInGemvExpertParallel", kBf16, 4, 2048, 768, 8, 64, 16, 16, Pattern::kBalanced},
    {"Fp16DecodeRoutedInGemvTopSixMinusOne", kFp16, 4, 2048, 768, 6, 16, 0, 16, Pattern::kMinusOne},
    // gate_up's 512 tiles of 1 row at four CTAs an SM; down (N 1024) off
    // the GEMV.
    {"Bf16DecodeRoutedInGemvFourCtas", kBf16, 1, 1024, 1024, 8, 16, 0, 16, Pattern::kZipf},
    // The decode down projection (ptx/moe/decode_down.cuh, up to 4 tokens)
    // on its edges: tokens of one slot; a long K (Mixtral's shape: two
    // slots, 56 units a warp); widths that are no multiple of its 256-
    // element steps (I 200: lanes past K) or of 16 columns (H 264); most
    // slots on other ranks (DeepSeek-V3's EP8 split: 32 of 256 experts
    // local). Then a decode call past 4 tokens: the sorted down and the
    // combine.
    {"Bf16DecodeDownTopOne", kBf16, 4, 512, 256, 1, 8, 0, 8, Pattern::kBalanced},
    {"Fp16DecodeDownLongK", kFp16, 1, 256, 14336, 2, 8, 0, 8, Pattern::kBalanced},
    {"Bf16DecodeDownOddWidths", kBf16, 3, 264, 200, 4, 16, 0, 16, Pattern::kZipf},
    {"Bf16DecodeDownFewLocal", kBf16, 4, 512, 256, 8, 256, 32, 32, Pattern::kBalanced},
    {"Bf16DecodeSortedDownEightTokens", kBf16, 8, 512, 256, 2, 8, 0, 8, Pattern::kDuplicates},
    // Past 32 routed rows the layer gathers inside gate_up while the rows
    // are up to 64 and average at most 2 an expert (a routing launch before
    // it, no copy; tests/check_layer_routing_in_gemv.sh checks which): 64
    // rows of 1 and of 2 an expert, hostile routing, the decode down after
    // a routing launch (4 tokens of 16 slots); then 64 rows of 8 an expert,
    // copied first.
    {"Bf16GatherSixtyFourRows", kBf16, 8, 512, 256, 8, 64, 0, 64, Pattern::kBalanced},
    {"Fp16GatherSixtyFourRowsHostile", kFp16, 16, 512, 256, 4, 32, 0, 32, Pattern::kHostile},
    {"Bf16GatherSixtyFourRowsDecodeDown", kBf16, 4, 512, 256, 16, 64, 0, 32, Pattern::kZipf},
    {"Bf16CopiesSixtyFourDenseRows", kBf16, 32, 512, 256, 2, 8, 0, 8, Pattern::kBalanced},
    // One token of 64 slots: gathered (64 rows, 1 an expert), but past the
    // decode down's 32 slots a token: the sorted down and the combine.
    {"Bf16GatherOneTokenSixtyFourSlots", kBf16, 1, 512, 256, 64, 64, 0, 64, Pattern::kBalanced},
};

// The index in kFfnCases of a case by name (the graph test's).
size_t ffn_case(const char *name) {
  for (size_t i = 0; i < std::size(kFfnCases); ++i)
    if (std::string(kFfnCases[i].name) == name) return i;
  ADD_FAILURE() << "no FfnCase " << name;
  return 0;
}

// A model's device buffers and a call of the layer on them.
struct DeviceFfn {
  Bytes x, w_gate_up, w_down;
  Routing routing;
  DeviceBuffer d_x, d_wgu, d_wd, d_ids, d_weights;
  GuardedBuffer d_out, workspace;
  ggemm_moe_ffn_args args{};

  DeviceFfn(const FfnCase &c, Rng &rng)
      : x(size_t(c.tokens * c.hidden) * 2), w_gate_up(size_t(c.local * 2 * c.intermediate * c.hidden) * 2),
        w_down(size_t(c.local * c.hidden * c.intermediate) * 2),
        routing(make_routing(c.pattern, c.tokens, c.k, c.num_experts, rng)),
        d_out(size_t(c.tokens * c.hidden) * 2), workspace(workspace_bytes(c)) {
    // Weights scaled by 1 / sqrt(depth), so every product stays near 1.
    fill_random(c.dtype, x.data(), size_t(c.tokens * c.hidden), rng);
    const float gu = 1.f / std::sqrt(float(c.hidden)), dn = 1.f / std::sqrt(float(c.intermediate));
    fill_random(c.dtype, w_gate_up.data(), w_gate_up.size() / 2, rng, -gu, gu);
    fill_random(c.dtype, w_down.data(), w_down.size() / 2, rng, -dn, dn);
    EXPECT_TRUE(d_x.alloc(x.size()) && d_wgu.alloc(w_gate_up.size()) && d_wd.alloc(w_down.size()));
    EXPECT_TRUE(d_ids.alloc(routing.ids.size() * 4) && d_weights.alloc(routing.weights.size() * 4));
    EXPECT_EQ(cudaMemcpy(d_x.get(), x.data(), x.size(), cudaMemcpyHostToDevice), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(d_wgu.get(), w_gate_up.data(), w_gate_up.size(), cudaMemcpyHostToDevice), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(d_wd.get(), w_down.data(), w_down.size(), cudaMemcpyHostToDevice), cudaSuccess);
    upload_routing();
    args.struct_size = sizeof args;
    args.dtype = c.dtype;
    args.num_tokens = c.tokens, args.hidden = c.hidden, args.intermediate = c.intermediate, args.top_k = c.k;
    args.num_experts = c.num_experts, args.first_expert = c.first, args.local_experts = c.local;
    args.x = d_x.get(), args.w_gate_up = d_wgu.get(), args.w_down = d_wd.get();
    args.topk_ids = d_ids.as<int32_t>(), args.topk_weights = d_weights.as<float>();
    args.out = d_out.get();
    args.workspace = workspace.get(), args.workspace_bytes = workspace.bytes();
  }
  // The workspace the layer asks for (poisoned, between guard bands).
  static size_t workspace_bytes(const FfnCase &c) {
    ggemm_moe_ffn_args a{};
    a.struct_size = sizeof a;
    a.dtype = c.dtype;
    a.num_tokens = c.tokens, a.hidden = c.hidden, a.intermediate = c.intermediate, a.top_k = c.k;
    a.num_experts = c.num_experts, a.first_expert = c.first, a.local_experts = c.local;
    size_t bytes = 0;
    EXPECT_EQ(ggemm_moe_ffn_workspace_size(&a, &bytes), GGEMM_STATUS_SUCCESS) << ggemm_last_error_message();
    return bytes;
  }
  // Out poisoned again (before another call).
  void poison_out() { EXPECT_EQ(cudaMemset(d_out.get(), 0xFF, d_out.bytes()), cudaSuccess); }
  void upload_routing() {
    EXPECT_EQ(cudaMemcpy(d_ids.get(), routing.ids.data(), routing.ids.size() * 4, cudaMemcpyHostToDevice),
              cudaSuccess);
    EXPECT_EQ(cudaMemcpy(d_weights.get(), routing.weights.data(), routing.weights.size() * 4, cudaMemcpyHostToDevice),
              cudaSuccess);
  }
  // The reference's out and faults.
  Bytes reference(uint32_t *faults) const {
    Bytes out(size_t(args.num_tokens * args.hidden) * 2);
    ggemm_moe_ffn_args r = args;
    r.x = x.data(), r.w_gate_up = w_gate_up.data(), r.w_down = w_down.data();
    r.topk_ids = routing.ids.data(), r.topk_weights = routing.weights.data(), r.out = out.data();
    *faults = ref::moe_ffn(r);
    return out;
  }
  // Per element, how far the GPU's out may be from the reference's: the
  // kernels sum in another order (fp32) and compute silu with another exp,
  // so each rounding to the dtype (h, y, out) may land one ulp away, and an
  // h one ulp away moves the down product by at most one ulp of each
  // |h_i * Wd_i| term. ulp <= 2^-7 |v| (bf16) or 2^-10 |v| (fp16) plus
  // 2^-24 for fp16's subnormals; fp32 order differences add
  // 2 sqrt(d) d 2^-24 of the absolute sum (test_util.h, default_atol).
  std::vector<float> bound() const {
    const ggemm_dtype dt = args.dtype;
    const double rel = dt == kBf16 ? std::ldexp(1.0, -7) : std::ldexp(1.0, -10);
    const double sub = dt == kFp16 ? std::ldexp(1.0, -24) : 0.0;
    const int64_t H = args.hidden, In = args.intermediate, k = args.top_k;
    auto ld = [&](const Bytes &b, size_t i) { return double(ref::load_as_float(dt, b.data(), i)); };
    auto fp32_order = [](int64_t d, double abs_sum) { return 2.0 * std::sqrt(double(d)) * double(d) * std::ldexp(1.0, -24) * abs_sum; };
    std::vector<float> out(size_t(args.num_tokens * H));
    std::vector<double> h(static_cast<size_t>(In)), h_err(static_cast<size_t>(In));
    for (int64_t t = 0; t < args.num_tokens; ++t) {
      std::vector<double> sum_abs(size_t(H), 0.0), err(size_t(H), 0.0);
      for (int64_t j = 0; j < k; ++j) {
        uint32_t unused = 0;
        const size_t s = size_t(t * k + j);
        const int64_t e = ref::moe_local_expert(routing.ids[s], routing.weights[s], args.num_experts,
                                                args.first_expert, args.local_experts, &unused);
        if (e < 0) continue;
        const double w = std::fabs(routing.weights[s]);
        for (int64_t i = 0; i < In; ++i) {
          double g = 0, u = 0, ga = 0, ua = 0;
          for (int64_t c = 0; c < H; ++c) {
            const double xv = ld(x, size_t(t * H + c));
            const double wg = ld(w_gate_up, size_t((e * 2 * In + i) * H + c));
            const double wu = ld(w_gate_up, size_t((e * 2 * In + In + i) * H + c));
            g += xv * wg, u += xv * wu, ga += std::fabs(xv * wg), ua += std::fabs(xv * wu);
          }
          h[size_t(i)] = g / (1 + std::exp(-g)) * u;
          // One ulp of h, and the fp32 order of g and u (silu' <= 1.1).
          h_err[size_t(i)] = rel * std::fabs(h[size_t(i)]) + sub + 1.1 * fp32_order(H, ga) * std::fabs(u) +
                             fp32_order(H, ua) * std::fabs(g) + 1e-6 * std::fabs(h[size_t(i)]);
        }
        for (int64_t n = 0; n < H; ++n) {
          double d = 0, da = 0, de = 0;
          for (int64_t i = 0; i < In; ++i) {
            const double wd = ld(w_down, size_t((e * H + n) * In + i));
            d += h[size_t(i)] * wd, da += std::fabs(h[size_t(i)] * wd), de += h_err[size_t(i)] * std::fabs(wd);
          }
          const double y = std::fabs(d * w);
          sum_abs[size_t(n)] += y;
          err[size_t(n)] += w * (de + fp32_order(In, da)) + rel * y + sub;
        }
      }
      for (int64_t n = 0; n < H; ++n)
        out[size_t(t * H + n)] = float(err[size_t(n)] + rel * sum_abs[size_t(n)] + sub);
    }
    return out;
  }
  // After a call: out within bound() of the reference, nothing written
  // outside it. Returns out, and the reference's faults in *want_faults.
  Bytes expect_out_matches_reference(uint32_t *want_faults) const {
    const Bytes want = reference(want_faults);
    bool guards = false, workspace_guards = false;
    const Bytes got = d_out.download(&guards);
    EXPECT_TRUE(guards) << "a write outside out";
    workspace.download(&workspace_guards);
    EXPECT_TRUE(workspace_guards) << "a write outside the workspace";
    const std::vector<float> b = bound();
    EXPECT_TRUE(compare_matrix(args.dtype, want.data(), got.data(), args.num_tokens, args.hidden, 0, 0, 10, b.data()));
    return got;
  }
};

class GpuMoeFfn : public ::testing::TestWithParam<FfnCase> {};

TEST_P(GpuMoeFfn, MatchesReference) {
  GGEMM_REQUIRE_GPU(h);
  const FfnCase &c = GetParam();
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  Rng rng(seed);
  DeviceFfn f(c, rng);
  uint32_t faults = 0;
  {
    CheckedMode checked(h);
    GGEMM_OK(ggemm_moe_ffn(h, &f.args, nullptr));
    faults = checked.bits();
  }
  uint32_t want_faults = 0;
  const Bytes got = f.expect_out_matches_reference(&want_faults);
  EXPECT_EQ(faults, want_faults);
  // Unchecked (checked mode off), the same routing: the same out, bit for
  // bit, and nothing written outside it.
  f.poison_out();
  GGEMM_OK(ggemm_moe_ffn(h, &f.args, nullptr));
  CUDA_OK(cudaDeviceSynchronize());
  bool guards = false;
  EXPECT_TRUE(f.d_out.download(&guards) == got) << "unchecked out differs from checked";
  EXPECT_TRUE(guards) << "a write outside out (unchecked)";
}

INSTANTIATE_TEST_SUITE_P(Cases, GpuMoeFfn, ::testing::ValuesIn(kFfnCases), CaseName());

// T = 0 is a no-op: out untouched.
TEST(GpuMoeFfnEdge, NoTokensWritesNothing) {
  GGEMM_REQUIRE_GPU(h);
  Rng rng(fresh_seed());
  FfnCase c = kFfnCases[0];
  DeviceFfn f(c, rng);
  f.args.num_tokens = 0;
  GGEMM_OK(ggemm_moe_ffn(h, &f.args, nullptr));
  CUDA_OK(cudaDeviceSynchronize());
  bool guards = false;
  const Bytes got = f.d_out.download(&guards);
  EXPECT_TRUE(guards);
  EXPECT_TRUE(std::all_of(got.begin(), got.end(), [](uint8_t b) { return b == 0xFF; }));
}

// A decode call where one token has no local expert: its output is the
// empty sum, zeros (out poisoned beforehand). Token 1 of 3: every slot -1.
TEST(GpuMoeFfnEdge, DecodeTokenWithNoExpertGetsZeros) {
  GGEMM_REQUIRE_GPU(h);
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  Rng rng(seed);
  DeviceFfn f(kFfnCases[ffn_case("Bf16DecodeRoutedInGemvDuplicates")], rng);
  for (int64_t j = 0; j < f.args.top_k; ++j) f.routing.ids[size_t(f.args.top_k + j)] = -1;
  f.upload_routing();
  GGEMM_OK(ggemm_moe_ffn(h, &f.args, nullptr));
  CUDA_OK(cudaDeviceSynchronize());
  uint32_t faults = 0;
  const Bytes got = f.expect_out_matches_reference(&faults);
  const size_t row = size_t(f.args.hidden) * 2;
  EXPECT_TRUE(std::all_of(got.begin() + std::ptrdiff_t(row), got.begin() + std::ptrdiff_t(2 * row),
                          [](uint8_t b) { return b == 0; }))
      << "token 1's output is not zeros";
}

// The layer 20 times on the same inputs: bitwise the same out; captured in a
// graph and replayed with new ids and weights, each replay matches the
// reference of its routing. A prefill-sized call (routing launches of its
// own), a call of one routing CTA (routing and copy in one launch) and a
// decode call (routing in the gate_up GEMV's prologue).
class GpuMoeFfnGraph : public ::testing::TestWithParam<const char *> {};

TEST_P(GpuMoeFfnGraph, DeterministicAndReplaysWithNewRouting) {
  GGEMM_REQUIRE_GPU(h);
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  Rng rng(seed);
  DeviceFfn f(kFfnCases[ffn_case(GetParam())], rng);
  GGEMM_OK(ggemm_moe_ffn(h, &f.args, nullptr));
  CUDA_OK(cudaDeviceSynchronize());
  bool guards = false;
  const Bytes first = f.d_out.download(&guards);
  for (int run = 1; run < 20; ++run) {
    f.poison_out();
    GGEMM_OK(ggemm_moe_ffn(h, &f.args, nullptr));
    CUDA_OK(cudaDeviceSynchronize());
    EXPECT_TRUE(f.d_out.download(&guards) == first) << "run " << run << " differs from run 0";
    EXPECT_TRUE(guards) << "run " << run << " wrote outside out";
  }

  cudaStream_t stream;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaGraph_t graph;
  CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  const ggemm_status captured = ggemm_moe_ffn(h, &f.args, stream);
  CUDA_OK(cudaStreamEndCapture(stream, &graph));
  GGEMM_OK(captured);
  cudaGraphExec_t exec;
  CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
  for (Pattern p : {Pattern::kZipf, Pattern::kMinusOne}) {
    f.routing = make_routing(p, f.args.num_tokens, f.args.top_k, f.args.num_experts, rng);
    f.upload_routing();
    CUDA_OK(cudaGraphLaunch(exec, stream));
    CUDA_OK(cudaStreamSynchronize(stream));
    uint32_t faults = 0;
    const Bytes want = f.reference(&faults);
    const Bytes got = f.d_out.download(&guards);
    const std::vector<float> bound = f.bound();
    EXPECT_TRUE(compare_matrix(f.args.dtype, want.data(), got.data(), f.args.num_tokens, f.args.hidden, 0, 0, 10,
                               bound.data()));
  }
  CUDA_OK(cudaGraphExecDestroy(exec));
  CUDA_OK(cudaGraphDestroy(graph));
  CUDA_OK(cudaStreamDestroy(stream));
}

INSTANTIATE_TEST_SUITE_P(Cases, GpuMoeFfnGraph,
                         ::testing::Values("Fp16E16K4", "Fp16Duplicates", "Bf16DecodeRoutedInGemvDuplicates"),
                         [](const ::testing::TestParamInfo<const char *> &i) { return std::string(i.param); });

// Weights past 4 GiB: 352 experts of [2 x 1536, 2048] gate_up (4.4 GB) and
// [2048, 1536] down (2.2 GB) bf16, the last 8 experts' gate_up rows starting
// past 4 GiB (SwiGLU's 5-D weight view and the down projection's 64-bit
// expert offsets). A decode call of 4 tokens (32 rows: the GEMVs), token 0
// routed to those 8 experts; then 12 tokens (96 rows, 12 an expert, past
// the GEMVs' 64 rows and the gather's: the token copy and the prefill
// SwiGLU and row-scale GEMMs) routed only to them. Skips where the device
// lacks the memory.
TEST(GpuMoeFfnLarge, WeightsPast4GiB) {
  GGEMM_REQUIRE_GPU(h);
  const FfnCase c{"Bf16WeightsPast4GiB", kBf16, 12, 2048, 1536, 8, 352, 0, 352, Pattern::kBalanced};
  REQUIRE_FREE_DEVICE_MEMORY(size_t(c.local) * 3 * size_t(c.intermediate * c.hidden) * 2);
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  Rng rng(seed);
  DeviceFfn f(c, rng);
  const size_t expert_bytes = size_t(2 * c.intermediate * c.hidden) * 2;
  for (int64_t j = 0; j < c.k; ++j) {
    const int32_t e = int32_t(c.local - c.k + j);
    ASSERT_GT(size_t(e) * expert_bytes, size_t(1) << 32) << "expert " << e << "'s gate_up rows must start past 4 GiB";
    f.routing.ids[size_t(j)] = e;
  }
  f.args.num_tokens = 4;
  f.upload_routing();
  GGEMM_OK(ggemm_moe_ffn(h, &f.args, nullptr));
  CUDA_OK(cudaDeviceSynchronize());
  uint32_t want_faults = 0;
  {
    SCOPED_TRACE("4 tokens");
    const Bytes got = f.expect_out_matches_reference(&want_faults);
    // Out has room for 12 tokens: the rows past the 4 stay poison.
    EXPECT_TRUE(std::all_of(got.begin() + std::ptrdiff_t(4 * c.hidden * 2), got.end(),
                            [](uint8_t b) { return b == 0xFF; }))
        << "a write past the 4 tokens' rows";
  }
  f.args.num_tokens = c.tokens;
  for (int64_t t = 0; t < c.tokens; ++t)
    for (int64_t j = 0; j < c.k; ++j) f.routing.ids[size_t(t * c.k + j)] = int32_t(c.local - c.k + j);
  f.upload_routing();
  f.poison_out();
  GGEMM_OK(ggemm_moe_ffn(h, &f.args, nullptr));
  CUDA_OK(cudaDeviceSynchronize());
  SCOPED_TRACE("12 tokens");
  f.expect_out_matches_reference(&want_faults);
}

}  // namespace
}  // namespace ggemm::testing
