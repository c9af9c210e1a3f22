#include "runtime/status.h"

#include <cstdarg>
#include <cstdio>

namespace ggemm {

std::string format_message(const char *format, va_list args) {
  char buf[1024];
  std::vsnprintf(buf, sizeof buf, format, args);
  return buf;
}

Status error(ggemm_status code, const char *format, ...) {
  va_list ap;
  va_start(ap, format);
  std::string message = format_message(format, ap);
  va_end(ap);
  return Status(code, std::move(message));
}

}  // namespace ggemm
