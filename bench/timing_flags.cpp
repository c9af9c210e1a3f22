#include "timing_flags.h"

#include "absl/flags/flag.h"

ABSL_FLAG(std::string, l2_flush, "clean",
          "how the cold rows flush L2 between calls: clean (a memset, then a read sweep) or dirty (the memset "
          "only)");
