#include "runtime/status.h"

#include <cstdarg>
#include <cstdio>

namespace ggemm {

Status error(ggemm_status code, const char *format, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, format);
  std::vsnprintf(buf, sizeof buf, format, ap);
  va_end(ap);
  return Status(code, buf);
}

}  // namespace ggemm
