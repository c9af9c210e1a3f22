// One call's plan: which kernel runs it and how (tile, pipeline, shared
// memory, launch geometry), made by one function per architecture as
// candidates -> filters -> choice (runtime/plan_sm90.cpp,
// runtime/plan_sm100.cpp; the rules both share in runtime/plan_common.cpp).
// The launch (runtime/launch_grouped.cpp) turns a plan into the kernel's
// parameters and enqueues it.
#pragma once
#include <cstdint>

#include "ggemm.h"
#include "runtime/device.h"
#include "runtime/kernel_registry.h"
#include "runtime/status.h"

namespace ggemm {

// What planning needs of a call: its numbers, no pointers.
struct GroupedShape {
  ggemm_dtype a_dtype, c_dtype;
  int64_t m, n, k;
  bool transpose_b;  // weights [E, N, K] (K-major); else [E, K, N]
  int64_t num_groups;
  int64_t max_rows_per_group;  // the caller's bound; 0 = unknown (M)
  ggemm_epilogue epilogue = GGEMM_EPILOGUE_STORE;
  int64_t split0 = 0, split1 = 0;  // output segments; (0, 0) = one
  bool a_planes = false;           // segment s reads activation rows m + s * M
  bool gather = false;             // row m reads activation row a_row_index[m] (one-row token loads)
};

// Tiles may cross the splits when the segments only route outputs (no
// activation planes: LoRA shrink), so the shared activations are read once
// per tile instead of once per segment. Not with accumulate: its TMA load of
// the old outputs takes one segment's view per tile.
bool spans_segments(const GroupedShape &s);

// Weight rows per tile on both architectures (the sm_90a tile of two m64
// warpgroups, the sm_100a tcgen05.mma M), and of a narrow tile for decode
// (plan_rules.h, narrow_tiles).
constexpr uint32_t kGroupedTileN = 128;
constexpr uint32_t kNarrowTileN = 64;

// Column blocks of tile_n features per row block, as the tile scheduler
// (ptx/blocks/tile_scheduler.h) counts them for this call.
int64_t column_blocks(const GroupedShape &s, uint32_t tile_n = kGroupedTileN);

// The most elements one call's output may have: the kernels' tile walk
// counts a group's tiles in 32 bits (ptx/blocks/tile_scheduler.h).
uint64_t max_output_elements();

// An upper bound on a launch's row blocks of tile_m tokens, from the host's
// bound on rows per group (0 = M): what the grid is sized by (the device-side
// counts decide the actual work; an underestimate only costs parallelism).
int64_t row_block_bound(const GroupedShape &s, uint32_t tile_m);

// The most row blocks of tile_m tokens any routing of M rows over the groups
// makes, whatever the device-side offsets and the caller's rows-per-group
// bound say: what a choice that must hold for the actual tiles is made by.
int64_t row_block_limit(const GroupedShape &s, uint32_t tile_m);

// Forces choices the automatic rules would otherwise make, for tests only:
// no environment variable or API of libggemm reaches it. The CPU tests pass
// one to the plan functions; the GPU suite's second and third runs set the
// process-wide one (set_plan_request_for_testing) to test each sm_90a kernel
// family on the calls the rules give the other.
struct PlanRequest {
  enum class Sm90ShortK : uint8_t {
    kAutomatic,
    kNever,          // every call on the persistent kernel
    kWherePossible,  // every call a short-K kernel can run on it
  };
  Sm90ShortK sm90_short_k = Sm90ShortK::kAutomatic;
  enum class DecodeGemv : uint8_t {
    kAutomatic,
    kNever,          // no call on the decode GEMV
    kWherePossible,  // every call it can run (K-major, no output splits or planes, no config)
  };
  DecodeGemv decode_gemv = DecodeGemv::kAutomatic;
  uint32_t sm90_k_slices = 0;  // slices of K per stage: 0 = automatic, 1, 2 or 4 where two stages fit
  enum class TokenMajor : uint8_t {
    kAutomatic,
    kNever,          // no call on the sm_90a token-major kernel
    kWherePossible,  // every call it can run (K-major weights, 16-bit outputs of one segment, store, row
                     // scale or SwiGLU, no gather, no planes, no config)
  };
  TokenMajor sm90_token_major = TokenMajor::kAutomatic;
};
void set_plan_request_for_testing(const PlanRequest &request);
PlanRequest plan_request_for_testing();

// The calls sm_90a's store-only and accumulate-only persistent kernels
// (KernelFamily::kPersistentStore, kPersistentAccumulate: the _store and
// _accumulate twins) serve and the plan gives them: their epilogue, no
// gather (ptx/sm90/kernel_table.h says why).
inline bool store_only_call(const GroupedShape &shape) {
  return shape.epilogue == GGEMM_EPILOGUE_STORE && !shape.gather;
}
inline bool accumulate_only_call(const GroupedShape &shape) {
  return shape.epilogue == GGEMM_EPILOGUE_ACCUMULATE && !shape.gather;
}

struct KernelPlan {
  const KernelEntry *kernel = nullptr;  // the entry point: name, family, tile_m, cluster
  uint32_t tile_m = 0;         // tokens per tile (the MMA's N)
  uint32_t tile_n = 0;         // weight rows per tile, per CTA
  uint32_t swizzle_bytes = 0;  // 128, 64, 32: one K-major shared-memory row; tile_k = swizzle_bytes / 2
  uint32_t stages = 0;         // pipeline depth (persistent kernels)
  uint32_t staging_buffers = 1;  // sm_90a epilogue buffers per consumer warpgroup
  uint32_t k_slices = 1;         // sm_90a: tile_k-wide slices of K per stage
  uint32_t consumer_warpgroups = 2;  // sm_90a: 2, or 1 with tiles of 64 features (plan_rules.h, narrow_tiles)
  uint32_t weights_box_rows = kGroupedTileN;  // K-major weight rows per TMA box
  bool narrow_token_boxes = false;  // sm_90a: token boxes per MMA width below tile_m
  uint32_t cluster_size = 1;  // CTAs per cluster: sm_90a cluster_m, sm_100a cta_group, the short-K split
  uint32_t threads = 0;
  uint32_t smem_bytes = 0;      // dynamic shared memory
  uint32_t out_box_tokens = 0;  // rows of the output views' TMA box
  uint32_t out_box_bytes = 128;  // sm_90a: its row (and swizzle) bytes; 64 for the token-major SwiGLU chunks
  uint32_t ctas_per_sm = 1;     // short-K kernels: CTAs one SM holds at once
  int64_t max_clusters = 0;     // the grid's clusters before the occupancy cap (launch_grouped)

  KernelFamily family() const { return kernel->family; }
  bool persistent() const {
    return kernel->family == KernelFamily::kPersistent || kernel->family == KernelFamily::kPersistentStore ||
           kernel->family == KernelFamily::kPersistentAccumulate || kernel->family == KernelFamily::kPersistentSwiglu;
  }
  bool token_major() const {
    return kernel->family == KernelFamily::kTokenMajor || kernel->family == KernelFamily::kTokenMajorSwiglu;
  }
  // Whether the kernel has the call's epilogue and gather compiled in: the
  // store-only and accumulate-only twins serve store_only_call()s and
  // accumulate_only_call()s alone (a launch refuses the rest), every other
  // kernel whatever its plan rules gave it.
  bool serves(const GroupedShape &shape) const {
    if (kernel->family == KernelFamily::kPersistentStore) return store_only_call(shape);
    if (kernel->family == KernelFamily::kPersistentAccumulate) return accumulate_only_call(shape);
    return true;
  }
  // The kernels fed by TMA through the operand tensor maps and storing
  // through the output views' maps: the persistent ones and the token-major ones.
  bool tma_pipeline() const { return persistent() || token_major(); }
};

// The plans. `config` has passed api/src/validate_config.cpp's checks; a
// config whose pipeline does not fit the device's shared memory is refused
// here (INVALID_CONFIG).
StatusOr<KernelPlan> plan_sm90(const DeviceProps &props, const GroupedShape &shape, const ggemm_config *config,
                               const PlanRequest &request = {});
StatusOr<KernelPlan> plan_sm100(const DeviceProps &props, const GroupedShape &shape,
                                const ggemm_config *config, const PlanRequest &request = {});
// The device's architecture's plan, with the process-wide test request.
StatusOr<KernelPlan> plan_for(const DeviceProps &props, Arch arch, const GroupedShape &shape,
                              const ggemm_config *config);

// sm_90a short-K kernels: CTAs one SM holds at once (the wave the rules count
// and the grid uses): as many as the launch bounds promise registers for
// (kShortKMinBlocksPerSm), where shared memory (less ~1 KB the SM reserves
// per CTA) holds them too. `splits`: 1, or kShortKSplit.
uint32_t sm90_short_k_ctas_per_sm(const DeviceProps &props, uint32_t tile_m, int64_t k, ggemm_dtype c_dtype,
                                  uint32_t splits = 1);

uint32_t dtype_bytes(ggemm_dtype t);
const char *dtype_name(ggemm_dtype t);

}  // namespace ggemm
