// The sm_100a grouped GEMM's epilogue: warps 2..5, one per 32-lane quarter
// of tensor memory, drain each tile's accumulator (tcgen05.ld), scale, add,
// route or (SwiGLU) combine each output and store it to global memory
// directly, then hand the accumulator back to the MMA thread. Never run on
// Blackwell hardware. grouped_gemm.cuh dispatches it;
// Cfg is the kernel's GroupedGemmSm100Config.
#pragma once
#include "../blocks/cluster_tiles.h"
#include "../blocks/grouped_params.h"
#include "../blocks/pipeline.h"
#include "../blocks/tile_handoff.h"
#include "../blocks/tile_scheduler.h"
#include "../blocks/out_convert.h"
#include "../blocks/swiglu.h"
#include "../instr/cluster.h"
#include "../instr/mbarrier.h"
#include "../instr/sm100/tcgen05.h"
#include "../instr/sm100/umma_desc.h"
#include "smem_layout.h"
#include "swiglu_lanes.h"

namespace ggemm::sm100 {

// The row-scale epilogue's routing weights of one tile, in registers.
//
// The per-element load (out *= row_scale[row0 + r] after each store) was a
// dependent global load in the drain's inner loop; the sm_90a epilogue
// measured that shape latency-bound (1.60x the store epilogue's time on
// the H200, ptx/sm90/row_scales.h) and loads its weights before the
// mainloop instead. Here every epilogue thread (a weight row) needs every
// token's weight, so lane l of each warp loads tokens l, l + 32, ... once
// per tile (kScaleWindows registers, coalesced, before the accumulator is
// ready), and the drain takes token 32w + j from lane j of register w by a
// shuffle: no memory access in the drain's loop, and no shared memory.
template <class Cfg>
struct RowScalesSm100 {
  float r[Cfg::kScaleWindows];

  // Tokens past the tile's rows hold 0: their outputs are never stored.
  GGEMM_DEVICE void load(const GroupedGemmParams &p, uint32_t row0, uint32_t rows, uint32_t lane) {
#pragma unroll
    for (int w = 0; w < Cfg::kScaleWindows; ++w) {
      const uint32_t token = 32 * w + lane;
      r[w] = token < rows ? __ldg(&p.row_scale[row0 + token]) : 0.f;
    }
  }

  // The weight of token 32w + j; every lane of the warp calls it.
  GGEMM_DEVICE float get(int w, uint32_t j) const { return __shfl_sync(0xffffffffu, r[w], j); }
};

template <class Cfg>
struct EpilogueSm100 {
  using Out = typename Cfg::Out;
  // One drain loop per epilogue kind, chosen once per launch (p.epilogue
  // is the same for every tile), so no per-element branch on the kind
  // sits in the loops (the sm_90a epilogue's lesson: the skipped paths'
  // code between the executed instructions slows an issue-bound loop).
  enum class Kind { kStore, kAccumulate, kRowScale, kSwiglu };

  // Thread `lane` of the warp owning tensor-memory lanes 32q..32q+31 holds
  // weight row (output column) 32q + lane of every tile.
  GGEMM_DEVICE static void run(const GroupedGemmParams &p, const typename Cfg::Barriers &b, uint32_t tmem_base,
                               uint32_t q, uint32_t rank) {
    switch (p.epilogue) {
      case kEpilogueAccumulate: run_kind<Kind::kAccumulate>(p, b, tmem_base, q, rank); break;
      case kEpilogueRowScale: run_kind<Kind::kRowScale>(p, b, tmem_base, q, rank); break;
      case kEpilogueSwiglu:
        if constexpr (Cfg::kSwiglu) {
          run_kind<Kind::kSwiglu>(p, b, tmem_base, q, rank);
          break;
        }
        // A kernel without the SwiGLU epilogue is never planned for it
        // (runtime/plan_sm100.cpp); should one be launched anyway, fail
        // loudly. (A bare trap: GGEMM_ARCH_TRAP's printf takes a stack frame,
        // which the SASS check refuses in these kernels.)
        asm volatile("trap;");
        break;
      default: run_kind<Kind::kStore>(p, b, tmem_base, q, rank); break;
    }
  }

  template <Kind K>
  GGEMM_DEVICE static void run_kind(const GroupedGemmParams &p, const typename Cfg::Barriers &b, uint32_t tmem_base,
                                    uint32_t q, uint32_t rank) {
    const uint32_t lane = threadIdx.x % 32;
    const uint32_t row_in_tile = 32 * q + lane;
    TileHandoff handoff;
    RingPosition acc;
    GroupedTile pair;
    while (Cfg::next_tile(handoff, &pair)) {
      const GroupedTile tile = cta_share(pair, rank);  // this CTA's rows of the pair tile
      const bool active = tile.expert >= 0;
      if (!active && K == Kind::kAccumulate) continue;  // C += 0
      const OutputView &view = p.out[p.span_segments ? output_segment(p, tile.col0 + row_in_tile) : tile.segment];
      const uint32_t rows = min(tile.rows, uint32_t(Cfg::kTileM));

      if (!active) {  // rows of an inactive group are zeroed
        store_zeros<K>(tile, view, rows, q, lane);
        continue;
      }
      // A warp whose 32 rows all lie past the tile's columns (narrow tiles,
      // N below 128) stores nothing and skips the accumulator's loads; it
      // still waits for the accumulator before handing it back, so its
      // arrival counts for this tile's phase. (SwiGLU's rows pair across a
      // warp's lanes; its warps always drain.)
      const bool drains = K == Kind::kSwiglu || 32 * q < tile.cols;
      // Row scale: this tile's routing weights, loaded before the
      // accumulator is ready, so their latency hides under the tile's MMAs.
      RowScalesSm100<Cfg> scales;
      if constexpr (K == Kind::kRowScale) {
        if (drains) scales.load(p, tile.row0, rows, lane);
      }

      ptx::mbarrier_wait_parity(&b.acc_full[acc.stage], acc.phase);
      tcgen05_fence_after_thread_sync();
      const uint32_t taddr = tmem_base + make_tmem_addr(32 * q, acc.stage * Cfg::kTileM);
      if (drains) {
        if constexpr (K == Kind::kSwiglu) {
          drain_swiglu(p, tile, view, rows, taddr, q, lane);
        } else if constexpr (K == Kind::kRowScale) {
          drain_row_scale(p, tile, view, rows, taddr, row_in_tile, scales);
        } else {
          drain<K == Kind::kAccumulate>(p, tile, view, rows, taddr, row_in_tile);
        }
      }
      // This thread's loads of the accumulator are complete (wait::ld): hand
      // it back to the MMA thread (the leader's) for the tile after next.
      tcgen05_fence_before_thread_sync();
      if constexpr (Cfg::kCtaGroup == 2) {
        ptx::mbarrier_arrive_remote(ptx::map_shared_to_rank(&b.acc_empty[acc.stage], 0));
      } else {
        ptx::mbarrier_arrive(&b.acc_empty[acc.stage]);
      }
      acc.advance(kAccBuffers);
    }
  }

  // Output column `col` of a view, at the tile's first token row.
  GGEMM_DEVICE static Out *column(const GroupedTile &tile, const OutputView &view, uint32_t col) {
    return reinterpret_cast<Out *>(view.base) + size_t(tile.row0) * view.ld + (col - view.col_offset);
  }

  // Store and accumulate: 8 token columns per tcgen05.ld, each output
  // alpha * result (+ the old value, rounded once).
  template <bool kAccumulate>
  GGEMM_DEVICE static void drain(const GroupedGemmParams &p, const GroupedTile &tile, const OutputView &view,
                                 uint32_t rows, uint32_t taddr, uint32_t row_in_tile) {
    const bool owned = row_in_tile < tile.cols;
    Out *dst = column(tile, view, tile.col0 + row_in_tile);
    for (uint32_t c = 0; c < rows; c += 8) {
      uint32_t v[8];
      tcgen05_ld_32x32b_x8(taddr + c, v);
      tcgen05_wait_ld();
      if (!owned) continue;
#pragma unroll
      for (uint32_t j = 0; j < 8; ++j) {
        const uint32_t r = c + j;
        if (r >= rows) break;
        float out = __uint_as_float(v[j]) * p.alpha;
        Out *d = dst + size_t(r) * view.ld;
        if constexpr (kAccumulate) out += OutConvert<Out>::to(*d);  // one rounding, below
        *d = OutConvert<Out>::from(out);
      }
    }
  }

  // Row scale: as drain, each output times its token's routing weight,
  // which comes from a register of RowScalesSm100 by one shuffle: window w
  // (tokens 32w..32w+31) is a compile-time register index, so the windows
  // are unrolled and the 8-column chunks inside one are not.
  GGEMM_DEVICE static void drain_row_scale(const GroupedGemmParams &p, const GroupedTile &tile,
                                           const OutputView &view, uint32_t rows, uint32_t taddr,
                                           uint32_t row_in_tile, const RowScalesSm100<Cfg> &scales) {
    const bool owned = row_in_tile < tile.cols;
    Out *dst = column(tile, view, tile.col0 + row_in_tile);
#pragma unroll
    for (int w = 0; w < Cfg::kScaleWindows; ++w) {
      for (uint32_t c8 = 0; c8 < 32; c8 += 8) {
        const uint32_t c = 32 * w + c8;
        if (c >= rows) break;
        uint32_t v[8];
        tcgen05_ld_32x32b_x8(taddr + c, v);
        // Every lane takes part in the shuffles, owned or not.
        float s[8];
#pragma unroll
        for (uint32_t j = 0; j < 8; ++j) s[j] = scales.get(w, c8 + j);
        tcgen05_wait_ld();
        if (!owned) continue;
#pragma unroll
        for (uint32_t j = 0; j < 8; ++j) {
          const uint32_t r = c + j;
          if (r >= rows) break;
          dst[size_t(r) * view.ld] = OutConvert<Out>::from(__uint_as_float(v[j]) * p.alpha * s[j]);
        }
      }
    }
  }

  // SwiGLU: the lanes' roles are SwigluLanes' (swiglu_lanes.h): lane l ^ 8
  // holds the other row of lane l's feature; per 8-column chunk each swaps 4
  // values with it (4 shuffles), and computes silu(gate) * up for 4 tokens
  // in fp32 (alpha applied to both, as sm_90a), rounded once, into C
  // [M, N/2] at column col0 / 2 + feature. (sm_90a's epilogue reads the same
  // octet pairs from its wgmma fragment, feature 8 * warp + lane / 4.)
  GGEMM_DEVICE static void drain_swiglu(const GroupedGemmParams &p, const GroupedTile &tile, const OutputView &view,
                                        uint32_t rows, uint32_t taddr, uint32_t q, uint32_t lane) {
    const uint32_t feature = SwigluLanes::feature(q, lane);
    const bool owned = feature < tile.cols / 2;
    Out *dst = column(tile, view, tile.col0 / 2 + feature);
    const uint32_t first = SwigluLanes::first_token(lane);
    for (uint32_t c = 0; c < rows; c += 8) {
      uint32_t v[8];
      tcgen05_ld_32x32b_x8(taddr + c, v);
      tcgen05_wait_ld();
      float mine[4], theirs[4];
#pragma unroll
      for (uint32_t i = 0; i < 4; ++i) {
        mine[i] = __uint_as_float(SwigluLanes::kept(lane, i, v));
        theirs[i] = __uint_as_float(__shfl_xor_sync(0xffffffffu, SwigluLanes::sent(lane, i, v), SwigluLanes::kPartnerXor));
      }
      if (!owned) continue;
#pragma unroll
      for (uint32_t i = 0; i < 4; ++i) {
        const uint32_t r = c + first + i;
        if (r >= rows) break;
        const float gate = SwigluLanes::gate(lane, mine[i], theirs[i]), up = SwigluLanes::up(lane, mine[i], theirs[i]);
        dst[size_t(r) * view.ld] = OutConvert<Out>::from(swiglu(p.alpha * gate, p.alpha * up));
      }
    }
  }

  // An inactive group's rows: zeros in this thread's column (SwiGLU: the
  // gate lane's feature of C [M, N/2]).
  template <Kind K>
  GGEMM_DEVICE static void store_zeros(const GroupedTile &tile, const OutputView &view, uint32_t rows, uint32_t q,
                                       uint32_t lane) {
    uint32_t col;
    bool owned;
    if constexpr (K == Kind::kSwiglu) {
      const uint32_t feature = SwigluLanes::feature(q, lane);
      owned = !SwigluLanes::is_up(lane) && feature < tile.cols / 2;
      col = tile.col0 / 2 + feature;
    } else {
      owned = 32 * q + lane < tile.cols;
      col = tile.col0 + 32 * q + lane;
    }
    if (!owned) return;
    Out *dst = column(tile, view, col);
    for (uint32_t r = 0; r < rows; ++r) dst[size_t(r) * view.ld] = OutConvert<Out>::from(0.f);
  }
};

}  // namespace ggemm::sm100
