// Argument validation of ggemm_lora_shrink_qkv and ggemm_lora_expand_qkv
// through the public C ABI, on the CPU: the checks run before the handle
// check, so with a NULL handle every invalid argument must return its own
// status and a message naming the field, and a valid call must get as far as
// INVALID_HANDLE. The pointers are fake but aligned; nothing dereferences
// them because nothing launches.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <string>

#include "abi_cases.h"
#include "ggemm.h"

namespace ggemm::testing {
namespace {

using Shrink = ggemm_lora_shrink_qkv_args;
using Expand = ggemm_lora_expand_qkv_args;

// The StructSize rows pass the other call's struct size as a wrong one.
static_assert(sizeof(Shrink) != sizeof(Expand), "the struct-size rows need the two sizes to differ");

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// ---- shrink ---------------------------------------------------------------

// A valid shrink: bf16 in and out, K 4096, rank 16, 8 groups over 8 adapters.
Shrink valid_shrink() {
  Shrink a;
  std::memset(&a, 0, sizeof a);
  a.struct_size = sizeof a;
  a.x_dtype = a.p_dtype = GGEMM_DTYPE_BF16;
  a.m = 64, a.k = 4096, a.rank = 16, a.num_adapters = 8;
  a.x = fake<const void>(0x1000), a.lora_a = fake<const void>(0x2000), a.p = fake<void>(0x3000);
  set_fake_lora_routing(a);
  a.scale = 1.0f, a.accumulate = 0;
  a.config = nullptr;
  return a;
}

TEST(LoraShrinkAbiValidation, ValidArgsReachTheHandleCheck) { expect_reaches_handle_check(valid_shrink()); }

TEST(LoraShrinkAbiValidation, ArgsNull) { expect_null_args_refused<Shrink>(); }

// Each row: valid_shrink() with one edit, and the status and argument name
// the call must answer with (kAccepted: it must reach the handle check).
const ArgsCase<Shrink> kShrinkCases[] = {
    {"StructSizeZero", [](Shrink &a) { a.struct_size = 0; }, GGEMM_STATUS_INVALID_VALUE, "struct_size"},
    {"StructSizeShorter", [](Shrink &a) { a.struct_size = sizeof a - 8; }, GGEMM_STATUS_INVALID_VALUE, "struct_size"},
    {"StructSizeLonger", [](Shrink &a) { a.struct_size = sizeof a + 8; }, GGEMM_STATUS_INVALID_VALUE, "struct_size"},
    {"StructSizeOfExpand", [](Shrink &a) { a.struct_size = sizeof(Expand); }, GGEMM_STATUS_INVALID_VALUE,
     "struct_size"},
    {"ConfigOfWrongSize", [](Shrink &a) { a.config = &kConfigOfWrongSize; }, GGEMM_STATUS_INVALID_VALUE, "config"},
    {"ConfigOfWrongSizeWithNoRows", [](Shrink &a) { a.m = 0, a.config = &kConfigOfWrongSize; },
     GGEMM_STATUS_INVALID_VALUE, "config"},
    {"ConfigFieldsAreTheDevicesToCheck", [](Shrink &a) { a.config = &kConfigNoKernelHas; }, kAccepted, nullptr},
    {"XDtype0", [](Shrink &a) { a.x_dtype = static_cast<ggemm_dtype>(0); }, GGEMM_STATUS_INVALID_DTYPE, "x_dtype"},
    {"XDtypeFp32", [](Shrink &a) { a.x_dtype = GGEMM_DTYPE_FP32; }, GGEMM_STATUS_INVALID_DTYPE, "x_dtype"},
    {"XDtype9", [](Shrink &a) { a.x_dtype = static_cast<ggemm_dtype>(9); }, GGEMM_STATUS_INVALID_DTYPE, "x_dtype"},
    {"XDtypeFp16", [](Shrink &a) { a.x_dtype = GGEMM_DTYPE_FP16; }, kAccepted, nullptr},
    {"PDtype0", [](Shrink &a) { a.p_dtype = static_cast<ggemm_dtype>(0); }, GGEMM_STATUS_INVALID_DTYPE, "p_dtype"},
    {"PDtype4", [](Shrink &a) { a.p_dtype = static_cast<ggemm_dtype>(4); }, GGEMM_STATUS_INVALID_DTYPE, "p_dtype"},
    {"PDtype9", [](Shrink &a) { a.p_dtype = static_cast<ggemm_dtype>(9); }, GGEMM_STATUS_INVALID_DTYPE, "p_dtype"},
    // Any output dtype with either operand dtype.
    {"PBf16XBf16", [](Shrink &a) { a.x_dtype = GGEMM_DTYPE_BF16, a.p_dtype = GGEMM_DTYPE_BF16; }, kAccepted, nullptr},
    {"PBf16XFp16", [](Shrink &a) { a.x_dtype = GGEMM_DTYPE_FP16, a.p_dtype = GGEMM_DTYPE_BF16; }, kAccepted, nullptr},
    {"PFp16XBf16", [](Shrink &a) { a.x_dtype = GGEMM_DTYPE_BF16, a.p_dtype = GGEMM_DTYPE_FP16; }, kAccepted, nullptr},
    {"PFp16XFp16", [](Shrink &a) { a.x_dtype = GGEMM_DTYPE_FP16, a.p_dtype = GGEMM_DTYPE_FP16; }, kAccepted, nullptr},
    {"PFp32XBf16", [](Shrink &a) { a.x_dtype = GGEMM_DTYPE_BF16, a.p_dtype = GGEMM_DTYPE_FP32; }, kAccepted, nullptr},
    {"PFp32XFp16", [](Shrink &a) { a.x_dtype = GGEMM_DTYPE_FP16, a.p_dtype = GGEMM_DTYPE_FP32; }, kAccepted, nullptr},
    {"MNegative", [](Shrink &a) { a.m = -1; }, GGEMM_STATUS_INVALID_DIMENSION, "m"},
    {"MTooLarge", [](Shrink &a) { a.m = int64_t(1) << 31; }, GGEMM_STATUS_INVALID_DIMENSION, "m"},
    {"MaxRowsPerGroupNegative", [](Shrink &a) { a.max_rows_per_group = -1; }, GGEMM_STATUS_INVALID_DIMENSION,
     "max_rows_per_group"},
    {"WeightElementCountOverflow",
     [](Shrink &a) { a.num_adapters = (int64_t(1) << 31) - 1, a.rank = int64_t(1) << 28, a.k = (int64_t(1) << 31) - 8; },
     GGEMM_STATUS_INVALID_DIMENSION, "num_adapters"},
    // Large adapter sets are normal: 1024 adapters x 3 x 128 x 8192 bf16 = 6 GiB.
    {"LargeAdapterSet", [](Shrink &a) { a.num_adapters = 1024, a.rank = 128, a.k = 8192; }, kAccepted, nullptr},
    // P has 3 * rank columns: 3 * 1024 of them is 2^42.6 elements, 3 * 512 is 2^41.6.
    {"OutputPast2To42Elements", [](Shrink &a) { a.m = (int64_t(1) << 31) - 1, a.rank = 1024; },
     GGEMM_STATUS_INVALID_DIMENSION, "rank"},
    {"OutputUnder2To42Elements", [](Shrink &a) { a.m = (int64_t(1) << 31) - 1, a.rank = 512; }, kAccepted, nullptr},
    // Small multiples of 8 are fine (rank 8, hidden 8), as is a rank that is
    // not a power of two.
    {"RankAndK8", [](Shrink &a) { a.rank = 8, a.k = 8; }, kAccepted, nullptr},
    {"Rank136K200", [](Shrink &a) { a.rank = 136, a.k = 200; }, kAccepted, nullptr},
    {"NumAdapters0", [](Shrink &a) { a.num_adapters = 0; }, GGEMM_STATUS_INVALID_DIMENSION, "num_adapters"},
    {"NumAdaptersNegative", [](Shrink &a) { a.num_adapters = -1; }, GGEMM_STATUS_INVALID_DIMENSION, "num_adapters"},
    {"NumGroups0", [](Shrink &a) { a.num_groups = 0; }, GGEMM_STATUS_INVALID_GROUP_COUNT, "num_groups"},
    {"NumGroupsPastMax", [](Shrink &a) { a.num_groups = GGEMM_MAX_GROUPS + 1; }, GGEMM_STATUS_INVALID_GROUP_COUNT,
     "num_groups"},
    // The bound itself is allowed.
    {"NumGroupsAtMax", [](Shrink &a) { a.num_groups = GGEMM_MAX_GROUPS; }, kAccepted, nullptr},
    {"Accumulate2", [](Shrink &a) { a.accumulate = 2; }, GGEMM_STATUS_INVALID_VALUE, "accumulate"},
    {"AccumulateNegative", [](Shrink &a) { a.accumulate = -1; }, GGEMM_STATUS_INVALID_VALUE, "accumulate"},
    {"Accumulate255", [](Shrink &a) { a.accumulate = 255; }, GGEMM_STATUS_INVALID_VALUE, "accumulate"},
    {"Accumulate1", [](Shrink &a) { a.accumulate = 1; }, kAccepted, nullptr},
    {"ScaleNaN", [](Shrink &a) { a.scale = kNaN; }, GGEMM_STATUS_INVALID_VALUE, "scale"},
    {"ScaleInf", [](Shrink &a) { a.scale = kInf; }, GGEMM_STATUS_INVALID_VALUE, "scale"},
    {"ScaleMinusInf", [](Shrink &a) { a.scale = -kInf; }, GGEMM_STATUS_INVALID_VALUE, "scale"},
    {"Scale0", [](Shrink &a) { a.scale = 0.0f; }, kAccepted, nullptr},
    {"ScaleMinus2", [](Shrink &a) { a.scale = -2.0f; }, kAccepted, nullptr},
    {"ScaleHalf", [](Shrink &a) { a.scale = 0.5f; }, kAccepted, nullptr},
    {"Scale1eMinus30", [](Shrink &a) { a.scale = 1e-30f; }, kAccepted, nullptr},
    {"Scale3e38", [](Shrink &a) { a.scale = 3e38f; }, kAccepted, nullptr},
    {"XNull", [](Shrink &a) { a.x = nullptr; }, GGEMM_STATUS_NULL_POINTER, "x"},
    {"LoraANull", [](Shrink &a) { a.lora_a = nullptr; }, GGEMM_STATUS_NULL_POINTER, "lora_a"},
    {"PNull", [](Shrink &a) { a.p = nullptr; }, GGEMM_STATUS_NULL_POINTER, "p"},
    // 8-byte aligned is not enough: TMA needs 16-byte global addresses.
    {"XMisalignedBy8", [](Shrink &a) { a.x = fake<const void>(0x1008); }, GGEMM_STATUS_MISALIGNED_POINTER, "x"},
    {"LoraAMisalignedBy8", [](Shrink &a) { a.lora_a = fake<const void>(0x2008); }, GGEMM_STATUS_MISALIGNED_POINTER,
     "lora_a"},
    {"PMisalignedBy2", [](Shrink &a) { a.p = fake<void>(0x3002); }, GGEMM_STATUS_MISALIGNED_POINTER, "p"},
    {"AOffsetsNull", [](Shrink &a) { a.a_offsets = nullptr; }, GGEMM_STATUS_NULL_POINTER, "a_offsets"},
    {"AdapterIdsNull", [](Shrink &a) { a.adapter_ids = nullptr; }, GGEMM_STATUS_NULL_POINTER, "adapter_ids"},
    {"ExpertUsageStatsNull", [](Shrink &a) { a.expert_usage_stats = nullptr; }, GGEMM_STATUS_NULL_POINTER,
     "expert_usage_stats"},
    {"AOffsetsMisalignedBy2", [](Shrink &a) { a.a_offsets = fake<const uint32_t>(0x4002); },
     GGEMM_STATUS_MISALIGNED_POINTER, "a_offsets"},
    {"AdapterIdsMisalignedBy1", [](Shrink &a) { a.adapter_ids = fake<const int32_t>(0x5001); },
     GGEMM_STATUS_MISALIGNED_POINTER, "adapter_ids"},
    {"ExpertUsageStatsMisalignedBy2", [](Shrink &a) { a.expert_usage_stats = fake<const uint32_t>(0x6002); },
     GGEMM_STATUS_MISALIGNED_POINTER, "expert_usage_stats"},
    // m == 0 reads and writes nothing, so the matrices may be NULL.
    {"EmptyCallNeedsNoMatrices", [](Shrink &a) { a.m = 0, a.x = nullptr, a.lora_a = nullptr, a.p = nullptr; },
     kAccepted, nullptr},
};

GGEMM_ABI_CASE_SUITE(LoraShrinkAbiValidation, Shrink, kShrinkCases, valid_shrink);

TEST(LoraShrinkAbiValidation, KAndRank) {
  expect_each_refused<Shrink>(valid_shrink, {{"k", &Shrink::k}, {"rank", &Shrink::rank}}, {0, -8, 4, 12, 100},
                              GGEMM_STATUS_INVALID_DIMENSION);
}

// ---- expand ---------------------------------------------------------------

// A valid expand: bf16 in and out, GQA (q_dim 4096, kv_dim 1024), rank 16,
// accumulating with scale 0.5, 8 groups over 8 adapters.
Expand valid_expand() {
  Expand a;
  std::memset(&a, 0, sizeof a);
  a.struct_size = sizeof a;
  a.p_dtype = a.out_dtype = GGEMM_DTYPE_BF16;
  a.m = 64, a.rank = 16, a.q_dim = 4096, a.kv_dim = 1024, a.num_adapters = 8;
  a.p = fake<const void>(0x1000), a.lora_b = fake<const void>(0x2000);
  a.q_out = fake<void>(0x3000), a.kv_out = fake<void>(0x7000);
  set_fake_lora_routing(a);
  a.scale = 0.5f, a.accumulate = 1;
  a.config = nullptr;
  return a;
}

TEST(LoraExpandAbiValidation, ValidArgsReachTheHandleCheck) {
  expect_reaches_handle_check(valid_expand());
  auto a = valid_expand();
  a.accumulate = 0;
  expect_valid(a);
}

TEST(LoraExpandAbiValidation, ArgsNull) { expect_null_args_refused<Expand>(); }

// Each row: valid_expand() with one edit, and the status and argument name
// the call must answer with (kAccepted: it must reach the handle check).
const ArgsCase<Expand> kExpandCases[] = {
    // 2^29 x 10240 outputs are past 2^42; 2^29 x 6144 are under.
    {"OutputPast2To42Elements", [](Expand &a) { a.m = int64_t(1) << 29, a.q_dim = 8192, a.kv_dim = 1024; },
     GGEMM_STATUS_INVALID_DIMENSION, "q_dim"},
    {"OutputUnder2To42Elements", [](Expand &a) { a.m = int64_t(1) << 29, a.q_dim = 4096, a.kv_dim = 1024; },
     kAccepted, nullptr},
    {"StructSizeZero", [](Expand &a) { a.struct_size = 0; }, GGEMM_STATUS_INVALID_VALUE, "struct_size"},
    {"StructSizeShorter", [](Expand &a) { a.struct_size = sizeof a - 8; }, GGEMM_STATUS_INVALID_VALUE, "struct_size"},
    {"StructSizeLonger", [](Expand &a) { a.struct_size = sizeof a + 8; }, GGEMM_STATUS_INVALID_VALUE, "struct_size"},
    {"StructSizeOfShrink", [](Expand &a) { a.struct_size = sizeof(Shrink); }, GGEMM_STATUS_INVALID_VALUE,
     "struct_size"},
    {"ConfigOfWrongSize", [](Expand &a) { a.config = &kConfigOfWrongSize; }, GGEMM_STATUS_INVALID_VALUE, "config"},
    {"ConfigOfWrongSizeWithNoRows", [](Expand &a) { a.m = 0, a.config = &kConfigOfWrongSize; },
     GGEMM_STATUS_INVALID_VALUE, "config"},
    {"ConfigFieldsAreTheDevicesToCheck", [](Expand &a) { a.config = &kConfigNoKernelHas; }, kAccepted, nullptr},
    {"PDtype0", [](Expand &a) { a.p_dtype = static_cast<ggemm_dtype>(0); }, GGEMM_STATUS_INVALID_DTYPE, "p_dtype"},
    {"PDtypeFp32", [](Expand &a) { a.p_dtype = GGEMM_DTYPE_FP32; }, GGEMM_STATUS_INVALID_DTYPE, "p_dtype"},
    {"PDtype9", [](Expand &a) { a.p_dtype = static_cast<ggemm_dtype>(9); }, GGEMM_STATUS_INVALID_DTYPE, "p_dtype"},
    {"OutDtype0", [](Expand &a) { a.out_dtype = static_cast<ggemm_dtype>(0); }, GGEMM_STATUS_INVALID_DTYPE,
     "out_dtype"},
    {"OutDtype4", [](Expand &a) { a.out_dtype = static_cast<ggemm_dtype>(4); }, GGEMM_STATUS_INVALID_DTYPE,
     "out_dtype"},
    {"OutDtype9", [](Expand &a) { a.out_dtype = static_cast<ggemm_dtype>(9); }, GGEMM_STATUS_INVALID_DTYPE,
     "out_dtype"},
    // Any output dtype with either operand dtype.
    {"OutBf16PBf16", [](Expand &a) { a.p_dtype = GGEMM_DTYPE_BF16, a.out_dtype = GGEMM_DTYPE_BF16; }, kAccepted,
     nullptr},
    {"OutBf16PFp16", [](Expand &a) { a.p_dtype = GGEMM_DTYPE_FP16, a.out_dtype = GGEMM_DTYPE_BF16; }, kAccepted,
     nullptr},
    {"OutFp16PBf16", [](Expand &a) { a.p_dtype = GGEMM_DTYPE_BF16, a.out_dtype = GGEMM_DTYPE_FP16; }, kAccepted,
     nullptr},
    {"OutFp16PFp16", [](Expand &a) { a.p_dtype = GGEMM_DTYPE_FP16, a.out_dtype = GGEMM_DTYPE_FP16; }, kAccepted,
     nullptr},
    {"OutFp32PBf16", [](Expand &a) { a.p_dtype = GGEMM_DTYPE_BF16, a.out_dtype = GGEMM_DTYPE_FP32; }, kAccepted,
     nullptr},
    {"OutFp32PFp16", [](Expand &a) { a.p_dtype = GGEMM_DTYPE_FP16, a.out_dtype = GGEMM_DTYPE_FP32; }, kAccepted,
     nullptr},
    {"MNegative", [](Expand &a) { a.m = -1; }, GGEMM_STATUS_INVALID_DIMENSION, "m"},
    // P has 3 * m rows (and kv_out 2 * m), addressed with 32 bits.
    {"MTwoToThe31", [](Expand &a) { a.m = int64_t(1) << 31; }, GGEMM_STATUS_INVALID_DIMENSION, "m"},
    {"MTwoToThe30", [](Expand &a) { a.m = int64_t(1) << 30; }, GGEMM_STATUS_INVALID_DIMENSION, "m"},
    {"MaxRowsPerGroupNegative", [](Expand &a) { a.max_rows_per_group = -1; }, GGEMM_STATUS_INVALID_DIMENSION,
     "max_rows_per_group"},
    {"WeightElementCountOverflow",
     [](Expand &a) {
       a.num_adapters = (int64_t(1) << 31) - 1, a.rank = (int64_t(1) << 31) - 8;
       a.q_dim = int64_t(1) << 29, a.kv_dim = int64_t(1) << 28;
     },
     GGEMM_STATUS_INVALID_DIMENSION, "num_adapters"},
    {"LargeAdapterSet", [](Expand &a) { a.num_adapters = 1024, a.rank = 128, a.q_dim = 8192, a.kv_dim = 1024; },
     kAccepted, nullptr},
    {"NumAdapters0", [](Expand &a) { a.num_adapters = 0; }, GGEMM_STATUS_INVALID_DIMENSION, "num_adapters"},
    {"NumAdaptersNegative", [](Expand &a) { a.num_adapters = -3; }, GGEMM_STATUS_INVALID_DIMENSION, "num_adapters"},
    {"NumGroups0", [](Expand &a) { a.num_groups = 0; }, GGEMM_STATUS_INVALID_GROUP_COUNT, "num_groups"},
    {"NumGroupsNegative", [](Expand &a) { a.num_groups = -1; }, GGEMM_STATUS_INVALID_GROUP_COUNT, "num_groups"},
    {"NumGroupsPastMax", [](Expand &a) { a.num_groups = GGEMM_MAX_GROUPS + 1; }, GGEMM_STATUS_INVALID_GROUP_COUNT,
     "num_groups"},
    {"NumGroupsAtMax", [](Expand &a) { a.num_groups = GGEMM_MAX_GROUPS; }, kAccepted, nullptr},
    {"Accumulate2", [](Expand &a) { a.accumulate = 2; }, GGEMM_STATUS_INVALID_VALUE, "accumulate"},
    {"AccumulateNegative", [](Expand &a) { a.accumulate = -1; }, GGEMM_STATUS_INVALID_VALUE, "accumulate"},
    {"ScaleNaN", [](Expand &a) { a.scale = kNaN; }, GGEMM_STATUS_INVALID_VALUE, "scale"},
    {"ScaleInf", [](Expand &a) { a.scale = kInf; }, GGEMM_STATUS_INVALID_VALUE, "scale"},
    {"ScaleMinusInf", [](Expand &a) { a.scale = -kInf; }, GGEMM_STATUS_INVALID_VALUE, "scale"},
    {"Scale0", [](Expand &a) { a.scale = 0.0f; }, kAccepted, nullptr},
    {"ScaleMinus1", [](Expand &a) { a.scale = -1.0f; }, kAccepted, nullptr},
    {"Scale2", [](Expand &a) { a.scale = 2.0f; }, kAccepted, nullptr},
    {"PNull", [](Expand &a) { a.p = nullptr; }, GGEMM_STATUS_NULL_POINTER, "p"},
    {"LoraBNull", [](Expand &a) { a.lora_b = nullptr; }, GGEMM_STATUS_NULL_POINTER, "lora_b"},
    {"QOutNull", [](Expand &a) { a.q_out = nullptr; }, GGEMM_STATUS_NULL_POINTER, "q_out"},
    {"KvOutNull", [](Expand &a) { a.kv_out = nullptr; }, GGEMM_STATUS_NULL_POINTER, "kv_out"},
    {"PMisalignedBy8", [](Expand &a) { a.p = fake<const void>(0x1008); }, GGEMM_STATUS_MISALIGNED_POINTER, "p"},
    {"LoraBMisalignedBy8", [](Expand &a) { a.lora_b = fake<const void>(0x2008); }, GGEMM_STATUS_MISALIGNED_POINTER,
     "lora_b"},
    {"QOutMisalignedBy8", [](Expand &a) { a.q_out = fake<void>(0x3008); }, GGEMM_STATUS_MISALIGNED_POINTER, "q_out"},
    {"KvOutMisalignedBy4", [](Expand &a) { a.kv_out = fake<void>(0x7004); }, GGEMM_STATUS_MISALIGNED_POINTER,
     "kv_out"},
    {"AOffsetsNull", [](Expand &a) { a.a_offsets = nullptr; }, GGEMM_STATUS_NULL_POINTER, "a_offsets"},
    {"AdapterIdsNull", [](Expand &a) { a.adapter_ids = nullptr; }, GGEMM_STATUS_NULL_POINTER, "adapter_ids"},
    {"ExpertUsageStatsNull", [](Expand &a) { a.expert_usage_stats = nullptr; }, GGEMM_STATUS_NULL_POINTER,
     "expert_usage_stats"},
    {"AOffsetsMisalignedBy2", [](Expand &a) { a.a_offsets = fake<const uint32_t>(0x4002); },
     GGEMM_STATUS_MISALIGNED_POINTER, "a_offsets"},
    {"AdapterIdsMisalignedBy2", [](Expand &a) { a.adapter_ids = fake<const int32_t>(0x5002); },
     GGEMM_STATUS_MISALIGNED_POINTER, "adapter_ids"},
    {"ExpertUsageStatsMisalignedBy1", [](Expand &a) { a.expert_usage_stats = fake<const uint32_t>(0x6001); },
     GGEMM_STATUS_MISALIGNED_POINTER, "expert_usage_stats"},
    // m == 0 reads and writes nothing, so the matrices may be NULL.
    {"EmptyCallNeedsNoMatrices",
     [](Expand &a) { a.m = 0, a.p = nullptr, a.lora_b = nullptr, a.q_out = nullptr, a.kv_out = nullptr; }, kAccepted,
     nullptr},
};

GGEMM_ABI_CASE_SUITE(LoraExpandAbiValidation, Expand, kExpandCases, valid_expand);

TEST(LoraExpandAbiValidation, RankQDimKvDim) {
  expect_each_refused<Expand>(valid_expand,
                              {{"rank", &Expand::rank}, {"q_dim", &Expand::q_dim}, {"kv_dim", &Expand::kv_dim}},
                              {0, -8, 4, 12, 1020}, GGEMM_STATUS_INVALID_DIMENSION);
}

TEST(LoraExpandAbiValidation, GqaAndUnalignedDimsAreValid) {
  // q_dim != kv_dim (GQA), q_dim < kv_dim, dims that are multiples of 8 but
  // of no tile, rank 8: all supported (a slower path is allowed).
  const int64_t dims[][3] = {{4096, 1024, 16}, {8192, 1024, 128}, {512, 256, 8},  {768, 256, 64},
                             {384, 128, 32},   {4096, 4096, 64},  {328, 136, 24}, {8, 8, 8},
                             {128, 512, 16}};
  for (const auto &d : dims) {
    SCOPED_TRACE(std::to_string(d[0]) + "/" + std::to_string(d[1]) + " rank " + std::to_string(d[2]));
    auto a = valid_expand();
    a.q_dim = d[0], a.kv_dim = d[1], a.rank = d[2];
    expect_valid(a);
  }
}

// A failed LoRA call's message is per thread and cleared by the next success,
// as for every other call.
TEST(LoraExpandAbiValidation, SuccessClearsTheLastError) {
  auto a = valid_expand();
  a.rank = 0;
  ASSERT_EQ(call(a), GGEMM_STATUS_INVALID_DIMENSION);
  ASSERT_STRNE(ggemm_last_error_message(), "");
  ASSERT_EQ(ggemm_destroy(nullptr), GGEMM_STATUS_SUCCESS);
  EXPECT_STREQ(ggemm_last_error_message(), "");
}

}  // namespace
}  // namespace ggemm::testing
