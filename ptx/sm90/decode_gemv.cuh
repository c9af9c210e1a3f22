// The decode GEMV: grouped GEMM calls whose groups hold a few rows (MoE
// decode: one token routes one row to each of its top-k experts), where the
// call is its weight reads. Measured beside cuBLAS (docs/performance.md,
// "Bounds"): at one token cuBLAS's batched GEMV reads Qwen3-30B-A3B's routed
// weights in 20.8 us for gate_up and down, the persistent kernel's 64-feature
// wgmma tiles in 27.8. A GEMV streams each weight row with plain 16-byte
// loads from many small CTAs, every load of a tile in flight at once, and
// has no pipeline to fill or drain.
//
// Each CTA (four warps, several an SM) walks tiles of TileM rows x
// kDecodeGemvTileN weight rows as the short-K kernel does (the routing
// copied into shared memory in one trip, then GroupedTileScheduler from
// blockIdx.x by gridDim.x, each warp walking with its 32 lanes together:
// a call listing all 128 experts, 8 routed, crosses the empty groups in 4
// steps where one thread's walk took 32, which cost as many instructions as
// the multiplies, ncu on the H200). Per tile, each warp takes kDecodeGemvRows
// weight rows by the tile's rows over the whole K: lane l reads elements
// [8 l + 256 i, 8 l + 256 i + 8) of every weight row and token row (one
// 16-byte load each; the weights past L1, the tokens through it, as every
// warp and every tile of the group reads them), and accumulates their
// products in fp32. A reduce-scatter over the lanes then leaves each sum in
// one lane (warp_reduce_scatter), which writes its output: times alpha,
// times the routing weight, plus the old output, or silu(gate) * up from
// the gate and up rows the warp holds side by side; one rounding.
//
// Gather (a_row_index): token row m reads activation row a_row_index[m]
// (zeros outside the activations, as TMA reads them; checked mode reports
// it). SwiGLU: a tile of 2 * 16 weight-row columns of N = 2I is 16 outputs;
// each warp multiplies 4 gate rows (o) and their 4 up rows (I + o). K-major
// weights only; K a multiple of 8 (the C ABI's rule); no output splits and
// no activation planes (the runtime plans it only then).
//
// Routing in the prologue (the _routed kernels; the MoE layer's gate_up at
// decode): the call's groups and gather index are not in memory yet. Each
// CTA routes the layer's top-k slots itself, one lane a slot, into its
// shared-memory tables (route_into_table), and CTA 0 writes the routing
// arrays for the launches after it: one launch and one trip through memory
// fewer than a routing kernel before the GEMV.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "../blocks/out_convert.h"
#include "../blocks/swiglu.h"
#include "../blocks/warp_gemv.h"
#include "../moe/route.cuh"
#include "decode_gemv_layout.h"
#include "params.h"
#include "short_k_gemm.cuh"

namespace ggemm::sm90 {

// The (f, t) value index a lane holds after warp_reduce_scatter over
// kDecodeGemvRows x TileM values, j-th of its V / 32, and whether it is the
// one lane of those holding the same sum that writes it.
template <int TileM>
struct GemvLaneValues {
  static constexpr int kValues = int(kDecodeGemvRows) * TileM;
  static constexpr int kLog2 = kValues >= 64 ? 6 : kValues >= 32 ? 5 : kValues >= 16 ? 4 : kValues >= 8 ? 3 : 2;
  static constexpr int kPerLane = kValues > 32 ? kValues / 32 : 1;
  GGEMM_DEVICE static uint32_t index(uint32_t lane, int j) {
    if constexpr (kValues > 32) {
      return uint32_t(kPerLane) * lane + uint32_t(j);
    } else {
      return lane >> (5 - kLog2);
    }
  }
  GGEMM_DEVICE static bool writer(uint32_t lane) {
    if constexpr (kValues >= 32) {
      return true;
    } else {
      return (lane & ((1u << (5 - kLog2)) - 1)) == 0;
    }
  }
};

// The MoE layer's routing, made by this CTA for itself (the _routed
// kernels, Sm90GroupedParams::route): warp 0 routes the slots
// (moe::route_warp, a lane a slot) into the routing tables of
// decode_gemv_layout and the row-token table, and counts the row blocks of
// tile_m rows; CTA 0's warp 1 meanwhile routes them into the layer's
// routing arrays (moe::route_one_warp, which also reports checked mode's
// faults) for the down projection and the combine. Every CTA makes the same
// tables from the same slots: a warp's few hundred cycles of shuffles,
// against a launch and a memory round trip of a routing kernel's own.
GGEMM_DEVICE GroupedProblem route_into_table(const Sm90GroupedParams &p, uint8_t *smem, uint32_t tile_m,
                                             uint64_t *row_blocks) {
  const ShortKLayout layout = decode_gemv_layout();
  uint32_t *offsets = reinterpret_cast<uint32_t *>(smem + layout.offsets_table_offset());
  int32_t *ids = reinterpret_cast<int32_t *>(smem + layout.ids_table_offset());
  uint32_t *counts = reinterpret_cast<uint32_t *>(smem + layout.warp_row_blocks_offset());  // row blocks, groups
  int32_t *row_token = reinterpret_cast<int32_t *>(smem + decode_gemv_row_token_offset());
  const uint32_t warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (warp == 0) {
    uint32_t unused_faults = 0;  // CTA 0's warp 1 reports them
    const moe::WarpRoute r = moe::route_warp(p.route, &unused_faults);
    const bool routed = r.expert != moe::kNoExpert;
    if (routed) {
      row_token[r.row] = int32_t(lane / p.route.top_k);
      if (r.leader) {
        ids[r.group] = int32_t(r.expert);
        offsets[r.group + 1] = r.first_row + r.group_rows;
      }
    }
    const uint32_t blocks = __reduce_add_sync(0xffffffffu, routed && r.leader ? ceil_div(r.group_rows, tile_m) : 0u);
    if (lane == 0) {
      offsets[0] = 0;  // never read (group 0 starts at row 0)
      counts[0] = blocks;
      counts[1] = r.totals.active;
    }
  } else if (warp == 1 && blockIdx.x == 0) {
    moe::route_one_warp(p.route);
  }
  __syncthreads();
  *row_blocks = counts[0];
  return GroupedProblem{offsets, ids, counts[1], p.m, p.n, p.num_experts, p.split0, p.split1, p.span_segments};
}

// RouteInPrologue: the MoE layer's gate_up at decode (the _routed kernels,
// Sm90GroupedParams::route): the tables and the gather index come from
// route_into_table, never from memory. Kernels of their own, so those of
// every other call keep their registers (the choice made at run time cost
// the one-row kernels 2-8 registers and spilled the four-CTA one).
template <typename Elem, typename Out, int TileM, bool RouteInPrologue = false>
struct DecodeGemvSm90 {
  static_assert(TileM == 1 || TileM == 2 || TileM == 4, "rows a tile: 1, 2 or 4 (kDecodeGemvMaxTileM)");
  static constexpr int kRows = int(kDecodeGemvRows);
  using Lanes = GemvLaneValues<TileM>;
  // Loads in flight a lane per K step: two steps of 256 elements at a time
  // while the tokens' loads are few.
  static constexpr int kUnroll = TileM <= 2 ? 2 : 1;

  GGEMM_DEVICE static void run(const Sm90GroupedParams &p) {
    extern __shared__ __align__(16) uint8_t smem[];
    ptx::launch_dependent_grids();
    ptx::wait_prior_grids();  // the stream's earlier kernels are done (ptx/instr/grid_dependency.h)
    uint64_t row_blocks;
    GroupedProblem problem;
    if constexpr (RouteInPrologue) {
      problem = route_into_table(p, smem, TileM, &row_blocks);  // routed here: nothing to check
    } else {
      if (p.device_status && threadIdx.x < 32) {
        if (blockIdx.x == 0) check_routing_warp(p);
        if (p.a_row_index) check_gather_warp(p);
      }
      problem = stage_routing_table(p, smem, decode_gemv_layout(), TileM, &row_blocks);
    }
    GroupedTileScheduler sched(problem, TileM, kDecodeGemvTileN);
    const uint64_t tiles = row_blocks * sched.col_blocks();
    GroupedTile tile;
    for (uint64_t t = blockIdx.x; t < tiles && sched.next_warp(t, &tile); t += gridDim.x) multiply_rows(p, tile);
  }

  // A tile holding fewer rows than TileM (a group's last, or a group smaller
  // than the caller's bound: tiles hold the bound, most decode groups are
  // one row) is multiplied by the smallest instantiation that holds its
  // rows: the same 32 weight rows, the same loads, without the FMAs and
  // token loads of the empty rows.
  GGEMM_DEVICE static void multiply_rows(const Sm90GroupedParams &p, const GroupedTile &tile) {
    if constexpr (TileM > 1) {
      if (tile.rows <= uint32_t(TileM / 2)) {
        DecodeGemvSm90<Elem, Out, TileM / 2, RouteInPrologue>::multiply_rows(p, tile);
        return;
      }
    }
    multiply_tile(p, tile);
  }

  // The activation row a tile row reads (its gather index: the prologue's
  // table, or p.a_row_index; or the row itself), or -1 when there is none
  // (past the tile's rows, or an index outside the activations).
  GGEMM_DEVICE static int64_t token_source(const Sm90GroupedParams &p, const GroupedTile &tile, int t) {
    if (uint32_t(t) >= tile.rows) return -1;
    const uint32_t row = tile.row0 + uint32_t(t);
    int32_t src;
    if constexpr (RouteInPrologue) {
      extern __shared__ __align__(16) uint8_t smem[];
      src = reinterpret_cast<const int32_t *>(smem + decode_gemv_row_token_offset())[row];
    } else {
      if (!p.a_row_index) return row;
      src = p.a_row_index[row];
    }
    return src >= 0 && uint32_t(src) < p.gather_rows ? int64_t(src) : -1;
  }

  // Loads one K step (U of 256 elements) of every weight row and token row
  // from element k on, then accumulates their products. Every step is
  // inside K (the caller's loop bounds): no per-load predicate but the
  // token rows'.
  template <int U>
  GGEMM_DEVICE static void multiply_step(const Elem *const (&w_row)[kRows], const Elem *const (&x_row)[TileM],
                                         uint32_t k, float (&acc)[kRows * TileM]) {
    uint4 w[U][kRows];
    uint4 x[U][TileM];
#pragma unroll
    for (int u = 0; u < U; ++u) {
#pragma unroll
      for (int f = 0; f < kRows; ++f) w[u][f] = load_streaming_16(w_row[f] + k + 256 * u);
#pragma unroll
      for (int t = 0; t < TileM; ++t)
        x[u][t] = x_row[t] ? __ldg(reinterpret_cast<const uint4 *>(x_row[t] + k + 256 * u)) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int t = 0; t < TileM; ++t) {
        float2 xf[4];
        unpack8<Elem>(x[u][t], xf);
#pragma unroll
        for (int f = 0; f < kRows; ++f) acc[f * TileM + t] = dot8<Elem>(w[u][f], xf, acc[f * TileM + t]);
      }
  }

  GGEMM_DEVICE static void multiply_tile(const Sm90GroupedParams &p, const GroupedTile &tile) {
    const bool active = tile.expert >= 0;
    const uint32_t epilogue = p.epilogue;
    if (!active && epilogue == kEpilogueAccumulate) return;  // C += 0
    const uint32_t warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const bool swiglu = epilogue == kEpilogueSwiglu;
    const uint32_t half_n = p.n / 2;
    // This warp's weight rows: f < 8 of the tile's columns, or with SwiGLU
    // gate rows o (f < 4) and up rows I + o (f >= 4) of outputs o.
    const uint32_t out0 = swiglu ? tile.col0 / 2 + 4 * warp : tile.col0 + kRows * warp;
    const uint32_t outs = swiglu ? tile.cols / 2 : tile.cols;  // valid outputs of the tile
    const uint32_t out_base = swiglu ? tile.col0 / 2 : tile.col0;

    float acc[kRows * TileM];
#pragma unroll
    for (int i = 0; i < kRows * TileM; ++i) acc[i] = 0.f;
    const uint32_t done = out0 - out_base;  // the tile's outputs before this warp's
    const uint32_t valid = outs > done ? min(outs - done, 4u) : 0u;  // of rows f < 4; of rows f >= 4 below
    // (A warp past the tile's last output, in a partial last tile, skips
    // the loads: its sums stay zero and it stores nothing.)
    if (active && valid > 0) {
      // Each row's start (this lane's first element): rows f < 4 from out0,
      // rows f >= 4 the next four (or with SwiGLU the up rows I further),
      // one row of K apart. A row past the tile's outputs reads the warp's
      // first row instead (its sum is never stored), so the loads need no
      // predicate.
      const uint32_t valid_hi = swiglu ? valid : (outs > done + 4 ? min(outs - done - 4, 4u) : 0u);
      const Elem *lo = static_cast<const Elem *>(p.weights) + (size_t(tile.expert) * p.n + out0) * p.k + lane * 8;
      const Elem *hi = lo + size_t(swiglu ? half_n : 4u) * p.k;
      const Elem *w_row[kRows];
#pragma unroll
      for (int f = 0; f < kRows; ++f) {
        const bool ok = uint32_t(f % 4) < (f < 4 ? valid : valid_hi);
        w_row[f] = ok ? (f < 4 ? lo : hi) + size_t(f % 4) * p.k : lo;
      }
      // Token rows: this lane's first element of each, or null (zeros).
      const Elem *x_row[TileM];
#pragma unroll
      for (int t = 0; t < TileM; ++t) {
        const int64_t src = token_source(p, tile, t);
        x_row[t] = src >= 0 ? static_cast<const Elem *>(p.tokens) + src * int64_t(p.k) + lane * 8 : nullptr;
      }
      // Lane l's elements: [8 l + 256 i, + 8) for every i with 8 l + 256 i
      // < K (K a multiple of 8); kUnroll steps at a time, then the last.
      const uint32_t lane_k = p.k > lane * 8 ? p.k - lane * 8 : 0u;  // elements from this lane's first
      uint32_t k = 0;
      for (; k + 256 * (kUnroll - 1) < lane_k; k += 256 * kUnroll) multiply_step<kUnroll>(w_row, x_row, k, acc);
      if constexpr (kUnroll > 1) {
        if (k < lane_k) multiply_step<1>(w_row, x_row, k, acc);
      }
    }
    warp_reduce_scatter(acc, lane);

    // Each sum's lane writes its output: (f, t) = (index / TileM, index % TileM).
#pragma unroll
    for (int j = 0; j < Lanes::kPerLane; ++j) {
      const uint32_t idx = Lanes::index(lane, j);
      const uint32_t f = idx / TileM, t = idx % TileM;
      const float v = acc[j];
      // SwiGLU: gate row f < 4's up value is row f + 4's, 4 TileM value
      // indices on, which every layout of GemvLaneValues puts 16 lanes on.
      const float up = __shfl_down_sync(0xffffffffu, v, 16);
      if ((swiglu && f >= 4) || !Lanes::writer(lane)) continue;
      const uint32_t o = out0 + f;
      if (t >= tile.rows || o - out_base >= outs) continue;
      const uint32_t row = tile.row0 + t;
      float out = 0.f;  // an inactive group's rows are zeros
      if (active) {
        if (swiglu) {
          out = ggemm::swiglu(p.alpha * v, p.alpha * up);
        } else {
          out = v * (epilogue == kEpilogueRowScale ? p.alpha * p.row_scale[row] : p.alpha);
        }
      }
      const OutputView &view = p.out[!swiglu && p.span_segments ? output_segment(p, o) : tile.segment];
      Out *dst = reinterpret_cast<Out *>(view.base) + size_t(row) * view.ld + (o - view.col_offset);
      if (epilogue == kEpilogueAccumulate) out += OutConvert<Out>::to(*dst);
      *dst = OutConvert<Out>::from(out);
    }
  }
};

}  // namespace ggemm::sm90
