// The MoE layer's argument validation through the public C ABI (libggemm.so
// and ggemm.h only), as test_abi_validation.cpp does for the grouped matmul:
// with a NULL handle every check is reached without a GPU; each invalid
// field returns its own status and a message naming it, and a valid call
// reaches INVALID_HANDLE. The pointers are fake (aligned unless the case says
// otherwise) and never dereferenced. The workspace queries are checked the
// same way, and for what they report.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "abi_cases.h"
#include "ggemm.h"

extern "C" void ggemm_c99_moe_layout(size_t out[6]);

namespace ggemm::testing {
namespace {

using RouteArgs = ggemm_moe_route_args;
using CombineArgs = ggemm_moe_combine_args;
using FfnArgs = ggemm_moe_ffn_args;

size_t route_workspace(const RouteArgs &a) {
  size_t bytes = 0;
  EXPECT_EQ(ggemm_moe_route_workspace_size(&a, &bytes), GGEMM_STATUS_SUCCESS) << ggemm_last_error_message();
  return bytes;
}

size_t ffn_workspace(const FfnArgs &a) {
  size_t bytes = 0;
  EXPECT_EQ(ggemm_moe_ffn_workspace_size(&a, &bytes), GGEMM_STATUS_SUCCESS) << ggemm_last_error_message();
  return bytes;
}

// 100 tokens, top-4 of 16 experts, this rank holding experts [4, 12).
RouteArgs valid_route() {
  RouteArgs a;
  std::memset(&a, 0, sizeof a);
  a.struct_size = sizeof a;
  a.num_tokens = 100, a.top_k = 4, a.num_experts = 16, a.first_expert = 4, a.local_experts = 8;
  a.topk_ids = fake<const int32_t>(0x1000), a.topk_weights = fake<const float>(0x2000);
  a.a_offsets = fake<uint32_t>(0x3000), a.expert_ids = fake<int32_t>(0x4000);
  a.expert_usage_stats = fake<uint32_t>(0x5000);
  a.row_token = fake<int32_t>(0x6000), a.row_slot = fake<int32_t>(0x7000);
  a.row_weight = fake<float>(0x8000), a.slot_row = fake<int32_t>(0x9000);
  a.workspace = fake<void>(0x10000);
  a.workspace_bytes = route_workspace(a);
  return a;
}

CombineArgs valid_combine() {
  CombineArgs a;
  std::memset(&a, 0, sizeof a);
  a.struct_size = sizeof a;
  a.y_dtype = a.out_dtype = GGEMM_DTYPE_BF16;
  a.num_tokens = 100, a.top_k = 4, a.hidden = 256, a.y_rows = 400;
  a.y = fake<const void>(0x1000), a.slot_row = fake<const int32_t>(0x2000), a.out = fake<void>(0x3000);
  return a;
}

FfnArgs valid_ffn() {
  FfnArgs a;
  std::memset(&a, 0, sizeof a);
  a.struct_size = sizeof a;
  a.dtype = GGEMM_DTYPE_BF16;
  a.num_tokens = 100, a.hidden = 256, a.intermediate = 128, a.top_k = 4;
  a.num_experts = 16, a.first_expert = 0, a.local_experts = 16;
  a.x = fake<const void>(0x1000), a.w_gate_up = fake<const void>(0x2000), a.w_down = fake<const void>(0x3000);
  a.topk_ids = fake<const int32_t>(0x4000), a.topk_weights = fake<const float>(0x5000);
  a.out = fake<void>(0x6000);
  a.workspace = fake<void>(0x10000);
  a.workspace_bytes = ffn_workspace(a);
  return a;
}

constexpr int64_t k2To31 = int64_t(1) << 31;

// ---- ggemm_moe_route ------------------------------------------------------------

TEST(AbiMoeRouteValidation, ValidArgsReachTheHandleCheck) { expect_reaches_handle_check(valid_route()); }
TEST(AbiMoeRouteValidation, ArgsNull) { expect_null_args_refused<RouteArgs>(); }

const ArgsCase<RouteArgs> kRouteCases[] = {
    {"StructSizeShorter", [](RouteArgs &a) { a.struct_size -= 8; }, GGEMM_STATUS_INVALID_VALUE, "struct_size"},
    {"StructSizeLonger", [](RouteArgs &a) { a.struct_size += 8; }, GGEMM_STATUS_INVALID_VALUE, "struct_size"},
    {"NumTokensNegative", [](RouteArgs &a) { a.num_tokens = -1; }, GGEMM_STATUS_INVALID_DIMENSION, "num_tokens"},
    {"NumTokens2To31", [](RouteArgs &a) { a.num_tokens = k2To31; }, GGEMM_STATUS_INVALID_DIMENSION, "num_tokens"},
    {"TopKZero", [](RouteArgs &a) { a.top_k = 0; }, GGEMM_STATUS_INVALID_DIMENSION, "top_k"},
    {"TopK65", [](RouteArgs &a) { a.top_k = 65; }, GGEMM_STATUS_INVALID_DIMENSION, "top_k"},
    // (More slots may need more workspace: the count matrix has a row a
    // chunk of 512 slots.)
    {"TopK64",
     [](RouteArgs &a) {
       a.top_k = 64;
       a.workspace_bytes = route_workspace(a);
     },
     kAccepted, nullptr},
    // The routed rows are numbered in 31 bits.
    {"SlotsPast2To31", [](RouteArgs &a) { a.num_tokens = k2To31 / 8, a.top_k = 8; }, GGEMM_STATUS_INVALID_DIMENSION,
     "num_tokens"},
    {"NumExpertsZero", [](RouteArgs &a) { a.num_experts = 0; }, GGEMM_STATUS_INVALID_DIMENSION, "num_experts"},
    {"NumExperts2To31", [](RouteArgs &a) { a.num_experts = k2To31; }, GGEMM_STATUS_INVALID_DIMENSION,
     "num_experts"},
    {"LocalExpertsZero", [](RouteArgs &a) { a.local_experts = 0; }, GGEMM_STATUS_INVALID_GROUP_COUNT,
     "local_experts"},
    {"LocalExpertsPastMaxGroups",
     [](RouteArgs &a) { a.num_experts = GGEMM_MAX_GROUPS + 8, a.first_expert = 0, a.local_experts = GGEMM_MAX_GROUPS + 1; },
     GGEMM_STATUS_INVALID_GROUP_COUNT, "local_experts"},
    {"LocalExpertsAtMaxGroups",
     [](RouteArgs &a) {
       a.num_experts = GGEMM_MAX_GROUPS, a.first_expert = 0, a.local_experts = GGEMM_MAX_GROUPS;
       a.workspace_bytes = route_workspace(a);
     },
     kAccepted, nullptr},
    {"FirstExpertNegative", [](RouteArgs &a) { a.first_expert = -1; }, GGEMM_STATUS_INVALID_VALUE, "first_expert"},
    {"LocalRangePastNumExperts", [](RouteArgs &a) { a.first_expert = 9; }, GGEMM_STATUS_INVALID_VALUE,
     "local_experts"},
    {"LocalRangeEndsAtNumExperts", [](RouteArgs &a) { a.first_expert = 8; }, kAccepted, nullptr},
    {"TopkIdsNull", [](RouteArgs &a) { a.topk_ids = nullptr; }, GGEMM_STATUS_NULL_POINTER, "topk_ids"},
    {"TopkIdsMisaligned", [](RouteArgs &a) { a.topk_ids = fake<const int32_t>(0x1002); },
     GGEMM_STATUS_MISALIGNED_POINTER, "topk_ids"},
    {"TopkWeightsNull", [](RouteArgs &a) { a.topk_weights = nullptr; }, GGEMM_STATUS_NULL_POINTER, "topk_weights"},
    {"TopkWeightsMisaligned", [](RouteArgs &a) { a.topk_weights = fake<const float>(0x2001); },
     GGEMM_STATUS_MISALIGNED_POINTER, "topk_weights"},
    {"AOffsetsNull", [](RouteArgs &a) { a.a_offsets = nullptr; }, GGEMM_STATUS_NULL_POINTER, "a_offsets"},
    {"AOffsetsMisaligned", [](RouteArgs &a) { a.a_offsets = fake<uint32_t>(0x3002); },
     GGEMM_STATUS_MISALIGNED_POINTER, "a_offsets"},
    {"ExpertIdsNull", [](RouteArgs &a) { a.expert_ids = nullptr; }, GGEMM_STATUS_NULL_POINTER, "expert_ids"},
    {"ExpertIdsMisaligned", [](RouteArgs &a) { a.expert_ids = fake<int32_t>(0x4002); },
     GGEMM_STATUS_MISALIGNED_POINTER, "expert_ids"},
    {"ExpertUsageStatsNull", [](RouteArgs &a) { a.expert_usage_stats = nullptr; }, GGEMM_STATUS_NULL_POINTER,
     "expert_usage_stats"},
    {"RowTokenNull", [](RouteArgs &a) { a.row_token = nullptr; }, GGEMM_STATUS_NULL_POINTER, "row_token"},
    {"RowTokenMisaligned", [](RouteArgs &a) { a.row_token = fake<int32_t>(0x6002); },
     GGEMM_STATUS_MISALIGNED_POINTER, "row_token"},
    {"RowSlotNull", [](RouteArgs &a) { a.row_slot = nullptr; }, GGEMM_STATUS_NULL_POINTER, "row_slot"},
    {"RowWeightNull", [](RouteArgs &a) { a.row_weight = nullptr; }, GGEMM_STATUS_NULL_POINTER, "row_weight"},
    {"RowWeightMisaligned", [](RouteArgs &a) { a.row_weight = fake<float>(0x8003); },
     GGEMM_STATUS_MISALIGNED_POINTER, "row_weight"},
    {"SlotRowNull", [](RouteArgs &a) { a.slot_row = nullptr; }, GGEMM_STATUS_NULL_POINTER, "slot_row"},
    {"SlotRowMisaligned", [](RouteArgs &a) { a.slot_row = fake<int32_t>(0x9002); },
     GGEMM_STATUS_MISALIGNED_POINTER, "slot_row"},
    {"WorkspaceNull", [](RouteArgs &a) { a.workspace = nullptr; }, GGEMM_STATUS_NULL_POINTER, "workspace"},
    {"WorkspaceMisalignedBy8", [](RouteArgs &a) { a.workspace = fake<void>(0x10008); },
     GGEMM_STATUS_MISALIGNED_POINTER, "workspace"},
    {"WorkspaceOneByteShort", [](RouteArgs &a) { a.workspace_bytes -= 1; }, GGEMM_STATUS_INVALID_VALUE,
     "workspace_bytes"},
    {"WorkspaceLarger", [](RouteArgs &a) { a.workspace_bytes += 4096; }, kAccepted, nullptr},
    // T = 0 reads no slot and writes no row, but still writes empty groups.
    {"NoTokensNeedsNoSlotArrays",
     [](RouteArgs &a) {
       a.num_tokens = 0;
       a.topk_ids = nullptr, a.topk_weights = nullptr, a.row_token = nullptr, a.row_slot = nullptr;
       a.row_weight = nullptr, a.slot_row = nullptr;
       a.workspace_bytes = route_workspace(a);
     },
     kAccepted, nullptr},
    {"NoTokensStillNeedsAOffsets", [](RouteArgs &a) { a.num_tokens = 0, a.a_offsets = nullptr; },
     GGEMM_STATUS_NULL_POINTER, "a_offsets"},
    {"NoTokensStillNeedsWorkspace", [](RouteArgs &a) { a.num_tokens = 0, a.workspace = nullptr; },
     GGEMM_STATUS_NULL_POINTER, "workspace"},
};
GGEMM_ABI_CASE_SUITE(AbiMoeRoute, RouteArgs, kRouteCases, valid_route);

// The message of a workspace too small names the size the call needs.
TEST(AbiMoeRouteValidation, WorkspaceTooSmallNamesTheNeededSize) {
  RouteArgs a = valid_route();
  const size_t needed = a.workspace_bytes;
  a.workspace_bytes = needed / 2;
  EXPECT_EQ(call(a), GGEMM_STATUS_INVALID_VALUE);
  EXPECT_NE(std::string(ggemm_last_error_message()).find(std::to_string(needed)), std::string::npos)
      << ggemm_last_error_message();
}

// ---- ggemm_moe_combine ----------------------------------------------------------

TEST(AbiMoeCombineValidation, ValidArgsReachTheHandleCheck) { expect_reaches_handle_check(valid_combine()); }
TEST(AbiMoeCombineValidation, ArgsNull) { expect_null_args_refused<CombineArgs>(); }

const ArgsCase<CombineArgs> kCombineCases[] = {
    {"StructSizeShorter", [](CombineArgs &a) { a.struct_size -= 8; }, GGEMM_STATUS_INVALID_VALUE, "struct_size"},
    {"YDtypeFp32", [](CombineArgs &a) { a.y_dtype = GGEMM_DTYPE_FP32, a.out_dtype = GGEMM_DTYPE_FP32; },
     GGEMM_STATUS_INVALID_DTYPE, "y_dtype"},
    {"YDtype0", [](CombineArgs &a) { a.y_dtype = static_cast<ggemm_dtype>(0); }, GGEMM_STATUS_INVALID_DTYPE,
     "y_dtype"},
    {"OutDtypeOtherHalf", [](CombineArgs &a) { a.out_dtype = GGEMM_DTYPE_FP16; }, GGEMM_STATUS_INVALID_DTYPE,
     "out_dtype"},
    {"OutDtype9", [](CombineArgs &a) { a.out_dtype = static_cast<ggemm_dtype>(9); }, GGEMM_STATUS_INVALID_DTYPE,
     "out_dtype"},
    {"OutDtypeFp32", [](CombineArgs &a) { a.out_dtype = GGEMM_DTYPE_FP32; }, kAccepted, nullptr},
    {"Fp16InFp16Out", [](CombineArgs &a) { a.y_dtype = a.out_dtype = GGEMM_DTYPE_FP16; }, kAccepted, nullptr},
    {"NumTokensNegative", [](CombineArgs &a) { a.num_tokens = -5; }, GGEMM_STATUS_INVALID_DIMENSION, "num_tokens"},
    {"TopKZero", [](CombineArgs &a) { a.top_k = 0; }, GGEMM_STATUS_INVALID_DIMENSION, "top_k"},
    {"TopK65", [](CombineArgs &a) { a.top_k = 65; }, GGEMM_STATUS_INVALID_DIMENSION, "top_k"},
    {"SlotsPast2To31", [](CombineArgs &a) { a.num_tokens = k2To31 / 2, a.top_k = 2; },
     GGEMM_STATUS_INVALID_DIMENSION, "top_k"},
    {"HiddenZero", [](CombineArgs &a) { a.hidden = 0; }, GGEMM_STATUS_INVALID_DIMENSION, "hidden"},
    {"HiddenNotMultipleOf8", [](CombineArgs &a) { a.hidden = 260; }, GGEMM_STATUS_INVALID_DIMENSION, "hidden"},
    {"Hidden2To31", [](CombineArgs &a) { a.hidden = k2To31; }, GGEMM_STATUS_INVALID_DIMENSION, "hidden"},
    {"YRowsNegative", [](CombineArgs &a) { a.y_rows = -1; }, GGEMM_STATUS_INVALID_DIMENSION, "y_rows"},
    {"YRows2To31", [](CombineArgs &a) { a.y_rows = k2To31; }, GGEMM_STATUS_INVALID_DIMENSION, "y_rows"},
    {"YRowsZero", [](CombineArgs &a) { a.y_rows = 0; }, kAccepted, nullptr},
    {"Accumulate2", [](CombineArgs &a) { a.accumulate = 2; }, GGEMM_STATUS_INVALID_VALUE, "accumulate"},
    {"AccumulateIntoBf16", [](CombineArgs &a) { a.accumulate = 1; }, GGEMM_STATUS_INVALID_VALUE, "accumulate"},
    {"AccumulateIntoFp32", [](CombineArgs &a) { a.accumulate = 1, a.out_dtype = GGEMM_DTYPE_FP32; }, kAccepted,
     nullptr},
    {"YNull", [](CombineArgs &a) { a.y = nullptr; }, GGEMM_STATUS_NULL_POINTER, "y"},
    {"YMisalignedBy8", [](CombineArgs &a) { a.y = fake<const void>(0x1008); }, GGEMM_STATUS_MISALIGNED_POINTER, "y"},
    {"SlotRowNull", [](CombineArgs &a) { a.slot_row = nullptr; }, GGEMM_STATUS_NULL_POINTER, "slot_row"},
    {"SlotRowMisaligned", [](CombineArgs &a) { a.slot_row = fake<const int32_t>(0x2002); },
     GGEMM_STATUS_MISALIGNED_POINTER, "slot_row"},
    {"OutNull", [](CombineArgs &a) { a.out = nullptr; }, GGEMM_STATUS_NULL_POINTER, "out"},
    {"OutMisalignedBy4", [](CombineArgs &a) { a.out = fake<void>(0x3004); }, GGEMM_STATUS_MISALIGNED_POINTER, "out"},
    {"NoTokensNeedsNoPointers",
     [](CombineArgs &a) { a.num_tokens = 0, a.y = nullptr, a.slot_row = nullptr, a.out = nullptr; }, kAccepted,
     nullptr},
};
GGEMM_ABI_CASE_SUITE(AbiMoeCombine, CombineArgs, kCombineCases, valid_combine);

// ---- ggemm_moe_ffn --------------------------------------------------------------

TEST(AbiMoeFfnValidation, ValidArgsReachTheHandleCheck) { expect_reaches_handle_check(valid_ffn()); }
TEST(AbiMoeFfnValidation, ArgsNull) { expect_null_args_refused<FfnArgs>(); }

const ArgsCase<FfnArgs> kFfnCases[] = {
    {"StructSizeZero", [](FfnArgs &a) { a.struct_size = 0; }, GGEMM_STATUS_INVALID_VALUE, "struct_size"},
    {"DtypeFp32", [](FfnArgs &a) { a.dtype = GGEMM_DTYPE_FP32; }, GGEMM_STATUS_INVALID_DTYPE, "dtype"},
    {"Dtype7", [](FfnArgs &a) { a.dtype = static_cast<ggemm_dtype>(7); }, GGEMM_STATUS_INVALID_DTYPE, "dtype"},
    {"NumTokensNegative", [](FfnArgs &a) { a.num_tokens = -1; }, GGEMM_STATUS_INVALID_DIMENSION, "num_tokens"},
    {"HiddenZero", [](FfnArgs &a) { a.hidden = 0; }, GGEMM_STATUS_INVALID_DIMENSION, "hidden"},
    {"HiddenNotMultipleOf8", [](FfnArgs &a) { a.hidden = 252; }, GGEMM_STATUS_INVALID_DIMENSION, "hidden"},
    {"IntermediateZero", [](FfnArgs &a) { a.intermediate = 0; }, GGEMM_STATUS_INVALID_DIMENSION, "intermediate"},
    {"IntermediateNotMultipleOf8", [](FfnArgs &a) { a.intermediate = 100; }, GGEMM_STATUS_INVALID_DIMENSION,
     "intermediate"},
    {"IntermediateTwiceTooWide", [](FfnArgs &a) { a.intermediate = k2To31 / 2; }, GGEMM_STATUS_INVALID_DIMENSION,
     "intermediate"},
    {"TopKZero", [](FfnArgs &a) { a.top_k = 0; }, GGEMM_STATUS_INVALID_DIMENSION, "top_k"},
    {"TopK65", [](FfnArgs &a) { a.top_k = 65; }, GGEMM_STATUS_INVALID_DIMENSION, "top_k"},
    {"NumExpertsZero", [](FfnArgs &a) { a.num_experts = 0; }, GGEMM_STATUS_INVALID_DIMENSION, "num_experts"},
    {"LocalExpertsZero", [](FfnArgs &a) { a.local_experts = 0; }, GGEMM_STATUS_INVALID_GROUP_COUNT, "local_experts"},
    {"FirstExpertNegative", [](FfnArgs &a) { a.first_expert = -8; }, GGEMM_STATUS_INVALID_VALUE, "first_expert"},
    {"LocalRangePastNumExperts", [](FfnArgs &a) { a.first_expert = 1; }, GGEMM_STATUS_INVALID_VALUE,
     "local_experts"},
    {"ExpertParallelRange",
     [](FfnArgs &a) { a.num_experts = 64, a.first_expert = 48, a.local_experts = 16; }, kAccepted, nullptr},
    // The gate_up output (T * k rows of 2I) past what one grouped matmul walks.
    {"OutputsPast2To42", [](FfnArgs &a) { a.num_tokens = k2To31 / 64 - 1, a.top_k = 64, a.intermediate = 65536; },
     GGEMM_STATUS_INVALID_DIMENSION, "num_tokens"},
    {"XNull", [](FfnArgs &a) { a.x = nullptr; }, GGEMM_STATUS_NULL_POINTER, "x"},
    {"XMisalignedBy8", [](FfnArgs &a) { a.x = fake<const void>(0x1008); }, GGEMM_STATUS_MISALIGNED_POINTER, "x"},
    {"WGateUpNull", [](FfnArgs &a) { a.w_gate_up = nullptr; }, GGEMM_STATUS_NULL_POINTER, "w_gate_up"},
    {"WGateUpMisaligned", [](FfnArgs &a) { a.w_gate_up = fake<const void>(0x2002); },
     GGEMM_STATUS_MISALIGNED_POINTER, "w_gate_up"},
    {"WDownNull", [](FfnArgs &a) { a.w_down = nullptr; }, GGEMM_STATUS_NULL_POINTER, "w_down"},
    {"WDownMisaligned", [](FfnArgs &a) { a.w_down = fake<const void>(0x3008); }, GGEMM_STATUS_MISALIGNED_POINTER,
     "w_down"},
    {"TopkIdsNull", [](FfnArgs &a) { a.topk_ids = nullptr; }, GGEMM_STATUS_NULL_POINTER, "topk_ids"},
    {"TopkIdsMisaligned", [](FfnArgs &a) { a.topk_ids = fake<const int32_t>(0x4001); },
     GGEMM_STATUS_MISALIGNED_POINTER, "topk_ids"},
    {"TopkWeightsNull", [](FfnArgs &a) { a.topk_weights = nullptr; }, GGEMM_STATUS_NULL_POINTER, "topk_weights"},
    {"OutNull", [](FfnArgs &a) { a.out = nullptr; }, GGEMM_STATUS_NULL_POINTER, "out"},
    {"OutMisalignedBy8", [](FfnArgs &a) { a.out = fake<void>(0x6008); }, GGEMM_STATUS_MISALIGNED_POINTER, "out"},
    {"WorkspaceNull", [](FfnArgs &a) { a.workspace = nullptr; }, GGEMM_STATUS_NULL_POINTER, "workspace"},
    {"WorkspaceMisaligned", [](FfnArgs &a) { a.workspace = fake<void>(0x10004); }, GGEMM_STATUS_MISALIGNED_POINTER,
     "workspace"},
    {"WorkspaceOneByteShort", [](FfnArgs &a) { a.workspace_bytes -= 1; }, GGEMM_STATUS_INVALID_VALUE,
     "workspace_bytes"},
    {"NoTokensIsANoOp",
     [](FfnArgs &a) {
       a.num_tokens = 0, a.x = nullptr, a.out = nullptr, a.topk_ids = nullptr, a.topk_weights = nullptr;
       a.workspace = nullptr, a.workspace_bytes = 0;
     },
     kAccepted, nullptr},
};
GGEMM_ABI_CASE_SUITE(AbiMoeFfn, FfnArgs, kFfnCases, valid_ffn);

// ---- the workspace queries --------------------------------------------------------

// They check the dims as the call does (pointers may be NULL) and refuse a
// NULL result pointer.
TEST(AbiMoeWorkspaceSize, RouteChecksDimsNotPointers) {
  RouteArgs a = valid_route();
  a.topk_ids = nullptr, a.workspace = nullptr, a.a_offsets = nullptr;
  size_t bytes = 0;
  EXPECT_EQ(ggemm_moe_route_workspace_size(&a, &bytes), GGEMM_STATUS_SUCCESS) << ggemm_last_error_message();
  EXPECT_GT(bytes, 0u);
  EXPECT_EQ(ggemm_moe_route_workspace_size(&a, nullptr), GGEMM_STATUS_NULL_POINTER);
  EXPECT_TRUE(names_arg(ggemm_last_error_message(), "bytes")) << ggemm_last_error_message();
  EXPECT_EQ(ggemm_moe_route_workspace_size(nullptr, &bytes), GGEMM_STATUS_NULL_POINTER);
  EXPECT_TRUE(names_arg(ggemm_last_error_message(), "args")) << ggemm_last_error_message();
  a.top_k = 0;
  EXPECT_EQ(ggemm_moe_route_workspace_size(&a, &bytes), GGEMM_STATUS_INVALID_DIMENSION);
  EXPECT_TRUE(names_arg(ggemm_last_error_message(), "top_k")) << ggemm_last_error_message();
  a = valid_route();
  a.struct_size = 0;
  EXPECT_EQ(ggemm_moe_route_workspace_size(&a, &bytes), GGEMM_STATUS_INVALID_VALUE);
  a = valid_route();
  a.first_expert = 100;
  EXPECT_EQ(ggemm_moe_route_workspace_size(&a, &bytes), GGEMM_STATUS_INVALID_VALUE);
  EXPECT_TRUE(names_arg(ggemm_last_error_message(), "first_expert")) << ggemm_last_error_message();
}

TEST(AbiMoeWorkspaceSize, FfnChecksDimsNotPointers) {
  FfnArgs a = valid_ffn();
  a.x = nullptr, a.workspace = nullptr;
  size_t bytes = 0;
  EXPECT_EQ(ggemm_moe_ffn_workspace_size(&a, &bytes), GGEMM_STATUS_SUCCESS) << ggemm_last_error_message();
  EXPECT_EQ(ggemm_moe_ffn_workspace_size(&a, nullptr), GGEMM_STATUS_NULL_POINTER);
  EXPECT_TRUE(names_arg(ggemm_last_error_message(), "bytes")) << ggemm_last_error_message();
  EXPECT_EQ(ggemm_moe_ffn_workspace_size(nullptr, &bytes), GGEMM_STATUS_NULL_POINTER);
  a.hidden = 12;
  EXPECT_EQ(ggemm_moe_ffn_workspace_size(&a, &bytes), GGEMM_STATUS_INVALID_DIMENSION);
  EXPECT_TRUE(names_arg(ggemm_last_error_message(), "hidden")) << ggemm_last_error_message();
  a = valid_ffn();
  a.dtype = GGEMM_DTYPE_FP32;
  EXPECT_EQ(ggemm_moe_ffn_workspace_size(&a, &bytes), GGEMM_STATUS_INVALID_DTYPE);
}

// The ffn's workspace holds at least its intermediates: h [T * k, I] and
// y [T * k, H] of the dtype, and the routing's arrays; it grows with each.
TEST(AbiMoeWorkspaceSize, FfnHoldsTheIntermediates) {
  const FfnArgs a = valid_ffn();
  const size_t rows = size_t(a.num_tokens * a.top_k);
  const size_t intermediates = rows * size_t(a.intermediate + a.hidden) * 2 + rows * 16;
  EXPECT_GE(a.workspace_bytes, intermediates);
  FfnArgs more = a;
  more.num_tokens *= 2;
  EXPECT_GE(ffn_workspace(more), a.workspace_bytes + rows * size_t(a.intermediate + a.hidden) * 2);
  more = a;
  more.intermediate *= 2;
  EXPECT_GE(ffn_workspace(more), a.workspace_bytes + rows * size_t(a.intermediate) * 2);
  more = a;
  more.dtype = GGEMM_DTYPE_FP16;
  EXPECT_EQ(ffn_workspace(more), a.workspace_bytes) << "bf16 and fp16 take the same room";
  // It does not depend on the pointers, and T = 0 needs at most T > 0's.
  more = a;
  more.x = nullptr;
  EXPECT_EQ(ffn_workspace(more), a.workspace_bytes);
  more.num_tokens = 0;
  EXPECT_LE(ffn_workspace(more), a.workspace_bytes);
}

// The route's workspace grows with the slots and the experts (its count
// matrix), and covers T = 0 (the kernels' barrier and totals).
TEST(AbiMoeWorkspaceSize, RouteGrowsWithSlotsAndExperts) {
  RouteArgs a = valid_route();
  a.num_tokens = 0;
  const size_t empty = route_workspace(a);
  EXPECT_GT(empty, 0u);
  a.num_tokens = 1 << 20, a.top_k = 8;
  const size_t big = route_workspace(a);
  EXPECT_GT(big, empty);
  a.num_experts = GGEMM_MAX_GROUPS, a.first_expert = 0, a.local_experts = GGEMM_MAX_GROUPS;
  EXPECT_GT(route_workspace(a), big);
}

// ---- C99 ------------------------------------------------------------------------------

// C (tests/test_abi_c99.c, which also calls each entry point) and C++ lay the
// MoE structs out alike.
TEST(AbiMoeC99, CAndCxxAgreeOnLayout) {
  size_t c_layout[6] = {0, 0, 0, 0, 0, 0};
  ggemm_c99_moe_layout(c_layout);
  EXPECT_EQ(c_layout[0], sizeof(RouteArgs));
  EXPECT_EQ(c_layout[1], offsetof(RouteArgs, workspace_bytes));
  EXPECT_EQ(c_layout[2], sizeof(CombineArgs));
  EXPECT_EQ(c_layout[3], offsetof(CombineArgs, accumulate));
  EXPECT_EQ(c_layout[4], sizeof(FfnArgs));
  EXPECT_EQ(c_layout[5], offsetof(FfnArgs, workspace_bytes));
}

}  // namespace
}  // namespace ggemm::testing
