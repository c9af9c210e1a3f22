// The row-scale epilogue's routing weights, loaded when a tile starts and
// handed to the epilogue by warp shuffles.
//
// Loading them in the epilogue costs a memory round trip per token octet:
// every stmatrix is an asm with a "memory" clobber, so no load can be
// hoisted past it, and each octet's weights arrive one L2 latency after the
// last octet was staged (measured: Qwen3-30B-A3B down, 278 us against 174
// with the store epilogue). Loaded before the mainloop, the loads' latency
// hides under the tile's wgmmas, and the epilogue's shuffles touch no memory.
//
// Which lane holds which weight: the epilogue's lane (4a + q) needs, for token
// octet j, tokens 8j + 2q and 8j + 2q + 1 (the m64nNk16 fragment). Lane 4a + q
// holds tokens 8(a + 8i) + 2q + {0, 1} of the chunk in registers 2i, 2i + 1,
// so the weight of octet j comes from lane 4 (j % 8) + q, register
// 2 (j / 8) + odd: a register index fixed at compile time and a source lane
// whose high bits are a constant and low bits the caller's, one shuffle with
// immediate operands (ptx::shfl_idx_keep_lane_bits). Each weight holds
// alpha times the routing weight, so the epilogue multiplies each output
// once, as the store epilogue does: in a one-chunk tile alpha joins when
// the epilogue starts (not at the load, which would then be waited for at
// the tile's start); in a two-chunk tile the loader warp multiplies.
//
// Tiles of two chunks (tile_m 256) hold no weights in registers through
// the mainloop: another chunk's four would spill the tile_m 256 consumer,
// and loading the second chunk's from global memory between the two
// chunks exposed that load's latency once per tile (row_scale 1.08x store
// on Qwen3-30B-A3B down, tile_m 256; level where a tile is one chunk).
// There the row-scale loader (warp 2 of warpgroup 0, idle without gather,
// which tile_m 256 never has) writes each active tile's weights, times
// alpha, into the tile's row-scales region in shared memory (1 KB, static)
// while the consumers run its mainloop, and each chunk fills the shuffle
// registers from there. Two mbarriers hand the region over: `full` (the
// loader's 32 lanes, once written) and `empty` (every consumer warp, once
// its lanes have read their last chunk's weights), so no barrier joins the two
// consumer warpgroups. (Reading a chunk's weights from the region by
// 16-byte loads instead of shuffles spilled the consumer.)
#pragma once
#include "params.h"
#include "../blocks/tile_handoff.h"
#include "../instr/mbarrier.h"
#include "../instr/shuffle.h"

namespace ggemm::sm90 {

// Tokens: the weights of one epilogue chunk (kStageTokens, at most 128);
// Chunks: the chunks of a tile (tile_m / Tokens, 1 or 2).
template <int Tokens, int Chunks>
struct RowScalesSm90 {
  static constexpr int kOctetsPerRound = 8;  // token octets a round of 32 lanes covers
  static constexpr int kRounds = (Tokens / 8 + kOctetsPerRound - 1) / kOctetsPerRound;
  // Whether the weights come through shared memory (a tile of two chunks).
  static constexpr bool kShared = Chunks > 1;
  static_assert(!kShared || (Tokens == 128 && Chunks == 2), "tile_m 256: a consumer thread's tokens per chunk");
  float r[2 * kRounds];  // the current chunk's, for the shuffles

  // One chunk (not kShared), when the tile starts: each weight of the chunk
  // into r; alpha joins them in the epilogue (apply_alpha). Tokens past the
  // tile's rows (and the lanes past a narrow tile's octets) hold 0: their
  // outputs are never stored. tid: the thread's index in its warpgroup.
  GGEMM_DEVICE void load(const GroupedGemmParams &p, uint32_t row0, uint32_t rows, uint32_t tid) {
    static_assert(!kShared, "two chunks: the row-scale loader writes the region");
    const uint32_t lane = tid % 32, a = lane / 4, q = lane % 4;
#pragma unroll
    for (int i = 0; i < kRounds; ++i)
#pragma unroll
      for (int odd = 0; odd < 2; ++odd) r[2 * i + odd] = weight(p, row0, rows, 8 * (a + kOctetsPerRound * i) + 2 * q + odd);
  }

  // One chunk (not kShared), when the epilogue starts: alpha times each
  // weight in place.
  GGEMM_DEVICE void apply_alpha(const GroupedGemmParams &p) {
#pragma unroll
    for (int i = 0; i < 2 * kRounds; ++i) r[i] *= p.alpha;
  }

  // kShared: chunk h's weights into the shuffle registers, from the region.
  GGEMM_DEVICE void load_chunk(const float *region, uint32_t h, uint32_t lane) {
    const uint32_t a = lane / 4, q = lane % 4;
    const float *chunk = region + Tokens * h;
#pragma unroll
    for (int i = 0; i < kRounds; ++i)
#pragma unroll
      for (int odd = 0; odd < 2; ++odd) r[2 * i + odd] = chunk[8 * (a + kOctetsPerRound * i) + 2 * q + odd];
  }

  // The weight of the tile's token `token`, 0 past its rows. (Not times
  // alpha here: a multiply at the load would wait for the load, at the
  // tile's start.)
  GGEMM_DEVICE static float weight(const GroupedGemmParams &p, uint32_t row0, uint32_t rows, uint32_t token) {
    return token < rows ? __ldg(&p.row_scale[row0 + token]) : 0.f;
  }

  // alpha times the weight of token 8j + 2 (lane % 4) + odd of the current
  // chunk; every lane of the warp calls it. j and odd are constants after
  // unrolling.
  GGEMM_DEVICE float get(int j, int odd) const {
    return ptx::shfl_idx_keep_lane_bits<3>(r[2 * (j / kOctetsPerRound) + odd], 4 * (j % kOctetsPerRound));
  }
};

// kShared: the region's two barriers (static shared memory beside it,
// sm90_row_scales_bytes).
struct RowScalesBarriers {
  uint64_t full, empty;
};

// The row-scale loader: warp 2 of warpgroup 0 in kernels whose tiles are
// two epilogue chunks, when the epilogue is row_scale. For each active tile
// handed off, once every consumer warp has read the previous tile's
// weights: the tile's TileM weights times alpha (0 past its rows) into the
// region, then an arrival of each lane on `full`. The consumers wait on
// `full` when their epilogue starts (the weights were written during the
// mainloop) and each of their warps arrives on `empty` after its last
// chunk's weights.
template <int TileM>
struct RowScaleLoaderSm90 {
  static constexpr int kPerLane = TileM / 32;

  GGEMM_DEVICE static void run(const GroupedGemmParams &p, uint8_t *handoff_region, float *region,
                               RowScalesBarriers *bars) {
    const uint32_t lane = threadIdx.x % 32;
    TileHandoff handoff;
    uint32_t loaded = 0;  // active tiles whose weights this warp wrote
    GroupedTile tile;
    while (handoff.take_warp(handoff_region, &tile)) {
      if (tile.expert < 0) continue;  // its epilogue stages zeros and reads no weight
      float w[kPerLane];
#pragma unroll
      for (int i = 0; i < kPerLane; ++i) {
        const uint32_t token = lane + 32 * i;
        w[i] = token < tile.rows ? __ldg(&p.row_scale[tile.row0 + token]) : 0.f;
      }
      // A fresh barrier's "previous phase" (parity 1) counts as complete.
      ptx::mbarrier_wait_parity(&bars->empty, (loaded & 1) ^ 1);
#pragma unroll
      for (int i = 0; i < kPerLane; ++i) region[lane + 32 * i] = p.alpha * w[i];
      ptx::mbarrier_arrive(&bars->full);  // release: this lane's writes
      ++loaded;
    }
  }
};

}  // namespace ggemm::sm90
