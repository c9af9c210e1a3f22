#include "runtime/heuristics.h"

#include <algorithm>

#include "ptx/blocks/grouped_params.h"
#include "ptx/sm100/kernel_table.h"
#include "ptx/sm100/smem_layout.h"
#include "ptx/sm90/kernel_table.h"
#include "ptx/sm90/short_k_layout.h"
#include "ptx/sm90/smem_layout.h"

namespace ggemm {

static_assert(sm90::kTileN == kGroupedTileN && sm100::kTileN == kGroupedTileN,
              "GroupedShape::col_blocks counts 128-row weight tiles on both architectures");

uint32_t dtype_bytes(ggemm_dtype t) { return t == GGEMM_DTYPE_FP32 ? 4 : 2; }

const char *dtype_name(ggemm_dtype t) {
  switch (t) {
    case GGEMM_DTYPE_BF16: return "bf16";
    case GGEMM_DTYPE_FP16: return "fp16";
    case GGEMM_DTYPE_FP32: return "fp32";
  }
  return "?";
}

namespace {

std::string kernel_name(const char *prefix, ggemm_dtype a, ggemm_dtype c, bool transpose_b, uint32_t tile_m) {
  return std::string(prefix) + dtype_name(a) + "_" + dtype_name(c) + "_" + (transpose_b ? "kmajor" : "mnmajor") +
         "_m" + std::to_string(tile_m);
}

}  // namespace

std::string sm90_kernel_name(ggemm_dtype a, ggemm_dtype c, bool transpose_b, uint32_t tile_m, uint32_t cluster_m) {
  return kernel_name("ggemm_sm90_grouped_", a, c, transpose_b, tile_m) + (cluster_m == 2 ? "_cl2" : "");
}

std::string sm90_short_k_kernel_name(ggemm_dtype a, ggemm_dtype c, uint32_t tile_m, uint32_t splits) {
  return std::string("ggemm_sm90_short_k_") + dtype_name(a) + "_" + dtype_name(c) + "_kmajor_m" +
         std::to_string(tile_m) + (splits > 1 ? "_split" + std::to_string(splits) : "");
}

std::string sm100_kernel_name(ggemm_dtype a, ggemm_dtype c, bool transpose_b, uint32_t tile_m, uint32_t cta_group) {
  return kernel_name("ggemm_sm100_grouped_", a, c, transpose_b, tile_m) + (cta_group == 2 ? "_cta2" : "");
}

namespace {

// What the two architectures' rules differ in.
struct ArchRules {
  Arch arch;
  const char *name;          // "sm_90a"
  const char *mma;           // the MMA instruction, for messages
  int mma_m;                 // sm_90a: 64 per consumer warpgroup; sm_100a: 128 (one tcgen05.mma, cta_group 1)
  uint32_t max_tile_m_fp32;  // the largest tile_m instantiated for fp32 output
  uint32_t max_tile_m_accumulate;  // the largest tile_m offering GGEMM_EPILOGUE_ACCUMULATE

  uint32_t max_tile_m(uint32_t out_bytes) const { return out_bytes == 4 ? max_tile_m_fp32 : 256; }
  bool tile_m_ok(uint32_t v, uint32_t out_bytes) const {
    return (v == 16 || v == 32 || v == 64 || v == 128 || v == 256) && v <= max_tile_m(out_bytes);
  }
};

// The TMA bytes a K-sliced sm_90a stage should load at least (see the
// K-sliced stages in choose_sm90_config): 20 KB at ~270 ns per stage is
// ~75 GB/s per SM, past DRAM's share with 132 SMs busy.
constexpr uint32_t kMinStageBytes = 20 * 1024;

// With K short enough to fit the ring whole (LoRA expand, K = rank), a ring
// deeper than a few tiles' stages only delays the start: every stage is two
// barrier inits, ~12 cycles each in a row at kernel entry (clock probe, NOTES
// v0.14: 1400 cycles to the first load at the decode expand's 32 stages, 760
// at 6). The producer runs ahead by whole tiles, so a ring of
// kShortKStageCap stages (or two tiles' stages) still covers a load's trip.
constexpr uint32_t kShortKStageCap = 8;
constexpr uint32_t short_k_stage_cap(int64_t k_iters) {
  return k_iters * 2 > int64_t(kShortKStageCap) ? uint32_t(k_iters * 2) : kShortKStageCap;
}

// sm_90a: ptx/sm90/kernel_table.h instantiates 256 for 16-bit outputs only,
// and 256 has no registers left for accumulate.
constexpr ArchRules kSm90Rules{Arch::kSm90a, "sm_90a", "wgmma", 64, GGEMM_SM90_MAX_TILE_M(4),
                               GGEMM_SM90_TILE_M_SUPPORTS_ACCUMULATE(256) ? 256u : 128u};
// sm_100a: the accumulators live in tensor memory, so every tile_m up to 256
// exists for every output dtype and epilogue (ptx/sm100/kernel_table.h).
constexpr ArchRules kSm100Rules{Arch::kSm100a, "sm_100a", "tcgen05.mma", 128, 256, 256};

// The caller's bound on rows per group, or M where it gives none (0) or a
// larger one.
int64_t max_rows_bound(const GroupedShape &s) {
  return s.max_rows_per_group > 0 ? std::min(s.max_rows_per_group, s.m) : s.m;
}

// The typical group: the average over the groups, never above the largest.
int64_t typical_rows(const GroupedShape &s, int64_t max_rows) {
  return std::min<int64_t>((s.m + s.num_groups - 1) / s.num_groups, max_rows);
}

// 128-wide column blocks per row block (GroupedShape::col_blocks, or N's).
int64_t col_blocks_of(const GroupedShape &s) {
  return s.col_blocks > 0 ? s.col_blocks : (s.n + kGroupedTileN - 1) / kGroupedTileN;
}

// The automatic token tile (the MMA's N). Small groups: the smallest tile
// holding the largest group, so decode-sized groups (1..16 rows) waste
// little. Large groups: 128, or 256 when the average group has 256 rows or
// more — a 128 x 256 tile moves 85 instead of 64 FLOPs per byte from L2,
// which bounds these kernels (NOTES v0.2-v0.3: Mixtral 0.83 -> 0.88, Qwen3
// 256-row groups 0.80 -> 0.83), while for ~128-row groups it wastes half of
// every tile. Partial row blocks run narrower MMAs in the kernel, so a large
// tile costs little at group ends.
uint32_t size_tile_m(const ArchRules &r, const GroupedShape &s, int64_t max_rows) {
  const int64_t avg_rows = typical_rows(s, max_rows);
  if (max_rows <= 16) return 16;
  if (max_rows <= 32) return 32;
  if (max_rows <= 64) return 64;
  const bool tile256_ok = r.max_tile_m(dtype_bytes(s.c_dtype)) >= 256 &&
                          (s.epilogue != GGEMM_EPILOGUE_ACCUMULATE || r.max_tile_m_accumulate >= 256);
  // Skewed routing, as far as the caller's bound tells (its largest group
  // more than 4x the average; Zipf-like): most groups then hold fewer rows
  // than the average, which overstates the typical group. On the Qwen3 Zipf
  // row (largest group 33x the average) 128 ran 431 us against 455 for 256,
  // while on balanced rows 256 wins (NOTES v0.3, v0.10). Without a bound
  // (max_rows is M) nothing is known of the skew: the average decides.
  const bool skewed = max_rows < s.m && max_rows > 4 * avg_rows;
  return avg_rows >= 256 && tile256_ok && !skewed ? 256 : 128;
}

// An upper bound on the tiles of a launch (as the grid size uses it).
int64_t tile_bound(const GroupedShape &s, uint32_t tile_m) {
  return row_block_bound(s, tile_m) * col_blocks_of(s);
}

uint32_t auto_tile_m(const ArchRules &r, const GroupedShape &s, int sm_count) {
  uint32_t tile_m = size_tile_m(r, s, max_rows_bound(s));
  // Narrow outputs (LoRA shrink: 3R columns, one or two column tiles) make
  // too few tiles to stream the activations on every SM; one SM moves a
  // fraction of the device's bandwidth. Halve tile_m while fewer than three
  // quarters of the SMs would get a tile (each halving doubles the weight
  // tiles read from L2, so a few idle SMs are the better trade).
  while (tile_m > 16 && 4 * tile_bound(s, tile_m) < 3 * int64_t(sm_count)) tile_m /= 2;
  return tile_m;
}

// The automatic swizzle: one 128-byte row of K per stage (tile_k 64), unless
// K is so short that most of the row would be zero fill.
uint32_t auto_swizzle(const GroupedShape &s) {
  if (!s.transpose_b) return 128;  // [E, K, N] weights: 128B MN-major boxes only
  if (s.k <= 16) return 32;
  if (s.k <= 32) return 64;
  return 128;
}

// What both architectures choose alike: tile_m and the swizzle, from the
// caller's override where it sets them (checked field by field) and the
// automatic rules otherwise; the requested stages (0 = as many as fit).
struct CommonChoice {
  uint32_t tile_m = 0, swizzle_bytes = 0, stages = 0;
  uint32_t cta_group = 1;
  uint32_t cluster_m = 0;  // as the caller asked: 0 (automatic), 1 or 2
};

ggemm_status choose_common(const ArchRules &r, const DeviceProps &props, const GroupedShape &shape,
                           const ggemm_config *o, CommonChoice *out) {
  const uint32_t out_bytes = dtype_bytes(shape.c_dtype);
  CommonChoice c;
  if (o) {
    if (o->struct_size != sizeof(ggemm_config))
      return fail(GGEMM_STATUS_INVALID_VALUE, "config->struct_size is %zu; this library expects %zu",
                  o->struct_size, sizeof(ggemm_config));
    if (r.arch == Arch::kSm90a && o->cta_group != 0 && o->cta_group != 1)
      return fail(GGEMM_STATUS_INVALID_CONFIG,
                  "config->cta_group = %d: cta_group 2 (two SMs sharing one MMA) needs sm_100a; this device is "
                  "sm_%d%d",
                  o->cta_group, props.cc_major, props.cc_minor);
    if (r.arch == Arch::kSm100a && o->cta_group != 0 && o->cta_group != 1 && o->cta_group != 2)
      return fail(GGEMM_STATUS_INVALID_CONFIG, "config->cta_group = %d: must be 0 (automatic), 1 or 2",
                  o->cta_group);
    c.cta_group = o->cta_group == 2 ? 2 : 1;
    // Clusters pair two CTAs along the weight rows (cluster_m 2, cluster_n
    // 1): on sm_100a that is the cta_group 2 pair (implied by it, and only
    // with it); on sm_90a two CTAs sharing their token tile by multicast.
    if (o->cluster_m < 0 || o->cluster_m > 2 || o->cluster_n < 0 || o->cluster_n > 1)
      return fail(GGEMM_STATUS_INVALID_CONFIG,
                  "config->cluster_m/cluster_n = %d/%d: the %s kernel runs without clusters or in pairs along "
                  "the weight rows (cluster_m 2, cluster_n 1); 0 = automatic",
                  o->cluster_m, o->cluster_n, r.name);
    if (r.arch == Arch::kSm100a && o->cluster_m > 1 && c.cta_group != 2)
      return fail(GGEMM_STATUS_INVALID_CONFIG,
                  "config->cluster_m = %d: on sm_100a the pair is the cta_group 2 pair; set cta_group = 2",
                  o->cluster_m);
    c.cluster_m = uint32_t(o->cluster_m);
    if (o->tile_n != 0 && o->tile_n != int(kGroupedTileN))
      return fail(GGEMM_STATUS_INVALID_CONFIG, "config->tile_n = %d: the %s kernel's weight tile is 128 rows",
                  o->tile_n, r.name);
    if (o->mma_m != 0 && o->mma_m != r.mma_m)
      return fail(GGEMM_STATUS_INVALID_CONFIG, "config->mma_m = %d: %s %s has M = %d", o->mma_m, r.name, r.mma,
                  r.mma_m);
    if (o->mma_k != 0 && o->mma_k != 16)
      return fail(GGEMM_STATUS_INVALID_CONFIG, "config->mma_k = %d: 16-bit %s has K = 16", o->mma_k, r.mma);
    if (o->tile_m != 0 && !r.tile_m_ok(uint32_t(o->tile_m), out_bytes))
      return fail(GGEMM_STATUS_INVALID_CONFIG,
                  "config->tile_m = %d: must be 16, 32, 64, 128%s for %s output", o->tile_m,
                  r.max_tile_m(out_bytes) >= 256 ? " or 256" : "", dtype_name(shape.c_dtype));
    c.tile_m = o->tile_m ? uint32_t(o->tile_m) : 0;
    if (c.tile_m && c.tile_m < GGEMM_SM100_MIN_TILE_M(c.cta_group))
      return fail(GGEMM_STATUS_INVALID_CONFIG,
                  "config->tile_m = %d with cta_group 2: the pair splits the tokens, so tile_m is 32 or more",
                  o->tile_m);
    if (c.tile_m && shape.epilogue == GGEMM_EPILOGUE_ACCUMULATE && c.tile_m > r.max_tile_m_accumulate)
      return fail(GGEMM_STATUS_INVALID_CONFIG,
                  "config->tile_m = %d: the accumulate epilogue runs with tile_m up to %u on %s", o->tile_m,
                  r.max_tile_m_accumulate, r.name);
    if (o->mma_n != 0 && (c.tile_m ? int(c.tile_m) != o->mma_n : !r.tile_m_ok(uint32_t(o->mma_n), out_bytes)))
      return fail(GGEMM_STATUS_INVALID_CONFIG, "config->mma_n = %d: on %s the %s N is tile_m (%d)", o->mma_n,
                  r.name, r.mma, o->tile_m);
    if (!c.tile_m && o->mma_n) c.tile_m = uint32_t(o->mma_n);
    for (int sw : {o->a_swizzle, o->b_swizzle})
      if (sw != 0 && sw != 32 && sw != 64 && sw != 128)
        return fail(GGEMM_STATUS_INVALID_CONFIG, "config->%s = %d: swizzle is 128, 64 or 32 bytes (0 = auto)",
                    sw == o->a_swizzle ? "a_swizzle" : "b_swizzle", sw);
    if (o->a_swizzle && o->b_swizzle && o->a_swizzle != o->b_swizzle)
      return fail(GGEMM_STATUS_INVALID_CONFIG,
                  "config->a_swizzle = %d and b_swizzle = %d: both operands share tile_k on %s, so the "
                  "swizzles must be equal",
                  o->a_swizzle, o->b_swizzle, r.name);
    c.swizzle_bytes = uint32_t(o->a_swizzle ? o->a_swizzle : o->b_swizzle);
    if (o->tile_k != 0) {
      if (o->tile_k != 64 && o->tile_k != 32 && o->tile_k != 16)
        return fail(GGEMM_STATUS_INVALID_CONFIG, "config->tile_k = %d: must be 64, 32 or 16 (16-bit operands)",
                    o->tile_k);
      if (c.swizzle_bytes && c.swizzle_bytes != uint32_t(o->tile_k) * 2)
        return fail(GGEMM_STATUS_INVALID_CONFIG,
                    "config->tile_k = %d with %u-byte swizzle: tile_k must be swizzle / 2", o->tile_k,
                    c.swizzle_bytes);
      c.swizzle_bytes = uint32_t(o->tile_k) * 2;
    }
    if (!shape.transpose_b && c.swizzle_bytes && c.swizzle_bytes != 128)
      return fail(GGEMM_STATUS_INVALID_CONFIG,
                  "config->a_swizzle/b_swizzle/tile_k give a %u-byte swizzle: weights stored [E, K, N] "
                  "(transpose_b = 0) need the 128-byte swizzle (tile_k 64) on %s",
                  c.swizzle_bytes, r.name);
    if (o->stages < 0)
      return fail(GGEMM_STATUS_INVALID_CONFIG, "config->stages = %d: must be >= 0", o->stages);
    c.stages = uint32_t(o->stages);
  }
  if (!c.tile_m)
    c.tile_m = std::max<uint32_t>(auto_tile_m(r, shape, props.sm_count), GGEMM_SM100_MIN_TILE_M(c.cta_group));
  if (!c.swizzle_bytes) c.swizzle_bytes = auto_swizzle(shape);
  *out = c;
  return GGEMM_STATUS_SUCCESS;
}

// A pipeline needs a stage to fill while another is consumed.
ggemm_status refuse_fit(const CommonChoice &c, const GroupedShape &shape, const DeviceProps &props, uint32_t fit) {
  return fail(GGEMM_STATUS_INVALID_CONFIG,
              "tile_m %u with %u-byte swizzle and %s output leaves room for %u pipeline stage(s) in %d bytes "
              "of shared memory; at least 2 are needed",
              c.tile_m, c.swizzle_bytes, dtype_name(shape.c_dtype), fit, props.smem_optin);
}

ggemm_status refuse_stages(uint32_t stages, uint32_t fit, const DeviceProps &props) {
  return fail(GGEMM_STATUS_INVALID_CONFIG,
              "config->stages = %u: this config fits 2..%u stages in the device's %d bytes of opt-in shared "
              "memory",
              stages, fit, props.smem_optin);
}

// The accumulate epilogue reads the old C through a ring of staging slots
// that the producer fills ahead of the epilogues (ptx/sm90/producer.cuh;
// 2 at least): the most slots, up to 4, beside which the whole reduction
// still fits in the pipeline (short K: the LoRA expand, whose time is the
// reads of C in flight; NOTES v0.15), with the short-K stage cap; else 2
// slots and every stage that fits.
ggemm_status choose_accumulate_ring(const DeviceProps &props, const GroupedShape &shape, int64_t k_iters,
                                    Sm90Config *c) {
  auto fit = [&](uint32_t slots) {
    return sm90::max_stages(c->tile_m, c->swizzle_bytes, dtype_bytes(shape.c_dtype), uint32_t(props.smem_optin),
                            slots, c->k_slices, c->weights_box_rows, c->consumer_warpgroups);
  };
  for (uint32_t slots = sm90::kMaxStagingBuffers; slots > 2; --slots) {
    const uint32_t f = fit(slots);
    if (f >= 2 && k_iters <= int64_t(f) && (c->stages == 0 || c->stages <= f)) {
      c->staging_buffers = slots;
      if (c->stages == 0) c->stages = std::min(f, short_k_stage_cap(k_iters));
      return GGEMM_STATUS_SUCCESS;
    }
  }
  const uint32_t f2 = fit(2);
  if (f2 < 2)
    return fail(GGEMM_STATUS_INVALID_CONFIG,
                "tile_m %u with %u-byte swizzle and %s output leaves room for %u pipeline stage(s) beside the "
                "accumulate epilogue's two staging slots in %d bytes of shared memory; at least 2 are needed",
                c->tile_m, c->swizzle_bytes, dtype_name(shape.c_dtype), f2, props.smem_optin);
  c->staging_buffers = 2;
  if (c->stages == 0) c->stages = f2;
  if (c->stages > f2 || c->stages < 2) return refuse_stages(c->stages, f2, props);
  return GGEMM_STATUS_SUCCESS;
}

}  // namespace

int64_t row_block_bound(const GroupedShape &s, uint32_t tile_m) {
  const int64_t max_rows = max_rows_bound(s);
  return std::min<int64_t>(s.num_groups * ((max_rows + tile_m - 1) / tile_m), (s.m + tile_m - 1) / tile_m + s.num_groups);
}

ggemm_status choose_sm90_config(const DeviceProps &props, const GroupedShape &shape,
                                const ggemm_config *o, Sm90Config *out) {
  const uint32_t out_bytes = dtype_bytes(shape.c_dtype);
  CommonChoice common;
  GGEMM_TRY(choose_common(kSm90Rules, props, shape, o, &common));
  Sm90Config c;
  c.tile_m = common.tile_m;
  c.swizzle_bytes = common.swizzle_bytes;
  c.stages = common.stages;
  // Pairs sharing the token tile by multicast exist for the prefill tiles
  // (ptx/sm90/kernel_table.h). Automatic: none yet (to be measured).
  if (common.cluster_m == 2 && c.tile_m < GGEMM_SM90_MIN_CLUSTER_TILE_M)
    return fail(GGEMM_STATUS_INVALID_CONFIG,
                "config->cluster_m = 2: on sm_90a a pair shares a token tile of 128 or 256 rows; this call's "
                "tile_m is %u (set tile_m = 128 or 256)",
                c.tile_m);
  c.cluster_m = common.cluster_m == 2 ? 2 : 1;
  c.weights_box_rows = kmajor_box_rows(shape.transpose_b, c.cluster_m, shape.n, sm90::kTileN);
  // One multiplying consumer warpgroup when N <= 64 (K-major weights, no
  // cluster): the second one's rows would all lie past N, and its 64 guard
  // rows per stage go to the pipeline (weights_stage_rows; the LoRA shrink
  // R 16: 7 -> 10 stages, NOTES v0.13).
  c.consumer_warpgroups = shape.transpose_b && c.cluster_m == 1 && shape.n <= 64 ? 1 : 2;
  // K-sliced stages: several 64-wide slices of K per stage, one TMA box per
  // operand, where K-major weights, no cluster and K a multiple of 64 allow
  // the sliced views and the stage count is automatic. One SM's TMA path
  // completes about one stage per 270 ns whatever its bytes up to ~24 KB
  // (bench/tma_probe.cu on the H200, NOTES v0.9), so a stage of a few KB
  // starves the SM: take the fewest slices (1, 2 or 4) that load at least
  // kMinStageBytes per stage, where 3 such stages fit and K covers two.
  // Measured (A/B by GGEMM_K_SLICES, us): LoRA shrink R 16 (10 KB stages)
  // 21.9 / 20.2 / 20.7 with 1 / 2 / 4 slices, decode shrink (8 KB) 18.3 /
  // 14.9 / 13.6, R 64 (24 KB) 27.3 / 29.0 / 40.4, MoE decode rows level.
  // GGEMM_K_SLICES (k_slices_request: 1, 2 or 4) forces the count where 2
  // stages fit.
  if (shape.transpose_b && c.cluster_m == 1 && c.swizzle_bytes == 128 && shape.k % 64 == 0 && c.stages == 0) {
    auto fit = [&](uint32_t slices) {
      return sm90::max_stages(c.tile_m, 128, out_bytes, uint32_t(props.smem_optin), 1, slices, c.weights_box_rows,
                              c.consumer_warpgroups);
    };
    if (shape.k_slices_request != 0) {
      if (shape.k_slices_request > 1 && fit(shape.k_slices_request) >= 2) c.k_slices = shape.k_slices_request;
    } else {
      const uint32_t slice_bytes = (c.weights_box_rows + c.tile_m) * 128;
      for (uint32_t slices = 1; slices <= 4; slices *= 2) {
        if (slices > 1 && (shape.k < int64_t(64 * slices * 2) || fit(slices) < 3)) break;
        c.k_slices = slices;
        if (slices * slice_bytes >= kMinStageBytes) break;
      }
    }
  }

  const uint32_t fit = sm90::max_stages(c.tile_m, c.swizzle_bytes, out_bytes, uint32_t(props.smem_optin), 1,
                                        c.k_slices, c.weights_box_rows, c.consumer_warpgroups);
  if (fit < 2) return refuse_fit(common, shape, props, fit);
  // Two epilogue buffers when the whole reduction still fits in the pipeline
  // with them (short K: LoRA, small hidden sizes): such calls are bound by
  // their output stores, and the second buffer overlaps staging the next
  // chunk with the TMA store of the last. With a long K the memory is worth
  // more as pipeline stages (NOTES v0.3: 3 stages lost to 4).
  const uint32_t tile_k = c.swizzle_bytes / 2;
  const int64_t k_iters = sm90::k_stages(uint32_t(shape.k), tile_k, c.k_slices);
  const uint32_t fit2 = sm90::max_stages(c.tile_m, c.swizzle_bytes, out_bytes, uint32_t(props.smem_optin), 2,
                                         c.k_slices, c.weights_box_rows, c.consumer_warpgroups);
  if (shape.epilogue == GGEMM_EPILOGUE_ACCUMULATE) {
    GGEMM_TRY(choose_accumulate_ring(props, shape, k_iters, &c));
  } else if (fit2 >= 2 && k_iters <= int64_t(fit2) && (c.stages == 0 || c.stages <= fit2)) {
    c.staging_buffers = 2;
    if (c.stages == 0) c.stages = std::min(fit2, short_k_stage_cap(k_iters));
  } else if (c.stages == 0) {
    c.stages = fit;
  } else if (c.stages > fit || c.stages < 2) {
    return refuse_stages(c.stages, fit, props);
  }
  *out = c;
  return GGEMM_STATUS_SUCCESS;
}

namespace {

// The short-K kernels' token tile: the smallest from kShortKMinTileM
// (doubling) holding the typical group of `rows`, at most `max_tile_m` (as
// size_tile_m): an 8-row decode group fills an 8-token tile.
uint32_t short_k_tile_m(int64_t rows, uint32_t max_tile_m) {
  uint32_t tile_m = sm90::kShortKMinTileM;
  while (tile_m < max_tile_m && rows > int64_t(tile_m)) tile_m *= 2;
  return tile_m;
}

// The call's tiles as the short-K rules count them: every group the typical
// one of `rows`.
int64_t typical_tiles(const GroupedShape &shape, int64_t rows, uint32_t tile_m) {
  return shape.num_groups * ((rows + tile_m - 1) / tile_m) * col_blocks_of(shape);
}

// The short-K kernel's CTAs every SM holds at once, over all SMs.
int64_t short_k_wave(const DeviceProps &props, const GroupedShape &shape, uint32_t tile_m, uint32_t splits) {
  return int64_t(sm90_short_k_ctas_per_sm(props, tile_m, shape.k, shape.c_dtype, splits)) * props.sm_count;
}

}  // namespace

uint32_t choose_sm90_short_k(const DeviceProps &props, const GroupedShape &shape, const ggemm_config *o) {
  if (o || !shape.transpose_b || shape.k > int64_t(sm90::kShortKMaxK) || shape.short_k_request < 0) return 0;
  const int64_t rows = typical_rows(shape, max_rows_bound(shape));
  const uint32_t tile_m = short_k_tile_m(rows, sm90::kShortKMaxTileM);
  // One wave: the typical groups' tiles, one per CTA, on the CTAs every SM
  // holds at once. Past that a CTA runs its tiles one after another with
  // nothing overlapping them (M 4096: 2x slower than the persistent kernel,
  // NOTES v0.16).
  if (shape.short_k_request == 0 && typical_tiles(shape, rows, tile_m) > short_k_wave(props, shape, tile_m, 1)) return 0;
  return tile_m;
}

uint32_t choose_sm90_short_k_split(const DeviceProps &props, const GroupedShape &shape, const ggemm_config *o) {
  if (o || !shape.transpose_b || shape.k <= int64_t(sm90::kShortKMaxK) ||
      shape.k > int64_t(sm90::kShortKSplitMaxK) || shape.short_k_request < 0 || props.sm_count < int(sm90::kShortKSplit))
    return 0;
  const int64_t rows = typical_rows(shape, max_rows_bound(shape));
  const uint32_t tile_m = short_k_tile_m(rows, sm90::kShortKSplitMaxTileM);  // 8 or 16
  if (shape.short_k_request == 0) {
    // Decode groups, and few tiles: the persistent kernel runs them on a
    // few SMs, each streaming its tile's whole K (the decode LoRA shrink: 8
    // tiles of K 4096, 8 SMs). Split, each tile's K spreads over a cluster,
    // one slice a CTA, and every cluster runs at once.
    if (rows > int64_t(sm90::kShortKSplitMaxTileM)) return 0;
    const int64_t tiles = typical_tiles(shape, rows, tile_m);
    if (tiles * sm90::kShortKSplit > short_k_wave(props, shape, tile_m, sm90::kShortKSplit) ||
        4 * tiles > props.sm_count)
      return 0;
  }
  return tile_m;
}

uint32_t sm90_short_k_ctas_per_sm(const DeviceProps &props, uint32_t tile_m, int64_t k, ggemm_dtype c_dtype,
                                  uint32_t splits) {
  const uint32_t smem = sm90::make_short_k_layout(tile_m, uint32_t(k), dtype_bytes(c_dtype), splits).total_bytes();
  const uint32_t by_smem = uint32_t(props.smem_optin) / (smem + 1024);
  return std::max<uint32_t>(1, std::min(sm90::kShortKMinBlocksPerSm, by_smem));
}

ggemm_status choose_sm100_config(const DeviceProps &props, const GroupedShape &shape,
                                 const ggemm_config *o, Sm100Config *out) {
  CommonChoice common;
  GGEMM_TRY(choose_common(kSm100Rules, props, shape, o, &common));
  Sm100Config c;
  c.tile_m = common.tile_m;
  c.swizzle_bytes = common.swizzle_bytes;
  c.stages = common.stages;
  c.cta_group = common.cta_group;
  c.tile_n = sm100::kTileN * c.cta_group;
  // The epilogue reads tensor memory and stores to global memory directly, so
  // shared memory holds only the pipeline and barriers: every stage that fits.
  const uint32_t fit = sm100::max_stages(c.tile_m, c.swizzle_bytes, uint32_t(props.smem_optin), c.cta_group);
  if (fit < 2) return refuse_fit(common, shape, props, fit);
  if (c.stages == 0) {
    c.stages = fit;
  } else if (c.stages > fit || c.stages < 2) {
    return refuse_stages(c.stages, fit, props);
  }
  *out = c;
  return GGEMM_STATUS_SUCCESS;
}

}  // namespace ggemm
