// The public C ABI as a user sees it, through libggemm.so and ggemm.h only.
// Argument checks run before the handle check (ggemm_api.cpp), so a NULL
// handle lets every check be reached without a GPU: each invalid argument
// must return its own status and a message naming it, and a valid call must
// get as far as INVALID_HANDLE. The pointers are fake but aligned; nothing
// dereferences them because nothing launches.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <set>
#include <string>
#include <thread>

#include "abi_cases.h"
#include "ggemm.h"

extern "C" int ggemm_c99_abi_check(void);
extern "C" void ggemm_c99_layout(size_t out[4]);

namespace ggemm::testing {
namespace {

using Args = ggemm_grouped_matmul_args;

// A valid call: bf16, 4 groups over 8 experts, K-major weights, STORE.
Args valid_args() {
  Args a;
  std::memset(&a, 0, sizeof a);
  a.struct_size = sizeof a;
  a.a_dtype = a.b_dtype = a.c_dtype = GGEMM_DTYPE_BF16;
  a.m = 64, a.n = 256, a.k = 128, a.num_experts = 8;
  a.a = fake<const void>(0x1000), a.b = fake<const void>(0x2000), a.c = fake<void>(0x3000);
  a.transpose_b = 1;
  a.a_offsets = fake<const uint32_t>(0x4000);
  a.expert_ids = fake<const int32_t>(0x5000);
  a.expert_usage_stats = fake<const uint32_t>(0x6000);
  a.num_groups = 4, a.max_rows_per_group = 0;
  a.epilogue = GGEMM_EPILOGUE_STORE, a.row_scale = nullptr;
  a.config = nullptr;
  return a;
}

TEST(AbiValidation, ValidArgsReachTheHandleCheck) { expect_reaches_handle_check(valid_args()); }

TEST(AbiValidation, ArgsNull) { expect_null_args_refused<Args>(); }

// Each row: valid_args() with one edit, and the status and argument name the
// call must answer with (kAccepted: it must reach the handle check).
const ArgsCase<Args> kCases[] = {
    // sizeof - 8 is 0.1.0's size (before group_ends), accepted; below it a
    // field would be cut.
    {"StructSizeShorter", [](Args &a) { a.struct_size = offsetof(Args, group_ends) - 8; }, GGEMM_STATUS_INVALID_VALUE,
     "struct_size"},
    {"StructSizeLonger", [](Args &a) { a.struct_size = sizeof a + 8; }, GGEMM_STATUS_INVALID_VALUE, "struct_size"},
    {"StructSizeZero", [](Args &a) { a.struct_size = 0; }, GGEMM_STATUS_INVALID_VALUE, "struct_size"},
    {"StructSizeOf010", [](Args &a) { a.struct_size = offsetof(Args, group_ends); }, kAccepted, nullptr},
    // A 0.1.0 caller has no group_ends: what lies there is not read.
    {"StructSizeOf010IgnoresGroupEnds",
     [](Args &a) { a.struct_size = offsetof(Args, group_ends), a.group_ends = fake<const uint32_t>(0x4004); },
     kAccepted, nullptr},
    {"StructSizeOf010StillNeedsAOffsets",
     [](Args &a) {
       a.struct_size = offsetof(Args, group_ends), a.a_offsets = nullptr, a.group_ends = fake<const uint32_t>(0x4004);
     },
     GGEMM_STATUS_NULL_POINTER, "a_offsets"},
    {"ADtypeFp32", [](Args &a) { a.a_dtype = a.b_dtype = GGEMM_DTYPE_FP32; }, GGEMM_STATUS_INVALID_DTYPE, "a_dtype"},
    {"BDtypeDiffersFromA", [](Args &a) { a.b_dtype = GGEMM_DTYPE_FP16; }, GGEMM_STATUS_INVALID_DTYPE, "b_dtype"},
    {"CDtype9", [](Args &a) { a.c_dtype = static_cast<ggemm_dtype>(9); }, GGEMM_STATUS_INVALID_DTYPE, "c_dtype"},
    {"CDtype0", [](Args &a) { a.c_dtype = static_cast<ggemm_dtype>(0); }, GGEMM_STATUS_INVALID_DTYPE, "c_dtype"},
    {"MNegative", [](Args &a) { a.m = -1; }, GGEMM_STATUS_INVALID_DIMENSION, "m"},
    {"MTwoToThe31", [](Args &a) { a.m = int64_t(1) << 31; }, GGEMM_STATUS_INVALID_DIMENSION, "m"},
    {"NZero", [](Args &a) { a.n = 0; }, GGEMM_STATUS_INVALID_DIMENSION, "n"},
    {"NNotMultipleOf8", [](Args &a) { a.n = 252; }, GGEMM_STATUS_INVALID_DIMENSION, "n"},
    {"NTooLarge", [](Args &a) { a.n = int64_t(1) << 31; }, GGEMM_STATUS_INVALID_DIMENSION, "n"},
    {"KZero", [](Args &a) { a.k = 0; }, GGEMM_STATUS_INVALID_DIMENSION, "k"},
    {"KNotMultipleOf8", [](Args &a) { a.k = 100; }, GGEMM_STATUS_INVALID_DIMENSION, "k"},
    {"NumExpertsZero", [](Args &a) { a.num_experts = 0; }, GGEMM_STATUS_INVALID_DIMENSION, "num_experts"},
    {"MaxRowsPerGroupNegative", [](Args &a) { a.max_rows_per_group = -1; }, GGEMM_STATUS_INVALID_DIMENSION,
     "max_rows_per_group"},
    {"NumGroupsZero", [](Args &a) { a.num_groups = 0; }, GGEMM_STATUS_INVALID_GROUP_COUNT, "num_groups"},
    {"NumGroupsPastMax", [](Args &a) { a.num_groups = GGEMM_MAX_GROUPS + 1; }, GGEMM_STATUS_INVALID_GROUP_COUNT,
     "num_groups"},
    // The bound itself is allowed.
    {"NumGroupsAtMax", [](Args &a) { a.num_groups = GGEMM_MAX_GROUPS; }, kAccepted, nullptr},
    {"TransposeB2", [](Args &a) { a.transpose_b = 2; }, GGEMM_STATUS_INVALID_VALUE, "transpose_b"},
    {"Epilogue7", [](Args &a) { a.epilogue = static_cast<ggemm_epilogue>(7); }, GGEMM_STATUS_INVALID_VALUE,
     "epilogue"},
    {"PlaneSplit0AboveSplit1", [](Args &a) { a.a_plane_split0 = 192, a.a_plane_split1 = 128; },
     GGEMM_STATUS_INVALID_VALUE, "a_plane_split0"},
    {"PlaneSplit1PastN", [](Args &a) { a.a_plane_split0 = 128, a.a_plane_split1 = 264; },  // n = 256
     GGEMM_STATUS_INVALID_VALUE, "a_plane_split0"},
    {"PlaneSplit0ZeroWithSplit1Set", [](Args &a) { a.a_plane_split0 = 0, a.a_plane_split1 = 128; },
     GGEMM_STATUS_INVALID_VALUE, "a_plane_split0"},
    {"PlaneSplit0Negative", [](Args &a) { a.a_plane_split0 = -8, a.a_plane_split1 = 0; }, GGEMM_STATUS_INVALID_VALUE,
     "a_plane_split0"},
    {"PlaneSplitNotMultipleOf8", [](Args &a) { a.a_plane_split0 = 100, a.a_plane_split1 = 200; },
     GGEMM_STATUS_INVALID_VALUE, "a_plane_split0"},
    // Equal splits and split1 == n are allowed (an empty middle or last plane).
    {"PlaneSplits128And192", [](Args &a) { a.a_plane_split0 = 128, a.a_plane_split1 = 192; }, kAccepted, nullptr},
    {"PlaneSplits128And128", [](Args &a) { a.a_plane_split0 = 128, a.a_plane_split1 = 128; }, kAccepted, nullptr},
    {"PlaneSplits64And256", [](Args &a) { a.a_plane_split0 = 64, a.a_plane_split1 = 256; }, kAccepted, nullptr},
    {"PlaneSplits256And256", [](Args &a) { a.a_plane_split0 = 256, a.a_plane_split1 = 256; }, kAccepted, nullptr},
    // With planes A has 3 * m rows, and those are addressed with 32 bits; the
    // same m without planes is fine.
    {"PlanesTripleMPast2To31",
     [](Args &a) { a.m = int64_t(1) << 30, a.a_plane_split0 = 128, a.a_plane_split1 = 192; },
     GGEMM_STATUS_INVALID_DIMENSION, "m"},
    {"NoPlanesMAt2To30", [](Args &a) { a.m = int64_t(1) << 30; }, kAccepted, nullptr},
    // The tile walk counts a group's tiles in 32 bits (kMaxOutputElements):
    // 2^43 - 2^12 outputs are refused, naming both m and n; just under 2^42 is not.
    {"OutputPast2To42ElementsNamesM", [](Args &a) { a.m = (int64_t(1) << 31) - 1, a.n = int64_t(1) << 12; },
     GGEMM_STATUS_INVALID_DIMENSION, "m"},
    {"OutputPast2To42ElementsNamesN", [](Args &a) { a.m = (int64_t(1) << 31) - 1, a.n = int64_t(1) << 12; },
     GGEMM_STATUS_INVALID_DIMENSION, "n"},
    {"OutputJustUnder2To42Elements", [](Args &a) { a.m = (int64_t(1) << 31) - 1, a.n = int64_t(1) << 11; },
     kAccepted, nullptr},
    {"WeightElementCountOverflow",
     [](Args &a) { a.num_experts = (int64_t(1) << 31) - 1, a.n = (int64_t(1) << 31) - 8, a.k = (int64_t(1) << 31) - 8; },
     GGEMM_STATUS_INVALID_DIMENSION, "num_experts"},
    // Weights past 4 GiB are normal (256 experts x 7168 x 4096 bf16 = 14 GiB).
    {"WeightsPast4GiB", [](Args &a) { a.num_experts = 256, a.n = 7168, a.k = 4096; }, kAccepted, nullptr},
    {"ANull", [](Args &a) { a.a = nullptr; }, GGEMM_STATUS_NULL_POINTER, "a"},
    {"BNull", [](Args &a) { a.b = nullptr; }, GGEMM_STATUS_NULL_POINTER, "b"},
    {"CNull", [](Args &a) { a.c = nullptr; }, GGEMM_STATUS_NULL_POINTER, "c"},
    // 8-byte aligned is not enough: TMA needs 16-byte global addresses.
    {"AMisalignedBy8", [](Args &a) { a.a = fake<const void>(0x1008); }, GGEMM_STATUS_MISALIGNED_POINTER, "a"},
    {"BMisalignedBy8", [](Args &a) { a.b = fake<const void>(0x2008); }, GGEMM_STATUS_MISALIGNED_POINTER, "b"},
    {"CMisalignedBy8", [](Args &a) { a.c = fake<void>(0x3008); }, GGEMM_STATUS_MISALIGNED_POINTER, "c"},
    {"AOffsetsNull", [](Args &a) { a.a_offsets = nullptr; }, GGEMM_STATUS_NULL_POINTER, "a_offsets"},
    {"ExpertIdsNull", [](Args &a) { a.expert_ids = nullptr; }, GGEMM_STATUS_NULL_POINTER, "expert_ids"},
    {"ExpertUsageStatsNull", [](Args &a) { a.expert_usage_stats = nullptr; }, GGEMM_STATUS_NULL_POINTER,
     "expert_usage_stats"},
    {"AOffsetsMisalignedBy2", [](Args &a) { a.a_offsets = fake<const uint32_t>(0x4002); },
     GGEMM_STATUS_MISALIGNED_POINTER, "a_offsets"},
    // Group ends (torch's offs) in place of a_offsets: one of the two, never both.
    {"GroupEndsInsteadOfAOffsets", [](Args &a) { a.a_offsets = nullptr, a.group_ends = fake<const uint32_t>(0x4004); },
     kAccepted, nullptr},
    {"AOffsetsAndGroupEnds", [](Args &a) { a.group_ends = fake<const uint32_t>(0x4004); }, GGEMM_STATUS_INVALID_VALUE,
     "group_ends"},
    {"AOffsetsAndGroupEndsWithNoRows", [](Args &a) { a.m = 0, a.group_ends = fake<const uint32_t>(0x4004); },
     GGEMM_STATUS_INVALID_VALUE, "group_ends"},
    {"NeitherAOffsetsNorGroupEnds", [](Args &a) { a.a_offsets = nullptr, a.group_ends = nullptr; },
     GGEMM_STATUS_NULL_POINTER, "group_ends"},
    {"GroupEndsMisalignedBy2",
     [](Args &a) { a.a_offsets = nullptr, a.group_ends = fake<const uint32_t>(0x4006); },
     GGEMM_STATUS_MISALIGNED_POINTER, "group_ends"},
    {"EmptyCallNeedsNoGroups", [](Args &a) { a.m = 0, a.a_offsets = nullptr; }, kAccepted, nullptr},
    {"ExpertIdsMisalignedBy2", [](Args &a) { a.expert_ids = fake<const int32_t>(0x5002); },
     GGEMM_STATUS_MISALIGNED_POINTER, "expert_ids"},
    {"ExpertUsageStatsMisalignedBy2", [](Args &a) { a.expert_usage_stats = fake<const uint32_t>(0x6002); },
     GGEMM_STATUS_MISALIGNED_POINTER, "expert_usage_stats"},
    // row_scale is checked only for the ROW_SCALE epilogue; the others never read it.
    {"RowScaleNull", [](Args &a) { a.epilogue = GGEMM_EPILOGUE_ROW_SCALE, a.row_scale = nullptr; },
     GGEMM_STATUS_NULL_POINTER, "row_scale"},
    {"RowScaleMisalignedBy2",
     [](Args &a) { a.epilogue = GGEMM_EPILOGUE_ROW_SCALE, a.row_scale = fake<const float>(0x7002); },
     GGEMM_STATUS_MISALIGNED_POINTER, "row_scale"},
    {"RowScaleAligned", [](Args &a) { a.epilogue = GGEMM_EPILOGUE_ROW_SCALE, a.row_scale = fake<const float>(0x7000); },
     kAccepted, nullptr},
    {"StoreNeedsNoRowScale", [](Args &a) { a.epilogue = GGEMM_EPILOGUE_STORE, a.row_scale = nullptr; }, kAccepted,
     nullptr},
    {"AccumulateNeedsNoRowScale", [](Args &a) { a.epilogue = GGEMM_EPILOGUE_ACCUMULATE, a.row_scale = nullptr; },
     kAccepted, nullptr},
    {"ConfigOfWrongSize", [](Args &a) { a.config = &kConfigOfWrongSize; }, GGEMM_STATUS_INVALID_VALUE, "config"},
    {"ConfigOfWrongSizeWithNoRows", [](Args &a) { a.m = 0, a.config = &kConfigOfWrongSize; },
     GGEMM_STATUS_INVALID_VALUE, "config"},
    {"ConfigFieldsAreTheDevicesToCheck", [](Args &a) { a.config = &kConfigNoKernelHas; }, kAccepted, nullptr},
    // m == 0 reads and writes nothing, so A and C may be NULL.
    {"EmptyCallNeedsNoMatrices", [](Args &a) { a.m = 0, a.a = nullptr, a.c = nullptr; }, kAccepted, nullptr},
};

GGEMM_ABI_CASE_SUITE(AbiValidation, Args, kCases, valid_args);

// A caller built against 0.1.0 hands over a struct that ends before
// group_ends: the library must read none of the bytes past it. The struct
// ends where an inaccessible page begins, so a read past it faults.
TEST(AbiValidation, StructOf010IsReadNoFurtherThanItsSize) {
  const size_t page = size_t(sysconf(_SC_PAGESIZE));
  void *mem = mmap(nullptr, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(mem, MAP_FAILED);
  char *guard = static_cast<char *>(mem) + page;
  ASSERT_EQ(mprotect(guard, page, PROT_NONE), 0);
  const size_t size = offsetof(Args, group_ends);
  Args full = valid_args();
  full.struct_size = size;
  std::memcpy(guard - size, &full, size);
  const auto *old_caller = reinterpret_cast<const Args *>(guard - size);
  EXPECT_EQ(call(old_caller), GGEMM_STATUS_INVALID_HANDLE) << describe(call(old_caller));
  Args bad = full;
  bad.k = 12;
  std::memcpy(guard - size, &bad, size);
  EXPECT_EQ(call(old_caller), GGEMM_STATUS_INVALID_DIMENSION);
  munmap(mem, 2 * page);
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
}  // namespace ggemm::testing
