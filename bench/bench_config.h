// bench_config.h — the optional config override of every ggemm call the
// benchmarks time, for experiments: GGEMM_BENCH_TILE_M, GGEMM_BENCH_STAGES,
// GGEMM_BENCH_CTA_GROUP and GGEMM_BENCH_CLUSTER_M force those fields,
// GGEMM_BENCH_SWIZZLE (128, 64 or 32) both operands' swizzle and with it
// tile_k (unset = automatic), e.g.
//   GGEMM_BENCH_TILE_M=64 build/bench/ggemm_bench --benchmark_filter=lora_shrink
#pragma once
#include <cstdlib>
#include <string>

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

// GGEMM_BENCH_EPILOGUE=accumulate: the MoE rows time ggemm's accumulate
// epilogue (C += A W^T, C's read counted in the bytes) instead of the store,
// for experiments on it (no long-K row has accumulate otherwise). The
// cuBLAS baselines stay in store mode, so compare ggemm with ggemm only.
// The LoRA rows name their mode (_accumulate) and ignore it.
inline bool bench_accumulate_override() {
  static const bool accumulate = [] {
    const char* v = std::getenv("GGEMM_BENCH_EPILOGUE");
    return v && std::string(v) == "accumulate";
  }();
  return accumulate;
}

// GGEMM_BENCH_ONE_EXPERT=1: the MoE rows' ggemm calls route every group to
// expert 0 (same rows, tiles and FLOPs; the weights come from DRAM once and
// from L2 after), for experiments that separate the weight traffic's cost
// from the tiles' arithmetic (the Zipf row). cuBLAS rows keep
// the real routing; compare ggemm with ggemm only.
inline bool bench_one_expert_override() {
  static const bool one = [] {
    const char* v = std::getenv("GGEMM_BENCH_ONE_EXPERT");
    return v && std::string(v) == "1";
  }();
  return one;
}

// GGEMM_BENCH_REPETITIONS=N: the MoE rows run N repetitions of their 20
// calls instead of 5, so one row keeps the GPU busy for seconds: long
// enough for the power and clock readings of bench/dev/run.sh power to
// settle (the compute-bound rows run at the power cap, whose clock depends
// on what ran in the second before).
inline int bench_repetitions_override(int default_repetitions) {
  const char* v = std::getenv("GGEMM_BENCH_REPETITIONS");
  const int n = v ? std::atoi(v) : 0;
  return n > 0 ? n : default_repetitions;
}
