// The MoE routing (ggemm_moe_route): a stable counting sort of the T * k
// (token, slot) pairs by local expert, with no host sync: one launch when
// the slots make one chunk (decode and small prefill), else two.
//
//   one warp (T * k <= 32, decode): a lane a slot, every count by shuffles
//     (route_one_warp).
//
//   one CTA (T * k <= one chunk): counts in shared memory, a scan of the
//     experts' counts in shared memory, the scatter of phase C below; no
//     scratch in global memory and no grid barrier (a cooperative grid's two
//     barriers and scratch round trips cost ~6 us at one token).
//
//   count pass (one CTA per chunk of chunk_slots consecutive slots): each
//     CTA counts its chunk's slots per local expert in shared memory and
//     writes the counts to chunk_counts[expert][chunk]; checked mode's
//     faults are reported here; CTA 0 zeroes the scatter pass's barrier.
//   scatter pass (cooperative: one CTA per SM, all resident):
//     A. each CTA takes a contiguous range of experts and scans each one's
//        row of chunk counts (the expert's rows before each chunk), keeping
//        the expert's total and its CTA's totals;        -- grid barrier --
//     B. each CTA scans the CTA totals and its experts' totals: each
//        expert's first sorted row, the groups (a_offsets, expert_ids) of the
//        experts that have rows, the usage stats, the fill past the active
//        count and past the routed rows;                  -- grid barrier --
//     C. each CTA scatters chunks: a slot's sorted row is its expert's first
//        row + the expert's rows in earlier chunks + its rank among the
//        expert's slots earlier in the chunk. Ranks are made in rounds of
//        512 slots: warps group equal experts (match.any), and one warp hands
//        each group its rank base in warp order, so the order is the slots'.
//
// Everything is a pure function of the inputs (no atomics whose order shows
// in a result: integer atomic sums only), so the outputs are bitwise the
// same on every run.
#pragma once
#include <cstdint>

#include "route_key.h"

namespace ggemm::moe {

#if defined(__CUDACC__)

GGEMM_DEVICE uint32_t load_route_key(const MoeRouteParams &p, uint32_t slot, float *weight, uint32_t *faults) {
  *weight = p.topk_weights[slot];
  return route_key(p.topk_ids[slot], *weight, p.num_experts, p.first_expert, p.local_experts, faults);
}

// Two 16-bit counters a 32-bit shared word: expert e is half e & 1 of word e / 2.
GGEMM_DEVICE uint32_t counter_shift(uint32_t expert) { return (expert & 1u) * 16u; }

GGEMM_DEVICE void zero_counters(uint32_t *counters, uint32_t local_experts) {
  for (uint32_t i = threadIdx.x; i < (local_experts + 1) / 2; i += blockDim.x) counters[i] = 0;
}

GGEMM_DEVICE void report_faults(uint32_t *device_status, uint32_t faults) {
  faults = __reduce_or_sync(0xffffffffu, faults);
  if (device_status && faults && threadIdx.x % 32 == 0) atomicOr(device_status, faults);
}

// Exclusive scan of one value per thread over the CTA (kRouteThreads);
// *total gets the CTA's sum. `scratch` holds kRouteWarps words.
GGEMM_DEVICE uint32_t cta_exclusive_scan(uint32_t v, uint32_t *scratch, uint32_t *total) {
  const uint32_t lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  uint32_t inclusive = v;
#pragma unroll
  for (uint32_t d = 1; d < 32; d *= 2) {
    const uint32_t up = __shfl_up_sync(0xffffffffu, inclusive, d);
    if (lane >= d) inclusive += up;
  }
  __syncthreads();  // scratch is free (an earlier scan's readers are done)
  if (lane == 31) scratch[warp] = inclusive;
  __syncthreads();
  uint32_t before = 0, sum = 0;
  for (uint32_t w = 0; w < kRouteWarps; ++w) {
    const uint32_t s = scratch[w];
    before += w < warp ? s : 0;
    sum += s;
  }
  *total = sum;
  return before + inclusive - v;
}

// All CTAs of the (cooperative) scatter pass arrive; none passes until all
// have arrived. `target` counts arrivals over the launch (CTAs x barriers
// so far), so the counter needs no reset between barriers.
GGEMM_DEVICE void grid_barrier(uint32_t *arrivals, uint32_t target) {
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();  // this CTA's writes before its arrival
    atomicAdd(arrivals, 1u);
    while (*static_cast<volatile uint32_t *>(arrivals) < target) __nanosleep(64);
    __threadfence();  // the others' writes before this CTA reads them
  }
  __syncthreads();
}

// Counts chunk `chunk`'s slots per local expert into the shared counters
// and reports checked mode's faults.
GGEMM_DEVICE void count_chunk(const MoeRouteParams &p, uint32_t chunk, uint32_t *counters) {
  zero_counters(counters, p.local_experts);
  __syncthreads();
  const uint32_t first = chunk * p.chunk_slots;
  const uint32_t end = min(first + p.chunk_slots, p.num_slots);
  uint32_t faults = 0;
  for (uint32_t s = first + threadIdx.x; s < end; s += blockDim.x) {
    float w;
    const uint32_t e = load_route_key(p, s, &w, &faults);
    if (e != kNoExpert) atomicAdd(&counters[e / 2], 1u << counter_shift(e));
  }
  report_faults(p.device_status, faults);
  __syncthreads();
}

GGEMM_DEVICE uint32_t counter_of(const uint32_t *counters, uint32_t expert) {
  return (counters[expert / 2] >> counter_shift(expert)) & 0xffffu;
}

// The count pass: CTA b counts chunk b.
GGEMM_DEVICE void route_count(const MoeRouteParams &p) {
  extern __shared__ uint32_t counters[];
  if (blockIdx.x == 0 && threadIdx.x == 0) *p.grid_arrivals = 0;
  const uint32_t chunk = blockIdx.x;
  if (chunk >= p.num_chunks) return;  // T = 0: one CTA, for the barrier only
  count_chunk(p, chunk, counters);
  for (uint32_t e = threadIdx.x; e < p.local_experts; e += blockDim.x)
    p.chunk_counts[size_t(e) * p.num_chunks + chunk] = counter_of(counters, e);
}

// The CTA's maximum of one value per thread (kRouteThreads); `scratch`
// holds kRouteWarps words.
GGEMM_DEVICE uint32_t cta_max(uint32_t v, uint32_t *scratch) {
  const uint32_t lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  v = __reduce_max_sync(0xffffffffu, v);
  __syncthreads();  // scratch is free
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  uint32_t most = 0;
  for (uint32_t w = 0; w < kRouteWarps; ++w) most = max(most, scratch[w]);
  return most;
}

// Chunks up to which phase A gives each expert a thread of its own that
// walks the expert's chunk counts, instead of the CTA scanning one expert
// at a time: a CTA-wide scan per expert is a global round trip and two
// barriers in series, 64 of them cost ~30 us at one token (measured on the
// H200), while a thread's walk over a few chunks costs one round trip for
// all experts at once.
constexpr uint32_t kThreadScanMaxChunks = 32;

// Phase A: CTA g's experts [e0, e1): each expert's counts become their
// exclusive prefix over chunks, its total goes to expert_rows, and the CTA's
// totals to cta_totals[g].
GGEMM_DEVICE void scan_expert_chunks(const MoeRouteParams &p, uint32_t e0, uint32_t e1, uint32_t *scratch) {
  uint32_t rows = 0, active = 0, most = 0;
  if (p.num_chunks <= kThreadScanMaxChunks) {
    for (uint32_t e = e0 + threadIdx.x; e < e1; e += blockDim.x) {
      uint32_t *row = p.chunk_counts + size_t(e) * p.num_chunks;
      uint32_t counts[kThreadScanMaxChunks];
#pragma unroll
      for (uint32_t c = 0; c < kThreadScanMaxChunks; ++c) counts[c] = c < p.num_chunks ? row[c] : 0;
      uint32_t carried = 0;
#pragma unroll
      for (uint32_t c = 0; c < kThreadScanMaxChunks; ++c) {
        if (c < p.num_chunks) row[c] = carried;
        carried += counts[c];
      }
      p.expert_rows[e] = carried;
      rows += carried;
      active += carried > 0;
      most = max(most, carried);
    }
    uint32_t rows_sum, active_sum;
    cta_exclusive_scan(rows, scratch, &rows_sum);
    cta_exclusive_scan(active, scratch, &active_sum);
    const uint32_t most_all = cta_max(most, scratch);
    if (threadIdx.x == 0) {
      p.cta_totals[3 * blockIdx.x + 0] = rows_sum;
      p.cta_totals[3 * blockIdx.x + 1] = active_sum;
      p.cta_totals[3 * blockIdx.x + 2] = most_all;
    }
    return;
  }
  for (uint32_t e = e0; e < e1; ++e) {
    uint32_t *row = p.chunk_counts + size_t(e) * p.num_chunks;
    uint32_t carried = 0;
    for (uint32_t c0 = 0; c0 < p.num_chunks; c0 += blockDim.x) {
      const uint32_t c = c0 + threadIdx.x;
      const uint32_t count = c < p.num_chunks ? row[c] : 0;
      uint32_t sum;
      const uint32_t before = cta_exclusive_scan(count, scratch, &sum);
      if (c < p.num_chunks) row[c] = carried + before;
      carried += sum;
    }
    rows += carried;
    active += carried > 0;
    most = max(most, carried);
    if (threadIdx.x == 0) p.expert_rows[e] = carried;
  }
  if (threadIdx.x == 0) {
    p.cta_totals[3 * blockIdx.x + 0] = rows;
    p.cta_totals[3 * blockIdx.x + 1] = active;
    p.cta_totals[3 * blockIdx.x + 2] = most;
  }
}

struct RouteTotals {
  uint32_t rows_before, active_before;  // of the CTAs before this one
  uint32_t rows, active, most;          // of all
};

// Every CTA reads all CTAs' totals (at most kMaxRouteScatterCtas: cheap).
GGEMM_DEVICE RouteTotals read_totals(const MoeRouteParams &p) {
  __shared__ RouteTotals totals;
  if (threadIdx.x == 0) {
    RouteTotals t{0, 0, 0, 0, 0};
    for (uint32_t g = 0; g < gridDim.x; ++g) {
      const uint32_t rows = p.cta_totals[3 * g], active = p.cta_totals[3 * g + 1], most = p.cta_totals[3 * g + 2];
      if (g < blockIdx.x) t.rows_before += rows, t.active_before += active;
      t.rows += rows, t.active += active, t.most = max(t.most, most);
    }
    totals = t;
  }
  __syncthreads();
  return totals;
}

// Phase B: CTA g's experts get their first sorted row and, when they have
// rows, their group.
// `expert_rows` holds each expert's rows (phase A's, in global memory, or
// the one-CTA path's in shared memory) and gets its first sorted row.
GGEMM_DEVICE void place_experts(const MoeRouteParams &p, uint32_t *expert_rows, uint32_t e0, uint32_t e1,
                                const RouteTotals &t, uint32_t *scratch) {
  uint32_t rows_carried = t.rows_before, groups_carried = t.active_before;
  for (uint32_t b = e0; b < e1; b += blockDim.x) {
    const uint32_t e = b + threadIdx.x;
    const uint32_t rows = e < e1 ? expert_rows[e] : 0;  // this CTA wrote them
    uint32_t rows_sum, groups_sum;
    const uint32_t rows_before = cta_exclusive_scan(rows, scratch, &rows_sum);
    const uint32_t groups_before = cta_exclusive_scan(rows > 0 ? 1u : 0u, scratch, &groups_sum);
    if (e < e1) {
      const uint32_t first_row = rows_carried + rows_before;
      expert_rows[e] = first_row;
      if (rows > 0) {
        p.a_offsets[groups_carried + groups_before] = first_row;
        p.expert_ids[groups_carried + groups_before] = int32_t(e);
      }
    }
    rows_carried += rows_sum;
    groups_carried += groups_sum;
  }
}

// Phase B, the rest, spread over `threads` threads (this one `tid`): the
// arrays past the active count and the rows past the routed ones.
GGEMM_DEVICE void fill_past_routed(const MoeRouteParams &p, const RouteTotals &t, uint32_t tid, uint32_t threads) {
  if (tid == 0) {
    p.usage_stats[0] = t.most;
    p.usage_stats[1] = t.active;
  }
  for (uint32_t g = t.active + tid; g <= p.local_experts; g += threads) {
    p.a_offsets[g] = t.rows;
    if (g < p.local_experts) p.expert_ids[g] = -1;
  }
  for (uint32_t m = t.rows + tid; m < p.num_slots; m += threads) {
    p.row_token[m] = -1;
    p.row_slot[m] = -1;
    p.row_weight[m] = 0.f;
  }
}

// The grid's threads, for the passes that spread phase B over the grid.
GGEMM_DEVICE void fill_past_routed(const MoeRouteParams &p, const RouteTotals &t) {
  fill_past_routed(p, t, blockIdx.x * blockDim.x + threadIdx.x, gridDim.x * blockDim.x);
}

// Phase C: the slots of one chunk to their sorted rows; `chunk_base(e)` is
// expert e's first sorted row for this chunk.
template <class ChunkBase>
GGEMM_DEVICE void scatter_chunk(const MoeRouteParams &p, uint32_t chunk, uint32_t *counters, ChunkBase chunk_base) {
  __shared__ uint32_t group_expert[kRouteWarps][32];  // per warp, at each group's leader lane
  __shared__ uint32_t group_size[kRouteWarps][32];
  __shared__ uint32_t group_base[kRouteWarps][32];
  const uint32_t lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  __syncthreads();  // the previous chunk's last round is done with the counters
  zero_counters(counters, p.local_experts);
  __syncthreads();
  const uint32_t first = chunk * p.chunk_slots;
  const uint32_t end = min(first + p.chunk_slots, p.num_slots);
  for (uint32_t round = first; round < end; round += blockDim.x) {
    const uint32_t s = round + threadIdx.x;
    float w = 0.f;
    uint32_t unused_faults = 0;  // reported by the count pass
    const uint32_t e = s < end ? load_route_key(p, s, &w, &unused_faults) : kNoExpert;
    const uint32_t peers = __match_any_sync(0xffffffffu, e);
    const uint32_t leader = __ffs(peers) - 1;
    const uint32_t rank_in_warp = __popc(peers & ((1u << lane) - 1u));
    group_expert[warp][lane] = lane == leader ? e : kNoExpert;
    group_size[warp][lane] = __popc(peers);
    __syncthreads();
    // One warp walks the warps in order: each group's base is the count of
    // its expert's slots in earlier warps (and rounds), as the order wants.
    if (warp == 0) {
      for (uint32_t w2 = 0; w2 < kRouteWarps; ++w2) {
        const uint32_t ge = group_expert[w2][lane];
        if (ge != kNoExpert) {
          const uint32_t shift = counter_shift(ge);
          group_base[w2][lane] = (atomicAdd(&counters[ge / 2], group_size[w2][lane] << shift) >> shift) & 0xffffu;
        }
        __syncwarp();
      }
    }
    __syncthreads();
    if (e != kNoExpert) {
      const uint32_t row = chunk_base(e) + group_base[warp][leader] + rank_in_warp;
      p.row_token[row] = int32_t(s / p.top_k);
      p.row_slot[row] = int32_t(s);
      p.row_weight[row] = w;
      p.slot_row[s] = int32_t(row);
    } else if (s < end) {
      p.slot_row[s] = -1;
    }
  }
}

GGEMM_DEVICE void route_scatter(const MoeRouteParams &p) {
  extern __shared__ uint32_t counters[];
  __shared__ uint32_t scratch[kRouteWarps];
  const uint32_t e0 = uint32_t(uint64_t(p.local_experts) * blockIdx.x / gridDim.x);
  const uint32_t e1 = uint32_t(uint64_t(p.local_experts) * (blockIdx.x + 1) / gridDim.x);
  scan_expert_chunks(p, e0, e1, scratch);
  grid_barrier(p.grid_arrivals, gridDim.x);
  const RouteTotals t = read_totals(p);
  place_experts(p, p.expert_rows, e0, e1, t, scratch);
  fill_past_routed(p, t);
  grid_barrier(p.grid_arrivals, 2 * gridDim.x);
  for (uint32_t chunk = blockIdx.x; chunk < p.num_chunks; chunk += gridDim.x) {
    scatter_chunk(p, chunk, counters, [&](uint32_t e) {
      return p.expert_rows[e] + p.chunk_counts[size_t(e) * p.num_chunks + chunk];
    });
  }
}

// The whole routing in one CTA when the slots make at most one chunk.
// Dynamic shared memory: the counters, (local_experts + 1) / 2 words, then
// one word per expert (its rows, then its first sorted row).
GGEMM_DEVICE void route_one_cta(const MoeRouteParams &p) {
  extern __shared__ uint32_t counters[];
  __shared__ uint32_t scratch[kRouteWarps];
  uint32_t *expert_rows = counters + (p.local_experts + 1) / 2;
  count_chunk(p, 0, counters);  // T = 0: no slot, every counter 0
  uint32_t rows = 0, active = 0, most = 0;
  for (uint32_t e = threadIdx.x; e < p.local_experts; e += blockDim.x) {
    const uint32_t c = counter_of(counters, e);
    expert_rows[e] = c;
    rows += c;
    active += c > 0;
    most = max(most, c);
  }
  RouteTotals t{0, 0, 0, 0, 0};
  cta_exclusive_scan(rows, scratch, &t.rows);  // its barriers also publish expert_rows
  cta_exclusive_scan(active, scratch, &t.active);
  t.most = cta_max(most, scratch);
  place_experts(p, expert_rows, 0, p.local_experts, t, scratch);
  fill_past_routed(p, t);
  scatter_chunk(p, 0, counters, [&](uint32_t e) { return expert_rows[e]; });  // starts with a barrier
}

// The whole routing in one warp when every slot has a lane (decode, at most
// kOneWarpMaxSlots slots): lane s holds slot s. A slot's sorted row is the
// count of slots whose expert is smaller plus its rank among its expert's
// slots (the lanes below it with the same expert): the stable order. No
// shared memory and no barrier: the one-CTA path's 512 threads spend most of
// a decode call's routing in barriers and scans over every expert.
//
// route_warp computes one lane's part; route_one_warp writes it to the
// routing arrays, and the decode GEMV that routes in its prologue
// (ptx/sm90/decode_gemv.cuh) to its shared-memory tables.
struct WarpRoute {
  uint32_t expert;     // this lane's slot's local expert, or kNoExpert
  float weight;        // its routing weight
  bool leader;         // the lowest lane of its expert: writes the group
  uint32_t row;        // its sorted row (routed slots only)
  uint32_t first_row;  // its expert's first sorted row
  uint32_t group;      // its expert's group (the experts below it that have rows)
  uint32_t group_rows; // its expert's rows
  RouteTotals totals;  // rows, active experts and the most rows of one, over the warp
};

GGEMM_DEVICE WarpRoute route_warp(const MoeRouteParams &p, uint32_t *faults) {
  const uint32_t lane = threadIdx.x % 32;
  WarpRoute r{};
  r.expert = lane < p.num_slots ? load_route_key(p, lane, &r.weight, faults) : kNoExpert;
  const uint32_t e = r.expert;
  const uint32_t peers = __match_any_sync(0xffffffffu, e);
  r.leader = lane == uint32_t(__ffs(peers) - 1);
  r.group_rows = uint32_t(__popc(peers));
  // Over the routed slots: how many (rows), how many experts (active), and
  // those below this lane's expert (its first row, its group).
  uint32_t rows = 0, active = 0, first_row = 0, group = 0;
  for (uint32_t l = 0; l < 32; ++l) {
    const uint32_t el = __shfl_sync(0xffffffffu, e, l);
    const bool leads = __shfl_sync(0xffffffffu, r.leader, l);
    if (el == kNoExpert) continue;
    ++rows;
    active += leads;
    first_row += el < e;
    group += leads && el < e;
  }
  r.first_row = first_row;
  r.group = group;
  r.row = first_row + __popc(peers & ((1u << lane) - 1u));
  r.totals.rows = rows, r.totals.active = active;
  r.totals.most = __reduce_max_sync(0xffffffffu, e != kNoExpert ? r.group_rows : 0u);
  return r;
}

GGEMM_DEVICE void route_one_warp(const MoeRouteParams &p) {
  const uint32_t lane = threadIdx.x % 32;
  uint32_t faults = 0;
  const WarpRoute r = route_warp(p, &faults);
  report_faults(p.device_status, faults);
  if (r.expert != kNoExpert) {
    p.row_token[r.row] = int32_t(lane / p.top_k);
    p.row_slot[r.row] = int32_t(lane);
    p.row_weight[r.row] = r.weight;
    p.slot_row[lane] = int32_t(r.row);
    if (r.leader) {
      p.a_offsets[r.group] = r.first_row;
      p.expert_ids[r.group] = int32_t(r.expert);
    }
  } else if (lane < p.num_slots) {
    p.slot_row[lane] = -1;
  }
  // The usage stats; the groups past the active ones end at the routed
  // rows, and the rows past them belong to no slot (the warp's lanes).
  fill_past_routed(p, r.totals, lane, 32);
}

#endif  // __CUDACC__

}  // namespace ggemm::moe
