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
// holds tokens 8(a + 8i) + 2q + {0, 1} in registers 2i, 2i + 1, so the weight
// of octet j comes from lane 4 (j % 8) + q, register 2 (j / 8) + odd: a
// register index fixed at compile time and a source lane whose high bits are a
// constant and low bits the caller's: one shuffle with immediate operands
// (ptx::shfl_idx_keep_lane_bits). Each weight is loaded times alpha, so the
// epilogue multiplies each output once, as the store epilogue does.
#pragma once
#include "params.h"
#include "../instr/shuffle.h"

namespace ggemm::sm90 {

// Tokens: the weights of one epilogue chunk (kStageTokens, at most 128).
template <int Tokens>
struct RowScalesSm90 {
  static constexpr int kOctetsPerRound = 8;  // token octets a round of 32 lanes covers
  static constexpr int kRounds = (Tokens / 8 + kOctetsPerRound - 1) / kOctetsPerRound;
  float r[2 * kRounds];

  // alpha times each weight. Tokens past the tile's rows (and the lanes past a
  // narrow tile's octets) hold 0: their outputs are never stored.
  GGEMM_DEVICE void load(const GroupedGemmParams &p, uint32_t row0, uint32_t rows, uint32_t lane) {
    const uint32_t a = lane / 4, q = lane % 4;
#pragma unroll
    for (int i = 0; i < kRounds; ++i)
#pragma unroll
      for (int odd = 0; odd < 2; ++odd) {
        const uint32_t token = 8 * (a + kOctetsPerRound * i) + 2 * q + odd;
        r[2 * i + odd] = token < rows ? p.alpha * __ldg(&p.row_scale[row0 + token]) : 0.f;
      }
  }

  // alpha times the weight of token 8j + 2 (lane % 4) + odd; every lane of
  // the warp calls it. j and odd are constants after unrolling.
  GGEMM_DEVICE float get(int j, int odd) const {
    return ptx::shfl_idx_keep_lane_bits<3>(r[2 * (j / kOctetsPerRound) + odd], 4 * (j % kOctetsPerRound));
  }
};

}  // namespace ggemm::sm90
