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
// immediate operands (ptx::shfl_idx_keep_lane_bits). alpha joins each
// weight when the epilogue starts (not at the load, which would then be
// waited for at the tile's start), so the epilogue multiplies each output
// once, as the store epilogue does.
//
// Tiles of two chunks (tile_m 256) hold no weights in registers through
// the mainloop: another chunk's four would spill the tile_m 256 consumer,
// and loading the second chunk's from global memory between the two
// chunks exposed that load's latency once per tile (row_scale 1.08x store
// on Qwen3-30B-A3B down, tile_m 256; level where a tile is one chunk). So
// each consumer thread loads one token's weight when the tile starts
// (token 128 cw + tid of warpgroup cw), the epilogue writes them to the
// tile's row-scales region in shared memory (1 KB, static, shared by the
// warpgroups, between two barriers of all consumer threads), and each chunk
// fills the shuffle registers from there. (Reading a chunk's weights from
// the region by 16-byte loads instead of shuffles spilled the consumer.)
#pragma once
#include "params.h"
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
  float own;             // kShared: the weight of token 128 cw + tid

  // When the tile starts: each weight of the first chunk into r, or
  // (kShared) this thread's token of chunk cw into own; alpha joins them in
  // the epilogue (apply_alpha, publish). Tokens past the tile's rows (and
  // the lanes past a narrow tile's octets) hold 0: their outputs are never
  // stored. cw: this warpgroup; tid: the thread's index in its warpgroup.
  GGEMM_DEVICE void load(const GroupedGemmParams &p, uint32_t row0, uint32_t rows, uint32_t cw, uint32_t tid) {
    if constexpr (kShared) {
      own = weight(p, row0, rows, Tokens * cw + tid);
    } else {
      const uint32_t lane = tid % 32, a = lane / 4, q = lane % 4;
#pragma unroll
      for (int i = 0; i < kRounds; ++i)
#pragma unroll
        for (int odd = 0; odd < 2; ++odd) r[2 * i + odd] = weight(p, row0, rows, 8 * (a + kOctetsPerRound * i) + 2 * q + odd);
    }
  }

  // kShared, when the epilogue starts: the tile's weights into the region
  // (Chunks * Tokens floats), chunk c by warpgroup c. With one multiplying
  // warpgroup, it loads the second chunk's here (a latency per tile that
  // only tile_m 256 with narrow tiles pays). Between two barriers of every
  // consumer thread (the caller's): the first says that no thread still
  // reads the previous tile's weights, the second that every weight is in
  // place.
  GGEMM_DEVICE void publish(const GroupedGemmParams &p, uint32_t row0, uint32_t rows, float *region, uint32_t cw,
                            uint32_t consumers, uint32_t tid) const {
    region[Tokens * cw + tid] = p.alpha * own;
    if (consumers == 1) region[Tokens + tid] = p.alpha * weight(p, row0, rows, Tokens + tid);
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

}  // namespace ggemm::sm90
