// The benchmark's command-line flags (Abseil flags; bench_flags.cpp defines
// them; --l2_flush, which the demo takes too, is timing_flags.h's). Google
// Benchmark takes its --benchmark_* flags first, then
// absl::ParseCommandLine the rest:
//   build/bench/ggemm_bench --benchmark_filter=lora_shrink --tile_m=64
// The config fields force the optional config override of every ggemm call
// the benchmarks time (0 = automatic), for experiments.
#pragma once
#include <cstdint>
#include <string>

#include "absl/flags/declare.h"

ABSL_DECLARE_FLAG(int32_t, tile_m);
ABSL_DECLARE_FLAG(int32_t, stages);
ABSL_DECLARE_FLAG(int32_t, cta_group);
ABSL_DECLARE_FLAG(int32_t, cluster_m);
ABSL_DECLARE_FLAG(int32_t, swizzle);
ABSL_DECLARE_FLAG(std::string, epilogue);
ABSL_DECLARE_FLAG(bool, one_expert);
ABSL_DECLARE_FLAG(int32_t, repetitions);
ABSL_DECLARE_FLAG(std::string, data);
