// Prints one of the benchmark harness's PTX kernels (bench/harness_ptx.h)
// to stdout, for tests/check_harness_ptx.sh to assemble with ptxas.
//
//   print_harness_ptx null|params|load_chain|streamN   (N: loads in flight a thread)
#include <cstdio>
#include <cstdlib>
#include <string>

#include "harness_ptx.h"

int main(int argc, char **argv) {
  using namespace ggemm::bench;
  const std::string which = argc == 2 ? argv[1] : "";
  std::string ptx;
  if (which == "null") ptx = kNullPtx;
  else if (which == "params") ptx = kParamsPtx;
  else if (which == "load_chain") ptx = kLoadChainPtx;
  else if (which.rfind("stream", 0) == 0 && std::atoi(which.c_str() + 6) > 0) ptx = stream_ptx(std::atoi(which.c_str() + 6));
  else {
    std::fprintf(stderr, "usage: %s null|params|load_chain|streamN\n", argv[0]);
    return 2;
  }
  std::fputs(ptx.c_str(), stdout);
  return 0;
}
