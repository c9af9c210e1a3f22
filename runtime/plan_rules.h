// The planning rules both architectures share (runtime/plan_common.cpp):
// the automatic token tile and swizzle, the caller's config applied, and the
// refusals of pipelines that do not fit. Internal to the plan_*.cpp files.
#pragma once
#include <cstdint>

#include "runtime/plan.h"

namespace ggemm {

// The caller's bound on rows per group, or M where it gives none (0) or a
// larger one.
int64_t max_rows_bound(const GroupedShape &s);

// The typical group: the average over the groups, never above the largest.
int64_t typical_rows(const GroupedShape &s, int64_t max_rows);

// The automatic token tile of the persistent kernels (see plan_common.cpp).
uint32_t auto_tile_m(Arch arch, const GroupedShape &s, int sm_count);

// The automatic swizzle: one 128-byte row of K per stage (tile_k 64), unless
// K is so short that most of the row would be zero fill (and not with
// gather on load, whose rows land 128 bytes apart).
uint32_t auto_swizzle(const GroupedShape &s);

// What both architectures take from the caller's config (already validated)
// or the automatic rules: the token tile, the swizzle, the stages asked for
// (0 = as many as fit), and the cluster.
struct TileChoice {
  uint32_t tile_m = 0, swizzle_bytes = 0, stages = 0;
  uint32_t cta_group = 1;  // sm_100a
  uint32_t cluster_m = 1;  // sm_90a: 2 = a pair sharing its token tile
};
TileChoice choose_tile(Arch arch, const DeviceProps &props, const GroupedShape &shape, const ggemm_config *config);

// A persistent kernel's plan as far as the tile decides it: the kernel of
// the table, tile_m, the 128 weight rows per CTA, swizzle, cluster and the
// K-major box rows; INTERNAL_ERROR when the table has no such kernel (the
// config checks and the rules should make that impossible).
StatusOr<KernelPlan> persistent_plan_of_tile(Arch arch, const GroupedShape &shape, const TileChoice &tile);

// A pipeline needs a stage to fill while another is consumed.
Status refuse_fit(const TileChoice &c, const GroupedShape &shape, const DeviceProps &props, uint32_t fit);
Status refuse_stages(uint32_t stages, uint32_t fit, const DeviceProps &props);

// The persistent grid's clusters: one CTA (or cluster) per SM (ctas_per_sm
// for the short-K kernels), fewer when the host's bound on the tiles is
// smaller. Clusters of two walk pair tiles of 256 weight rows, so the bound
// counts those.
int64_t max_clusters(const KernelPlan &plan, const GroupedShape &shape, const DeviceProps &props);

}  // namespace ggemm
