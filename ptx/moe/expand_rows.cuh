// The MoE layer's expand copy (ggemm_moe_ffn past the fused gather's rows):
// each token's row of x copied to its k sorted rows, out[slot_row[t * k +
// j], :] = x[t, :], for the ungathered gate_up GEMM. Token-major: each
// token's row is read from memory once and written k times (a row-major
// gather, out[m] = x[row_token[m]], read each token k times, and at
// prefill, where the copies outgrow L2, mostly from DRAM). A slot with no
// row (-1) is skipped; the rows past the routed ones, which no slot names,
// get zeros (the GEMM's boxes may load them; no stale bits go in). Memory
// bound: a warp copies
// one token's 256-vector stretch of the row (kExpandVectorsInFlight 16-byte
// loads a lane, all in flight before any store) to its rows, or, where
// tokens are too few to fill the GPU, to every slot_parts-th of them.
#pragma once
#include <cstdint>

#include "../blocks/routing_check.h"
#include "../instr/global_v4.h"
#include "moe_params.h"

namespace ggemm::moe {

#if defined(__CUDACC__)

// The copy itself, its items dealt to the grid's warps: row_of(slot) is
// the sorted row of slot t * top_k + j (a size_t) (-1: none; inside [0, out_rows)
// where not -1), and the rows from routed_rows() (at most out_rows, asked
// for once the copy is done) to out_rows get zeros.
//
// Plain (coherent) loads (ptx::ld_global_no_allocate_v4): ptxas may not
// move a store above a load that might read what it writes, so a lane's
// loads are all in flight before its first store. (With __ldg's
// non-coherent loads, or left to itself, it interleaved them, two or three
// loads in flight.)
template <class RowOf, class RoutedRows>
GGEMM_DEVICE void copy_token_rows(const MoeExpandParams &p, RowOf row_of, RoutedRows routed_rows) {
  constexpr uint32_t kStretch = 32 * kExpandVectorsInFlight;  // vectors a warp copies
  const uint32_t lane = threadIdx.x % 32;
  const uint32_t stretches = (p.row_vectors + kStretch - 1) / kStretch;
  const uint64_t items = uint64_t(p.num_tokens) * stretches * p.slot_parts;
  const uint64_t warps = uint64_t(gridDim.x) * (blockDim.x / 32);
  for (uint64_t item = uint64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32; item < items; item += warps) {
    // Item = (token, stretch, part): neighbouring warps take the parts of
    // one stretch, so the copies that re-read it find it in L2.
    const uint32_t part = uint32_t(item % p.slot_parts);
    const uint32_t token = uint32_t(item / p.slot_parts / stretches);
    const uint32_t v0 = uint32_t(item / p.slot_parts % stretches) * kStretch + lane;
    const uint4 *src = static_cast<const uint4 *>(p.x) + size_t(token) * p.row_vectors;
    uint4 v[kExpandVectorsInFlight];
#pragma unroll
    for (uint32_t i = 0; i < kExpandVectorsInFlight; ++i)
      if (v0 + 32 * i < p.row_vectors) v[i] = ptx::ld_global_no_allocate_v4(src + v0 + 32 * i);
    // The token's rows, a batch of kExpandSlotBatch read before any store
    // (the stores' memory clobber keeps later reads behind them).
    for (uint32_t j0 = part; j0 < p.top_k; j0 += kExpandSlotBatch * p.slot_parts) {
      int32_t row[kExpandSlotBatch];
#pragma unroll
      for (uint32_t j = 0; j < kExpandSlotBatch; ++j) {
        const uint32_t slot = j0 + j * p.slot_parts;
        row[j] = slot < p.top_k ? row_of(size_t(token) * p.top_k + slot) : -1;
      }
#pragma unroll
      for (uint32_t j = 0; j < kExpandSlotBatch; ++j) {
        if (row[j] < 0) continue;
        uint4 *dst = static_cast<uint4 *>(p.out) + size_t(row[j]) * p.row_vectors;
#pragma unroll
        for (uint32_t i = 0; i < kExpandVectorsInFlight; ++i)
          if (v0 + 32 * i < p.row_vectors) ptx::st_global_v4(dst + v0 + 32 * i, v[i]);
      }
    }
  }
  const uint32_t routed = routed_rows();
  const uint64_t pad_items = uint64_t(p.out_rows - routed) * stretches;
  for (uint64_t item = uint64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32; item < pad_items; item += warps) {
    const uint32_t v0 = uint32_t(item % stretches) * kStretch + lane;
    uint4 *dst = static_cast<uint4 *>(p.out) + size_t(routed + item / stretches) * p.row_vectors;
#pragma unroll
    for (uint32_t i = 0; i < kExpandVectorsInFlight; ++i)
      if (v0 + 32 * i < p.row_vectors) ptx::st_global_v4(dst + v0 + 32 * i, make_uint4(0, 0, 0, 0));
  }
}

// The expand launch: the rows from the routing arrays (slot_row, and the
// routed count at a_offsets past the active groups); a row outside [-1,
// out_rows) is written nowhere and reported.
GGEMM_DEVICE void expand_rows(const MoeExpandParams &p) {
  uint32_t faults = 0;
  copy_token_rows(
      p,
      [&](size_t slot) {
        const int32_t row = p.slot_row[slot];
        const bool inside = row >= 0 && uint32_t(row) < p.out_rows;
        if (!inside && row != -1) faults |= kFaultIndexOutOfRange;
        return inside ? row : -1;
      },
      [&] { return min(*p.routed_rows, p.out_rows); });
  report_warp_faults(p.device_status, faults);
}

#endif  // __CUDACC__

}  // namespace ggemm::moe
