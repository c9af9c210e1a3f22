// The MoE routing (ggemm_moe_route): a stable counting sort of the T * k
// (token, slot) pairs by local expert, with no host sync and no grid-wide
// barrier: one launch up to one chunk of slots (512: decode and small
// prefill), else two.
//
//   one warp (T * k <= 32, decode): a lane a slot, every count by shuffles
//     (route_one_warp).
//
//   one CTA (one chunk and at most 512 local experts): a thread a slot,
//     lane masks per warp and expert (route_one_cta.cuh).
//
//   count pass (more than one chunk; one CTA per chunk of chunk_slots
//     consecutive slots): each CTA counts its chunk's slots per local expert
//     in 16-bit shared-memory counters and writes its row of the
//     [num_chunks][local_experts] count matrix.
//
//   scatter pass (one CTA per chunk; alone when there is one chunk of more
//     experts than one CTA's route_one_cta holds): each of
//     the CTA's 16 warps ranks a contiguous run of the chunk's slots, 32 at a
//     time (match.any; the group's lowest lane bumps the warp's own 16-bit
//     count of that expert in shared memory), so a slot's rank among its
//     expert's slots in the chunk is
//       the expert's slots in the warps before it + those earlier in its run;
//     the first term is a prefix over the 16 warps' counts, a thread an
//     expert. Every CTA then reads the whole count matrix (chunks x experts
//     words, each expert's column split over up to 32 threads: 64 x 128 at
//     Qwen3-30B's 4096 tokens; the chunks stop growing at kMaxChunkSlots,
//     so past ~4M slots the grid's reads grow as the square of the chunk
//     count) and scans the experts' totals, so each knows every expert's
//     first sorted row and its rows in the chunks before its own, with no
//     other CTA to wait for:
//       sorted row = expert's first row + its rows in earlier chunks
//                    + its slots in earlier warps + rank in the warp's run.
//     CTA 0 writes the groups and the usage stats; the rows past the routed
//     ones are filled by the whole grid. The tables hold at most
//     kRouteWindowExperts experts; more experts are ranked in windows of
//     that many, a walk of the chunk each.
//
// The walks re-read the slots (L1), so the chunk's ids and weights are
// loaded in batches of kRouteKeyBatch a lane, one memory trip a batch.
// Everything is a pure function of the inputs (no atomics whose order shows
// in a result), so the outputs are bitwise the same on every run.
#pragma once
#include <cstdint>

#include "route_key.h"

namespace ggemm::moe {

#if defined(__CUDACC__)

GGEMM_DEVICE uint32_t load_route_key(const MoeRouteParams &p, uint32_t slot, float *weight, uint32_t *faults) {
  *weight = p.topk_weights[slot];
  return route_key(p.topk_ids[slot], *weight, p.num_experts, p.first_expert, p.local_experts, faults);
}

// The keys of kRouteKeyBatch slots, slot(j) (negative: none, kNoExpert):
// every id and weight is loaded before any key is made, so a batch costs
// one memory trip. (With each key made right after its own loads, inside
// the branch that guards them, the compiler waited for each pair in turn:
// eight trips a batch, ~20 us of a 4096-slot chunk on the H200.)
template <class SlotOf>
GGEMM_DEVICE void load_route_keys(const MoeRouteParams &p, SlotOf slot_of, uint32_t *expert, float *weight,
                                  uint32_t *faults) {
  int32_t id[kRouteKeyBatch];
#pragma unroll
  for (uint32_t j = 0; j < kRouteKeyBatch; ++j) {
    const int64_t s = slot_of(j);
    id[j] = s >= 0 ? p.topk_ids[s] : -1;
    weight[j] = s >= 0 ? p.topk_weights[s] : 0.f;
  }
#pragma unroll
  for (uint32_t j = 0; j < kRouteKeyBatch; ++j)
    expert[j] = route_key(id[j], weight[j], p.num_experts, p.first_expert, p.local_experts, faults);
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

struct RouteTotals {
  uint32_t rows, active, most;  // routed rows, experts with rows, the most rows of one
};

// The arrays past the active count and the rows past the routed ones,
// spread over `threads` threads (this one `tid`); tid 0 writes the stats.
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

// The count pass: CTA c counts chunk c's slots per local expert (two 16-bit
// counters a shared word: a chunk holds at most kMaxChunkSlots slots) and
// writes row c of the count matrix. Checked mode's faults are the scatter
// pass's to report (it sees every slot too).
GGEMM_DEVICE void route_count(const MoeRouteParams &p) {
  extern __shared__ uint32_t counters[];
  const uint32_t chunk = blockIdx.x;
  for (uint32_t i = threadIdx.x; i < (p.local_experts + 1) / 2; i += blockDim.x) counters[i] = 0;
  __syncthreads();
  const uint32_t first = chunk * p.chunk_slots;
  const uint32_t end = min(first + p.chunk_slots, p.num_slots);
  uint32_t unused_faults = 0;
  for (uint32_t s0 = first + threadIdx.x; s0 < end; s0 += kRouteKeyBatch * blockDim.x) {
    uint32_t expert[kRouteKeyBatch];
    float unused_weight[kRouteKeyBatch];
    load_route_keys(
        p, [&](uint32_t j) { return s0 + j * blockDim.x < end ? int64_t(s0 + j * blockDim.x) : int64_t(-1); }, expert,
        unused_weight, &unused_faults);
#pragma unroll
    for (uint32_t j = 0; j < kRouteKeyBatch; ++j)
      if (expert[j] != kNoExpert) atomicAdd(&counters[expert[j] / 2], 1u << ((expert[j] & 1u) * 16u));
  }
  __syncthreads();
  uint32_t *row = p.chunk_counts + size_t(chunk) * p.local_experts;
  for (uint32_t e = threadIdx.x; e < p.local_experts; e += blockDim.x)
    row[e] = (counters[e / 2] >> ((e & 1u) * 16u)) & 0xffffu;
}

// The scatter pass's view of its chunk: warp w ranks the run of
// per_lane * 32 slots from first + w * per_lane * 32, 32 at a time.
struct ChunkRuns {
  uint32_t chunk, first, end, per_lane;
  GGEMM_DEVICE uint32_t slot(uint32_t i) const {
    return first + (threadIdx.x / 32) * per_lane * 32 + i * 32 + threadIdx.x % 32;
  }
};

// Walks this lane's slots of the chunk in order, calling
// visit(slot, expert, weight) once per step with the whole warp (a slot past
// the chunk's end comes with kNoExpert); the ids and weights of a batch of
// steps are loaded before any is visited. Returns checked mode's faults.
template <class Visit>
GGEMM_DEVICE uint32_t walk_runs(const MoeRouteParams &p, const ChunkRuns &c, Visit visit) {
  uint32_t faults = 0;
  for (uint32_t i0 = 0; i0 < c.per_lane; i0 += kRouteKeyBatch) {
    uint32_t expert[kRouteKeyBatch];
    float weight[kRouteKeyBatch];
    load_route_keys(
        p,
        [&](uint32_t j) {
          const uint32_t s = c.slot(i0 + j);
          return i0 + j < c.per_lane && s < c.end ? int64_t(s) : int64_t(-1);
        },
        expert, weight, &faults);
#pragma unroll
    for (uint32_t j = 0; j < kRouteKeyBatch; ++j)
      if (i0 + j < c.per_lane) visit(c.slot(i0 + j), expert[j], weight[j]);
  }
  return faults;
}

// Threads that share one expert's column of the count matrix (a power of
// two up to a warp, so their sums meet by shuffles): as many as the CTA
// has for each of the window's experts.
GGEMM_DEVICE uint32_t column_threads(uint32_t experts) {
  uint32_t t = 1;
  while (t < 32 && 2 * t * experts <= kRouteThreads) t *= 2;
  return t;
}

// The scatter pass (see the top of this file). Dynamic shared memory: the
// warps' 16-bit counts, [kRouteWarps][window], then a 32-bit base a window
// expert.
GGEMM_DEVICE void route_scatter(const MoeRouteParams &p) {
  extern __shared__ __align__(16) uint8_t route_smem[];
  __shared__ uint32_t scratch[kRouteWarps];
  const uint32_t lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const uint32_t window = min(p.local_experts, kRouteWindowExperts);
  uint16_t *warp_counts = reinterpret_cast<uint16_t *>(route_smem);  // [warp][expert - e0]
  uint32_t *base = reinterpret_cast<uint32_t *>(route_smem + size_t(kRouteWarps) * window * sizeof(uint16_t));
  uint16_t *my_counts = warp_counts + warp * window;

  ChunkRuns runs;
  runs.chunk = blockIdx.x;
  runs.first = blockIdx.x * p.chunk_slots;
  runs.end = min(runs.first + p.chunk_slots, p.num_slots);  // first >= end: T = 0
  runs.per_lane = p.chunk_slots / kRouteThreads;

  RouteTotals t{0, 0, 0};
  uint32_t most = 0;
  for (uint32_t e0 = 0; e0 < p.local_experts; e0 += window) {
    const uint32_t experts = min(window, p.local_experts - e0);
    // A slot's expert within the window, or kNoExpert.
    auto in_window = [&](uint32_t e) { return e != kNoExpert && e - e0 < experts ? e - e0 : kNoExpert; };
    __syncthreads();  // the previous window's walk is done with the tables
    // (Every warp's row whole, as 32-bit words: rows are `window` wide.)
    for (uint32_t i = threadIdx.x; i < kRouteWarps * window / 2; i += blockDim.x)
      reinterpret_cast<uint32_t *>(warp_counts)[i] = 0;
    __syncthreads();

    // 1. Each warp counts its run's slots per expert.
    const uint32_t faults = walk_runs(p, runs, [&](uint32_t, uint32_t e, float) {
      const uint32_t x = in_window(e);
      const uint32_t peers = __match_any_sync(0xffffffffu, x);
      if (x != kNoExpert && lane == uint32_t(__ffs(peers) - 1)) my_counts[x] += uint16_t(__popc(peers));
      __syncwarp();  // the next step's group leader may be another lane
    });
    if (e0 == 0) report_warp_faults(p.device_status, faults);
    __syncthreads();

    // 2. Each expert's slots in the warps before each warp (in place), and
    //    in the whole chunk (into base, for the one-chunk case).
    for (uint32_t x = threadIdx.x; x < experts; x += blockDim.x) {
      uint32_t carried = 0;
      for (uint32_t w = 0; w < kRouteWarps; ++w) {
        const uint32_t c = warp_counts[w * window + x];
        warp_counts[w * window + x] = uint16_t(carried);
        carried += c;
      }
      base[x] = carried;
    }
    __syncthreads();

    // 3. Every expert's total and its rows in the chunks before this one
    //    (the count matrix, or this chunk alone), their scan over the
    //    experts (first rows, groups), and each expert's base in the chunk.
    const uint32_t share = p.num_chunks > 1 ? column_threads(experts) : 1;
    for (uint32_t x0 = 0; x0 < experts; x0 += kRouteThreads / share) {
      const uint32_t x = x0 + threadIdx.x / share, part = threadIdx.x % share;
      uint32_t total = 0, before = 0;
      if (x < experts) {
        if (p.num_chunks > 1) {
          const uint32_t *column = p.chunk_counts + e0 + x;
#pragma unroll 8
          for (uint32_t c = part; c < p.num_chunks; c += share) {
            const uint32_t v = column[size_t(c) * p.local_experts];
            total += v;
            before += c < runs.chunk ? v : 0u;
          }
        } else {
          total = base[x];
        }
      }
      for (uint32_t d = 1; d < share; d *= 2) {
        total += __shfl_xor_sync(0xffffffffu, total, d);
        before += __shfl_xor_sync(0xffffffffu, before, d);
      }
      const bool owner = x < experts && part == 0;
      const uint32_t rows = owner ? total : 0u;
      uint32_t rows_sum, groups_sum;
      const uint32_t rows_before = cta_exclusive_scan(rows, scratch, &rows_sum);
      const uint32_t groups_before = cta_exclusive_scan(rows > 0 ? 1u : 0u, scratch, &groups_sum);
      if (owner) {
        const uint32_t first_row = t.rows + rows_before;
        base[x] = first_row + before;
        if (rows > 0 && blockIdx.x == 0) {
          p.a_offsets[t.active + groups_before] = first_row;
          p.expert_ids[t.active + groups_before] = int32_t(e0 + x);
        }
      }
      most = max(most, rows);
      t.rows += rows_sum;
      t.active += groups_sum;
    }
    __syncthreads();

    // 4. Each warp walks its run again: a slot's row is its expert's base +
    //    the expert's slots earlier in the run + its rank among its group.
    walk_runs(p, runs, [&](uint32_t s, uint32_t e, float w) {
      const uint32_t x = in_window(e);
      const uint32_t peers = __match_any_sync(0xffffffffu, x);
      const uint32_t leader = uint32_t(__ffs(peers) - 1);
      uint32_t earlier = 0;
      if (x != kNoExpert && lane == leader) {
        earlier = my_counts[x];
        my_counts[x] = uint16_t(earlier + __popc(peers));
      }
      earlier = __shfl_sync(0xffffffffu, earlier, leader);
      __syncwarp();
      if (x != kNoExpert) {
        const uint32_t row = base[x] + earlier + __popc(peers & ((1u << lane) - 1u));
        p.row_token[row] = int32_t(s / p.top_k);
        p.row_slot[row] = int32_t(s);
        p.row_weight[row] = w;
        p.slot_row[s] = int32_t(row);
      } else if (e == kNoExpert && e0 == 0 && s < runs.end) {
        p.slot_row[s] = -1;
      }
    });
  }
  t.most = cta_max(most, scratch);
  fill_past_routed(p, t, blockIdx.x * blockDim.x + threadIdx.x, gridDim.x * blockDim.x);
}

// The whole routing in one warp when every slot has a lane (decode, at most
// kOneWarpMaxSlots slots): lane s holds slot s. A slot's sorted row is the
// count of slots whose expert is smaller plus its rank among its expert's
// slots (the lanes below it with the same expert): the stable order. No
// shared memory and no barrier: a 512-thread scatter CTA would spend most of
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
  report_warp_faults(p.device_status, faults);
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
