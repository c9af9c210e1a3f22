// The public C ABI as a user sees it, through libggemm.so and ggemm.h only.
// Argument checks run before the handle check (ggemm_api.cpp), so a NULL
// handle lets every check be reached without a GPU: each invalid argument
// must return its own status and a message naming it, and a valid call must
// get as far as INVALID_HANDLE. The pointers are fake but aligned; nothing
// dereferences them because nothing launches.
#include <gtest/gtest.h>

#include <cctype>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <set>
#include <string>
#include <thread>
#include <utility>

#include "ggemm.h"

extern "C" int ggemm_c99_abi_check(void);
extern "C" void ggemm_c99_layout(size_t out[4]);

namespace {

template <typename T>
T *fake(uintptr_t addr) {
  return reinterpret_cast<T *>(addr);
}

ggemm_grouped_matmul_args valid_args() {
  ggemm_grouped_matmul_args a;
  std::memset(&a, 0, sizeof a);
  a.struct_size = sizeof a;
  a.a_dtype = GGEMM_DTYPE_BF16;
  a.b_dtype = GGEMM_DTYPE_BF16;
  a.c_dtype = GGEMM_DTYPE_BF16;
  a.m = 64;
  a.n = 256;
  a.k = 128;
  a.num_experts = 8;
  a.a = fake<const void>(0x1000);
  a.b = fake<const void>(0x2000);
  a.c = fake<void>(0x3000);
  a.transpose_b = 1;
  a.a_offsets = fake<const uint32_t>(0x4000);
  a.expert_ids = fake<const int32_t>(0x5000);
  a.expert_usage_stats = fake<const uint32_t>(0x6000);
  a.num_groups = 4;
  a.max_rows_per_group = 0;
  a.epilogue = GGEMM_EPILOGUE_STORE;
  a.row_scale = nullptr;
  a.config = nullptr;
  return a;
}

ggemm_status call(const ggemm_grouped_matmul_args &a) { return ggemm_grouped_matmul(nullptr, &a, nullptr); }

// True if `msg` names `arg`: a whole-word occurrence (not a piece of a longer
// identifier). One-letter names (a, m, ...) must be the subject ("m = ...",
// "a is NULL"), since a lone letter could appear in any sentence.
bool names_arg(const std::string &msg, const std::string &arg) {
  auto ident = [](char ch) { return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_'; };
  for (size_t pos = msg.find(arg); pos != std::string::npos; pos = msg.find(arg, pos + 1)) {
    const size_t end = pos + arg.size();
    if (pos > 0 && ident(msg[pos - 1])) continue;
    if (end < msg.size() && ident(msg[end])) continue;
    if (arg.size() > 1) return true;
    const std::string rest = msg.substr(end);
    if (rest.rfind(" =", 0) == 0 || rest.rfind(" is", 0) == 0) return true;
  }
  return false;
}

// Calls with `a` and expects `status` and a message naming `arg`.
void expect_refused(const ggemm_grouped_matmul_args &a, ggemm_status status, const std::string &arg) {
  const ggemm_status got = call(a);
  EXPECT_EQ(got, status) << "got " << ggemm_status_string(got) << " (\"" << ggemm_last_error_message()
                         << "\"), want " << ggemm_status_string(status);
  const std::string msg = ggemm_last_error_message();
  EXPECT_TRUE(names_arg(msg, arg)) << "message \"" << msg << "\" does not name " << arg;
}

// A valid call with no handle gets past validation to the handle check.
void expect_valid(const ggemm_grouped_matmul_args &a) {
  const ggemm_status got = call(a);
  EXPECT_EQ(got, GGEMM_STATUS_INVALID_HANDLE) << ggemm_status_string(got) << ": " << ggemm_last_error_message();
}

TEST(AbiValidation, ValidArgsReachTheHandleCheck) {
  expect_valid(valid_args());
  EXPECT_TRUE(names_arg(ggemm_last_error_message(), "handle")) << ggemm_last_error_message();
}

TEST(AbiValidation, ArgsNull) {
  EXPECT_EQ(ggemm_grouped_matmul(nullptr, nullptr, nullptr), GGEMM_STATUS_NULL_POINTER);
  EXPECT_TRUE(names_arg(ggemm_last_error_message(), "args")) << ggemm_last_error_message();
}

TEST(AbiValidation, StructSize) {
  auto a = valid_args();
  a.struct_size = sizeof a - 8;  // an older, shorter struct
  expect_refused(a, GGEMM_STATUS_INVALID_VALUE, "struct_size");
  a.struct_size = 0;
  expect_refused(a, GGEMM_STATUS_INVALID_VALUE, "struct_size");
}

TEST(AbiValidation, ADtypeFp32) {
  auto a = valid_args();
  a.a_dtype = a.b_dtype = GGEMM_DTYPE_FP32;
  expect_refused(a, GGEMM_STATUS_INVALID_DTYPE, "a_dtype");
}

TEST(AbiValidation, BDtypeDiffersFromA) {
  auto a = valid_args();
  a.b_dtype = GGEMM_DTYPE_FP16;
  expect_refused(a, GGEMM_STATUS_INVALID_DTYPE, "b_dtype");
}

TEST(AbiValidation, CDtypeInvalid) {
  auto a = valid_args();
  a.c_dtype = static_cast<ggemm_dtype>(9);
  expect_refused(a, GGEMM_STATUS_INVALID_DTYPE, "c_dtype");
  a.c_dtype = static_cast<ggemm_dtype>(0);
  expect_refused(a, GGEMM_STATUS_INVALID_DTYPE, "c_dtype");
}

TEST(AbiValidation, MNegative) {
  auto a = valid_args();
  a.m = -1;
  expect_refused(a, GGEMM_STATUS_INVALID_DIMENSION, "m");
}

TEST(AbiValidation, MTwoToThe31) {
  auto a = valid_args();
  a.m = int64_t(1) << 31;
  expect_refused(a, GGEMM_STATUS_INVALID_DIMENSION, "m");
}

TEST(AbiValidation, NZero) {
  auto a = valid_args();
  a.n = 0;
  expect_refused(a, GGEMM_STATUS_INVALID_DIMENSION, "n");
}

TEST(AbiValidation, NNotMultipleOf8) {
  auto a = valid_args();
  a.n = 252;
  expect_refused(a, GGEMM_STATUS_INVALID_DIMENSION, "n");
}

TEST(AbiValidation, NTooLarge) {
  auto a = valid_args();
  a.n = int64_t(1) << 31;
  expect_refused(a, GGEMM_STATUS_INVALID_DIMENSION, "n");
}

TEST(AbiValidation, KZero) {
  auto a = valid_args();
  a.k = 0;
  expect_refused(a, GGEMM_STATUS_INVALID_DIMENSION, "k");
}

TEST(AbiValidation, KNotMultipleOf8) {
  auto a = valid_args();
  a.k = 100;
  expect_refused(a, GGEMM_STATUS_INVALID_DIMENSION, "k");
}

TEST(AbiValidation, NumExpertsZero) {
  auto a = valid_args();
  a.num_experts = 0;
  expect_refused(a, GGEMM_STATUS_INVALID_DIMENSION, "num_experts");
}

TEST(AbiValidation, MaxRowsPerGroupNegative) {
  auto a = valid_args();
  a.max_rows_per_group = -1;
  expect_refused(a, GGEMM_STATUS_INVALID_DIMENSION, "max_rows_per_group");
}

TEST(AbiValidation, NumGroupsZero) {
  auto a = valid_args();
  a.num_groups = 0;
  expect_refused(a, GGEMM_STATUS_INVALID_GROUP_COUNT, "num_groups");
}

TEST(AbiValidation, NumGroupsPastMax) {
  auto a = valid_args();
  a.num_groups = GGEMM_MAX_GROUPS + 1;
  expect_refused(a, GGEMM_STATUS_INVALID_GROUP_COUNT, "num_groups");
  a.num_groups = GGEMM_MAX_GROUPS;  // the bound itself is allowed
  expect_valid(a);
}

TEST(AbiValidation, TransposeB2) {
  auto a = valid_args();
  a.transpose_b = 2;
  expect_refused(a, GGEMM_STATUS_INVALID_VALUE, "transpose_b");
}

TEST(AbiValidation, Epilogue7) {
  auto a = valid_args();
  a.epilogue = static_cast<ggemm_epilogue>(7);
  expect_refused(a, GGEMM_STATUS_INVALID_VALUE, "epilogue");
}

TEST(AbiValidation, PlaneSplit0AboveSplit1) {
  auto a = valid_args();
  a.a_plane_split0 = 192, a.a_plane_split1 = 128;
  expect_refused(a, GGEMM_STATUS_INVALID_VALUE, "a_plane_split0");
}

TEST(AbiValidation, PlaneSplit1PastN) {
  auto a = valid_args();
  a.a_plane_split0 = 128, a.a_plane_split1 = 264;  // n = 256
  expect_refused(a, GGEMM_STATUS_INVALID_VALUE, "a_plane_split0");
}

TEST(AbiValidation, PlaneSplit0ZeroWithSplit1Set) {
  auto a = valid_args();
  a.a_plane_split0 = 0, a.a_plane_split1 = 128;
  expect_refused(a, GGEMM_STATUS_INVALID_VALUE, "a_plane_split0");
  a.a_plane_split0 = -8, a.a_plane_split1 = 0;
  expect_refused(a, GGEMM_STATUS_INVALID_VALUE, "a_plane_split0");
}

TEST(AbiValidation, PlaneSplitNotMultipleOf8) {
  auto a = valid_args();
  a.a_plane_split0 = 100, a.a_plane_split1 = 200;
  expect_refused(a, GGEMM_STATUS_INVALID_VALUE, "a_plane_split0");
}

TEST(AbiValidation, PlaneSplitsValid) {
  // Equal splits and split1 == n are allowed (an empty middle or last plane).
  for (auto s : {std::pair<int64_t, int64_t>{128, 192}, {128, 128}, {64, 256}, {256, 256}}) {
    auto a = valid_args();
    a.a_plane_split0 = s.first, a.a_plane_split1 = s.second;
    expect_valid(a);
  }
}

TEST(AbiValidation, PlanesTripleMPast2To31) {
  // With planes A has 3 * m rows, and those are addressed with 32 bits.
  auto a = valid_args();
  a.m = int64_t(1) << 30;
  a.a_plane_split0 = 128, a.a_plane_split1 = 192;
  expect_refused(a, GGEMM_STATUS_INVALID_DIMENSION, "m");
  a.a_plane_split0 = a.a_plane_split1 = 0;  // the same m without planes is fine
  expect_valid(a);
}

TEST(AbiValidation, OutputPast2To42Elements) {
  // The tile walk counts a group's tiles in 32 bits (kMaxOutputElements).
  auto a = valid_args();
  a.m = (int64_t(1) << 31) - 1;
  a.n = int64_t(1) << 12;  // 2^43 - 2^12 outputs
  expect_refused(a, GGEMM_STATUS_INVALID_DIMENSION, "m");
  expect_refused(a, GGEMM_STATUS_INVALID_DIMENSION, "n");
  a.n = int64_t(1) << 11;  // just under 2^42
  expect_valid(a);
}

TEST(AbiValidation, WeightElementCountOverflow) {
  auto a = valid_args();
  a.num_experts = (int64_t(1) << 31) - 1;
  a.n = (int64_t(1) << 31) - 8;
  a.k = (int64_t(1) << 31) - 8;
  expect_refused(a, GGEMM_STATUS_INVALID_DIMENSION, "num_experts");
  // Weights past 4 GiB are normal (256 experts x 7168 x 4096 bf16 = 14 GiB).
  a = valid_args();
  a.num_experts = 256, a.n = 7168, a.k = 4096;
  expect_valid(a);
}

TEST(AbiValidation, MatrixNull) {
  for (const char *which : {"a", "b", "c"}) {
    SCOPED_TRACE(which);
    auto a = valid_args();
    if (which[0] == 'a') a.a = nullptr;
    if (which[0] == 'b') a.b = nullptr;
    if (which[0] == 'c') a.c = nullptr;
    expect_refused(a, GGEMM_STATUS_NULL_POINTER, which);
  }
}

TEST(AbiValidation, MatrixMisalignedBy8) {
  // 8-byte aligned is not enough: TMA needs 16-byte global addresses.
  for (const char *which : {"a", "b", "c"}) {
    SCOPED_TRACE(which);
    auto a = valid_args();
    if (which[0] == 'a') a.a = fake<const void>(0x1008);
    if (which[0] == 'b') a.b = fake<const void>(0x2008);
    if (which[0] == 'c') a.c = fake<void>(0x3008);
    expect_refused(a, GGEMM_STATUS_MISALIGNED_POINTER, which);
  }
}

TEST(AbiValidation, IndexArraysNull) {
  auto a = valid_args();
  a.a_offsets = nullptr;
  expect_refused(a, GGEMM_STATUS_NULL_POINTER, "a_offsets");
  a = valid_args();
  a.expert_ids = nullptr;
  expect_refused(a, GGEMM_STATUS_NULL_POINTER, "expert_ids");
  a = valid_args();
  a.expert_usage_stats = nullptr;
  expect_refused(a, GGEMM_STATUS_NULL_POINTER, "expert_usage_stats");
}

TEST(AbiValidation, IndexArraysMisalignedBy2) {
  auto a = valid_args();
  a.a_offsets = fake<const uint32_t>(0x4002);
  expect_refused(a, GGEMM_STATUS_MISALIGNED_POINTER, "a_offsets");
  a = valid_args();
  a.expert_ids = fake<const int32_t>(0x5002);
  expect_refused(a, GGEMM_STATUS_MISALIGNED_POINTER, "expert_ids");
  a = valid_args();
  a.expert_usage_stats = fake<const uint32_t>(0x6002);
  expect_refused(a, GGEMM_STATUS_MISALIGNED_POINTER, "expert_usage_stats");
}

TEST(AbiValidation, RowScaleOnlyForRowScaleEpilogue) {
  auto a = valid_args();
  a.epilogue = GGEMM_EPILOGUE_ROW_SCALE;
  a.row_scale = nullptr;
  expect_refused(a, GGEMM_STATUS_NULL_POINTER, "row_scale");
  a.row_scale = fake<const float>(0x7002);
  expect_refused(a, GGEMM_STATUS_MISALIGNED_POINTER, "row_scale");
  a.row_scale = fake<const float>(0x7000);
  expect_valid(a);
  // The other epilogues never read it.
  for (ggemm_epilogue e : {GGEMM_EPILOGUE_STORE, GGEMM_EPILOGUE_ACCUMULATE}) {
    a = valid_args();
    a.epilogue = e;
    a.row_scale = nullptr;
    expect_valid(a);
  }
}

TEST(AbiValidation, EmptyCallNeedsNoMatrices) {
  // m == 0 reads and writes nothing, so A and C may be NULL.
  auto a = valid_args();
  a.m = 0;
  a.a = nullptr;
  a.c = nullptr;
  expect_valid(a);
}

// ---- status strings, version, create/destroy, last error -------------------------

TEST(AbiBasics, StatusStringsAreDistinctAndPrefixed) {
  std::set<std::string> seen;
  for (int s = GGEMM_STATUS_SUCCESS; s <= GGEMM_STATUS_INTERNAL_ERROR; ++s) {
    const char *str = ggemm_status_string(static_cast<ggemm_status>(s));
    ASSERT_NE(str, nullptr) << "status " << s;
    EXPECT_EQ(std::string(str).rfind("GGEMM_STATUS_", 0), 0u) << str;
    EXPECT_TRUE(seen.insert(str).second) << "status " << s << " shares the name " << str;
  }
  EXPECT_EQ(seen.size(), 15u);
  EXPECT_STREQ(ggemm_status_string(GGEMM_STATUS_INVALID_CONFIG), "GGEMM_STATUS_INVALID_CONFIG");
  // Not an enumerator: still a string, never NULL.
  EXPECT_NE(ggemm_status_string(static_cast<ggemm_status>(1234)), nullptr);
}

TEST(AbiBasics, Version) {
  EXPECT_EQ(ggemm_version(), GGEMM_VERSION);
  EXPECT_EQ(GGEMM_VERSION, GGEMM_VERSION_MAJOR * 10000 + GGEMM_VERSION_MINOR * 100 + GGEMM_VERSION_PATCH);
}

TEST(AbiBasics, DestroyNullSucceeds) { EXPECT_EQ(ggemm_destroy(nullptr), GGEMM_STATUS_SUCCESS); }

TEST(AbiBasics, CreateNullHandlePointer) {
  EXPECT_EQ(ggemm_create(nullptr, 0), GGEMM_STATUS_NULL_POINTER);
  EXPECT_TRUE(names_arg(ggemm_last_error_message(), "handle")) << ggemm_last_error_message();
}

TEST(AbiBasics, SuccessClearsTheLastError) {
  auto a = valid_args();
  a.k = 0;
  ASSERT_NE(call(a), GGEMM_STATUS_SUCCESS);
  ASSERT_STRNE(ggemm_last_error_message(), "");
  ASSERT_EQ(ggemm_destroy(nullptr), GGEMM_STATUS_SUCCESS);
  EXPECT_STREQ(ggemm_last_error_message(), "");
}

TEST(AbiBasics, LastErrorIsPerThread) {
  auto a = valid_args();
  a.k = 0;
  ASSERT_EQ(call(a), GGEMM_STATUS_INVALID_DIMENSION);
  const std::string mine = ggemm_last_error_message();
  ASSERT_TRUE(names_arg(mine, "k"));

  std::string theirs_before, theirs_after;
  ggemm_status theirs_status = GGEMM_STATUS_SUCCESS;
  std::thread other([&] {
    theirs_before = ggemm_last_error_message();  // a fresh thread has none
    auto b = valid_args();
    b.num_groups = 0;
    theirs_status = call(b);
    theirs_after = ggemm_last_error_message();
  });
  other.join();
  EXPECT_EQ(theirs_before, "");
  EXPECT_EQ(theirs_status, GGEMM_STATUS_INVALID_GROUP_COUNT);
  EXPECT_TRUE(names_arg(theirs_after, "num_groups")) << theirs_after;
  EXPECT_EQ(ggemm_last_error_message(), mine);
}

TEST(AbiBasics, CreateWithoutGpuReportsClearly) {
  ggemm_handle_t h = reinterpret_cast<ggemm_handle_t>(uintptr_t(0x10));  // must be overwritten
  const ggemm_status s = ggemm_create(&h, 0);
  if (s == GGEMM_STATUS_SUCCESS) {
    ASSERT_NE(h, nullptr);
    EXPECT_EQ(ggemm_destroy(h), GGEMM_STATUS_SUCCESS) << ggemm_last_error_message();
  } else {
    EXPECT_TRUE(s == GGEMM_STATUS_DRIVER_NOT_FOUND || s == GGEMM_STATUS_NO_DEVICE ||
                s == GGEMM_STATUS_UNSUPPORTED_DEVICE)
        << ggemm_status_string(s) << ": " << ggemm_last_error_message();
    EXPECT_STRNE(ggemm_last_error_message(), "");
    EXPECT_EQ(h, nullptr) << "a failed create must not leave a handle behind";
  }
  for (int ordinal : {999, -1}) {
    ggemm_handle_t bad = nullptr;
    const ggemm_status b = ggemm_create(&bad, ordinal);
    EXPECT_NE(b, GGEMM_STATUS_SUCCESS) << "device " << ordinal;
    EXPECT_STRNE(ggemm_last_error_message(), "") << "device " << ordinal;
    if (b == GGEMM_STATUS_SUCCESS) ggemm_destroy(bad);
  }
}

// ---- C99 ------------------------------------------------------------------------

TEST(AbiC99, HeaderWorksFromC) { EXPECT_EQ(ggemm_c99_abi_check(), 0); }

TEST(AbiC99, CAndCxxAgreeOnLayout) {
  size_t c_layout[4] = {0, 0, 0, 0};
  ggemm_c99_layout(c_layout);
  EXPECT_EQ(c_layout[0], sizeof(ggemm_grouped_matmul_args));
  EXPECT_EQ(c_layout[1], sizeof(ggemm_config));
  EXPECT_EQ(c_layout[2], offsetof(ggemm_grouped_matmul_args, config));
  EXPECT_EQ(c_layout[3], offsetof(ggemm_config, b_swizzle));
}

}  // namespace
