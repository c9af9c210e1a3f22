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
  static constexpr uint32_t kAccHalf = kTileFeatures / 2;      // m64n192 f32: 96 registers
  // The SwiGLU kernels' tile: its 192 weight rows are 12 octet pairs (8
  // gate rows, the 8 up rows of the same features; kSwigluOctet), 96 output
  // features, staged whole as 3 chunks of 32 features (64-byte rows,
  // 64B-swizzled: the output map's box) and stored by one TMA store each.
  static constexpr uint32_t kSwigluOutFeatures = kTileFeatures / 2;
  static constexpr uint32_t kSwigluChunkFeatures = 32, kSwigluChunks = kSwigluOutFeatures / kSwigluChunkFeatures;
  static constexpr uint32_t kSwigluChunkBytes = kTileTokens * kSwigluChunkFeatures * 2;
  // A consumer warpgroup's staging tile: one 64-feature chunk of the store
  // and row-scale epilogues, or SwiGLU's whole output tile.
  static constexpr uint32_t staging_bytes(bool swiglu) {
    return swiglu ? kSwigluChunks * kSwigluChunkBytes : kTileTokens * 128;
  }
  static constexpr uint32_t kStagingOffset = kStages * kStageBytes;
  // Dynamic shared memory: the stages and the two staging tiles, and the
  // slack the kernel aligns its base up by (the barriers and the tile
  // handoff are static).
  static constexpr uint32_t kSmemAlignSlack = 1024;
  static constexpr uint32_t smem_bytes(bool swiglu) {
    return kStagingOffset + 2 * staging_bytes(swiglu) + kSmemAlignSlack;
  }
  static constexpr uint32_t kThreads = 384;
  // 40 + 2 x 232 registers a thread: the consumers' 192 accumulators and
  // their loop fit under 232 (at 24 the walker spills).
  static constexpr uint32_t kProducerRegs = 40, kConsumerRegs = 232;
  // Named barriers: 0 is __syncthreads; `order` into consumer warpgroup cw
  // is 1 + cw; a consumer warpgroup's own is 3 + cw.
  static constexpr uint32_t kOrderBarrier = 1, kEpilogueBarrier = 3;
};

}  // namespace ggemm::sm90
