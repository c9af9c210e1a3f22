// The MoE layer's down projection at decode with the combine folded in
// (ggemm_moe_ffn, up to kDecodeDownMaxTopK slots a token):
//
//   out[t, c] = sum over token t's routed slots s of
//               weight_s * (w_down[expert_s][c, :] . h[slot_row[s], :])
//
// in fp32, rounded once. (The sorted path past decode rounds each slot's
// scaled row to the dtype before its combine, so a token's bits here and
// there may differ by those roundings; each path is bitwise reproducible.)
// Where the down GEMV wrote each slot's scaled row to y in sorted order and
// a combine kernel then read a token's k rows back and summed them, here
// the tile is a token's columns, so the sum over its slots happens in
// registers: one launch and one dependent kernel fewer (the combine kernel
// added ~2 us to Qwen3-30B-A3B's 26 us layer at one token on the H200, a
// dependent launch that waits for the down call to end and then makes two
// trips to memory for a few KB).
//
// A tile is one token's kDecodeDownCols output columns; tiles run column
// block outer, token inner, so the tokens of a column block (which may
// share experts) run side by side. The tile's work is its routed slots
// times the K steps (256 elements: a lane's 8 of each weight row), listed
// slot by slot; each warp takes a contiguous quarter of the list,
// kDecodeDownBatch units at a time, every weight and h load of a batch in
// flight before any is used, and each lane keeps kDecodeDownCols partial
// sums, each unit's dot scaled by its slot's weight as it is added. The
// lanes' sums are then added over the warp (warp_reduce_scatter, a fixed
// tree) and the four warps' in warp order through shared memory: the order
// depends only on the routing and the shapes, so the result is bitwise the
// same on every run. Slots are routed by route_key, the routing's own rule
// (the routing reports checked mode's faults), and read their h row at
// slot_row.
//
// So every slot of the token costs only its weight rows' bytes, whatever
// the number of slots a token has here (with expert parallelism, often one
// or none): the units, not the slots, are spread over the warps.
//
// Before its wait for the gate_up GEMV (grid dependency), each CTA starts
// its first tile's first weight lines on their way into L2
// (decode_down_prefetch): its CTAs are placed as the GEMV's leave, so the
// down projection's first DRAM trips overlap the GEMV's tail instead of
// following it. Measured on the H200: Qwen3-30B-A3B's layer at one token
// 24.5 -> 22.8 us (docs/performance.md).
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "../blocks/out_convert.h"
#include "../blocks/warp_gemv.h"
#include "../instr/prefetch.h"
#include "moe_params.h"
#include "route_key.h"

namespace ggemm::moe {

#if defined(__CUDACC__)

// A slot's local expert by the routing's own rule (route_key; the routing
// reports checked mode's faults, so they are not reported again here).
GGEMM_DEVICE uint32_t local_expert(const MoeDecodeDownParams &p, int32_t id, float weight) {
  uint32_t reported_by_routing = 0;
  return route_key(id, weight, p.num_experts, p.first_expert, p.local_experts, &reported_by_routing);
}

// Compacts the routed slots into the low lanes: lane j gets the j-th routed
// slot's expert, h row and weight. Returns how many are routed.
GGEMM_DEVICE uint32_t compact_slots(bool routed, uint32_t *expert, int32_t *row, float *weight) {
  const uint32_t lane = threadIdx.x % 32;
  const uint32_t routed_lanes = __ballot_sync(~0u, routed);
  const uint32_t slots = uint32_t(__popc(routed_lanes));
  const uint32_t src = lane < slots ? __fns(routed_lanes, 0, int(lane) + 1) : 0u;
  *expert = __shfl_sync(~0u, *expert, src);
  *row = __shfl_sync(~0u, *row, src);
  *weight = __shfl_sync(~0u, *weight, src);
  return slots;
}

// A warp's units of a tile: a contiguous run [first, last) of the list
// (slot j, K step i), slot by slot, so each warp's loads of a row follow one
// another.
struct WarpUnits {
  uint32_t first, last;
};
GGEMM_DEVICE WarpUnits warp_units(uint32_t slots, uint32_t steps, uint32_t warp) {
  constexpr uint32_t kWarps = kDecodeDownThreads / 32;
  const uint32_t units = slots * steps, per_warp = (units + kWarps - 1) / kWarps;
  const uint32_t first = min(warp * per_warp, units);
  return WarpUnits{first, min(first + per_warp, units)};
}

// Called before wait_prior_grids: brings into L2 the weight lines of the
// first kDecodeDownBatch units each warp of this CTA loads (its first
// tile's), while the kernel ahead (the gate_up GEMV) drains. Nothing here
// waits for a load to land but the ids. The ids are the layer's inputs, but
// a kernel ahead may still be writing them (the router, if the GEMV has not
// passed its own wait yet), so this read may see any value: they are read
// relaxed (past L1) and used only for prefetch addresses, which stay inside
// w_down whatever they are (route_key maps every id to a local expert or to
// none, and only routed slots' units are prefetched). A prefetch into L2
// can never leave a stale copy (ptx/instr/prefetch.h); the kernel reads
// everything again after the wait. (The main loop also drops a routed slot
// whose h row is out of range, which the routing never writes; the
// prefetch does not read slot_row, the GEMV's output.)
template <typename Elem>
GGEMM_DEVICE void decode_down_prefetch(const MoeDecodeDownParams &p) {
  constexpr uint32_t kCols = kDecodeDownCols, kLineElems = 128 / sizeof(Elem);
  constexpr uint32_t kLinesPerUnit = 256 / kLineElems;  // a K step of one row
  const uint32_t warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const uint32_t tiles = p.num_tokens * (p.hidden / kCols);
  if (blockIdx.x >= tiles) return;
  const uint32_t t = blockIdx.x % p.num_tokens, col0 = blockIdx.x / p.num_tokens * kCols;
  const uint32_t steps = (p.inter + 255) / 256;
  uint32_t expert = kNoExpert;
  float weight = 0.f;
  int32_t row = 0;
  if (lane < p.top_k) {
    const size_t s = size_t(t) * p.top_k + lane;
    weight = ptx::ld_relaxed_gpu_f32(p.topk_weights + s);
    expert = local_expert(p, ptx::ld_relaxed_gpu_s32(p.topk_ids + s), weight);
  }
  const uint32_t slots = compact_slots(expert != kNoExpert, &expert, &row, &weight);
  const WarpUnits run = warp_units(slots, steps, warp);
  const Elem *w_down = static_cast<const Elem *>(p.w_down);
  for (uint32_t q = lane; q < kDecodeDownBatch * kCols * kLinesPerUnit; q += 32) {
    const uint32_t u = run.first + q / (kCols * kLinesPerUnit);
    const uint32_t c = q / kLinesPerUnit % kCols, line = q % kLinesPerUnit;
    const uint32_t j = min(u / steps, slots > 0 ? slots - 1 : 0u);
    const uint32_t e = __shfl_sync(~0u, expert, j);
    const uint32_t k = (u - u / steps * steps) * 256u + line * kLineElems;
    if (u < run.last && k < p.inter) ptx::prefetch_l2(w_down + (size_t(e) * p.hidden + col0 + c) * p.inter + k);
  }
}

template <typename Elem>
GGEMM_DEVICE void decode_down(const MoeDecodeDownParams &p) {
  constexpr uint32_t kWarps = kDecodeDownThreads / 32, kCols = kDecodeDownCols, kBatch = kDecodeDownBatch;
  static_assert(kCols >= 1 && kCols <= 32 && (kCols & (kCols - 1)) == 0, "columns a tile: a power of two <= 32");
  constexpr uint32_t kLanesPerSum = 32 / kCols;  // lanes holding each sum after warp_reduce_scatter
  __shared__ float partial[2][kWarps][kCols];  // by tile parity: one barrier a tile
  const uint32_t warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const uint32_t steps = (p.inter + 255) / 256;
  const uint32_t tiles = p.num_tokens * (p.hidden / kCols);  // T <= 32: far below 2^32
  const Elem *w_down = static_cast<const Elem *>(p.w_down);
  const Elem *h = static_cast<const Elem *>(p.h);
  uint32_t parity = 0;
  for (uint32_t tile = blockIdx.x; tile < tiles; tile += gridDim.x, parity ^= 1u) {
    const uint32_t t = tile % p.num_tokens, col0 = tile / p.num_tokens * kCols;

    // The token's slots, a lane a slot (every warp loads them itself: one
    // trip, the other warps' from L1, and no barrier).
    uint32_t expert = kNoExpert;
    float weight = 0.f;
    int32_t row = -1;
    if (lane < p.top_k) {
      const size_t s = size_t(t) * p.top_k + lane;
      weight = p.topk_weights[s];
      row = p.slot_row[s];
      expert = local_expert(p, p.topk_ids[s], weight);
    }
    const uint32_t slots = compact_slots(expert != kNoExpert && row >= 0 && uint32_t(row) < p.h_rows, &expert,
                                         &row, &weight);
    const WarpUnits run = warp_units(slots, steps, warp);
    const uint32_t first = run.first, last = run.last;
    uint32_t j = first / steps, i = first - j * steps;
    float acc[kCols];
#pragma unroll
    for (uint32_t c = 0; c < kCols; ++c) acc[c] = 0.f;
    for (uint32_t u0 = first; u0 < last; u0 += kBatch) {
      uint4 w[kBatch][kCols], x[kBatch];
      float scale[kBatch];
      bool used[kBatch];
#pragma unroll
      for (uint32_t b = 0; b < kBatch; ++b) {
        // A unit past the warp's last, or a lane past K, reads its slot's
        // first elements again (so no load needs a predicate) and adds
        // nothing.
        const uint32_t jj = min(j, slots - 1);
        const uint32_t e = __shfl_sync(~0u, expert, jj);
        const int32_t r = __shfl_sync(~0u, row, jj);
        scale[b] = __shfl_sync(~0u, weight, jj);
        const uint32_t k = i * 256u + lane * 8u;
        used[b] = u0 + b < last && k < p.inter;
        const size_t at = used[b] ? k : 0u;
        const Elem *w_rows = w_down + (size_t(e) * p.hidden + col0) * p.inter + at;
#pragma unroll
        for (uint32_t c = 0; c < kCols; ++c) w[b][c] = load_streaming_16(w_rows + size_t(c) * p.inter);
        x[b] = __ldg(reinterpret_cast<const uint4 *>(h + size_t(r) * p.inter + at));
        const bool next_slot = ++i == steps;
        i = next_slot ? 0u : i;
        j += next_slot ? 1u : 0u;
      }
#pragma unroll
      for (uint32_t b = 0; b < kBatch; ++b) {
        float2 xf[4];
        unpack8<Elem>(x[b], xf);
#pragma unroll
        for (uint32_t c = 0; c < kCols; ++c) {
          const float d = dot8<Elem>(w[b][c], xf, 0.f);
          acc[c] = used[b] ? fmaf(scale[b], d, acc[c]) : acc[c];
        }
      }
    }

    // Lane kLanesPerSum * c then holds the warp's sum of column c; the
    // warps' sums are added in warp order.
    warp_reduce_scatter(acc, lane);
    if (lane % kLanesPerSum == 0) partial[parity][warp][lane / kLanesPerSum] = acc[0];
    __syncthreads();
    if (threadIdx.x < kCols) {
      float sum = 0.f;
#pragma unroll
      for (uint32_t v = 0; v < kWarps; ++v) sum += partial[parity][v][threadIdx.x];
      static_cast<Elem *>(p.out)[size_t(t) * p.hidden + col0 + threadIdx.x] = OutConvert<Elem>::from(sum);
    }
  }
}

#endif  // __CUDACC__

}  // namespace ggemm::moe
