// The kernels libggemm embeds, as the runtime sees them: one entry per
// extern "C" entry point, generated from the same kernel tables that
// instantiate them (ptx/sm90/kernel_table.h, ptx/sm100/kernel_table.h), so
// the plans can only name kernels that exist and the legal tiles are read
// off the tables, never restated.
#pragma once
#include <cstdint>

#include "ggemm.h"
#include "runtime/device.h"

namespace ggemm {

enum class KernelFamily : uint8_t {
  kPersistent,   // the warp-specialised TMA pipeline (sm_90a, sm_100a)
  kShortK,       // sm_90a: no pipeline, K <= kShortKMaxK (ptx/sm90/short_k_gemm.cuh)
  kShortKSplit,  // sm_90a: the same with K split over a cluster of kShortKSplit CTAs
  kPersistentStore,   // sm_90a: the persistent kernel compiled for the store epilogue alone, no gather
  kPersistentAccumulate,  // sm_90a: the same for the accumulate epilogue alone (tile_m <= 128)
  kPersistentSwiglu,  // sm_90a: the persistent kernel with its epilogue fixed to SwiGLU (tile_m 256)
  kDecodeGemv,   // groups of a few rows, weights streamed by plain loads (ptx/sm90/decode_gemv.cuh; both archs)
  kDecodeGemvRouted,  // sm_90a: the same, routing the MoE layer's slots in its prologue (GroupedLaunch::route)
  kTokenMajor,   // sm_90a: prefill, tokens on the MMA's M side, ping-pong consumers (ptx/sm90/token_major_gemm.cuh)
  kTokenMajorSwiglu,  // sm_90a: the same with its epilogue fixed to SwiGLU
};

struct KernelEntry {
  const char *name;
  Arch arch;
  KernelFamily family;
  ggemm_dtype in, out;
  bool kmajor;       // weights [E, N, K] (transpose_b); else [E, K, N]
  uint32_t tile_m;   // tokens per tile
  uint32_t cluster;  // CTAs per cluster: sm_90a cluster_m, sm_100a cta_group, the split count;
                     // the decode GEMV's CTAs an SM (its launch bounds)
};

struct KernelTable {
  const KernelEntry *begin() const { return entries; }
  const KernelEntry *end() const { return entries + count; }
  const KernelEntry *entries;
  uint32_t count;
};

// Every embedded kernel.
KernelTable kernel_table();

// The entry of that kernel, or null when no such kernel exists.
const KernelEntry *find_kernel(Arch arch, KernelFamily family, ggemm_dtype in, ggemm_dtype out, bool kmajor,
                               uint32_t tile_m, uint32_t cluster);

// Whether a persistent kernel with this tile_m exists for an output dtype
// (for every operand dtype and weight layout alike).
bool persistent_tile_exists(Arch arch, ggemm_dtype out, uint32_t tile_m, uint32_t cluster = 1);

// The largest persistent tile_m for an output dtype.
uint32_t max_persistent_tile_m(Arch arch, ggemm_dtype out);

// The smallest tile_m of a cluster size (sm_90a pairs: 128; sm_100a
// cta_group 2: 32), 0 when the architecture has no such clusters.
uint32_t min_cluster_tile_m(Arch arch, uint32_t cluster);

// Whether the persistent kernels of a tile_m offer GGEMM_EPILOGUE_ACCUMULATE
// (sm_90a's 256 has no registers left for it).
bool accumulate_supported(Arch arch, uint32_t tile_m);

// The largest tile_m offering the accumulate epilogue.
uint32_t max_accumulate_tile_m(Arch arch);

}  // namespace ggemm
