// The GPU cases with a kernel choice forced through the plan's test request
// (runtime/plan.h, PlanRequest), so each sm_90a kernel family is also tested
// on the calls the automatic rule gives the other. Linked with the library's
// objects: the request is internal and libggemm.so does not export it.
//
//   ggemm_tests_forced_plan [--sm90_short_k=never|where_possible]
//                           [--decode_gemv=never|where_possible]
//                           [--sm90_token_major=never|where_possible] [gtest flags]
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "runtime/plan.h"

int main(int argc, char **argv) {
  testing::InitGoogleTest(&argc, argv);  // removes the gtest flags
  const std::string short_k = "--sm90_short_k=", decode_gemv = "--decode_gemv=", token_major = "--sm90_token_major=";
  ggemm::PlanRequest request;
  bool given = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const std::string *flag = arg.rfind(short_k, 0) == 0       ? &short_k
                              : arg.rfind(decode_gemv, 0) == 0 ? &decode_gemv
                              : arg.rfind(token_major, 0) == 0 ? &token_major
                                                               : nullptr;
    if (!flag) {
      std::fprintf(stderr, "unknown argument %s\n", argv[i]);
      return 2;
    }
    const std::string value = arg.substr(flag->size());
    if (value != "never" && value != "where_possible") {
      std::fprintf(stderr, "%s: expected never or where_possible\n", argv[i]);
      return 2;
    }
    const bool never = value == "never";
    if (flag == &short_k) {
      request.sm90_short_k =
          never ? ggemm::PlanRequest::Sm90ShortK::kNever : ggemm::PlanRequest::Sm90ShortK::kWherePossible;
    } else if (flag == &decode_gemv) {
      request.decode_gemv =
          never ? ggemm::PlanRequest::DecodeGemv::kNever : ggemm::PlanRequest::DecodeGemv::kWherePossible;
    } else {
      request.sm90_token_major =
          never ? ggemm::PlanRequest::TokenMajor::kNever : ggemm::PlanRequest::TokenMajor::kWherePossible;
    }
    given = true;
  }
  if (!given) {
    std::fprintf(stderr,
                 "usage: %s --sm90_short_k=never|where_possible --decode_gemv=never|where_possible "
                 "--sm90_token_major=never|where_possible [gtest flags]\n",
                 argv[0]);
    return 2;
  }
  ggemm::set_plan_request_for_testing(request);
  return RUN_ALL_TESTS();
}
