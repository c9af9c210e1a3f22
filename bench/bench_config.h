// bench_config.h — what the benchmark's flags (bench_flags.h) change in the
// calls it times: the optional config override, the epilogue, the routing
// and the repetitions.
#pragma once
#include <string>

#include "absl/flags/flag.h"
#include "bench_flags.h"
#include "ggemm.h"
#include "gpu_buffers.h"

// The config override of every ggemm call the benchmarks time, or NULL when
// no config flag is set. Read once (after the flags are parsed).
inline const ggemm_config* bench_config_override() {
  static ggemm_config cfg{};
  static const bool set = [] {
    cfg.struct_size = sizeof cfg;
    cfg.tile_m = absl::GetFlag(FLAGS_tile_m);
    cfg.stages = absl::GetFlag(FLAGS_stages);
    cfg.cta_group = absl::GetFlag(FLAGS_cta_group);
    cfg.cluster_m = absl::GetFlag(FLAGS_cluster_m);
    cfg.a_swizzle = cfg.b_swizzle = absl::GetFlag(FLAGS_swizzle);
    cfg.tile_k = cfg.a_swizzle / 2;
    return cfg.tile_m != 0 || cfg.stages != 0 || cfg.cta_group != 0 || cfg.cluster_m != 0 || cfg.a_swizzle != 0;
  }();
  return set ? &cfg : nullptr;
}

// --epilogue=accumulate: the MoE rows time the accumulate epilogue. The LoRA
// rows name their mode (_accumulate) and ignore it.
inline bool bench_accumulate_override() { return absl::GetFlag(FLAGS_epilogue) == "accumulate"; }
// --epilogue=row_scale: the MoE rows time the row-scale epilogue (the routing
// weights, one float a row, counted in the bytes).
inline bool bench_row_scale_override() { return absl::GetFlag(FLAGS_epilogue) == "row_scale"; }

// --data=model: the MoE rows' operands drawn as a model's (gpu_buffers.h).
inline ggemm::bench::DataDistribution bench_data_distribution() {
  using ggemm::bench::DataDistribution;
  return absl::GetFlag(FLAGS_data) == "model" ? DataDistribution::kModel : DataDistribution::kUniform;
}

// --one_expert: the MoE rows' ggemm calls route every group to expert 0.
inline bool bench_one_expert_override() { return absl::GetFlag(FLAGS_one_expert); }

// --repetitions=N: the MoE rows run N repetitions of their 20 calls instead
// of `default_repetitions`.
inline int bench_repetitions_override(int default_repetitions) {
  const int n = absl::GetFlag(FLAGS_repetitions);
  return n > 0 ? n : default_repetitions;
}
