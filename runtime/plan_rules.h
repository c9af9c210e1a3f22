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

// K-major weight rows a stage's TMA box loads for tiles of tile_n rows:
// kmajor_box_rows, except that SwiGLU loads whole octet pairs of its 5-D
// view (kSwigluOctet: tile_n interleaved rows, zeros past I) however narrow
// N is: 128 rows on a wide persistent tile, 64 (4 octet pairs) on a narrow
// one, 192 (12) on the token-major kernel's.
uint32_t weights_box_rows(const GroupedShape &shape, uint32_t cluster_size, uint32_t tile_n);

// What both architectures take from the caller's config (already validated)
// or the automatic rules: the token tile, the swizzle, the stages asked for
// (0 = as many as fit), and the cluster.
struct TileChoice {
  uint32_t tile_m = 0, swizzle_bytes = 0, stages = 0;
  uint32_t cta_group = 1;  // sm_100a
  uint32_t cluster_m = 1;  // sm_90a: 2 = a pair sharing its token tile
};
TileChoice choose_tile(Arch arch, const DeviceProps &props, const GroupedShape &shape, const ggemm_config *config);

// The decode GEMV (ptx/sm90/decode_gemv.cuh, plain CUDA built for both
// architectures): its tile for this call (1, 2 or 4 rows), or 0 when it
// does not take the call; then its plan. It takes a call only where its
// tiles fill at least this fraction of their waves of CTAs (plan_common.cpp).
constexpr double kDecodeGemvMinWaveFill = 0.85;
// And only calls of at most this many rows in all (plan_common.cpp says why).
constexpr int64_t kDecodeGemvMaxCallRows = 64;
// The GEMV's CTAs an SM for this call: of the counts its tile's registers
// allow (three, and four for tiles of 1 row), the one whose waves its tiles
// fill best (the first, the most CTAs, on a tie); and that fill.
struct DecodeGemvWaves {
  uint32_t ctas_per_sm;
  double fill;
};
DecodeGemvWaves decode_gemv_waves(const DeviceProps &props, const GroupedShape &shape, uint32_t tile_m);
uint32_t decode_gemv_filter(const DeviceProps &props, const GroupedShape &shape, const ggemm_config *config,
                            PlanRequest::DecodeGemv request);
StatusOr<KernelPlan> plan_decode_gemv(Arch arch, const DeviceProps &props, const GroupedShape &shape,
                                      uint32_t tile_m);

// A persistent kernel's plan as far as the tile decides it: the kernel of
// the table, tile_m, the 128 weight rows per CTA, swizzle, cluster and the
// K-major box rows; INTERNAL_ERROR when the table has no such kernel (the
// config checks and the rules should make that impossible).
StatusOr<KernelPlan> persistent_plan_of_tile(Arch arch, const GroupedShape &shape, const TileChoice &tile);

// A pipeline needs a stage to fill while another is consumed.
Status refuse_fit(const TileChoice &c, const GroupedShape &shape, const DeviceProps &props, uint32_t fit);
Status refuse_stages(uint32_t stages, uint32_t fit, const DeviceProps &props);

// Tiles of kNarrowTileN features, each CTA streaming half as many weight
// rows, on both architectures (K-major weights, no cluster or pair), where
//  - N <= 64: the other half of a wide tile would lie past N;
//  - or tiles of 128 features would leave half the SMs idle (decode with few
//    groups: Mixtral's down projection at one token is 2 groups x 32 column
//    blocks, 64 tiles on 132 SMs, each streaming 3.7 MB of weights). Half as
//    wide, twice the tiles stream the same weights on twice the SMs; the
//    token tile is re-read per column block, a few KB at these sizes;
//  - or, for decode (tile_m <= kNarrowMaxTileM: at most 64 rows a tile, a
//    quarter of the H200's FLOPs-per-byte ridge, so weight-read-bound; and M
//    <= the groups, as torch's offs list every expert at decode, so the
//    count of row blocks is at most M and that bound is near the count),
//    wide tiles would not fill one wave (Qwen3-30B's gate_up at one token:
//    96 on 132 SMs; narrow, every SM starts streaming; not with gather on
//    load, whose one-row boxes cost per stage, so a narrow stage pays them
//    for half the weight bytes), or their last wave would run on at most
//    half the SMs (Qwen3-235B's gate_up at one token: 192 tiles on 132 SMs,
//    60 of them streaming two tiles' 2 MB while 72 idle; narrow, the most
//    any SM streams is 1.5 MB). Narrow tiles never leave an SM more bytes
//    than wide ones: ceil(2W/S) <= 2 ceil(W/S) for W wide tiles on S SMs,
//    strictly less exactly when the last wave fills at most half.
//    Counted by row_block_limit, which no routing exceeds (the caller's
//    rows-per-group bound may be wrong): a narrow tile's group never has
//    2^32 tiles (ptx/blocks/tile_scheduler.h, kMaxOutputElements). Not under
//    a config, which describes the wide kernel its fields name.
// SwiGLU's narrow tile is 4 of its 8 octet pairs (32 features; the 5-D
// weight box has weights_box_rows / 16 octets), not at tile_m above
// sm90::kMaxGatherSwigluTileM (sm_90a's SwiGLU-only tile_m 256 kernels).
// sm_90a multiplies a narrow tile with one consumer warpgroup; sm_100a's
// tcgen05.mma keeps M 128, the rows past the 64-row box never stored
// (ptx/sm100/grouped_gemm.cuh; its SwiGLU epilogue's warps 2 and 3 hold
// features 32..63, past a narrow tile's columns: swiglu_lanes.h).
constexpr uint32_t kNarrowMaxTileM = 64;
bool narrow_tiles(const DeviceProps &props, const GroupedShape &shape, const ggemm_config *config,
                  const KernelPlan &p);
// A plan's tile and weight box made narrow.
void narrow_plan(KernelPlan *p, const GroupedShape &shape);

// Whether the persistent kernels' tile walker crosses groups with its 32
// lanes together (GroupedTileScheduler::next_warp, 32 groups' ends a step)
// rather than with one thread (next, kWalkBatch a step): where a CTA's step
// from one tile to its next, `grid` tiles on, crosses more groups than one
// thread's batch, by the host's bounds (the tiles a listed group has on
// average). The lanes' scans and shuffles cost more than the thread's chain
// where a step crosses a group or two (LoRA expand, 8 adapters of ~100
// tiles: M 1024 10.7 -> 10.4 us cold with one thread, H200), and save whole
// dependent loads where it crosses many (decode listing every expert,
// torch's offs: Qwen3-30B down at one token 14.9 -> 9.4 us with the lanes).
bool walk_by_lanes(const KernelPlan &plan, const GroupedShape &shape, int64_t grid);

// The persistent grid's clusters: one CTA (or cluster) per SM (ctas_per_sm
// for the short-K kernels), fewer when the host's bound on the tiles is
// smaller. Clusters of two walk pair tiles of 256 weight rows, so the bound
// counts those.
int64_t max_clusters(const KernelPlan &plan, const GroupedShape &shape, const DeviceProps &props);

}  // namespace ggemm
