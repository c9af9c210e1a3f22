// The sm_90a token-major kernel's tile and shared memory (token_major_gemm.cuh),
// computed identically by the runtime (the plan's launch) and the kernel.
#pragma once
#include <cstdint>

namespace ggemm::sm90 {

struct TokenMajorShape {
  // A consumer warpgroup's tile: 128 tokens (two m64 halves) x 192 features
  // (the wgmma N), 64 of K a stage (one 128-byte swizzle span).
  static constexpr uint32_t kTileTokens = 128, kTileFeatures = 192, kTileK = 64;
  static constexpr uint32_t kStages = 4;
  static constexpr uint32_t kTokensBytes = kTileTokens * 128;
  static constexpr uint32_t kWeightsBytes = kTileFeatures * 128;  // the slot; a box may hold fewer rows (N < 192)
  static constexpr uint32_t kStageBytes = kTokensBytes + kWeightsBytes;
  static constexpr uint32_t kChunks = kTileFeatures / 64;  // epilogue chunks of 64 features (128 bytes)
  static constexpr uint32_t kStagingBytes = kTileTokens * 128;  // one chunk, one per consumer warpgroup
  static constexpr uint32_t kAccHalf = kTileFeatures / 2;      // m64n192 f32: 96 registers
  static constexpr uint32_t kStagingOffset = kStages * kStageBytes;
  // Dynamic shared memory: the stages and the two staging tiles, and the
  // slack the kernel aligns its base up by (the barriers and the tile
  // handoff are static).
  static constexpr uint32_t kSmemAlignSlack = 1024;
  static constexpr uint32_t kSmemBytes = kStagingOffset + 2 * kStagingBytes + kSmemAlignSlack;
  static constexpr uint32_t kThreads = 384;
  // 40 + 2 x 232 registers a thread: the consumers' 192 accumulators and
  // their loop fit under 232 (at 24 the walker spills).
  static constexpr uint32_t kProducerRegs = 40, kConsumerRegs = 232;
  // Named barriers: 0 is __syncthreads; `order` into consumer warpgroup cw
  // is 1 + cw; a consumer warpgroup's own is 3 + cw.
  static constexpr uint32_t kOrderBarrier = 1, kEpilogueBarrier = 3;
};

}  // namespace ggemm::sm90
