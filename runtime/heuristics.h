// Config choice for the grouped GEMM, one function per architecture (sm_90a,
// sm_100a): candidates filtered by commented rules, and the validation of a
// caller's override. Both share the automatic tile and swizzle rules and the
// override checks; they differ in which tiles exist and how stages fit.
#pragma once
#include <cstdint>
#include <string>

#include "ggemm.h"
#include "runtime/device.h"

namespace ggemm {

struct GroupedShape {
  ggemm_dtype a_dtype, c_dtype;
  int64_t m, n, k;
  bool transpose_b;
  int64_t num_groups;
  int64_t max_rows_per_group;  // 0 = unknown (M)
  ggemm_epilogue epilogue = GGEMM_EPILOGUE_STORE;
  int64_t col_blocks = 0;  // 128-wide column tiles per row block; 0 = ceil(n / 128)
  uint32_t k_slices_request = 0;  // sm_90a K-sliced stages: 0 = automatic, 1, 2 or 4 (GGEMM_K_SLICES, experiments)
  // sm_90a short-K kernel: 0 = automatic, -1 = never, 1 = wherever it can run
  // (GGEMM_SM90_SHORT_K=0 / 1, experiments and tests of both kernels).
  int short_k_request = 0;
};

// Weight rows per tile on both architectures (the sm_90a tile of two m64
// warpgroups, the sm_100a tcgen05.mma M); GroupedShape::col_blocks counts these.
constexpr uint32_t kGroupedTileN = 128;

// An upper bound on a launch's row blocks of tile_m tokens, from the host's
// bound on rows per group (0 = M): what the grid is sized by (the device-side
// counts decide the actual work; an underestimate only costs parallelism).
int64_t row_block_bound(const GroupedShape &shape, uint32_t tile_m);

struct Sm90Config {
  uint32_t tile_m = 0;         // tokens per tile (wgmma N)
  uint32_t tile_n = 128;       // features per tile (two m64 warpgroups)
  uint32_t swizzle_bytes = 0;  // 128, 64, 32; tile_k = swizzle_bytes / 2
  uint32_t stages = 0;
  uint32_t staging_buffers = 1;  // epilogue buffers per consumer warpgroup
  uint32_t cluster_m = 1;        // 2: two CTAs share the token tile by TMA multicast (tile_m 128, 256)
  uint32_t weights_box_rows = 128;  // K-major weight rows per TMA box (kmajor_box_rows)
  uint32_t k_slices = 1;            // slices of K per stage, one box per operand (GroupedGemmParams::k_slices)
  uint32_t consumer_warpgroups = 2;  // 1 when N <= 64 (GroupedGemmParams::consumer_warpgroups)
};

// Picks (or validates, when `override` is non-NULL) the config for a call.
// Refuses configs no kernel can run with INVALID_CONFIG naming the field.
ggemm_status choose_sm90_config(const DeviceProps &props, const GroupedShape &shape,
                                const ggemm_config *override, Sm90Config *out);

// The kernel's entry-point name for a config (ptx/sm90/kernel_table.h;
// "_cl2" appended for cluster_m 2).
std::string sm90_kernel_name(ggemm_dtype a, ggemm_dtype c, bool transpose_b, uint32_t tile_m,
                             uint32_t cluster_m = 1);

// sm_90a's short-K kernel (ptx/sm90/short_k_gemm.cuh): the token tile it
// runs with, or 0 when the persistent kernel takes the call. Where it can
// run: K-major weights, K <= 128, no config override (a config describes
// the persistent kernel). Automatic: when the typical groups' tiles (the
// average group, no larger than the caller's bound) fit in one wave of its
// CTAs (sm90_short_k_ctas_per_sm on every SM), i.e. the call is latency,
// not bandwidth (the decode LoRA expand).
uint32_t choose_sm90_short_k(const DeviceProps &props, const GroupedShape &shape, const ggemm_config *override);

// sm_90a's split short-K kernel (the same file, a cluster of kShortKSplit
// CTAs a tile, each one slice of K): the token tile it runs with, or 0.
// Where it can run: K-major weights, 128 < K <= kShortKSplitMaxK (4096), no
// config override, an SM count of at least a cluster. Automatic: decode
// groups (the typical one at most 16 rows) whose tiles are few (at most a
// quarter of the SM count: the persistent kernel would stream each tile's
// whole K on one SM) and, as clusters, fit one wave (the decode LoRA
// shrink). Asked by GGEMM_SM90_SHORT_K=1 (short_k_request 1): every call it
// can run, with tiles of 16 past 8-row groups. Checked after
// choose_sm90_short_k, which takes K <= 128.
uint32_t choose_sm90_short_k_split(const DeviceProps &props, const GroupedShape &shape, const ggemm_config *override);

// CTAs of the short-K kernel one SM holds at once: as many as its launch
// bounds promise registers for (kShortKMinBlocksPerSm), where shared memory
// (less ~1 KB the SM reserves per CTA) holds them too. The rule's wave and
// the launch's grid both count these. `splits`: 1, or kShortKSplit for the
// split kernel (its shared memory holds one slice of K and the partial).
uint32_t sm90_short_k_ctas_per_sm(const DeviceProps &props, uint32_t tile_m, int64_t k, ggemm_dtype c_dtype,
                                  uint32_t splits = 1);

// The short-K kernel's entry-point name (ptx/sm90/kernel_table.h); the split
// kernels' end in _split8.
std::string sm90_short_k_kernel_name(ggemm_dtype a, ggemm_dtype c, uint32_t tile_m, uint32_t splits = 1);

struct Sm100Config {
  uint32_t tile_m = 0;         // tokens per tile (tcgen05.mma N)
  uint32_t tile_n = 128;       // features per tile (tcgen05.mma M): 128 x cta_group
  uint32_t swizzle_bytes = 0;  // 128, 64, 32; tile_k = swizzle_bytes / 2
  uint32_t stages = 0;
  uint32_t cta_group = 1;      // 2: a cluster of two CTAs shares each MMA (config override only)
};

// The same for sm_100a: every tile_m for every output dtype and epilogue;
// cta_group 2 when the config asks for it (tile_m 32 or more); the automatic
// choice is cta_group 1 until a Blackwell GPU can measure the difference.
ggemm_status choose_sm100_config(const DeviceProps &props, const GroupedShape &shape,
                                 const ggemm_config *override, Sm100Config *out);

// The kernel's entry-point name for a config (ptx/sm100/kernel_table.h;
// "_cta2" appended for cta_group 2).
std::string sm100_kernel_name(ggemm_dtype a, ggemm_dtype c, bool transpose_b, uint32_t tile_m,
                              uint32_t cta_group = 1);

uint32_t dtype_bytes(ggemm_dtype t);
const char *dtype_name(ggemm_dtype t);

}  // namespace ggemm
