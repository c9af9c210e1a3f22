// The flag the timing harness itself reads (timing.h), shared by the
// benchmark and the demo; timing_flags.cpp defines it. The benchmark's
// other flags are bench_flags.h's.
#pragma once
#include <string>

#include "absl/flags/declare.h"

ABSL_DECLARE_FLAG(std::string, l2_flush);
