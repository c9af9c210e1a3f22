// The GPU cases with a kernel choice forced through the plan's test request
// (runtime/plan.h, PlanRequest), so each sm_90a kernel family is also tested
// on the calls the automatic rule gives the other. Linked with the library's
// objects: the request is internal and libggemm.so does not export it.
//
//   ggemm_tests_forced_plan --sm90_short_k=never|where_possible [gtest flags]
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "runtime/plan.h"

int main(int argc, char **argv) {
  testing::InitGoogleTest(&argc, argv);  // removes the gtest flags
  const std::string flag = "--sm90_short_k=";
  ggemm::PlanRequest request;
  bool given = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind(flag, 0) != 0) {
      std::fprintf(stderr, "unknown argument %s\n", argv[i]);
      return 2;
    }
    const std::string value = arg.substr(flag.size());
    if (value == "never") {
      request.sm90_short_k = ggemm::PlanRequest::Sm90ShortK::kNever;
    } else if (value == "where_possible") {
      request.sm90_short_k = ggemm::PlanRequest::Sm90ShortK::kWherePossible;
    } else {
      std::fprintf(stderr, "--sm90_short_k=%s: expected never or where_possible\n", value.c_str());
      return 2;
    }
    given = true;
  }
  if (!given) {
    std::fprintf(stderr, "usage: %s --sm90_short_k=never|where_possible [gtest flags]\n", argv[0]);
    return 2;
  }
  ggemm::set_plan_request_for_testing(request);
  return RUN_ALL_TESTS();
}
