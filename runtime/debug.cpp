#include "runtime/debug.h"

#include <cstdlib>

namespace ggemm {

bool debug_enabled() {
  static const bool on = [] {  // read once: the environment is fixed for the process
    const char *v = std::getenv("GGEMM_DEBUG");
    return v && *v && *v != '0';
  }();
  return on;
}

}  // namespace ggemm
