#include <algorithm>
#include <atomic>

#include "ptx/blocks/grouped_params.h"
#include "ptx/blocks/tile_scheduler.h"
#include "ptx/sm100/smem_layout.h"
#include "ptx/sm90/smem_layout.h"
#include "ptx/sm90/decode_gemv_layout.h"
#include "runtime/plan_rules.h"

namespace ggemm {

static_assert(sm90::kTileN == kGroupedTileN && sm100::kTileN == kGroupedTileN,
              "both architectures' tiles are kGroupedTileN weight rows per CTA");

uint32_t dtype_bytes(ggemm_dtype t) { return t == GGEMM_DTYPE_FP32 ? 4 : 2; }

const char *dtype_name(ggemm_dtype t) {
  switch (t) {
    case GGEMM_DTYPE_BF16: return "bf16";
    case GGEMM_DTYPE_FP16: return "fp16";
    case GGEMM_DTYPE_FP32: return "fp32";
  }
  return "?";
}

uint64_t max_output_elements() { return kMaxOutputElements; }

bool spans_segments(const GroupedShape &s) {
  const bool splits = s.split0 != 0 || s.split1 != 0;
  return splits && !s.a_planes && s.epilogue != GGEMM_EPILOGUE_ACCUMULATE;
}

int64_t column_blocks(const GroupedShape &s, uint32_t tile_n) {
  // A scheduler with no active group reads no routing array: only its column count.
  const GroupedProblem counting{nullptr,           nullptr,           0, uint32_t(s.m), uint32_t(s.n), 0,
                                uint32_t(s.split0), uint32_t(s.split1), spans_segments(s) ? 1u : 0u};
  return GroupedTileScheduler(counting, 1, tile_n).col_blocks();
}

int64_t row_block_limit(const GroupedShape &s, uint32_t tile_m) {
  // M rows in at most n = min(groups, M) non-empty groups: a group of r rows
  // has 1 + (r - 1) / tile_m row blocks, so all of them together at most
  // n + (M - n) / tile_m (decode calls listing every expert, torch's offs,
  // have far more groups than rows).
  const int64_t nonempty = std::min<int64_t>(s.num_groups, s.m);
  return nonempty + (s.m - nonempty) / tile_m;
}

int64_t row_block_bound(const GroupedShape &s, uint32_t tile_m) {
  const int64_t max_rows = max_rows_bound(s);
  return std::min<int64_t>(s.num_groups * ((max_rows + tile_m - 1) / tile_m), row_block_limit(s, tile_m));
}

int64_t max_rows_bound(const GroupedShape &s) {
  return s.max_rows_per_group > 0 ? std::min(s.max_rows_per_group, s.m) : s.m;
}

int64_t typical_rows(const GroupedShape &s, int64_t max_rows) {
  return std::min<int64_t>((s.m + s.num_groups - 1) / s.num_groups, max_rows);
}

namespace {

// The token tile by group size. Small groups: the smallest tile holding the
// largest group, so decode-sized groups (1..16 rows) waste little. Large
// groups: 128, or 256 when the average group has 256 rows or more — a
// 128 x 256 tile moves 85 instead of 64 FLOPs per byte from L2, which bounds
// these kernels, while for ~128-row groups it wastes half of every tile.
// Partial row blocks run narrower MMAs in the kernel, so a large tile costs
// little at group ends.
uint32_t size_tile_m(Arch arch, const GroupedShape &s, int64_t max_rows) {
  const int64_t avg_rows = typical_rows(s, max_rows);
  if (max_rows <= 16) return 16;
  if (max_rows <= 32) return 32;
  if (max_rows <= 64) return 64;
  const bool tile256_ok = persistent_tile_exists(arch, s.c_dtype, 256) &&
                          (s.epilogue != GGEMM_EPILOGUE_ACCUMULATE || accumulate_supported(arch, 256));
  // Skewed routing, as far as the caller's bound tells (its largest group
  // more than 4x the average; Zipf-like): most groups then hold fewer rows
  // than the average, which overstates the typical group, and 128 wins
  // (measured: docs/performance.md). Without a bound (max_rows is M)
  // nothing is known of the skew: the average decides.
  const bool skewed = max_rows < s.m && max_rows > 4 * avg_rows;
  return avg_rows >= 256 && tile256_ok && !skewed ? 256 : 128;
}

}  // namespace

uint32_t auto_tile_m(Arch arch, const GroupedShape &s, int sm_count) {
  uint32_t tile_m = size_tile_m(arch, s, max_rows_bound(s));
  // Narrow outputs (LoRA shrink: 3R columns, one or two column tiles) make
  // too few tiles to stream the activations on every SM; one SM moves a
  // fraction of the device's bandwidth. Halve tile_m while fewer than three
  // quarters of the SMs would get a tile (each halving doubles the weight
  // tiles read from L2, so a few idle SMs are the better trade).
  const int64_t col_blocks = column_blocks(s);
  while (tile_m > 16 && 4 * row_block_bound(s, tile_m) * col_blocks < 3 * int64_t(sm_count)) tile_m /= 2;
  return tile_m;
}

uint32_t auto_swizzle(const GroupedShape &s) {
  if (!s.transpose_b) return 128;  // [E, K, N] weights: 128B MN-major boxes only
  // Gathered token rows land one 128-byte row at a time (sm_90a's loader
  // writes them at 128-byte strides; a TMA box's shared-memory address must
  // be 128-byte aligned): past K is zero fill.
  if (s.gather) return 128;
  if (s.k <= 16) return 32;
  if (s.k <= 32) return 64;
  return 128;
}

TileChoice choose_tile(Arch arch, const DeviceProps &props, const GroupedShape &shape, const ggemm_config *o) {
  TileChoice c;
  if (o) {
    c.cta_group = o->cta_group == 2 ? 2 : 1;
    c.cluster_m = o->cluster_m == 2 ? 2 : 1;
    c.tile_m = uint32_t(o->tile_m ? o->tile_m : o->mma_n);  // validated: mma_n is tile_m where both are set
    c.swizzle_bytes = uint32_t(o->a_swizzle ? o->a_swizzle : o->b_swizzle);
    if (o->tile_k) c.swizzle_bytes = uint32_t(o->tile_k) * 2;
    c.stages = uint32_t(o->stages);
  }
  if (!c.tile_m)
    c.tile_m = std::max<uint32_t>(auto_tile_m(arch, shape, props.sm_count), min_cluster_tile_m(arch, c.cta_group));
  if (!c.swizzle_bytes) c.swizzle_bytes = auto_swizzle(shape);
  return c;
}

uint32_t weights_box_rows(const GroupedShape &shape, uint32_t cluster_size, uint32_t tile_n) {
  return shape.epilogue == GGEMM_EPILOGUE_SWIGLU ? tile_n
                                                 : kmajor_box_rows(shape.transpose_b, cluster_size, shape.n, tile_n);
}

StatusOr<KernelPlan> persistent_plan_of_tile(Arch arch, const GroupedShape &shape, const TileChoice &tile) {
  const uint32_t cluster = arch == Arch::kSm90a ? tile.cluster_m : tile.cta_group;
  KernelPlan p;
  // sm_90a: the kernel compiled for the store or the accumulate epilogue
  // alone where the call needs nothing else.
  const KernelFamily family = arch != Arch::kSm90a          ? KernelFamily::kPersistent
                              : store_only_call(shape)      ? KernelFamily::kPersistentStore
                              : accumulate_only_call(shape) ? KernelFamily::kPersistentAccumulate
                                                            : KernelFamily::kPersistent;
  p.kernel = find_kernel(arch, family, shape.a_dtype, shape.c_dtype, shape.transpose_b, tile.tile_m, cluster);
  if (!p.kernel)
    return error(GGEMM_STATUS_INTERNAL_ERROR, "no %s kernel for %s->%s tile_m %u in clusters of %u",
                 arch_name(arch), dtype_name(shape.a_dtype), dtype_name(shape.c_dtype), tile.tile_m, cluster);
  p.tile_m = tile.tile_m;
  p.tile_n = kGroupedTileN;  // each CTA's weight rows (and TMA box), whatever the cluster
  p.swizzle_bytes = tile.swizzle_bytes;
  p.cluster_size = cluster;
  p.weights_box_rows = weights_box_rows(shape, p.cluster_size, p.tile_n);
  return p;
}

Status refuse_fit(const TileChoice &c, const GroupedShape &shape, const DeviceProps &props, uint32_t fit) {
  return error(GGEMM_STATUS_INVALID_CONFIG,
               "tile_m %u with %u-byte swizzle and %s output leaves room for %u pipeline stage(s) in %d bytes "
               "of shared memory; at least 2 are needed",
               c.tile_m, c.swizzle_bytes, dtype_name(shape.c_dtype), fit, props.smem_optin);
}

Status refuse_stages(uint32_t stages, uint32_t fit, const DeviceProps &props) {
  return error(GGEMM_STATUS_INVALID_CONFIG,
               "config->stages = %u: this config fits 2..%u stages in the device's %d bytes of opt-in shared "
               "memory",
               stages, fit, props.smem_optin);
}

int64_t max_clusters(const KernelPlan &plan, const GroupedShape &shape, const DeviceProps &props) {
  const int64_t col_blocks = column_blocks(shape, plan.tile_n);
  const int64_t pair_col_blocks =
      plan.persistent() && plan.cluster_size == 2 ? (col_blocks + 1) / 2 + 2 : col_blocks;  // + 2: segment ends
  const int64_t by_sms = int64_t(props.sm_count) * plan.ctas_per_sm / plan.cluster_size;
  return std::max<int64_t>(1, std::min<int64_t>(by_sms, row_block_bound(shape, plan.tile_m) * pair_col_blocks));
}

bool walk_by_lanes(const KernelPlan &plan, const GroupedShape &shape, int64_t grid) {
  if (shape.num_groups <= 1) return false;
  const int64_t tiles = row_block_bound(shape, plan.tile_m) * column_blocks(shape, plan.tile_n * plan.cluster_size);
  // grid / (tiles / groups) groups a step, against kWalkBatch.
  return grid / plan.cluster_size * shape.num_groups > int64_t(GroupedTileScheduler::kWalkBatch) * tiles;
}

bool narrow_tiles(const DeviceProps &props, const GroupedShape &shape, const ggemm_config *config,
                  const KernelPlan &p) {
  if (!shape.transpose_b || p.cluster_size != 1) return false;
  if (shape.epilogue == GGEMM_EPILOGUE_SWIGLU && p.tile_m > sm90::kMaxGatherSwigluTileM) return false;
  if (shape.n <= int64_t(kNarrowTileN)) return true;
  if (config) return false;
  const int64_t sms = props.sm_count;
  const int64_t wide_tiles = row_block_limit(shape, p.tile_m) * column_blocks(shape, kGroupedTileN);
  if (2 * wide_tiles <= sms) return true;
  // Decode (weight-read-bound, a row block per routed row at most): wide
  // tiles short of one wave (not with gather on load, whose one-row boxes
  // cost per stage, not per byte: a narrow stage pays them for half the
  // weights), or a last wave of them on at most half the SMs (a remainder
  // of 0 is a full wave).
  const bool decode = p.tile_m <= kNarrowMaxTileM && shape.m <= shape.num_groups;
  const int64_t last_wave = wide_tiles % sms;
  return decode && ((wide_tiles < sms && !shape.gather) || (last_wave != 0 && 2 * last_wave <= sms));
}

void narrow_plan(KernelPlan *p, const GroupedShape &shape) {
  p->tile_n = kNarrowTileN;
  p->weights_box_rows = weights_box_rows(shape, 1, p->tile_n);
}

// The decode GEMV's tile for this call, or 0 when it does not take it.
// Groups of up to kDecodeGemvMaxRows rows as far as the caller's bound
// tells: one token routes a row to each of its top-k experts (the MoE
// layer bounds a group by its tokens, api/src/moe_api.cpp), and calls
// without a bound bound a group by M, 8 at one token of top-8. The tile: the
// smallest of 1, 2 and 4 rows holding that bound. A tile of fewer rows runs
// the smaller instantiation's multiply (DecodeGemvSm90::multiply_rows), so
// a tile larger than most groups costs its kernel's registers, not FMAs. A
// group larger than the tile takes a tile per tile_m rows, each reading its
// weights again.
//
// And only where its tiles fill their waves: a GEMV CTA takes whole tiles,
// each a few dependent trips to DRAM, so a last wave on a fraction of the
// CTAs leaves the rest of the chip idle for a whole tile's latency, which
// the persistent kernel's wider pipelines hide. Measured on the H200 (one
// token, sustained; docs/performance.md): the calls at 0.65 of their waves
// (Qwen3-30B-A3B down, 512 tiles on 396 CTAs, 11.0 us against the
// persistent kernel's 9.6; Mixtral down, 256 tiles, 72.2 against 60.8) lose,
// Qwen3-235B down at 0.86 is level (31.2 against 30.7), every call at 0.9
// or more wins (Qwen3-30B gate_up at 0.97: 14.9 against 18.5).
// kDecodeGemvMinWaveFill is the line between them. The waves are those of
// the CTA count that fills them best (decode_gemv_waves): tiles of 1 row
// run four CTAs an SM as well as three, so Qwen3-30B down's 512 tiles fill
// 0.97 of one wave of 528 CTAs.
uint32_t decode_gemv_filter(const DeviceProps &props, const GroupedShape &shape, const ggemm_config *config,
                            PlanRequest::DecodeGemv request) {
  if (request == PlanRequest::DecodeGemv::kNever || config) return 0;  // a config describes the persistent kernel
  if (!shape.transpose_b) return 0;                            // K-major weights: rows stream along K
  if (shape.split0 != 0 || shape.split1 != 0 || shape.a_planes) return 0;  // one output view, one plane
  const int64_t max_rows = max_rows_bound(shape);
  if (request != PlanRequest::DecodeGemv::kWherePossible && max_rows > int64_t(sm90::kDecodeGemvMaxRows)) return 0;
  uint32_t tile_m = 1;
  while (tile_m < sm90::kDecodeGemvMaxTileM && max_rows > int64_t(tile_m)) tile_m *= 2;
  if (request == PlanRequest::DecodeGemv::kWherePossible) return tile_m;
  // A group past the tile reads its weights again for each further tile: a
  // whole extra weight pass where the call is its weight reads. So where the
  // caller bounds the groups, the bound must fit one tile. Measured on the
  // H200 (16 tokens, every expert listed, docs/performance.md): Mixtral's
  // groups of up to 6 rows in tiles of 4 took 599 us against the persistent
  // kernel's 444, Qwen3's of up to 3-5 in tiles of 2 ran 5-6% slower cold.
  // Without a bound a group is bounded by M <= 8 (tiles of 4 from M = 3).
  if (shape.max_rows_per_group > 0 && max_rows > int64_t(tile_m)) return 0;
  // The GEMV streams the routed weights at 0.85-0.9 of the copy floor
  // whatever the call; the persistent kernel's pipelines reach more as the
  // rows grow: measured on the H200 (sustained, docs/performance.md) at 16
  // tokens of top-8, M 128, groups of up to 3 rows in tiles of 4, Qwen3-30B
  // down took 65.8 us on the GEMV against 62.1, Qwen3-235B gate_up 509
  // against 486 cold; at 4 tokens, M 32, every call won on it. So the GEMV
  // keeps to M <= 64 (8 tokens of top-8).
  if (shape.m > kDecodeGemvMaxCallRows) return 0;
  return decode_gemv_waves(props, shape, tile_m).fill >= kDecodeGemvMinWaveFill ? tile_m : 0;
}

DecodeGemvWaves decode_gemv_waves(const DeviceProps &props, const GroupedShape &shape, uint32_t tile_m) {
  const int64_t tiles = row_block_bound(shape, tile_m) * column_blocks(shape, sm90::kDecodeGemvTileN);
  DecodeGemvWaves best{sm90::kDecodeGemvMinCtasPerSm, 0.0};
  for (uint32_t ctas = sm90::decode_gemv_max_ctas_per_sm(tile_m); ctas >= sm90::kDecodeGemvMinCtasPerSm; --ctas) {
    const int64_t grid = int64_t(props.sm_count) * ctas;
    const int64_t waves = (tiles + grid - 1) / grid;
    const double fill = waves > 0 ? double(tiles) / double(waves * grid) : 0.0;
    if (fill > best.fill) best = {ctas, fill};
  }
  return best;
}

StatusOr<KernelPlan> plan_decode_gemv(Arch arch, const DeviceProps &props, const GroupedShape &shape,
                                      uint32_t tile_m) {
  KernelPlan p;
  const uint32_t ctas_per_sm = decode_gemv_waves(props, shape, tile_m).ctas_per_sm;
  p.kernel = find_kernel(arch, KernelFamily::kDecodeGemv, shape.a_dtype, shape.c_dtype, true, tile_m, ctas_per_sm);
  if (!p.kernel)
    return error(GGEMM_STATUS_INTERNAL_ERROR, "no %s decode GEMV kernel with tile_m %u at %u CTAs an SM",
                 arch_name(arch), tile_m, ctas_per_sm);
  p.tile_m = tile_m;
  p.tile_n = sm90::kDecodeGemvTileN;
  p.threads = sm90::kDecodeGemvThreads;
  p.smem_bytes = sm90::decode_gemv_smem_bytes();
  p.ctas_per_sm = ctas_per_sm;
  p.max_clusters = max_clusters(p, shape, props);
  return p;
}

namespace {
std::atomic<PlanRequest::Sm90ShortK> g_sm90_short_k{PlanRequest::Sm90ShortK::kAutomatic};
std::atomic<PlanRequest::DecodeGemv> g_decode_gemv{PlanRequest::DecodeGemv::kAutomatic};
std::atomic<uint32_t> g_sm90_k_slices{0};
std::atomic<PlanRequest::TokenMajor> g_sm90_token_major{PlanRequest::TokenMajor::kAutomatic};
}  // namespace

void set_plan_request_for_testing(const PlanRequest &request) {
  g_sm90_short_k.store(request.sm90_short_k, std::memory_order_relaxed);
  g_decode_gemv.store(request.decode_gemv, std::memory_order_relaxed);
  g_sm90_k_slices.store(request.sm90_k_slices, std::memory_order_relaxed);
  g_sm90_token_major.store(request.sm90_token_major, std::memory_order_relaxed);
}

PlanRequest plan_request_for_testing() {
  PlanRequest r;
  r.sm90_short_k = g_sm90_short_k.load(std::memory_order_relaxed);
  r.decode_gemv = g_decode_gemv.load(std::memory_order_relaxed);
  r.sm90_k_slices = g_sm90_k_slices.load(std::memory_order_relaxed);
  r.sm90_token_major = g_sm90_token_major.load(std::memory_order_relaxed);
  return r;
}

StatusOr<KernelPlan> plan_for(const DeviceProps &props, Arch arch, const GroupedShape &shape,
                              const ggemm_config *config) {
  switch (arch) {
    case Arch::kSm90a: return plan_sm90(props, shape, config, plan_request_for_testing());
    case Arch::kSm100a: return plan_sm100(props, shape, config, plan_request_for_testing());
  }
  return error(GGEMM_STATUS_INTERNAL_ERROR, "no planner for architecture %d", int(arch));
}

}  // namespace ggemm
