// bench_config.h — the optional config override of every ggemm call the
// benchmarks time, for experiments: GGEMM_BENCH_TILE_M, GGEMM_BENCH_STAGES,
// GGEMM_BENCH_CTA_GROUP and GGEMM_BENCH_CLUSTER_M force those fields,
// GGEMM_BENCH_SWIZZLE (128, 64 or 32) both operands' swizzle and with it
// tile_k (unset = automatic), e.g.
//   GGEMM_BENCH_TILE_M=64 build/bench/ggemm_bench --benchmark_filter=lora_shrink
#pragma once
#include <cstdlib>

#include "ggemm.h"

inline const ggemm_config* bench_config_override() {
  static ggemm_config cfg{};
  static const bool set = [] {
    cfg.struct_size = sizeof cfg;
    auto field = [](const char* name) {
      const char* v = std::getenv(name);
      return v ? std::atoi(v) : 0;
    };
    cfg.tile_m = field("GGEMM_BENCH_TILE_M");
    cfg.stages = field("GGEMM_BENCH_STAGES");
    cfg.cta_group = field("GGEMM_BENCH_CTA_GROUP");
    cfg.cluster_m = field("GGEMM_BENCH_CLUSTER_M");
    cfg.a_swizzle = cfg.b_swizzle = field("GGEMM_BENCH_SWIZZLE");
    cfg.tile_k = cfg.a_swizzle / 2;
    return cfg.tile_m != 0 || cfg.stages != 0 || cfg.cta_group != 0 || cfg.cluster_m != 0 || cfg.a_swizzle != 0;
  }();
  return set ? &cfg : nullptr;
}
