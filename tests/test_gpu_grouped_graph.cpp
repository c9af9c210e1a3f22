// GPU tests of ggemm_grouped_matmul over more than one call: a captured call
// replayed with new routing, and calls that read what the one before wrote.
// Against the CPU reference, outputs poisoned; skipped without a GPU.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gpu_grouped_problem.h"

namespace ggemm::testing {
namespace {

// A call captured in a CUDA graph, replayed with other offsets (or group
// ends), expert ids and active counts written to the same device arrays
// between replays, each replay checked against the reference. Prefill-sized
// groups with no row bound; or decode-sized ones (decode = true: groups of 0
// to 4 rows, the caller's bound 4 holding in every replay, Qwen3-30B-A3B's
// gate_up shape with the row-scale epilogue): the automatic plan runs them on the
// persistent kernel's narrow decode tiles (16 x 64 on the H200), the
// forced-plan suite's --decode_gemv=where_possible on the decode GEMV.
void run_graph_replay(ggemm_handle_t handle, bool group_ends, bool decode = false) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed) + (group_ends ? ", group ends" : "") + (decode ? ", decode" : ""));
  Rng rng(seed);
  Case c{"graph"};
  c.rows = decode ? std::vector<int64_t>{1, 2, 0, 4} : std::vector<int64_t>{100, 50, 200, 10};
  c.n = decode ? 1536 : 512;
  c.k = decode ? 2048 : 256;
  c.unowned_rows = decode ? 9 : 200;  // room for the replays' larger groups
  c.group_ends = group_ends;
  if (decode) c.epilogue = GGEMM_EPILOGUE_ROW_SCALE;
  Problem p(c, rng);
  ASSERT_NO_FATAL_FAILURE(upload(p));
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  ggemm_grouped_matmul_args dev = p.args(true, nullptr);
  dev.max_rows_per_group = decode ? 4 : 0;  // without a bound: the replays change the sizes
  CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  GGEMM_OK(ggemm_grouped_matmul(handle, &dev, stream));
  CUDA_OK(cudaStreamEndCapture(stream, &graph));
  CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));

  const std::vector<std::vector<int64_t>> replays =
      decode ? std::vector<std::vector<int64_t>>{{1, 2, 0, 4}, {4, 4, 4, 4}, {0, 1, 3, 2}, {2, 0, 0, 0}}
             : std::vector<std::vector<int64_t>>{{100, 50, 200, 10}, {0, 300, 1, 160}, {7, 7, 7, 7}, {400, 0, 0, 0}};
  const std::vector<uint32_t> actives = {4, 4, 2, 1};
  for (size_t r = 0; r < replays.size(); ++r) {
    std::vector<uint32_t> offsets = {0};
    for (int64_t x : replays[r]) offsets.push_back(uint32_t(offsets.back() + x));
    p.offsets = offsets;
    p.ids = {int32_t(r % 4), -1, int32_t((r + 1) % 4), 3};
    p.stats[1] = actives[r];
    CUDA_OK(cudaMemcpyAsync(p.d_offsets.get(), p.offsets.data(), p.offsets.size() * 4, cudaMemcpyHostToDevice, stream));
    if (group_ends)  // the ends only: the word before them keeps kNotAnOffset
      CUDA_OK(cudaMemcpyAsync(p.d_ends.as<uint32_t>() + 1, p.offsets.data() + 1, (p.offsets.size() - 1) * 4,
                              cudaMemcpyHostToDevice, stream));
    CUDA_OK(cudaMemcpyAsync(p.d_ids.get(), p.ids.data(), p.ids.size() * 4, cudaMemcpyHostToDevice, stream));
    CUDA_OK(cudaMemcpyAsync(p.d_stats.get(), p.stats, 8, cudaMemcpyHostToDevice, stream));
    CUDA_OK(cudaMemcpyAsync(p.d_c.get(), p.c_init.data(), p.c_init.size(), cudaMemcpyHostToDevice, stream));
    CUDA_OK(cudaGraphLaunch(exec, stream));
    std::vector<uint8_t> got(p.c_init.size());
    CUDA_OK(cudaMemcpyAsync(got.data(), p.d_c.get(), got.size(), cudaMemcpyDeviceToHost, stream));
    CUDA_OK(cudaStreamSynchronize(stream));
    const std::vector<uint8_t> expected = reference_output(p);
    EXPECT_TRUE(compare_matrix(c.out, expected.data(), got.data(), p.m, c.n, default_atol(c.out, c.k),
                               default_rtol(c.out)))
        << "replay " << r;
  }
  CUDA_OK(cudaGraphExecDestroy(exec));
  CUDA_OK(cudaGraphDestroy(graph));
  CUDA_OK(cudaStreamDestroy(stream));
}

// Back-to-back calls where each reads what the one before it wrote (the
// second call's A is the first's C, the first's C poisoned just before it):
// every launch is a programmatic dependent launch, so this fails if a kernel
// read global memory before waiting for the stream's earlier work. Both the
// persistent kernel (K 256) and the short-K kernel (K 64, decode rows).
TEST(GroupedMatmulGpuChained, EachCallSeesThePreviousOutput) {
  GGEMM_REQUIRE_GPU(handle);
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  Rng rng(seed);
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  for (const std::vector<int64_t> &rows : {std::vector<int64_t>{300, 0, 129, 40}, std::vector<int64_t>{1, 2, 0, 3}}) {
    for (int64_t k1 : {int64_t(256), int64_t(64)}) {
      Case c1{"first"};
      c1.rows = rows;
      c1.k = k1;
      c1.n = 64;  // the second call's K: the short-K kernel takes small rows
      c1.unowned_rows = 0;
      Case c2 = c1;
      c2.name = "second";
      c2.k = c1.n;
      c2.n = 192;
      Problem p1(c1, rng), p2(c2, rng);
      ASSERT_NO_FATAL_FAILURE(upload(p1));
      ASSERT_NO_FATAL_FAILURE(upload(p2));
      ggemm_grouped_matmul_args first = p1.args(true, nullptr), second = p2.args(true, nullptr);
      second.a = p1.d_c.get();
      for (int round = 0; round < 4; ++round) {
        CUDA_OK(cudaMemsetAsync(p1.d_c.get(), 0xff, p1.c_init.size(), stream));  // NaN until the first call writes
        CUDA_OK(cudaMemsetAsync(p2.d_c.get(), 0xff, p2.c_init.size(), stream));
        GGEMM_OK(ggemm_grouped_matmul(handle, &first, stream));
        GGEMM_OK(ggemm_grouped_matmul(handle, &second, stream));
      }
      std::vector<uint8_t> got1(p1.c_init.size()), got2(p2.c_init.size());
      CUDA_OK(cudaMemcpyAsync(got1.data(), p1.d_c.get(), got1.size(), cudaMemcpyDeviceToHost, stream));
      CUDA_OK(cudaMemcpyAsync(got2.data(), p2.d_c.get(), got2.size(), cudaMemcpyDeviceToHost, stream));
      CUDA_OK(cudaStreamSynchronize(stream));
      SCOPED_TRACE("k1 " + std::to_string(k1) + ", first group rows " + std::to_string(rows[0]));
      const std::vector<uint8_t> want1 = reference_output(p1);
      EXPECT_TRUE(compare_matrix(c1.out, want1.data(), got1.data(), p1.m, c1.n, default_atol(c1.out, c1.k),
                                 default_rtol(c1.out)));
      p2.a = got1;  // the second call's reference reads what the first wrote
      const std::vector<uint8_t> want2 = reference_output(p2);
      EXPECT_TRUE(compare_matrix(c2.out, want2.data(), got2.data(), p2.m, c2.n, default_atol(c2.out, c2.k),
                                 default_rtol(c2.out)));
    }
  }
  CUDA_OK(cudaStreamDestroy(stream));
}

TEST(GroupedMatmulGpuGraph, ReplayWithNewDeviceCounts) {
  GGEMM_REQUIRE_GPU(handle);
  run_graph_replay(handle, false);
}

TEST(GroupedMatmulGpuGraph, ReplayWithNewGroupEnds) {
  GGEMM_REQUIRE_GPU(handle);
  run_graph_replay(handle, true);
}

TEST(GroupedMatmulGpuGraph, DecodeReplayWithNewRouting) {
  GGEMM_REQUIRE_GPU(handle);
  run_graph_replay(handle, false, true);
  run_graph_replay(handle, true, true);
}

}  // namespace
}  // namespace ggemm::testing
