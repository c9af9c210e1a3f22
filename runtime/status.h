// Internal error reporting: every failure returns a ggemm_status and records
// a message naming what was wrong in the calling thread's last-error slot.
#pragma once
#include "ggemm.h"

namespace ggemm {

// Records `status` with a printf-style message for ggemm_last_error_message()
// and returns it, so call sites read `return fail(STATUS, "...", ...);`.
ggemm_status fail(ggemm_status status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

// Clears the calling thread's message (at the start of each API call).
void clear_error();

}  // namespace ggemm

#define GGEMM_TRY(expr)                          \
  do {                                           \
    ggemm_status ggemm_try_status_ = (expr);     \
    if (ggemm_try_status_ != GGEMM_STATUS_SUCCESS) return ggemm_try_status_; \
  } while (0)
