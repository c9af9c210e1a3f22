// The API layer's error reporting: every entry point returns a ggemm_status
// and leaves a message naming what was wrong in the calling thread's
// last-error slot (ggemm_last_error_message). Argument checks report through
// fail(); the runtime's Status errors through report().
#pragma once
#include <string>

#include "ggemm.h"
#include "runtime/status.h"

namespace ggemm {

// Records `message` as the calling thread's last error and returns `status`.
ggemm_status record_error(ggemm_status status, const std::string &message);

// Records a printf-style message and returns `status`, so call sites read
// `return fail(STATUS, "...", ...);`.
ggemm_status fail(ggemm_status status, const char *format, ...) __attribute__((format(printf, 2, 3)));

// A runtime error as the C ABI reports it: its code, and its message as the
// thread's last error; OK becomes GGEMM_STATUS_SUCCESS.
ggemm_status report(const Status &status);

// Clears the calling thread's message (at the start of each API call).
void clear_error();

}  // namespace ggemm

// Returns the ggemm_status of `expr` (an argument check) unless it is SUCCESS.
#define GGEMM_TRY(expr)                                                      \
  do {                                                                       \
    ggemm_status ggemm_try_status_ = (expr);                                 \
    if (ggemm_try_status_ != GGEMM_STATUS_SUCCESS) return ggemm_try_status_; \
  } while (0)
