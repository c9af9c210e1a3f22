// sm_90a plans. Five kernel families are candidates for every call, in this
// order of preference; the first whose filters pass takes it:
//   1. short-K (no pipeline; K <= 128): latency-bound calls whose tiles fit
//      one wave of its CTAs (the decode LoRA expand);
//   2. split short-K (K over a cluster of kShortKSplit CTAs; 128 < K <= 4096):
//      decode calls of few tiles (the decode LoRA shrink);
//   3. the decode GEMV (ptx/sm90/decode_gemv.cuh; plan_common.cpp,
//      decode_gemv_filter): groups of at most kDecodeGemvMaxRows rows (MoE
//      decode), no output splits or planes;
//   4. the token-major ping-pong kernel (ptx/sm90/token_major_gemm.cuh):
//      prefill calls (groups of kTokenMajorMinRows rows or more) with
//      K-major weights, 16-bit outputs of one segment and the store,
//      row-scale or SwiGLU epilogue, no gather, no planes, no config;
//   5. the persistent warp-specialised kernel: everything else, its token
//      tile from the shared rules (plan_common.cpp), then its pipeline sized
//      to the shared memory.
#include <algorithm>

#include "ptx/blocks/grouped_params.h"
#include "ptx/sm90/short_k_layout.h"
#include "ptx/sm90/smem_layout.h"
#include "ptx/sm90/token_major_layout.h"
#include "runtime/plan_rules.h"

namespace ggemm {
namespace {

using Sm90ShortK = PlanRequest::Sm90ShortK;

// ---- the short-K families --------------------------------------------------

// Their token tile: the smallest from kShortKMinTileM (doubling) holding the
// typical group of `rows`, at most `max_tile_m`: an 8-row decode group fills
// an 8-token tile.
uint32_t short_k_tile_m(int64_t rows, uint32_t max_tile_m) {
  uint32_t tile_m = sm90::kShortKMinTileM;
  while (tile_m < max_tile_m && rows > int64_t(tile_m)) tile_m *= 2;
  return tile_m;
}

// The call's tiles as the short-K rules count them: every group the typical
// one of `rows`.
int64_t typical_tiles(const GroupedShape &shape, int64_t rows, uint32_t tile_m) {
  return shape.num_groups * ((rows + tile_m - 1) / tile_m) * column_blocks(shape);
}

// The CTAs every SM holds at once, over all SMs.
int64_t short_k_wave(const DeviceProps &props, const GroupedShape &shape, uint32_t tile_m, uint32_t splits) {
  return int64_t(sm90_short_k_ctas_per_sm(props, tile_m, shape.k, shape.c_dtype, splits)) * props.sm_count;
}

// The short-K kernels load whole rows of A by pointer and store, scale or
// accumulate: no gather, no SwiGLU.
bool short_k_epilogue(const GroupedShape &shape) { return !shape.gather && shape.epilogue != GGEMM_EPILOGUE_SWIGLU; }

// The short-K kernel's tile for this call, or 0 when it does not take it.
uint32_t short_k_filter(const DeviceProps &props, const GroupedShape &shape, const ggemm_config *config,
                        Sm90ShortK request) {
  if (request == Sm90ShortK::kNever || !short_k_epilogue(shape)) return 0;
  if (config) return 0;                                   // a config describes the persistent kernel
  if (!shape.transpose_b) return 0;                       // K-major weights only
  if (shape.k > int64_t(sm90::kShortKMaxK)) return 0;     // the whole K in one pass
  const int64_t rows = typical_rows(shape, max_rows_bound(shape));
  const uint32_t tile_m = short_k_tile_m(rows, sm90::kShortKMaxTileM);
  if (request == Sm90ShortK::kWherePossible) return tile_m;
  // One wave: the typical groups' tiles, one per CTA, on the CTAs every SM
  // holds at once. Past that a CTA runs its tiles one after another with
  // nothing overlapping them (2x slower than the persistent kernel at M 4096).
  if (typical_tiles(shape, rows, tile_m) > short_k_wave(props, shape, tile_m, 1)) return 0;
  return tile_m;
}

// The split short-K kernel's tile for this call, or 0.
uint32_t short_k_split_filter(const DeviceProps &props, const GroupedShape &shape, const ggemm_config *config,
                              Sm90ShortK request) {
  if (request == Sm90ShortK::kNever || !short_k_epilogue(shape)) return 0;
  if (config || !shape.transpose_b) return 0;  // as the short-K kernel
  if (shape.k <= int64_t(sm90::kShortKMaxK) || shape.k > int64_t(sm90::kShortKSplitMaxK)) return 0;
  if (props.sm_count < int(sm90::kShortKSplit)) return 0;  // a cluster needs that many SMs
  const int64_t rows = typical_rows(shape, max_rows_bound(shape));
  const uint32_t tile_m = short_k_tile_m(rows, sm90::kShortKSplitMaxTileM);  // 8 or 16
  if (request == Sm90ShortK::kWherePossible) return tile_m;
  // Decode groups, and few tiles: the persistent kernel runs them on a few
  // SMs, each streaming its tile's whole K (the decode LoRA shrink: 8 tiles
  // of K 4096, 8 SMs). Split, each tile's K spreads over a cluster, one
  // slice a CTA, and every cluster runs at once.
  if (rows > int64_t(sm90::kShortKSplitMaxTileM)) return 0;
  const int64_t tiles = typical_tiles(shape, rows, tile_m);
  if (tiles * sm90::kShortKSplit > short_k_wave(props, shape, tile_m, sm90::kShortKSplit)) return 0;
  if (4 * tiles > props.sm_count) return 0;  // many tiles: the persistent kernel fills the SMs anyway
  return tile_m;
}

StatusOr<KernelPlan> plan_short_k(const DeviceProps &props, const GroupedShape &shape, KernelFamily family,
                                  uint32_t tile_m) {
  const uint32_t splits = family == KernelFamily::kShortKSplit ? sm90::kShortKSplit : 1;
  KernelPlan p;
  p.kernel = find_kernel(Arch::kSm90a, family, shape.a_dtype, shape.c_dtype, true, tile_m, splits);
  if (!p.kernel)
    return error(GGEMM_STATUS_INTERNAL_ERROR, "no sm_90a short-K kernel with tile_m %u and %u CTAs a tile", tile_m,
                 splits);
  p.tile_m = tile_m;
  p.tile_n = sm90::kTileN;
  p.threads = sm90::kShortKThreads;
  p.smem_bytes = sm90::make_short_k_layout(tile_m, uint32_t(shape.k), dtype_bytes(shape.c_dtype), splits).total_bytes();
  p.cluster_size = splits;
  p.ctas_per_sm = sm90_short_k_ctas_per_sm(props, tile_m, shape.k, shape.c_dtype, splits);
  p.max_clusters = max_clusters(p, shape, props);
  return p;
}

// ---- the token-major family -------------------------------------------------

using TokenMajor = PlanRequest::TokenMajor;

// Typical rows a group from which the token-major kernel takes a call. On
// the H200 (2026-12-03, its probe against the persistent kernel's plans,
// same process, sustained): Qwen3-30B-A3B gate_up at 64 rows an expert
// 0.99x, at 128 1.03x, 256 1.01-1.11x, 512 1.04-1.13x (balanced / random
// counts); DeepSeek-V3 EP8 and Mixtral shapes 0.97-1.02x balanced,
// 1.02-1.17x with random counts (docs/performance.md, "The token-major
// ping-pong kernel").
constexpr int64_t kTokenMajorMinRows = 128;

// Whether the token-major kernel runs the call (what it can run; with the
// automatic request, also whether it should).
bool token_major_filter(const DeviceProps &props, const GroupedShape &shape, const ggemm_config *config,
                        TokenMajor request) {
  if (request == TokenMajor::kNever || config) return false;  // a config describes the persistent kernel
  if (!shape.transpose_b || shape.gather || shape.a_planes || shape.split0 != 0 || shape.split1 != 0) return false;
  const bool swiglu = shape.epilogue == GGEMM_EPILOGUE_SWIGLU;
  if (shape.epilogue != GGEMM_EPILOGUE_STORE && shape.epilogue != GGEMM_EPILOGUE_ROW_SCALE && !swiglu) return false;
  if (dtype_bytes(shape.c_dtype) != 2) return false;
  // Its static shared memory beside the dynamic: 448 bytes (the tile
  // handoff and the stages' barriers; the driver's count on the H200), under
  // the 1024 allowed here. cuobjdump's SHARED column adds the 1 KB a block
  // the system reserves, which the opt-in limit already leaves out.
  if (uint32_t(props.smem_optin) < sm90::TokenMajorShape::smem_bytes(swiglu) + 1024) return false;
  if (request == TokenMajor::kWherePossible) return true;
  // A tile computes 192 features (SwiGLU: weight rows) whatever N is:
  // narrower calls stay on the persistent kernel's 128 (or 64) (measured
  // only at N >= 768).
  if (shape.n < int64_t(sm90::TokenMajorShape::kTileFeatures)) return false;
  return typical_rows(shape, max_rows_bound(shape)) >= kTokenMajorMinRows;
}

StatusOr<KernelPlan> plan_token_major(const DeviceProps &props, const GroupedShape &shape) {
  using S = sm90::TokenMajorShape;
  const bool swiglu = shape.epilogue == GGEMM_EPILOGUE_SWIGLU;
  KernelPlan p;
  p.kernel = find_kernel(Arch::kSm90a, swiglu ? KernelFamily::kTokenMajorSwiglu : KernelFamily::kTokenMajor,
                         shape.a_dtype, shape.c_dtype, true, S::kTileTokens, 1);
  if (!p.kernel)
    return error(GGEMM_STATUS_INTERNAL_ERROR, "no sm_90a token-major%s kernel for %s -> %s", swiglu ? " SwiGLU" : "",
                 dtype_name(shape.a_dtype), dtype_name(shape.c_dtype));
  p.tile_m = S::kTileTokens;
  p.tile_n = S::kTileFeatures;
  p.swizzle_bytes = 128;
  p.stages = S::kStages;
  p.staging_buffers = 1;
  p.k_slices = 1;
  p.weights_box_rows = weights_box_rows(shape, 1, S::kTileFeatures);
  p.narrow_token_boxes = false;
  p.threads = S::kThreads;
  p.smem_bytes = S::smem_bytes(swiglu);
  p.out_box_tokens = S::kTileTokens;
  // SwiGLU stores its 96 output features as three 32-feature chunks.
  p.out_box_bytes = swiglu ? S::kSwigluChunkFeatures * 2 : 128;
  p.max_clusters = max_clusters(p, shape, props);
  return p;
}

// ---- the persistent kernel's pipeline ---------------------------------------

// The TMA bytes a K-sliced stage should load at least: one SM's TMA path
// completes about one stage per 270 ns whatever its bytes up to ~24 KB
// (bench/dev/tma_probe.cu), so 20 KB a stage is ~75 GB/s per SM, past
// DRAM's share with 132 SMs busy.
constexpr uint32_t kMinStageBytes = 20 * 1024;

// With K short enough to fit the ring whole (LoRA expand, K = rank), a ring
// deeper than a few tiles' stages only delays the start: each stage is two
// barrier inits at kernel entry. The producer runs ahead by whole tiles, so
// a ring of kShortKStageCap stages (or two tiles' stages) still covers a
// load's trip.
constexpr uint32_t kShortKStageCap = 8;
constexpr uint32_t short_k_stage_cap(int64_t k_iters) {
  return k_iters * 2 > int64_t(kShortKStageCap) ? uint32_t(k_iters * 2) : kShortKStageCap;
}

// Stages that fit beside `staging` epilogue buffers.
uint32_t stages_that_fit(const KernelPlan &p, const GroupedShape &shape, const DeviceProps &props, uint32_t staging,
                         uint32_t k_slices) {
  return sm90::max_stages(p.tile_m, p.swizzle_bytes, dtype_bytes(shape.c_dtype), uint32_t(props.smem_optin), staging,
                          k_slices, p.weights_box_rows, p.consumer_warpgroups);
}

// K-sliced stages: several 64-wide slices of K per stage, one TMA box per
// operand, where K-major weights, no cluster and K a multiple of 64 allow
// the sliced views and the stage count is automatic. A stage of a few KB
// starves the SM (kMinStageBytes), so take the fewest slices (1, 2 or 4)
// that load at least kMinStageBytes per stage, where 3 such stages fit and K
// covers two. A test request forces the count where 2 stages fit.
uint32_t choose_k_slices(const KernelPlan &p, const GroupedShape &shape, const DeviceProps &props,
                         uint32_t requested_stages, uint32_t request) {
  if (!props.sliced_tensor_maps) return 1;  // this driver cannot encode the sliced views
  if (!shape.transpose_b || p.cluster_size != 1 || p.swizzle_bytes != 128 || shape.k % 64 != 0 ||
      requested_stages != 0)
    return 1;
  // Gathered rows come one per box, and SwiGLU's interleaved weights take a
  // 5-D view with no dimension left for the slices.
  if (shape.gather || shape.epilogue == GGEMM_EPILOGUE_SWIGLU) return 1;
  if (request != 0) return request > 1 && stages_that_fit(p, shape, props, 1, request) >= 2 ? request : 1;
  const uint32_t slice_bytes = (p.weights_box_rows + p.tile_m) * 128;
  uint32_t chosen = 1;
  for (uint32_t slices = 1; slices <= 4; slices *= 2) {
    if (slices > 1 && (shape.k < int64_t(64 * slices * 2) || stages_that_fit(p, shape, props, 1, slices) < 3)) break;
    chosen = slices;
    if (slices * slice_bytes >= kMinStageBytes) break;
  }
  return chosen;
}

// The accumulate epilogue reads the old C through a ring of staging slots
// that the producer fills ahead of the epilogues (ptx/sm90/producer.cuh; 2
// at least): the most slots, up to 4, beside which the whole reduction still
// fits in the pipeline (short K: the LoRA expand, whose time is the reads of
// C in flight), with the short-K stage cap; else 2 slots and every stage
// that fits.
Status size_accumulate_ring(const DeviceProps &props, const GroupedShape &shape, int64_t k_iters,
                            KernelPlan *p) {
  for (uint32_t slots = sm90::kMaxStagingBuffers; slots > 2; --slots) {
    const uint32_t f = stages_that_fit(*p, shape, props, slots, p->k_slices);
    if (f >= 2 && k_iters <= int64_t(f) && (p->stages == 0 || p->stages <= f)) {
      p->staging_buffers = slots;
      if (p->stages == 0) p->stages = std::min(f, short_k_stage_cap(k_iters));
      return OkStatus();
    }
  }
  const uint32_t f2 = stages_that_fit(*p, shape, props, 2, p->k_slices);
  if (f2 < 2)
    return error(GGEMM_STATUS_INVALID_CONFIG,
                 "tile_m %u with %u-byte swizzle and %s output leaves room for %u pipeline stage(s) beside the "
                 "accumulate epilogue's two staging slots in %d bytes of shared memory; at least 2 are needed",
                 p->tile_m, p->swizzle_bytes, dtype_name(shape.c_dtype), f2, props.smem_optin);
  p->staging_buffers = 2;
  if (p->stages == 0) p->stages = f2;
  if (p->stages > f2 || p->stages < 2) return refuse_stages(p->stages, f2, props);
  return OkStatus();
}

// Stages and epilogue buffers. Two buffers when the whole reduction still
// fits in the pipeline with them (short K: LoRA, small hidden sizes): such
// calls are bound by their output stores, and the second buffer overlaps
// staging the next chunk with the TMA store of the last. With a long K the
// memory is worth more as pipeline stages.
Status size_pipeline(const DeviceProps &props, const GroupedShape &shape, const TileChoice &tile,
                     KernelPlan *p) {
  const uint32_t fit = stages_that_fit(*p, shape, props, 1, p->k_slices);
  if (fit < 2) return refuse_fit(tile, shape, props, fit);
  const int64_t k_iters = sm90::k_stages(uint32_t(shape.k), p->swizzle_bytes / 2, p->k_slices);
  const uint32_t fit2 = stages_that_fit(*p, shape, props, 2, p->k_slices);
  p->stages = tile.stages;  // 0 (automatic) or at least 2 (validate_config)
  if (shape.epilogue == GGEMM_EPILOGUE_ACCUMULATE) return size_accumulate_ring(props, shape, k_iters, p);
  if (fit2 >= 2 && k_iters <= int64_t(fit2) && (p->stages == 0 || p->stages <= fit2)) {
    p->staging_buffers = 2;
    if (p->stages == 0) p->stages = std::min(fit2, short_k_stage_cap(k_iters));
  } else if (p->stages == 0) {
    p->stages = fit;
  } else if (p->stages > fit || p->stages < 2) {
    return refuse_stages(p->stages, fit, props);
  }
  return OkStatus();
}

StatusOr<KernelPlan> plan_persistent(const DeviceProps &props, const GroupedShape &shape,
                                     const ggemm_config *config, uint32_t k_slices_request) {
  TileChoice tile = choose_tile(Arch::kSm90a, props, shape, config);
  // SwiGLU at tile_m 256 has kernels of its own (the _swiglu family); gather
  // and SwiGLU otherwise exist up to tile_m 128 (sm90::kMaxGatherSwigluTileM).
  const KernelEntry *swiglu_only_kernel =
      shape.epilogue == GGEMM_EPILOGUE_SWIGLU && !shape.gather && tile.cluster_m == 1 &&
              tile.tile_m > sm90::kMaxGatherSwigluTileM
          ? find_kernel(Arch::kSm90a, KernelFamily::kPersistentSwiglu, shape.a_dtype, shape.c_dtype, true,
                        tile.tile_m, 1)
          : nullptr;
  if ((shape.gather || shape.epilogue == GGEMM_EPILOGUE_SWIGLU) && tile.tile_m > sm90::kMaxGatherSwigluTileM &&
      !swiglu_only_kernel) {
    if (config && config->tile_m != 0)
      return error(GGEMM_STATUS_INVALID_CONFIG, "config->tile_m = %d: with %s the largest sm_90a tile_m is %u",
                   config->tile_m, shape.gather ? "gather on load (a_row_index)" : "the SwiGLU epilogue",
                   sm90::kMaxGatherSwigluTileM);
    tile.tile_m = sm90::kMaxGatherSwigluTileM;
  }
  // Pairs sharing the token tile by multicast exist for the prefill tiles
  // (ptx/sm90/kernel_table.h); automatic plans use none.
  if (tile.cluster_m == 2 && !persistent_tile_exists(Arch::kSm90a, shape.c_dtype, tile.tile_m, 2))
    return error(GGEMM_STATUS_INVALID_CONFIG,
                 "config->cluster_m = 2: on sm_90a a pair shares a token tile of %u or more rows; this call's "
                 "tile_m is %u (set tile_m = 128 or 256)",
                 min_cluster_tile_m(Arch::kSm90a, 2), tile.tile_m);
  const bool swiglu = shape.epilogue == GGEMM_EPILOGUE_SWIGLU;
  if (tile.cluster_m == 2 && (shape.gather || swiglu))
    return error(GGEMM_STATUS_INVALID_CONFIG, "config->cluster_m = 2: %s runs without clusters on sm_90a",
                 shape.gather ? "gather on load (a_row_index)" : "the SwiGLU epilogue");
  KernelPlan p;
  GGEMM_ASSIGN_OR_RETURN(p, persistent_plan_of_tile(Arch::kSm90a, shape, tile));
  if (swiglu_only_kernel) p.kernel = swiglu_only_kernel;
  // (SwiGLU's weight box is whole octet pairs, wide or narrow: plan_common.cpp,
  // weights_box_rows.)
  static_assert(sm90::kTileN / sm90::kConsumerWarpgroups == kNarrowTileN, "a narrow tile is one warpgroup's rows");
  if (narrow_tiles(props, shape, config, p)) {
    p.consumer_warpgroups = 1;
    narrow_plan(&p, shape);
  }
  p.k_slices = choose_k_slices(p, shape, props, tile.stages, k_slices_request);
  GGEMM_RETURN_IF_ERROR(size_pipeline(props, shape, tile, &p));
  // Without a cluster, one K slice a stage: token boxes of each MMA width
  // below tile_m, so a group's last, partial row block loads only the rows
  // its MMA reads (GroupedGemmParams::tmap_tokens_narrow).
  // (A gather loads exactly the group's rows, one box each.)
  p.narrow_token_boxes = p.cluster_size == 1 && p.k_slices == 1 && !shape.gather;
  p.threads = sm90::kThreads;
  p.smem_bytes = sm90::make_smem_layout(p.tile_m, p.swizzle_bytes, dtype_bytes(shape.c_dtype), p.stages,
                                        p.staging_buffers, p.k_slices, p.weights_box_rows, p.consumer_warpgroups)
                     .total_bytes();
  p.out_box_tokens = sm90::sm90_epilogue_stage_tokens(p.tile_m);
  p.max_clusters = max_clusters(p, shape, props);
  return p;
}

}  // namespace

StatusOr<KernelPlan> plan_sm90(const DeviceProps &props, const GroupedShape &shape, const ggemm_config *config,
                               const PlanRequest &request) {
  const uint32_t gemv_tile_m = decode_gemv_filter(props, shape, config, request.decode_gemv);
  // A forced GEMV (the forced-plan GPU suite's --decode_gemv=where_possible)
  // comes first, so it takes every call it can run, the short-K kernels' too.
  const bool gemv_forced = request.decode_gemv == PlanRequest::DecodeGemv::kWherePossible;
  if (gemv_tile_m && gemv_forced) return plan_decode_gemv(Arch::kSm90a, props, shape, gemv_tile_m);
  if (const uint32_t tile_m = short_k_filter(props, shape, config, request.sm90_short_k))
    return plan_short_k(props, shape, KernelFamily::kShortK, tile_m);
  if (const uint32_t tile_m = short_k_split_filter(props, shape, config, request.sm90_short_k))
    return plan_short_k(props, shape, KernelFamily::kShortKSplit, tile_m);
  if (gemv_tile_m) return plan_decode_gemv(Arch::kSm90a, props, shape, gemv_tile_m);
  if (token_major_filter(props, shape, config, request.sm90_token_major)) return plan_token_major(props, shape);
  return plan_persistent(props, shape, config, request.sm90_k_slices);
}

uint32_t sm90_short_k_ctas_per_sm(const DeviceProps &props, uint32_t tile_m, int64_t k, ggemm_dtype c_dtype,
                                  uint32_t splits) {
  const uint32_t smem = sm90::make_short_k_layout(tile_m, uint32_t(k), dtype_bytes(c_dtype), splits).total_bytes();
  const uint32_t by_smem = uint32_t(props.smem_optin) / (smem + 1024);
  return std::max<uint32_t>(1, std::min(sm90::kShortKMinBlocksPerSm, by_smem));
}

}  // namespace ggemm
