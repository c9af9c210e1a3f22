// Prints one of the benchmark harness's PTX kernels (bench/harness_ptx.h)
// to stdout, for tests/check_harness_ptx.sh to assemble with ptxas.
//
//   print_harness_ptx null|params|load_chain|l2_read_sweep|stream4|stream16
#include <cstdio>
#include <cstring>
#include <string>

#include "harness_ptx.h"

int main(int argc, char **argv) {
  using namespace ggemm::bench;
  const std::string which = argc == 2 ? argv[1] : "";
  std::string ptx;
  if (which == "null") ptx = kNullPtx;
  else if (which == "params") ptx = kParamsPtx;
  else if (which == "load_chain") ptx = kLoadChainPtx;
  else if (which == "l2_read_sweep") ptx = kL2ReadSweepPtx;
  else if (which == "stream4") ptx = stream_ptx(4);
  else if (which == "stream16") ptx = stream_ptx(16);
  else {
    std::fprintf(stderr, "usage: %s null|params|load_chain|l2_read_sweep|stream4|stream16\n", argv[0]);
    return 2;
  }
  std::fputs(ptx.c_str(), stdout);
  return 0;
}
