// abi_cases.h — what the argument-validation tests of the public C ABI share
// (test_abi_validation.cpp, test_abi_lora_validation.cpp,
// test_abi_moe_validation.cpp): fake pointers,
// whether an error message names an argument, and table-driven cases.
//
// Argument checks run before the handle check, so a NULL handle lets every
// check be reached without a GPU: an invalid argument must return its own
// status and a message naming it, and a valid call must get as far as
// INVALID_HANDLE. The fake pointers are aligned where the case does not say
// otherwise; nothing dereferences them because nothing launches.
#ifndef GGEMM_TESTS_ABI_CASES_H
#define GGEMM_TESTS_ABI_CASES_H

#include <gtest/gtest.h>

#include <cctype>
#include <cstdint>
#include <initializer_list>
#include <ostream>
#include <string>

#include "ggemm.h"
#include "test_util.h"

namespace ggemm::testing {

template <typename T>
T *fake(uintptr_t addr) {
  return reinterpret_cast<T *>(addr);
}

// True if `msg` names `arg`: a whole-word occurrence (not a piece of a longer
// identifier). One-letter names (a, m, k, p, ...) must be the subject
// ("m = ...", "p is NULL"), since a lone letter could appear in any sentence.
inline bool names_arg(const std::string &msg, const std::string &arg) {
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

// A config of the wrong struct_size (refused with the arguments, before the
// handle, whatever m), and one of the right size whose fields no kernel has
// (checked against the device's kernels when the call is launched, so a
// NULL handle's call gets that far).
inline const ggemm_config kConfigOfWrongSize = [] {
  ggemm_config c{};
  c.struct_size = sizeof c - 4;
  return c;
}();
inline const ggemm_config kConfigNoKernelHas = [] {
  ggemm_config c{};
  c.struct_size = sizeof c;
  c.tile_n = 7;
  return c;
}();

// A status with this thread's last error message, for failure output.
inline std::string describe(ggemm_status got) {
  return std::string(ggemm_status_string(got)) + " (\"" + ggemm_last_error_message() + "\")";
}

// Each call with a NULL handle and the default stream: validation only.
inline ggemm_status call(const ggemm_grouped_matmul_args *a) { return ggemm_grouped_matmul(nullptr, a, nullptr); }
inline ggemm_status call(const ggemm_lora_shrink_qkv_args *a) { return ggemm_lora_shrink_qkv(nullptr, a, nullptr); }
inline ggemm_status call(const ggemm_lora_expand_qkv_args *a) { return ggemm_lora_expand_qkv(nullptr, a, nullptr); }
inline ggemm_status call(const ggemm_moe_route_args *a) { return ggemm_moe_route(nullptr, a, nullptr); }
inline ggemm_status call(const ggemm_moe_combine_args *a) { return ggemm_moe_combine(nullptr, a, nullptr); }
inline ggemm_status call(const ggemm_moe_ffn_args *a) { return ggemm_moe_ffn(nullptr, a, nullptr); }
template <typename Args>
ggemm_status call(const Args &a) {
  return call(&a);
}

// Calls with `a` and expects `status` and a message naming `arg`.
template <typename Args>
void expect_refused(const Args &a, ggemm_status status, const std::string &arg) {
  const ggemm_status got = call(a);
  EXPECT_EQ(got, status) << "got " << describe(got) << ", want " << ggemm_status_string(status);
  const std::string msg = ggemm_last_error_message();
  EXPECT_TRUE(names_arg(msg, arg)) << "message \"" << msg << "\" does not name " << arg;
}

// A valid call with no handle gets past validation to the handle check.
template <typename Args>
void expect_valid(const Args &a) {
  const ggemm_status got = call(a);
  EXPECT_EQ(got, GGEMM_STATUS_INVALID_HANDLE) << describe(got);
}

// The valid arguments reach the handle check, and its message names the handle.
template <typename Args>
void expect_reaches_handle_check(const Args &a) {
  expect_valid(a);
  EXPECT_TRUE(names_arg(ggemm_last_error_message(), "handle")) << ggemm_last_error_message();
}

// A NULL args pointer is refused, naming args.
template <typename Args>
void expect_null_args_refused() {
  EXPECT_EQ(call(static_cast<const Args *>(nullptr)), GGEMM_STATUS_NULL_POINTER);
  EXPECT_TRUE(names_arg(ggemm_last_error_message(), "args")) << ggemm_last_error_message();
}

// Fake, aligned routing arrays for the LoRA calls (both name them alike).
template <typename LoraArgs>
void set_fake_lora_routing(LoraArgs &a) {
  a.a_offsets = fake<const uint32_t>(0x4000);
  a.adapter_ids = fake<const int32_t>(0x5000);
  a.expert_usage_stats = fake<const uint32_t>(0x6000);
  a.num_groups = 8;
  a.max_rows_per_group = 0;
}

// One row of a validation table: start from the valid arguments, apply
// `edit`, call. A refused case gives the status and the argument the message
// must name; an accepted case (status kAccepted, named_arg null) must reach
// the handle check.
template <typename Args>
struct ArgsCase {
  const char *name;  // the gtest parameter name, so a failure names the case
  void (*edit)(Args &);
  ggemm_status status;
  const char *named_arg;
};

// The status of an accepted row: validation passed, the NULL handle did not.
constexpr ggemm_status kAccepted = GGEMM_STATUS_INVALID_HANDLE;

// Runs one row against the arguments `valid()` builds.
template <typename Args>
void check_case(const ArgsCase<Args> &c, Args (*valid)()) {
  Args a = valid();
  c.edit(a);
  if (c.status == kAccepted)
    expect_valid(a);
  else
    expect_refused(a, c.status, c.named_arg);
}

// gtest prints parameters with this (the case name instead of raw bytes).
template <typename Args>
void PrintTo(const ArgsCase<Args> &c, std::ostream *os) {
  *os << c.name;
}

// An int64_t field of an argument struct, with the name messages use for it.
template <typename Args>
struct Int64Field {
  const char *name;
  int64_t Args::*member;
};

// Each value of `bad` in each of `fields`, one at a time in otherwise valid
// arguments, is refused with `status` and a message naming the field.
template <typename Args>
void expect_each_refused(Args (*valid)(), std::initializer_list<Int64Field<Args>> fields,
                         std::initializer_list<int64_t> bad, ggemm_status status) {
  for (const Int64Field<Args> &f : fields) {
    for (int64_t value : bad) {
      SCOPED_TRACE(std::string(f.name) + " = " + std::to_string(value));
      Args a = valid();
      a.*f.member = value;
      expect_refused(a, status, f.name);
    }
  }
}

}  // namespace ggemm::testing

// The parameterised test of a table: each row of `cases` checked against
// `valid`(), named <Suite>/<Suite>Case.Check/<row name>.
#define GGEMM_ABI_CASE_SUITE(Suite, Args, cases, valid)                                      \
  class Suite##Case : public ::testing::TestWithParam<::ggemm::testing::ArgsCase<Args>> {}; \
  TEST_P(Suite##Case, Check) { ::ggemm::testing::check_case(GetParam(), valid); }           \
  INSTANTIATE_TEST_SUITE_P(Suite, Suite##Case, ::testing::ValuesIn(cases), ::ggemm::testing::CaseName())

#endif  // GGEMM_TESTS_ABI_CASES_H
