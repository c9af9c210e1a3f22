#include "runtime/debug.h"

#include <cctype>
#include <cstdlib>
#include <string>

namespace ggemm {

bool debug_value_enables(const char *value) {
  if (!value || !*value) return false;
  std::string v(value);
  for (char &c : v) c = char(std::tolower(static_cast<unsigned char>(c)));
  return v != "0" && v != "false" && v != "off" && v != "no";
}

bool debug_enabled() {
  static const bool on = debug_value_enables(std::getenv("GGEMM_DEBUG"));  // the environment is fixed for the process
  return on;
}

}  // namespace ggemm
