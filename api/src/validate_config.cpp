// The config override's checks: each field against what the device's
// architecture has kernels for (the kernel tables, through the runtime's
// registry). What depends on the call's automatic choices or on the device's
// shared memory (a pair's token tile, whether the stages fit) is refused by
// the plan (runtime/plan_sm90.cpp, plan_sm100.cpp), also as INVALID_CONFIG.
#include "api/src/errors.h"
#include "api/src/validate.h"
#include "runtime/kernel_registry.h"
#include "runtime/plan.h"

namespace ggemm {
namespace {

// What the messages name of an architecture.
struct ArchTerms {
  const char *name;  // "sm_90a"
  const char *mma;   // the MMA instruction
  int mma_m;         // sm_90a: 64 per consumer warpgroup; sm_100a: 128 (one tcgen05.mma, cta_group 1)
};

ArchTerms terms(Arch arch) {
  return arch == Arch::kSm90a ? ArchTerms{"sm_90a", "wgmma", 64} : ArchTerms{"sm_100a", "tcgen05.mma", 128};
}

}  // namespace

ggemm_status validate_config(const ggemm_config *o, Arch arch, const DeviceProps &props, const GroupedShape &shape) {
  if (!o) return GGEMM_STATUS_SUCCESS;
  GGEMM_TRY(check_config_size(o));
  const ggemm_dtype c_dtype = shape.c_dtype;
  const ArchTerms r = terms(arch);
  if (arch == Arch::kSm90a && o->cta_group != 0 && o->cta_group != 1)
    return fail(GGEMM_STATUS_INVALID_CONFIG,
                "config->cta_group = %d: cta_group 2 (two SMs sharing one MMA) needs sm_100a; this device is "
                "sm_%d%d",
                o->cta_group, props.cc_major, props.cc_minor);
  if (arch == Arch::kSm100a && o->cta_group != 0 && o->cta_group != 1 && o->cta_group != 2)
    return fail(GGEMM_STATUS_INVALID_CONFIG, "config->cta_group = %d: must be 0 (automatic), 1 or 2", o->cta_group);
  const uint32_t cta_group = o->cta_group == 2 ? 2 : 1;
  // Clusters pair two CTAs along the weight rows (cluster_m 2, cluster_n
  // 1): on sm_100a that is the cta_group 2 pair (implied by it, and only
  // with it); on sm_90a two CTAs sharing their token tile by multicast.
  if (o->cluster_m < 0 || o->cluster_m > 2 || o->cluster_n < 0 || o->cluster_n > 1)
    return fail(GGEMM_STATUS_INVALID_CONFIG,
                "config->cluster_m/cluster_n = %d/%d: the %s kernel runs without clusters or in pairs along "
                "the weight rows (cluster_m 2, cluster_n 1); 0 = automatic",
                o->cluster_m, o->cluster_n, r.name);
  if (arch == Arch::kSm100a && o->cluster_m > 1 && cta_group != 2)
    return fail(GGEMM_STATUS_INVALID_CONFIG,
                "config->cluster_m = %d: on sm_100a the pair is the cta_group 2 pair; set cta_group = 2",
                o->cluster_m);
  if (o->tile_n != 0 && o->tile_n != int(kGroupedTileN))
    return fail(GGEMM_STATUS_INVALID_CONFIG, "config->tile_n = %d: the %s kernel's weight tile is 128 rows",
                o->tile_n, r.name);
  if (o->mma_m != 0 && o->mma_m != r.mma_m)
    return fail(GGEMM_STATUS_INVALID_CONFIG, "config->mma_m = %d: %s %s has M = %d", o->mma_m, r.name, r.mma,
                r.mma_m);
  if (o->mma_k != 0 && o->mma_k != 16)
    return fail(GGEMM_STATUS_INVALID_CONFIG, "config->mma_k = %d: 16-bit %s has K = 16", o->mma_k, r.mma);
  // The tiles the kernel tables instantiate for this output dtype.
  auto tile_m_ok = [&](int v) { return v > 0 && persistent_tile_exists(arch, c_dtype, uint32_t(v)); };
  if (o->tile_m != 0 && !tile_m_ok(o->tile_m))
    return fail(GGEMM_STATUS_INVALID_CONFIG, "config->tile_m = %d: must be 16, 32, 64, 128%s for %s output",
                o->tile_m, max_persistent_tile_m(arch, c_dtype) >= 256 ? " or 256" : "", dtype_name(c_dtype));
  if (o->mma_n != 0 && (o->tile_m ? o->tile_m != o->mma_n : !tile_m_ok(o->mma_n)))
    return fail(GGEMM_STATUS_INVALID_CONFIG, "config->mma_n = %d: on %s the %s N is tile_m (%d)", o->mma_n, r.name,
                r.mma, o->tile_m);
  // The tile_m the config fixes: its own, or, alone, mma_n's (the plan
  // takes mma_n as tile_m; runtime/plan_common.cpp). Both checks below hold
  // for either field.
  const int fixed_tile_m = o->tile_m ? o->tile_m : o->mma_n;
  const char *fixed_by = o->tile_m ? "tile_m" : "mma_n";
  if (fixed_tile_m != 0 && cta_group == 2 && uint32_t(fixed_tile_m) < min_cluster_tile_m(arch, 2))
    return fail(GGEMM_STATUS_INVALID_CONFIG,
                "config->%s = %d with cta_group 2: the pair splits the tokens, so tile_m is 32 or more", fixed_by,
                fixed_tile_m);
  if (fixed_tile_m != 0 && shape.epilogue == GGEMM_EPILOGUE_ACCUMULATE &&
      !accumulate_supported(arch, uint32_t(fixed_tile_m)))
    return fail(GGEMM_STATUS_INVALID_CONFIG,
                "config->%s = %d: the accumulate epilogue runs with tile_m up to %u on %s", fixed_by, fixed_tile_m,
                max_accumulate_tile_m(arch), r.name);
  for (int sw : {o->a_swizzle, o->b_swizzle})
    if (sw != 0 && sw != 32 && sw != 64 && sw != 128)
      return fail(GGEMM_STATUS_INVALID_CONFIG, "config->%s = %d: swizzle is 128, 64 or 32 bytes (0 = auto)",
                  sw == o->a_swizzle ? "a_swizzle" : "b_swizzle", sw);
  if (o->a_swizzle && o->b_swizzle && o->a_swizzle != o->b_swizzle)
    return fail(GGEMM_STATUS_INVALID_CONFIG,
                "config->a_swizzle = %d and b_swizzle = %d: both operands share tile_k on %s, so the "
                "swizzles must be equal",
                o->a_swizzle, o->b_swizzle, r.name);
  uint32_t swizzle_bytes = uint32_t(o->a_swizzle ? o->a_swizzle : o->b_swizzle);
  if (o->tile_k != 0) {
    if (o->tile_k != 64 && o->tile_k != 32 && o->tile_k != 16)
      return fail(GGEMM_STATUS_INVALID_CONFIG, "config->tile_k = %d: must be 64, 32 or 16 (16-bit operands)",
                  o->tile_k);
    if (swizzle_bytes && swizzle_bytes != uint32_t(o->tile_k) * 2)
      return fail(GGEMM_STATUS_INVALID_CONFIG,
                  "config->tile_k = %d with %u-byte swizzle: tile_k must be swizzle / 2", o->tile_k, swizzle_bytes);
    swizzle_bytes = uint32_t(o->tile_k) * 2;
  }
  if (!shape.transpose_b && swizzle_bytes && swizzle_bytes != 128)
    return fail(GGEMM_STATUS_INVALID_CONFIG,
                "config->a_swizzle/b_swizzle/tile_k give a %u-byte swizzle: weights stored [E, K, N] "
                "(transpose_b = 0) need the 128-byte swizzle (tile_k 64) on %s",
                swizzle_bytes, r.name);
  if (shape.gather && swizzle_bytes && swizzle_bytes != 128)
    return fail(GGEMM_STATUS_INVALID_CONFIG,
                "config->a_swizzle/b_swizzle/tile_k give a %u-byte swizzle: gather on load (a_row_index) "
                "lands the token rows 128 bytes apart and needs the 128-byte swizzle (tile_k 64) on %s",
                swizzle_bytes, r.name);
  // A pipeline needs a stage to fill while one is consumed (a consumer frees
  // a stage only once the next is full): one stage would wait forever.
  if (o->stages < 0 || o->stages == 1)
    return fail(GGEMM_STATUS_INVALID_CONFIG, "config->stages = %d: must be 0 (automatic) or at least 2", o->stages);
  return GGEMM_STATUS_SUCCESS;
}

}  // namespace ggemm
