// GPU tests of ggemm_grouped_matmul given malformed device-side routing or
// gather indices: the result the reference's clamping rules give, no write
// outside C (guard bands), and in checked mode exactly the faults present.
// Skipped without a GPU.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gpu_grouped_problem.h"

namespace ggemm::testing {
namespace {

// One call of the hostile tests: C (`out`, between guard bands) set to the
// problem's initial bytes and the checked-mode word zeroed, the call into
// C; a failure for any write outside C or a C other than `expected`.
// Returns the word's bits in *status.
void call_into_guarded_c(ggemm_handle_t handle, ggemm_grouped_matmul_args dev, const Problem &p,
                         const std::vector<uint8_t> &expected, GuardedBuffer &out,
                         const DeviceBuffer &status_word, uint32_t *status) {
  out.upload(p.c_init.data());
  CUDA_OK(cudaMemset(status_word.get(), 0, 4));
  dev.c = out.get();
  GGEMM_OK(ggemm_grouped_matmul(handle, &dev, nullptr));
  CUDA_OK(cudaGetLastError());
  CUDA_OK(cudaDeviceSynchronize());
  CUDA_OK(cudaMemcpy(status, status_word.get(), 4, cudaMemcpyDeviceToHost));
  bool guards = false;
  const std::vector<uint8_t> got = out.download(&guards);
  EXPECT_TRUE(guards) << "a write outside C";
  EXPECT_TRUE(compare_matrix(p.c.out, expected.data(), got.data(), p.m, p.c_cols, default_atol(p.c.out, p.c.k),
                             default_rtol(p.c.out)));
}

// Malformed device-side routing arrays (what the host cannot check without a
// synchronisation): the kernel must compute what the reference's clamping
// rules say, write nothing outside C (guard bands of poison on both sides),
// and, in checked mode, report exactly the faults present.
// K 256 runs on the persistent kernel; K 64 (automatic config) on sm_90a's
// short-K kernel, which walks the routing on its own.
// With group_ends the scenarios whose a_offsets[0] is 0 run as group ends
// (the rest cannot be said that way), kNotAnOffset in the word before them.
void run_hostile_routing(int64_t k, bool group_ends = false) {
  ggemm_handle_t handle = nullptr;  // its own: checked mode is per handle
  GGEMM_OK(ggemm_create(&handle, 0));
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed) + ", k " + std::to_string(k) + (group_ends ? ", group ends" : ""));
  Rng rng(seed);
  Case c{"hostile"};
  c.rows = {50, 60, 70, 80};
  c.n = 264;
  c.k = k;
  c.unowned_rows = 40;
  c.group_ends = group_ends;
  Problem p(c, rng);
  ASSERT_NO_FATAL_FAILURE(upload(p));

  GuardedBuffer out(p.c_init.size());  // C between 64 KiB guard bands of poison
  DeviceBuffer d_status;
  ASSERT_TRUE(d_status.alloc(4));
  ASSERT_FALSE(::testing::Test::HasFailure()) << "cudaMalloc of C's guarded allocation";

  const uint32_t M = uint32_t(p.m), kPast = 0xFFFFFFF0u;
  struct Scenario {
    const char *name;
    std::vector<uint32_t> offsets;
    std::vector<int32_t> ids;
    uint32_t active;
    uint32_t faults;
  };
  const std::vector<Scenario> scenarios = {
      {"well_formed", {0, 50, 110, 180, 260}, {0, 1, 2, 3}, 4, 0},
      {"decreasing", {0, 120, 40, 200, 210}, {0, 1, 2, 3}, 4, GGEMM_DEVICE_FAULT_OFFSETS_NOT_MONOTONE},
      {"first_not_zero", {9, 50, 110, 180, 260}, {0, 1, 2, 3}, 4, GGEMM_DEVICE_FAULT_OFFSETS_NOT_MONOTONE},
      {"past_m", {0, 50, M - 10, kPast, 0xFFFFFFFFu}, {0, 1, 2, 3}, 4, GGEMM_DEVICE_FAULT_OFFSET_PAST_M},
      {"past_m_then_back", {0, M + 100, 60, 70, 80}, {3, 2, 1, 0}, 4,
       GGEMM_DEVICE_FAULT_OFFSET_PAST_M | GGEMM_DEVICE_FAULT_OFFSETS_NOT_MONOTONE},
      {"ids_out_of_range", {0, 50, 110, 180, 260}, {0, 4, -7, int32_t(0x7fffffff)}, 4,
       GGEMM_DEVICE_FAULT_ID_OUT_OF_RANGE},
      {"active_past_capacity", {0, 50, 110, 180, 260}, {0, 1, 2, 3}, 1000, GGEMM_DEVICE_FAULT_ACTIVE_COUNT},
      {"faults_past_active_count_ignored", {0, 50, 110, 5, 0xFFFFFFFFu}, {0, 1, 9, 9}, 2, 0},
      {"all_at_once", {3, 1u << 31, 0, 7, 7}, {-2, 0, 1, 99}, 77,
       GGEMM_DEVICE_FAULT_OFFSETS_NOT_MONOTONE | GGEMM_DEVICE_FAULT_OFFSET_PAST_M |
           GGEMM_DEVICE_FAULT_ID_OUT_OF_RANGE | GGEMM_DEVICE_FAULT_ACTIVE_COUNT},
  };
  // The automatic config, and pairs sharing their token tile (cluster_m 2):
  // n = 264 makes the last pair tile's second share empty.
  ggemm_config pair_config = make_config(c);
  pair_config.tile_m = 128;
  pair_config.cluster_m = 2;
  const ggemm_config *const configs[] = {nullptr, &pair_config};
  for (int run = 0; run < 4; ++run) {
    const ggemm_config *config = configs[run / 2];
    const bool checked = run % 2 == 0;
    GGEMM_OK(ggemm_set_device_status(handle, checked ? d_status.as<uint32_t>() : nullptr));
    for (const Scenario &s : scenarios) {
      if (group_ends && s.offsets[0] != 0) continue;
      SCOPED_TRACE(std::string(s.name) + (checked ? " (checked)" : " (unchecked)") + (config ? ", pairs" : ""));
      p.offsets = s.offsets;
      p.ids = s.ids;
      p.stats[1] = s.active;
      CUDA_OK(cudaMemcpy(p.d_offsets.get(), p.offsets.data(), p.offsets.size() * 4, cudaMemcpyHostToDevice));
      if (group_ends) {
        std::vector<uint32_t> ends = p.offsets;
        ends[0] = kNotAnOffset;
        CUDA_OK(cudaMemcpy(p.d_ends.get(), ends.data(), ends.size() * 4, cudaMemcpyHostToDevice));
      }
      CUDA_OK(cudaMemcpy(p.d_ids.get(), p.ids.data(), p.ids.size() * 4, cudaMemcpyHostToDevice));
      CUDA_OK(cudaMemcpy(p.d_stats.get(), p.stats, 8, cudaMemcpyHostToDevice));
      ggemm_grouped_matmul_args dev = p.args(true, config);
      dev.max_rows_per_group = 0;  // the hint would be wrong for clamped groups
      uint32_t status = 0;
      ASSERT_NO_FATAL_FAILURE(call_into_guarded_c(handle, dev, p, reference_output(p), out, d_status, &status));
      EXPECT_EQ(status, checked ? s.faults : 0u) << "device status bits";
    }
  }
  GGEMM_OK(ggemm_destroy(handle));
}

TEST(GroupedMatmulGpuHostile, MalformedRoutingIsClampedAndReported) {
  GGEMM_REQUIRE_GPU(shared_handle);
  (void)shared_handle;
  run_hostile_routing(256);
}

TEST(GroupedMatmulGpuHostile, MalformedRoutingIsClampedAndReportedAtShortK) {
  GGEMM_REQUIRE_GPU(shared_handle);
  (void)shared_handle;
  run_hostile_routing(64);
}

// The same through group_ends: the faults are those of the ends alone (the
// word before them, which is not 0, is never read nor reported).
TEST(GroupedMatmulGpuHostile, MalformedGroupEndsAreClampedAndReported) {
  GGEMM_REQUIRE_GPU(shared_handle);
  (void)shared_handle;
  run_hostile_routing(256, true);
  run_hostile_routing(64, true);
}

// Checked mode's gather check covers every row the walk reads: with
// decreasing offsets the walk's groups end where the largest stated end
// does (its clamp keeps the ends non-decreasing), not where the last group
// says. An index out of range in a row only the largest end covers is
// reported beside the offsets' own fault.
TEST(GroupedMatmulGpuHostile, GatherIndicesPastTheLastStatedEndAreChecked) {
  GGEMM_REQUIRE_GPU(shared_handle);
  (void)shared_handle;
  ggemm_handle_t handle = nullptr;  // its own: checked mode is per handle
  GGEMM_OK(ggemm_create(&handle, 0));
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  Rng rng(seed);
  Case c{"gather_decreasing_offsets"};
  c.rows = {100, 0};
  c.n = 256;
  c.k = 128;
  c.gather_rows = 40;
  Problem p(c, rng);
  p.offsets = {0, 100, 50};  // group 1 says it ends at 50; the walk reads rows [0, 100)
  p.row_index[70] = int32_t(c.gather_rows);
  ASSERT_NO_FATAL_FAILURE(upload(p));
  DeviceBuffer d_status;
  ASSERT_TRUE(d_status.alloc(4));
  CUDA_OK(cudaMemset(d_status.get(), 0, 4));
  GGEMM_OK(ggemm_set_device_status(handle, d_status.as<uint32_t>()));
  ggemm_grouped_matmul_args dev = p.args(true, nullptr);
  dev.max_rows_per_group = 0;
  GGEMM_OK(ggemm_grouped_matmul(handle, &dev, nullptr));
  CUDA_OK(cudaGetLastError());
  CUDA_OK(cudaDeviceSynchronize());
  GGEMM_OK(ggemm_destroy(handle));
  uint32_t status = 0;
  CUDA_OK(cudaMemcpy(&status, d_status.get(), 4, cudaMemcpyDeviceToHost));
  EXPECT_EQ(status, uint32_t(GGEMM_DEVICE_FAULT_OFFSETS_NOT_MONOTONE | GGEMM_DEVICE_FAULT_INDEX_OUT_OF_RANGE));
}

// Gather indices outside [0, a_rows) passed directly (-1, -7, a_rows,
// INT32_MAX in grouped rows, some in an inactive group's, which checked
// mode's index check covers too): the kernels read zeros for those rows,
// as the reference does, write nothing outside C (64 KiB guard bands of
// poison on both sides) and, in checked mode, report exactly
// GGEMM_DEVICE_FAULT_INDEX_OUT_OF_RANGE; unchecked, nothing. Prefill groups
// (the persistent kernel's one-row TMA boxes), store, row scale and SwiGLU;
// decode groups under a row bound (the persistent kernel's 16-row tiles in
// the automatic plan, the decode GEMV with --decode_gemv=where_possible);
// a K of 24 (the short-K swizzle's gathered rows).
void run_hostile_gather(const Case &c, int64_t row_bound) {
  ggemm_handle_t handle = nullptr;  // its own: checked mode is per handle
  GGEMM_OK(ggemm_create(&handle, 0));
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed) + ", " + c.name);
  Rng rng(seed);
  Problem p(c, rng);
  ASSERT_NO_FATAL_FAILURE(upload(p));
  GuardedBuffer out(p.c_init.size());  // C between 64 KiB guard bands of poison
  DeviceBuffer d_status;
  ASSERT_TRUE(d_status.alloc(4));
  ASSERT_FALSE(::testing::Test::HasFailure()) << "cudaMalloc of C's guarded allocation";
  const std::vector<uint8_t> expected = reference_output(p);
  for (bool checked : {true, false}) {
    SCOPED_TRACE(checked ? "checked" : "unchecked");
    GGEMM_OK(ggemm_set_device_status(handle, checked ? d_status.as<uint32_t>() : nullptr));
    ggemm_grouped_matmul_args dev = p.args(true, nullptr);
    dev.max_rows_per_group = row_bound;
    uint32_t status = 0;
    ASSERT_NO_FATAL_FAILURE(call_into_guarded_c(handle, dev, p, expected, out, d_status, &status));
    EXPECT_EQ(status, checked ? uint32_t(GGEMM_DEVICE_FAULT_INDEX_OUT_OF_RANGE) : 0u) << "device status bits";
  }
  GGEMM_OK(ggemm_destroy(handle));
}

TEST(GroupedMatmulGpuHostile, GatherIndicesOutOfRangeReadZerosAndAreReported) {
  GGEMM_REQUIRE_GPU(shared_handle);
  (void)shared_handle;
  for (ggemm_epilogue e : {GGEMM_EPILOGUE_STORE, GGEMM_EPILOGUE_ROW_SCALE, GGEMM_EPILOGUE_SWIGLU}) {
    Case c{std::string("prefill_") +
           (e == GGEMM_EPILOGUE_STORE ? "store" : e == GGEMM_EPILOGUE_ROW_SCALE ? "row_scale" : "swiglu")};
    c.rows = {31, 300, 0, 64};
    c.experts = {0, 1, -1, 2};
    c.n = 384;
    c.k = 320;
    c.epilogue = e;
    c.gather_rows = 97;
    c.hostile_index = true;
    run_hostile_gather(c, 0);
  }
  {
    Case c{"decode_swiglu_fp16"};
    c.rows = {1, 2, 0, 4, 1};
    c.experts = {0, 1, 2, -1, 3};
    c.n = 48;
    c.k = 520;
    c.in = c.out = GGEMM_DTYPE_FP16;
    c.epilogue = GGEMM_EPILOGUE_SWIGLU;
    c.gather_rows = 7;
    c.hostile_index = true;
    c.unowned_rows = 0;
    run_hostile_gather(c, 4);
  }
  {
    Case c{"short_k24"};
    c.rows = {9, 40, 0, 3};
    c.num_experts = 4;
    c.n = 200;
    c.k = 24;
    c.gather_rows = 50;
    c.hostile_index = true;
    run_hostile_gather(c, 0);
  }
}

TEST(AbiCheckedMode, SetDeviceStatusChecksItsArguments) {
  EXPECT_EQ(ggemm_set_device_status(nullptr, nullptr), GGEMM_STATUS_INVALID_HANDLE);
  GGEMM_REQUIRE_GPU(handle);
  alignas(4) static uint32_t word[2];
  EXPECT_EQ(ggemm_set_device_status(handle, reinterpret_cast<uint32_t *>(reinterpret_cast<char *>(word) + 2)),
            GGEMM_STATUS_MISALIGNED_POINTER);
  EXPECT_NE(std::string(ggemm_last_error_message()).find("device_status"), std::string::npos);
  EXPECT_EQ(ggemm_set_device_status(handle, nullptr), GGEMM_STATUS_SUCCESS);
}

}  // namespace
}  // namespace ggemm::testing
