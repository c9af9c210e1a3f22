/* The C side of fuzz_validate: calls that a C caller may make but a C++
 * caller cannot without undefined behaviour of its own (an int outside an
 * enum's values passed where the enum is expected). Compiled as C99. */
#include "ggemm.h"

const char *ggemm_fuzz_status_string_of_int(int value) { return ggemm_status_string((ggemm_status)value); }
