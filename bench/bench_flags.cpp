#include "bench_flags.h"

#include "absl/flags/flag.h"

ABSL_FLAG(int32_t, tile_m, 0, "force config->tile_m of every ggemm call (0 = automatic)");
ABSL_FLAG(int32_t, stages, 0, "force config->stages (0 = as many as fit)");
ABSL_FLAG(int32_t, cta_group, 0, "force config->cta_group (sm_100a; 0 = automatic)");
ABSL_FLAG(int32_t, cluster_m, 0, "force config->cluster_m (0 = automatic)");
ABSL_FLAG(int32_t, swizzle, 0, "force both operands' swizzle, 128, 64 or 32 bytes, and tile_k with it (0 = automatic)");
ABSL_FLAG(std::string, epilogue, "store",
          "store, accumulate or row_scale: the MoE rows time ggemm's accumulate epilogue (C += A W^T, C's "
          "read counted in the bytes) or its row-scale epilogue (C = w[m] A W^T); the cuBLAS rows stay in "
          "store mode, so compare ggemm with ggemm only");
ABSL_FLAG(bool, one_expert, false,
          "route every MoE group to expert 0 (same rows, tiles and FLOPs; the weights from L2 after the first "
          "read): separates the weight traffic's cost from the tiles' arithmetic; compare ggemm with ggemm only");
ABSL_FLAG(int32_t, repetitions, 0,
          "repetitions of each MoE row's 20 calls (0 = 5): more keeps the GPU busy for seconds, for power and "
          "clock readings");
ABSL_FLAG(std::string, data, "uniform",
          "the MoE rows' operands: uniform (in (-1, 1)) or model (normal activations, weights normal / sqrt(K), "
          "as a model's): the MMAs' power, and at the power cap the clock, follow the bits");
