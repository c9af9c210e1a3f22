// Argument validation of ggemm_lora_shrink_qkv and ggemm_lora_expand_qkv
// through the public C ABI, on the CPU: the checks run before the handle
// check, so with a NULL handle every invalid argument must return its own
// status and a message naming the field, and a valid call must get as far as
// INVALID_HANDLE. The pointers are fake but aligned; nothing dereferences
// them because nothing launches.
#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>

#include "ggemm.h"

namespace {

template <typename T>
T *fake(uintptr_t addr) {
  return reinterpret_cast<T *>(addr);
}

// True if `msg` names `arg` as a whole word (not part of a longer identifier).
// One-letter names (m, k, p) must be the subject: "m = ..." or "p is ...".
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

std::string describe(ggemm_status got) {
  return std::string(ggemm_status_string(got)) + " (\"" + ggemm_last_error_message() + "\")";
}

// ---- shrink ---------------------------------------------------------------

ggemm_lora_shrink_qkv_args valid_shrink() {
  ggemm_lora_shrink_qkv_args a;
  std::memset(&a, 0, sizeof a);
  a.struct_size = sizeof a;
  a.x_dtype = GGEMM_DTYPE_BF16;
  a.p_dtype = GGEMM_DTYPE_BF16;
  a.m = 64;
  a.k = 4096;
  a.rank = 16;
  a.num_adapters = 8;
  a.x = fake<const void>(0x1000);
  a.lora_a = fake<const void>(0x2000);
  a.p = fake<void>(0x3000);
  a.a_offsets = fake<const uint32_t>(0x4000);
  a.adapter_ids = fake<const int32_t>(0x5000);
  a.expert_usage_stats = fake<const uint32_t>(0x6000);
  a.num_groups = 8;
  a.max_rows_per_group = 0;
  a.scale = 1.0f;
  a.accumulate = 0;
  a.config = nullptr;
  return a;
}

ggemm_status call(const ggemm_lora_shrink_qkv_args &a) { return ggemm_lora_shrink_qkv(nullptr, &a, nullptr); }

void expect_refused(const ggemm_lora_shrink_qkv_args &a, ggemm_status status, const std::string &arg) {
  const ggemm_status got = call(a);
  EXPECT_EQ(got, status) << "got " << describe(got) << ", want " << ggemm_status_string(status);
  const std::string msg = ggemm_last_error_message();
  EXPECT_TRUE(names_arg(msg, arg)) << "message \"" << msg << "\" does not name " << arg;
}

void expect_valid(const ggemm_lora_shrink_qkv_args &a) {
  const ggemm_status got = call(a);
  EXPECT_EQ(got, GGEMM_STATUS_INVALID_HANDLE) << describe(got);
}

TEST(LoraShrinkAbiValidation, ValidArgsReachTheHandleCheck) {
  expect_valid(valid_shrink());
  EXPECT_TRUE(names_arg(ggemm_last_error_message(), "handle")) << ggemm_last_error_message();
}

TEST(LoraShrinkAbiValidation, ArgsNull) {
  EXPECT_EQ(ggemm_lora_shrink_qkv(nullptr, nullptr, nullptr), GGEMM_STATUS_NULL_POINTER);
  EXPECT_TRUE(names_arg(ggemm_last_error_message(), "args")) << ggemm_last_error_message();
}

TEST(LoraShrinkAbiValidation, StructSize) {
  auto a = valid_shrink();
  for (size_t size : {size_t(0), sizeof a - 8, sizeof a + 8, sizeof(ggemm_lora_expand_qkv_args)}) {
    if (size == sizeof a) continue;
    a.struct_size = size;
    expect_refused(a, GGEMM_STATUS_INVALID_VALUE, "struct_size");
  }
}

TEST(LoraShrinkAbiValidation, XDtype) {
  for (int dt : {0, int(GGEMM_DTYPE_FP32), 9}) {
    auto a = valid_shrink();
    a.x_dtype = static_cast<ggemm_dtype>(dt);
    expect_refused(a, GGEMM_STATUS_INVALID_DTYPE, "x_dtype");
  }
  auto a = valid_shrink();
  a.x_dtype = GGEMM_DTYPE_FP16;
  expect_valid(a);
}

TEST(LoraShrinkAbiValidation, PDtype) {
  for (int dt : {0, 4, 9}) {
    auto a = valid_shrink();
    a.p_dtype = static_cast<ggemm_dtype>(dt);
    expect_refused(a, GGEMM_STATUS_INVALID_DTYPE, "p_dtype");
  }
  for (ggemm_dtype dt : {GGEMM_DTYPE_BF16, GGEMM_DTYPE_FP16, GGEMM_DTYPE_FP32}) {
    for (ggemm_dtype x : {GGEMM_DTYPE_BF16, GGEMM_DTYPE_FP16}) {
      auto a = valid_shrink();
      a.x_dtype = x;
      a.p_dtype = dt;  // any output dtype with either operand dtype
      expect_valid(a);
    }
  }
}

TEST(LoraShrinkAbiValidation, MNegative) {
  auto a = valid_shrink();
  a.m = -1;
  expect_refused(a, GGEMM_STATUS_INVALID_DIMENSION, "m");
}

TEST(LoraShrinkAbiValidation, MTooLarge) {
  auto a = valid_shrink();
  a.m = int64_t(1) << 31;
  expect_refused(a, GGEMM_STATUS_INVALID_DIMENSION, "m");
}

TEST(LoraShrinkAbiValidation, MaxRowsPerGroupNegative) {
  auto a = valid_shrink();
  a.max_rows_per_group = -1;
  expect_refused(a, GGEMM_STATUS_INVALID_DIMENSION, "max_rows_per_group");
}

TEST(LoraShrinkAbiValidation, WeightElementCountOverflow) {
  auto a = valid_shrink();
  a.num_adapters = (int64_t(1) << 31) - 1;
  a.rank = int64_t(1) << 28;
  a.k = (int64_t(1) << 31) - 8;
  expect_refused(a, GGEMM_STATUS_INVALID_DIMENSION, "num_adapters");
  // Large adapter sets are normal: 1024 adapters x 3 x 128 x 8192 bf16 = 6 GiB.
  a = valid_shrink();
  a.num_adapters = 1024, a.rank = 128, a.k = 8192;
  expect_valid(a);
}

TEST(LoraShrinkAbiValidation, OutputPast2To42Elements) {
  auto a = valid_shrink();
  a.m = (int64_t(1) << 31) - 1;
  a.rank = 1024;  // P: 3 * 1024 columns, 2^42.6 elements
  expect_refused(a, GGEMM_STATUS_INVALID_DIMENSION, "rank");
  a.rank = 512;  // 2^41.6
  expect_valid(a);
}

TEST(LoraShrinkAbiValidation, KAndRank) {
  struct Field {
    const char *name;
    int64_t ggemm_lora_shrink_qkv_args::*member;
  };
  for (const Field f : {Field{"k", &ggemm_lora_shrink_qkv_args::k}, Field{"rank", &ggemm_lora_shrink_qkv_args::rank}}) {
    for (int64_t bad : {int64_t(0), int64_t(-8), int64_t(4), int64_t(12), int64_t(100)}) {
      SCOPED_TRACE(std::string(f.name) + " = " + std::to_string(bad));
      auto a = valid_shrink();
      a.*f.member = bad;
      expect_refused(a, GGEMM_STATUS_INVALID_DIMENSION, f.name);
    }
  }
  // Small multiples of 8 are fine (rank 8, hidden 8).
  auto a = valid_shrink();
  a.rank = 8;
  a.k = 8;
  expect_valid(a);
  a.rank = 136;  // not a power of two
  a.k = 200;
  expect_valid(a);
}

TEST(LoraShrinkAbiValidation, NumAdapters) {
  for (int64_t bad : {int64_t(0), int64_t(-1)}) {
    auto a = valid_shrink();
    a.num_adapters = bad;
    expect_refused(a, GGEMM_STATUS_INVALID_DIMENSION, "num_adapters");
  }
}

TEST(LoraShrinkAbiValidation, NumGroups) {
  auto a = valid_shrink();
  a.num_groups = 0;
  expect_refused(a, GGEMM_STATUS_INVALID_GROUP_COUNT, "num_groups");
  a.num_groups = GGEMM_MAX_GROUPS + 1;
  expect_refused(a, GGEMM_STATUS_INVALID_GROUP_COUNT, "num_groups");
  a.num_groups = GGEMM_MAX_GROUPS;  // the bound itself is allowed
  expect_valid(a);
}

TEST(LoraShrinkAbiValidation, Accumulate) {
  for (int bad : {2, -1, 255}) {
    auto a = valid_shrink();
    a.accumulate = bad;
    expect_refused(a, GGEMM_STATUS_INVALID_VALUE, "accumulate");
  }
  auto a = valid_shrink();
  a.accumulate = 1;
  expect_valid(a);
}

TEST(LoraShrinkAbiValidation, ScaleNotFinite) {
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                    -std::numeric_limits<float>::infinity()}) {
    auto a = valid_shrink();
    a.scale = bad;
    expect_refused(a, GGEMM_STATUS_INVALID_VALUE, "scale");
  }
  for (float ok : {0.0f, -2.0f, 0.5f, 1e-30f, 3e38f}) {
    auto a = valid_shrink();
    a.scale = ok;
    expect_valid(a);
  }
}

TEST(LoraShrinkAbiValidation, MatricesNull) {
  for (const char *which : {"x", "lora_a", "p"}) {
    SCOPED_TRACE(which);
    auto a = valid_shrink();
    if (!std::strcmp(which, "x")) a.x = nullptr;
    if (!std::strcmp(which, "lora_a")) a.lora_a = nullptr;
    if (!std::strcmp(which, "p")) a.p = nullptr;
    expect_refused(a, GGEMM_STATUS_NULL_POINTER, which);
  }
}

TEST(LoraShrinkAbiValidation, MatricesMisalignedBy8) {
  // 8-byte aligned is not enough: TMA needs 16-byte global addresses.
  for (const char *which : {"x", "lora_a", "p"}) {
    SCOPED_TRACE(which);
    auto a = valid_shrink();
    if (!std::strcmp(which, "x")) a.x = fake<const void>(0x1008);
    if (!std::strcmp(which, "lora_a")) a.lora_a = fake<const void>(0x2008);
    if (!std::strcmp(which, "p")) a.p = fake<void>(0x3002);
    expect_refused(a, GGEMM_STATUS_MISALIGNED_POINTER, which);
  }
}

TEST(LoraShrinkAbiValidation, IndexArrays) {
  auto a = valid_shrink();
  a.a_offsets = nullptr;
  expect_refused(a, GGEMM_STATUS_NULL_POINTER, "a_offsets");
  a = valid_shrink();
  a.adapter_ids = nullptr;
  expect_refused(a, GGEMM_STATUS_NULL_POINTER, "adapter_ids");
  a = valid_shrink();
  a.expert_usage_stats = nullptr;
  expect_refused(a, GGEMM_STATUS_NULL_POINTER, "expert_usage_stats");
  a = valid_shrink();
  a.a_offsets = fake<const uint32_t>(0x4002);
  expect_refused(a, GGEMM_STATUS_MISALIGNED_POINTER, "a_offsets");
  a = valid_shrink();
  a.adapter_ids = fake<const int32_t>(0x5001);
  expect_refused(a, GGEMM_STATUS_MISALIGNED_POINTER, "adapter_ids");
  a = valid_shrink();
  a.expert_usage_stats = fake<const uint32_t>(0x6002);
  expect_refused(a, GGEMM_STATUS_MISALIGNED_POINTER, "expert_usage_stats");
}

TEST(LoraShrinkAbiValidation, EmptyCallNeedsNoMatrices) {
  // m == 0 reads and writes nothing, so the matrices may be NULL.
  auto a = valid_shrink();
  a.m = 0;
  a.x = nullptr;
  a.lora_a = nullptr;
  a.p = nullptr;
  expect_valid(a);
}

// ---- expand ---------------------------------------------------------------

ggemm_lora_expand_qkv_args valid_expand() {
  ggemm_lora_expand_qkv_args a;
  std::memset(&a, 0, sizeof a);
  a.struct_size = sizeof a;
  a.p_dtype = GGEMM_DTYPE_BF16;
  a.out_dtype = GGEMM_DTYPE_BF16;
  a.m = 64;
  a.rank = 16;
  a.q_dim = 4096;
  a.kv_dim = 1024;
  a.num_adapters = 8;
  a.p = fake<const void>(0x1000);
  a.lora_b = fake<const void>(0x2000);
  a.q_out = fake<void>(0x3000);
  a.kv_out = fake<void>(0x7000);
  a.a_offsets = fake<const uint32_t>(0x4000);
  a.adapter_ids = fake<const int32_t>(0x5000);
  a.expert_usage_stats = fake<const uint32_t>(0x6000);
  a.num_groups = 8;
  a.max_rows_per_group = 0;
  a.scale = 0.5f;
  a.accumulate = 1;
  a.config = nullptr;
  return a;
}

ggemm_status call(const ggemm_lora_expand_qkv_args &a) { return ggemm_lora_expand_qkv(nullptr, &a, nullptr); }

void expect_refused(const ggemm_lora_expand_qkv_args &a, ggemm_status status, const std::string &arg) {
  const ggemm_status got = call(a);
  EXPECT_EQ(got, status) << "got " << describe(got) << ", want " << ggemm_status_string(status);
  const std::string msg = ggemm_last_error_message();
  EXPECT_TRUE(names_arg(msg, arg)) << "message \"" << msg << "\" does not name " << arg;
}

void expect_valid(const ggemm_lora_expand_qkv_args &a) {
  const ggemm_status got = call(a);
  EXPECT_EQ(got, GGEMM_STATUS_INVALID_HANDLE) << describe(got);
}

TEST(LoraExpandAbiValidation, ValidArgsReachTheHandleCheck) {
  expect_valid(valid_expand());
  EXPECT_TRUE(names_arg(ggemm_last_error_message(), "handle")) << ggemm_last_error_message();
  auto a = valid_expand();
  a.accumulate = 0;
  expect_valid(a);
}

TEST(LoraExpandAbiValidation, OutputPast2To42Elements) {
  auto a = valid_expand();
  a.m = int64_t(1) << 29;
  a.q_dim = 8192, a.kv_dim = 1024;  // 2^29 x 10240: past 2^42
  expect_refused(a, GGEMM_STATUS_INVALID_DIMENSION, "q_dim");
  a.q_dim = 4096;  // 2^29 x 6144: under
  expect_valid(a);
}

TEST(LoraExpandAbiValidation, ArgsNull) {
  EXPECT_EQ(ggemm_lora_expand_qkv(nullptr, nullptr, nullptr), GGEMM_STATUS_NULL_POINTER);
  EXPECT_TRUE(names_arg(ggemm_last_error_message(), "args")) << ggemm_last_error_message();
}

TEST(LoraExpandAbiValidation, StructSize) {
  auto a = valid_expand();
  for (size_t size : {size_t(0), sizeof a - 8, sizeof a + 8, sizeof(ggemm_lora_shrink_qkv_args)}) {
    if (size == sizeof a) continue;
    a.struct_size = size;
    expect_refused(a, GGEMM_STATUS_INVALID_VALUE, "struct_size");
  }
}

TEST(LoraExpandAbiValidation, PDtype) {
  for (int dt : {0, int(GGEMM_DTYPE_FP32), 9}) {
    auto a = valid_expand();
    a.p_dtype = static_cast<ggemm_dtype>(dt);
    expect_refused(a, GGEMM_STATUS_INVALID_DTYPE, "p_dtype");
  }
}

TEST(LoraExpandAbiValidation, OutDtype) {
  for (int dt : {0, 4, 9}) {
    auto a = valid_expand();
    a.out_dtype = static_cast<ggemm_dtype>(dt);
    expect_refused(a, GGEMM_STATUS_INVALID_DTYPE, "out_dtype");
  }
  for (ggemm_dtype out : {GGEMM_DTYPE_BF16, GGEMM_DTYPE_FP16, GGEMM_DTYPE_FP32}) {
    for (ggemm_dtype p : {GGEMM_DTYPE_BF16, GGEMM_DTYPE_FP16}) {
      auto a = valid_expand();
      a.p_dtype = p;
      a.out_dtype = out;
      expect_valid(a);
    }
  }
}

TEST(LoraExpandAbiValidation, MNegative) {
  auto a = valid_expand();
  a.m = -1;
  expect_refused(a, GGEMM_STATUS_INVALID_DIMENSION, "m");
}

TEST(LoraExpandAbiValidation, MTooLarge) {
  // P has 3 * m rows (and kv_out 2 * m), addressed with 32 bits.
  auto a = valid_expand();
  a.m = int64_t(1) << 31;
  expect_refused(a, GGEMM_STATUS_INVALID_DIMENSION, "m");
  a.m = int64_t(1) << 30;
  expect_refused(a, GGEMM_STATUS_INVALID_DIMENSION, "m");
}

TEST(LoraExpandAbiValidation, MaxRowsPerGroupNegative) {
  auto a = valid_expand();
  a.max_rows_per_group = -1;
  expect_refused(a, GGEMM_STATUS_INVALID_DIMENSION, "max_rows_per_group");
}

TEST(LoraExpandAbiValidation, WeightElementCountOverflow) {
  auto a = valid_expand();
  a.num_adapters = (int64_t(1) << 31) - 1;
  a.rank = (int64_t(1) << 31) - 8;
  a.q_dim = int64_t(1) << 29;
  a.kv_dim = int64_t(1) << 28;
  expect_refused(a, GGEMM_STATUS_INVALID_DIMENSION, "num_adapters");
  a = valid_expand();
  a.num_adapters = 1024, a.rank = 128, a.q_dim = 8192, a.kv_dim = 1024;
  expect_valid(a);
}

TEST(LoraExpandAbiValidation, RankQDimKvDim) {
  struct Field {
    const char *name;
    int64_t ggemm_lora_expand_qkv_args::*member;
  };
  for (const Field f : {Field{"rank", &ggemm_lora_expand_qkv_args::rank},
                        Field{"q_dim", &ggemm_lora_expand_qkv_args::q_dim},
                        Field{"kv_dim", &ggemm_lora_expand_qkv_args::kv_dim}}) {
    for (int64_t bad : {int64_t(0), int64_t(-8), int64_t(4), int64_t(12), int64_t(1020)}) {
      SCOPED_TRACE(std::string(f.name) + " = " + std::to_string(bad));
      auto a = valid_expand();
      a.*f.member = bad;
      expect_refused(a, GGEMM_STATUS_INVALID_DIMENSION, f.name);
    }
  }
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

TEST(LoraExpandAbiValidation, NumAdapters) {
  for (int64_t bad : {int64_t(0), int64_t(-3)}) {
    auto a = valid_expand();
    a.num_adapters = bad;
    expect_refused(a, GGEMM_STATUS_INVALID_DIMENSION, "num_adapters");
  }
}

TEST(LoraExpandAbiValidation, NumGroups) {
  auto a = valid_expand();
  a.num_groups = 0;
  expect_refused(a, GGEMM_STATUS_INVALID_GROUP_COUNT, "num_groups");
  a.num_groups = -1;
  expect_refused(a, GGEMM_STATUS_INVALID_GROUP_COUNT, "num_groups");
  a.num_groups = GGEMM_MAX_GROUPS + 1;
  expect_refused(a, GGEMM_STATUS_INVALID_GROUP_COUNT, "num_groups");
  a.num_groups = GGEMM_MAX_GROUPS;
  expect_valid(a);
}

TEST(LoraExpandAbiValidation, Accumulate) {
  for (int bad : {2, -1}) {
    auto a = valid_expand();
    a.accumulate = bad;
    expect_refused(a, GGEMM_STATUS_INVALID_VALUE, "accumulate");
  }
}

TEST(LoraExpandAbiValidation, ScaleNotFinite) {
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                    -std::numeric_limits<float>::infinity()}) {
    auto a = valid_expand();
    a.scale = bad;
    expect_refused(a, GGEMM_STATUS_INVALID_VALUE, "scale");
  }
  for (float ok : {0.0f, -1.0f, 2.0f}) {
    auto a = valid_expand();
    a.scale = ok;
    expect_valid(a);
  }
}

TEST(LoraExpandAbiValidation, MatricesNull) {
  for (const char *which : {"p", "lora_b", "q_out", "kv_out"}) {
    SCOPED_TRACE(which);
    auto a = valid_expand();
    if (!std::strcmp(which, "p")) a.p = nullptr;
    if (!std::strcmp(which, "lora_b")) a.lora_b = nullptr;
    if (!std::strcmp(which, "q_out")) a.q_out = nullptr;
    if (!std::strcmp(which, "kv_out")) a.kv_out = nullptr;
    expect_refused(a, GGEMM_STATUS_NULL_POINTER, which);
  }
}

TEST(LoraExpandAbiValidation, MatricesMisalignedBy8) {
  for (const char *which : {"p", "lora_b", "q_out", "kv_out"}) {
    SCOPED_TRACE(which);
    auto a = valid_expand();
    if (!std::strcmp(which, "p")) a.p = fake<const void>(0x1008);
    if (!std::strcmp(which, "lora_b")) a.lora_b = fake<const void>(0x2008);
    if (!std::strcmp(which, "q_out")) a.q_out = fake<void>(0x3008);
    if (!std::strcmp(which, "kv_out")) a.kv_out = fake<void>(0x7004);
    expect_refused(a, GGEMM_STATUS_MISALIGNED_POINTER, which);
  }
}

TEST(LoraExpandAbiValidation, IndexArrays) {
  auto a = valid_expand();
  a.a_offsets = nullptr;
  expect_refused(a, GGEMM_STATUS_NULL_POINTER, "a_offsets");
  a = valid_expand();
  a.adapter_ids = nullptr;
  expect_refused(a, GGEMM_STATUS_NULL_POINTER, "adapter_ids");
  a = valid_expand();
  a.expert_usage_stats = nullptr;
  expect_refused(a, GGEMM_STATUS_NULL_POINTER, "expert_usage_stats");
  a = valid_expand();
  a.a_offsets = fake<const uint32_t>(0x4002);
  expect_refused(a, GGEMM_STATUS_MISALIGNED_POINTER, "a_offsets");
  a = valid_expand();
  a.adapter_ids = fake<const int32_t>(0x5002);
  expect_refused(a, GGEMM_STATUS_MISALIGNED_POINTER, "adapter_ids");
  a = valid_expand();
  a.expert_usage_stats = fake<const uint32_t>(0x6001);
  expect_refused(a, GGEMM_STATUS_MISALIGNED_POINTER, "expert_usage_stats");
}

TEST(LoraExpandAbiValidation, EmptyCallNeedsNoMatrices) {
  auto a = valid_expand();
  a.m = 0;
  a.p = nullptr;
  a.lora_b = nullptr;
  a.q_out = nullptr;
  a.kv_out = nullptr;
  expect_valid(a);
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
