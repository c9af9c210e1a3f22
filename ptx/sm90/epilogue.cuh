// The sm_90a grouped GEMM's epilogue: one consumer warpgroup's 64 features
// of a tile, from its fp32 accumulators to the outputs (grouped_gemm.cuh
// runs it after each tile's mainloop). Each output is computed on the way
// into a 128B-swizzled staging tile (stmatrix.trans, or fp32 stores), then
// leaves by one TMA store when the chunk is whole, or by masked 16-byte
// stores at group and segment edges. Accumulate mode adds the old C that the
// producer loaded into the staging slot and stores from the same slot.
// Cfg is the kernel's GroupedGemmSm90Config.
#pragma once
#include "params.h"
#include "../blocks/out_convert.h"
#include "../blocks/swiglu.h"
#include "../blocks/swizzle.h"
#include "../blocks/tile_scheduler.h"
#include "../instr/barrier.h"
#include "../instr/cvta.h"
#include "../instr/fence.h"
#include "../instr/ldmatrix.h"
#include "../instr/mbarrier.h"
#include "../instr/stmatrix.h"
#include "../instr/tma.h"
#include "row_scales.h"
#include "staging_buffers.h"

namespace ggemm::sm90 {

// The accumulate epilogue's ring of old-C slots (staging_buffers of them
// per consumer warpgroup; every active tile takes the next slot, in the
// order the producer filled them). full[s]: the producer's TMA load of
// both warpgroups' halves landed. empty[s]: each warpgroup is done with
// its half (its TMA store has read it, or its masked stores have).
struct OldCBarriers {
  uint64_t *full, *empty;
};
// A consumer warpgroup's place in that ring. The slot of a whole tile is
// freed one tile later, once the store group after it is committed and
// wait_group.read 1 says its own store has read it (a wait right after the
// store would expose the store's latency); `pending` is that slot + 1, or
// 0. Thread 0 of the warpgroup keeps `pending` (it issues the stores).
// With two slots or more the producer never needs a pending slot before
// the consumers' next tile: it waits for tile n - slots to be freed, and
// tile n - 2 at the latest is freed during tile n - 1.
struct OldCRing {
  uint32_t count = 0, pending = 0;
};

template <class Cfg>
struct EpilogueSm90 {
  using Out = typename Cfg::Out;
  using RowScales = RowScalesSm90<Cfg::kStageTokens, Cfg::kStageChunks>;

  // Fragment of m64nNk16 (PTX ISA 9.7.15.5.1.1, "Register fragments"): warp w
  // of the warpgroup owns weight rows 16w..16w+15; acc[4j + e] is row
  // 16w + lane/4 + 8*(e/2), token 8j + 2*(lane%4) + e%2.
  //
  // The epilogue only reads acc: every output value is computed on the way to
  // the staging tile. Writing acc here (scaling in place, zeroing) would be a
  // non-wgmma definition of the accumulators inside the tile loop, and ptxas
  // then serialises every wgmma of the mainloop (C7515).
  //
  // scaled_tiles: with two chunks, the count of row-scaled active tiles this
  // warpgroup has stored (the parity of the row-scales region's barriers).
  // Only the general kernels (Cfg::kAnyEpilogue) read p.epilogue here, per
  // tile; the others compile no other epilogue's test.
  GGEMM_DEVICE static void store(const Sm90GroupedParams &p, const GroupedTile &tile, bool active, uint32_t cw,
                                 uint32_t tid, uint8_t *staging_base, StagingBuffers &staging_buffers,
                                 RowScales &scales, uint32_t &scaled_tiles, const float (&acc)[Cfg::kAccRegs]) {
    const uint32_t warp = tid / 32, lane = tid % 32;
    const uint32_t barrier_id = 1 + cw;  // named barrier of this warpgroup (0 is __syncthreads)

    const uint32_t col0 = Cfg::warpgroup_col0(tile, cw), cols = Cfg::warpgroup_cols(tile, cw);
    // The segment of these columns; with span_segments they may cross a
    // split, and then each 8-column chunk is routed by the masked stores.
    const uint32_t segment = p.span_segments ? output_segment(p, col0) : tile.segment;
    const bool crosses = p.span_segments && cols > 0 && output_segment(p, col0 + cols - 1) != segment;
    const OutputView &view = p.out[segment];
    const CUtensorMap *tmap_out = &p.tmap_out[segment];

    const bool scale = Cfg::kAnyEpilogue && p.epilogue == kEpilogueRowScale;  // an inactive tile stages zeros either way
    const bool swiglu = Cfg::kSwigluOnly || (Cfg::kSwiglu && p.epilogue == kEpilogueSwiglu);
    // alpha joins the weights; with two chunks the row-scale loader has
    // written them (times alpha) into shared memory (row_scales.h).
    const bool scaled = active && scale && !swiglu;
    if (scaled) {
      if constexpr (Cfg::kRowScalesShared) {
        ptx::mbarrier_wait_parity(&Cfg::row_scales_barriers()->full, scaled_tiles & 1);
      } else {
        scales.apply_alpha(p);
      }
    }

#pragma unroll
    for (uint32_t h = 0; h < Cfg::kStageChunks; ++h) {
      const uint32_t first = h * Cfg::kStageTokens;  // tokens [first, first + kStageTokens)
      if (first >= tile.rows) break;
      const uint32_t rows = min(tile.rows - first, Cfg::kStageTokens);
      const int32_t row0 = int32_t(tile.row0 + first);

      // This chunk's buffer may still be read by an earlier TMA store: wait
      // as staging_buffers.h explains.
      const StagingBuffers::Chunk chunk = staging_buffers.next_chunk();
      uint8_t *staging = staging_base + chunk.buffer * Cfg::kStagingBytes;
      if (tid == 0) {
        if (chunk.pending_allowed == 1) {
          ptx::tma_store_wait_group_read<1>();
        } else {
          ptx::tma_store_wait_group_read<0>();
        }
      }
      ptx::bar_sync(barrier_id, 128);

      // One staging loop per epilogue kind, chosen here and not inside the
      // unrolled steps: a runtime branch in each step leaves the skipped
      // path's code between the executed instructions, and this loop runs
      // at instruction-fetch speed (ncu on the LoRA expand: half the warp
      // stalls are "no instruction"). An inactive tile's zeros are a loop of
      // their own, so the others carry no select per output.
      if (!active) {
        stage_zeros(tid, staging);
      } else if (swiglu) {
        stage_swiglu_chunk(p, h, warp, lane, staging, acc);
      } else if (scale) {
        if constexpr (RowScales::kShared) scales.load_chunk(Cfg::row_scales_region(), h, lane);
        stage_chunk<true, false>(p, h, warp, lane, staging, scales, acc);
      } else {
        stage_chunk<false, false>(p, h, warp, lane, staging, scales, acc);
      }
      ptx::fence_proxy_async_shared_cta();
      ptx::bar_sync(barrier_id, 128);

      if (cols == 0) continue;
      if (swiglu) {
        // Half the features: a gate and an up make one output.
        masked_stores<Cfg::kFeaturesPerWarpgroup / 2>(p, tid, staging, rows, cols / 2, col0 / 2, row0, false, view);
        continue;
      }
      if (rows == Cfg::kStageTokens && cols == Cfg::kFeaturesPerWarpgroup && !crosses) {  // whole: one TMA store
        if (tid == 0) {
          for (uint32_t b = 0; b < Cfg::kBoxes; ++b)
            ptx::tma_store_2d(tmap_out, staging + b * Cfg::kStageTokens * 128,
                              int32_t(col0 - view.col_offset + b * Cfg::kColsPerBox), row0);
          ptx::tma_store_commit_group();
        }
        staging_buffers.stored_whole();
        continue;
      }
      masked_stores(p, tid, staging, rows, cols, col0, row0, crosses, view);
    }
    if constexpr (Cfg::kRowScalesShared) {  // (not RowScales::kShared: SwiGLU-only kernels have no loader)
      if (scaled) {
        // Every lane of the warp has its last chunk's weights in registers
        // (the shuffles consumed them): one arrival for the warp.
        __syncwarp();
        if (lane == 0) ptx::mbarrier_arrive(&Cfg::row_scales_barriers()->empty);
        ++scaled_tiles;
      }
    }
  }

  // Masked 16-byte stores of a staged chunk (of Features output columns a
  // row; the SwiGLU chunk has half the warpgroup's) at edges: rows past the
  // group's end and columns past the segment's end are skipped; with
  // `crosses`, each 8-column piece goes to its own segment.
  template <uint32_t Features = Cfg::kFeaturesPerWarpgroup>
  GGEMM_DEVICE static void masked_stores(const Sm90GroupedParams &p, uint32_t tid, const uint8_t *staging,
                                         uint32_t rows, uint32_t cols, uint32_t col0, int32_t row0, bool crosses,
                                         const OutputView &view) {
    constexpr uint32_t kElemsPerChunk = 16 / Cfg::kOutBytes;
    constexpr uint32_t kChunksPerRow = Features / kElemsPerChunk;
    for (uint32_t idx = tid; idx < Cfg::kStageTokens * kChunksPerRow; idx += 128) {
      const uint32_t token = idx / kChunksPerRow, ch = idx % kChunksPerRow;
      if (token >= rows || ch * kElemsPerChunk >= cols) continue;
      const uint32_t box = ch / 8;
      uint4 v =
          *reinterpret_cast<const uint4 *>(staging + box * Cfg::kStageTokens * 128 + swizzle128_offset(token, ch % 8));
      const uint32_t col = col0 + ch * kElemsPerChunk;  // splits are multiples of 8: a chunk never crosses one
      const OutputView &to = crosses ? p.out[output_segment(p, col)] : view;
      Out *dst = reinterpret_cast<Out *>(to.base) + size_t(row0 + token) * to.ld + (col - to.col_offset);
      *reinterpret_cast<uint4 *>(dst) = v;
    }
  }

  // The accumulate epilogue of an active tile (C += result, rounded once):
  // the producer has loaded the old C into this tile's ring slot; each
  // output adds its old value in fp32 (stage_chunk) and goes back out from
  // the same slot, by one TMA store when the tile is whole, else by masked
  // stores. Then the slot is given back (OldCRing says when).
  GGEMM_DEVICE static void store_accumulate(const Sm90GroupedParams &p, const GroupedTile &tile, uint32_t cw,
                                            uint32_t tid, uint8_t *staging_base, const OldCBarriers &c, OldCRing &ring,
                                            const float (&acc)[Cfg::kAccRegs]) {
    const uint32_t warp = tid / 32, lane = tid % 32;
    const uint32_t barrier_id = 1 + cw;
    const uint32_t col0 = Cfg::warpgroup_col0(tile, cw), cols = Cfg::warpgroup_cols(tile, cw);
    const uint32_t rows = min(tile.rows, Cfg::kStageTokens);  // tile_m <= 128: the whole tile
    const OutputView &view = p.out[tile.segment];
    const uint32_t slot = ring.count % p.staging_buffers;
    const uint32_t phase = (ring.count / p.staging_buffers) & 1;
    ++ring.count;
    uint8_t *staging = staging_base + slot * Cfg::kStagingBytes;

    ptx::mbarrier_wait_parity(&c.full[slot], phase);
    const RowScales unused{};  // no row scale with accumulate
    stage_chunk<false, true>(p, 0, warp, lane, staging, unused, acc);
    // Generic writes (and reads) of the slot before the TMA store reads it,
    // or before the producer's next TMA load overwrites it.
    ptx::fence_proxy_async_shared_cta();
    ptx::bar_sync(barrier_id, 128);

    const bool whole = rows == Cfg::kStageTokens && cols == Cfg::kFeaturesPerWarpgroup;
    if (!whole) {
      masked_stores(p, tid, staging, rows, cols, col0, int32_t(tile.row0), false, view);
      ptx::fence_proxy_async_shared_cta();  // the masked stores' reads, before the next load
      ptx::bar_sync(barrier_id, 128);
    }
    if (tid == 0) {
      if (whole) {
        for (uint32_t b = 0; b < Cfg::kBoxes; ++b)
          ptx::tma_store_2d(&p.tmap_out[tile.segment], staging + b * Cfg::kStageTokens * 128,
                            int32_t(col0 - view.col_offset + b * Cfg::kColsPerBox), int32_t(tile.row0));
        ptx::tma_store_commit_group();
        ptx::tma_store_wait_group_read<1>();  // every store but this one has read its slot
      } else {
        ptx::tma_store_wait_group_read<0>();
        ptx::mbarrier_arrive(&c.empty[slot]);
      }
      if (ring.pending) ptx::mbarrier_arrive(&c.empty[ring.pending - 1]);
      ring.pending = whole ? slot + 1 : 0;
    }
  }

  // SwiGLU: chunk h of this warpgroup's kFeaturesPerWarpgroup / 2 output
  // features, silu(gate) * up from the interleaved fragment (the weights'
  // octet pairs, kSwigluOctet): acc[4j + e] is the gate (e < 2) or the up
  // (e >= 2) value of feature 8 * warp + lane / 4 for token 8j + 2 (lane % 4)
  // + e % 2. stmatrix .x4.trans stores four token octets of the warp's 8
  // features at once: matrix i is octet jj + i, whose row r (a token) lane
  // 8i + r addresses: 16 bytes at 16-byte chunk `warp` of the token's
  // 128-byte staging row (chunks 4..7 stay unused). A chunk of fewer than 4
  // octets (tile_m 16) stores its last octet again.
  GGEMM_DEVICE static void stage_swiglu_chunk(const Sm90GroupedParams &p, uint32_t h, uint32_t warp, uint32_t lane,
                                              uint8_t *staging, const float (&acc)[Cfg::kAccRegs]) {
    if constexpr (Cfg::kOutBytes == 2) {  // SwiGLU writes 16-bit outputs only (the API refuses fp32)
    constexpr int kOctets = Cfg::kStageTokens / 8;
    const uint32_t base = ptx::smem_addr(staging);
#pragma unroll
    for (int jj = 0; jj < kOctets; jj += 4) {
      uint32_t packed[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int j = int(h) * kOctets + min(jj + i, kOctets - 1);
        packed[i] = OutConvert<Out>::pack2(swiglu(p.alpha * acc[4 * j], p.alpha * acc[4 * j + 2]),
                                           swiglu(p.alpha * acc[4 * j + 1], p.alpha * acc[4 * j + 3]));
      }
      const uint32_t octet = uint32_t(min(jj + int(lane / 8), kOctets - 1));
      ptx::stmatrix_x4_trans(base + swizzle128_offset(8 * octet + lane % 8, warp), packed[0], packed[1], packed[2],
                             packed[3]);
    }
    }
  }

  // An inactive tile's chunk: zeros in every byte of this warpgroup's
  // staging buffer (the swizzle does not matter for zeros).
  GGEMM_DEVICE static void stage_zeros(uint32_t tid, uint8_t *staging) {
    static_assert(Cfg::kStagingBytes % (16 * 128) == 0, "whole 16-byte stores per thread");
#pragma unroll
    for (uint32_t i = 0; i < Cfg::kStagingBytes / (16 * 128); ++i)
      *reinterpret_cast<uint4 *>(staging + (i * 128 + tid) * 16) = make_uint4(0, 0, 0, 0);
  }

  // Writes chunk h of an active tile's accumulators (this warpgroup's;
  // tokens [h * kStageTokens, (h + 1) * kStageTokens)) into the staging
  // buffer as the output type: times alpha, or times alpha * the routing
  // weight (kScale, one multiply: RowScalesSm90 holds the products); then
  // plus the old value already loaded into the buffer (kAccumulate).
  template <bool kScale, bool kAccumulate>
  GGEMM_DEVICE static void stage_chunk(const Sm90GroupedParams &p, uint32_t h, uint32_t warp, uint32_t lane,
                                       uint8_t *staging, const RowScales &scales, const float (&acc)[Cfg::kAccRegs]) {
    // alpha times the routing weight of the chunk's token 8jj + 2 * (lane % 4) + odd.
    auto row_scale = [&](int j, int odd) { return scales.get(j, odd); };
    constexpr int kOctets = Cfg::kStageTokens / 8;  // token octets per chunk
    if constexpr (Cfg::kOutBytes == 2) {
      const uint32_t lane_addr = stmatrix_lane_addr(ptx::smem_addr(staging), warp, lane);
#pragma unroll
      for (int jj = 0; jj < kOctets; jj += 2) {
        const int j = int(h) * kOctets + jj;  // octet of the tile
        // Token octets j and j+1: v[0..3] from acc[4j..], v[4..7] from acc[4j+4..].
        float v[8];
        if constexpr (kScale) {
          const float s[4] = {row_scale(jj, 0), row_scale(jj, 1), row_scale(jj + 1, 0), row_scale(jj + 1, 1)};
#pragma unroll
          for (int x = 0; x < 8; ++x) v[x] = acc[4 * j + x] * s[2 * (x / 4) + x % 2];
        } else {
#pragma unroll
          for (int x = 0; x < 8; ++x) v[x] = acc[4 * j + x] * p.alpha;
        }
        if constexpr (kAccumulate) {
          // ldmatrix.trans at stmatrix's addresses returns the old values in
          // fragment layout.
          uint32_t r[4];
          ptx::ldmatrix_x4_trans(lane_addr + jj * 1024, r[0], r[1], r[2], r[3]);
#pragma unroll
          for (int x = 0; x < 4; ++x) {
            const float2 old = OutConvert<Out>::unpack2(r[x]);
            v[2 * x] += old.x;
            v[2 * x + 1] += old.y;
          }
        }
        ptx::stmatrix_x4_trans(lane_addr + jj * 1024, OutConvert<Out>::pack2(v[0], v[1]),
                               OutConvert<Out>::pack2(v[2], v[3]), OutConvert<Out>::pack2(v[4], v[5]),
                               OutConvert<Out>::pack2(v[6], v[7]));
      }
    } else {
#pragma unroll
      for (int jj = 0; jj < kOctets; ++jj) {
        const int j = int(h) * kOctets + jj;
        const float s[2] = {kScale ? row_scale(jj, 0) : p.alpha, kScale ? row_scale(jj, 1) : p.alpha};
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          float *slot = fp32_staging_slot(staging, warp, lane, jj, e);
          float v = acc[4 * j + e] * s[e % 2];
          if constexpr (kAccumulate) v += *slot;
          *slot = v;
        }
      }
    }
  }

  // The shared address this lane gives stmatrix/ldmatrix .x4.trans for token
  // octets j, j+1 at j = 0 (add 1024 bytes per octet): matrix q = lane / 8
  // holds features 8 * (q % 2) of this warp's 16 and tokens 8 * (q / 2) + row
  // (lane % 8); the row is the token, so its swizzle is fixed per lane.
  GGEMM_DEVICE static uint32_t stmatrix_lane_addr(uint32_t staging_addr, uint32_t warp, uint32_t lane) {
    const uint32_t q = lane / 8, i = lane % 8;
    return staging_addr + swizzle128_offset(8 * (q >> 1) + i, 2 * warp + (q & 1));
  }

  // Where fp32 fragment element acc[4j + e] is staged. token % 8 does not
  // depend on j, so the swizzle is fixed per (lane, e) and j only adds
  // 8 rows (1024 bytes): written out so the compiler keeps 4 bases, not 64
  // addresses.
  GGEMM_DEVICE static float *fp32_staging_slot(const uint8_t *staging, uint32_t warp, uint32_t lane, int j, int e) {
    const uint32_t feature = 16 * warp + lane / 4 + 8 * (e >> 1);
    const uint32_t token_lo = 2 * (lane % 4) + (e & 1);  // token = 8j + token_lo
    const uint32_t box = feature / Cfg::kColsPerBox, col = feature % Cfg::kColsPerBox;
    return reinterpret_cast<float *>(const_cast<uint8_t *>(staging) + box * Cfg::kStageTokens * 128 +
                                     swizzle128_offset(token_lo, col / 4) + j * 1024) +
           col % 4;
  }
};

}  // namespace ggemm::sm90
