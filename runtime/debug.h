// GGEMM_DEBUG: every call prints its tensor maps, chosen config and launch
// geometry to stderr. On for any value but empty, "0", "false", "off" or
// "no" (in any case), read once per process.
#pragma once

namespace ggemm {

bool debug_enabled();

// Whether a value of GGEMM_DEBUG turns the printing on (nullptr: unset).
bool debug_value_enables(const char *value);

}  // namespace ggemm
