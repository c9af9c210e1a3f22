// The thread-local last-error message and the status names.
#include "api/src/errors.h"

#include <cstdarg>
#include <string>

namespace ggemm {
namespace {
thread_local std::string t_last_error;
}

ggemm_status record_error(ggemm_status status, const std::string &message) {
  try {
    t_last_error = message;
  } catch (...) {
    // Out of memory while recording an error: keep the status, drop the text.
  }
  return status;
}

ggemm_status fail(ggemm_status status, const char *format, ...) {
  va_list ap;
  va_start(ap, format);
  const std::string message = format_message(format, ap);
  va_end(ap);
  return record_error(status, message);
}

ggemm_status report(const Status &status) {
  if (status.ok()) return GGEMM_STATUS_SUCCESS;
  return record_error(status.code(), status.message());
}

void clear_error() { t_last_error.clear(); }

}  // namespace ggemm

extern "C" const char *ggemm_last_error_message(void) { return ggemm::t_last_error.c_str(); }

extern "C" const char *ggemm_status_string(ggemm_status status) {
  switch (status) {
    case GGEMM_STATUS_SUCCESS: return "GGEMM_STATUS_SUCCESS";
    case GGEMM_STATUS_NULL_POINTER: return "GGEMM_STATUS_NULL_POINTER";
    case GGEMM_STATUS_MISALIGNED_POINTER: return "GGEMM_STATUS_MISALIGNED_POINTER";
    case GGEMM_STATUS_INVALID_DIMENSION: return "GGEMM_STATUS_INVALID_DIMENSION";
    case GGEMM_STATUS_INVALID_DTYPE: return "GGEMM_STATUS_INVALID_DTYPE";
    case GGEMM_STATUS_INVALID_GROUP_COUNT: return "GGEMM_STATUS_INVALID_GROUP_COUNT";
    case GGEMM_STATUS_INVALID_CONFIG: return "GGEMM_STATUS_INVALID_CONFIG";
    case GGEMM_STATUS_INVALID_VALUE: return "GGEMM_STATUS_INVALID_VALUE";
    case GGEMM_STATUS_INVALID_HANDLE: return "GGEMM_STATUS_INVALID_HANDLE";
    case GGEMM_STATUS_DRIVER_NOT_FOUND: return "GGEMM_STATUS_DRIVER_NOT_FOUND";
    case GGEMM_STATUS_NO_DEVICE: return "GGEMM_STATUS_NO_DEVICE";
    case GGEMM_STATUS_UNSUPPORTED_DEVICE: return "GGEMM_STATUS_UNSUPPORTED_DEVICE";
    case GGEMM_STATUS_DRIVER_ERROR: return "GGEMM_STATUS_DRIVER_ERROR";
    case GGEMM_STATUS_OUT_OF_MEMORY: return "GGEMM_STATUS_OUT_OF_MEMORY";
    case GGEMM_STATUS_INTERNAL_ERROR: return "GGEMM_STATUS_INTERNAL_ERROR";
  }
  return "GGEMM_STATUS_<unknown>";
}
