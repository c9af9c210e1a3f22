// The MoE layer's own kernels' parameters (ptx/moe/: route, combine, expand
// rows, decode down), shared by the kernels and the runtime that fills them
// (runtime/launch_moe.cpp). Plain data: no CUDA header needed.
#pragma once
#include <cstdint>

namespace ggemm::moe {

// Threads of a routing CTA: the count pass's slots per step; the scatter
// pass's 16 warps, each ranking its own run of the chunk's slots, and its
// block-wide scans.
constexpr uint32_t kRouteThreads = 512;
constexpr uint32_t kRouteWarps = kRouteThreads / 32;

// Slots up to which the routing runs in one warp, a lane a slot
// (route_one_warp).
constexpr uint32_t kOneWarpMaxSlots = 32;

// Slots of one chunk at most: the per-chunk counters are 16-bit, so a
// chunk's count of one expert must stay below 2^16. A chunk is
// kRouteThreads * (a power of two) slots.
constexpr uint32_t kMaxChunkSlots = 32768;

// Steps of a scatter warp's walk whose ids and weights are loaded together.
constexpr uint32_t kRouteKeyBatch = 8;

// Experts a scatter CTA ranks at once: its shared tables take 36 bytes an
// expert (a 16-bit count per warp, a 32-bit base), 144 KiB at 4096; more
// experts are ranked in windows of this many, one walk of the chunk each.
constexpr uint32_t kRouteWindowExperts = 4096;
constexpr uint32_t kRouteBytesPerWindowExpert = kRouteWarps * 2 + 4;

// Local experts up to which a call of at most kRouteThreads slots routes in
// one CTA, a thread a slot (route_one_cta.cuh): a thread an expert in its
// scan; its table takes a 32-bit lane mask a warp and a first row an expert.
constexpr uint32_t kOneCtaMaxExperts = kRouteThreads;
constexpr uint32_t kOneCtaBytesPerExpert = (kRouteWarps + 1) * 4;

// A slot with no local expert (id -1, another rank's expert, an id out of
// range, a weight that is not finite).
constexpr uint32_t kNoExpert = 0xffffffffu;

struct MoeRouteParams {
  const int32_t *topk_ids;   // [T * k]
  const float *topk_weights; // [T * k]
  // Outputs (ggemm_moe_route_args).
  uint32_t *a_offsets;    // [local_experts + 1]
  int32_t *expert_ids;    // [local_experts]
  uint32_t *usage_stats;  // [2]
  int32_t *row_token;     // [T * k]
  int32_t *row_slot;      // [T * k]
  float *row_weight;      // [T * k]
  int32_t *slot_row;      // [T * k]
  // Scratch in the caller's workspace (runtime/launch_moe.cpp lays it out).
  uint32_t *chunk_counts;  // [num_chunks][local_experts]: the count pass's counts (more than one chunk)
  uint32_t *device_status; // checked mode (ggemm_set_device_status); null = off
  uint32_t num_slots;      // T * k
  uint32_t top_k;
  int32_t num_experts;
  int32_t first_expert;
  uint32_t local_experts;
  uint32_t chunk_slots;    // slots per chunk: kRouteThreads * a power of two, <= kMaxChunkSlots
  uint32_t num_chunks;     // ceil(num_slots / chunk_slots)
};

// Threads of a combine CTA; a team of team_threads (a power of two, 8..128)
// sums one token's row, so a CTA holds kCombineThreads / team_threads tokens.
constexpr uint32_t kCombineThreads = 128;
constexpr uint32_t kMinCombineTeam = 8;
constexpr uint32_t kMaxTopK = 64;

struct MoeCombineParams {
  const void *y;           // [y_rows, hidden] bf16 or fp16
  const int32_t *slot_row; // [T * k]
  void *out;               // [T, hidden]
  uint32_t *device_status; // checked mode; null = off
  uint32_t num_tokens;
  uint32_t top_k;
  uint32_t hidden;         // a multiple of 8
  uint32_t y_rows;
  uint32_t team_threads;
  uint32_t accumulate;     // fp32 out only
};

// The expand copy (ptx/moe/expand_rows.cuh): a warp a token's stretch of
// 32 x kExpandVectorsInFlight 16-byte vectors at a time.
constexpr uint32_t kExpandThreads = 256;
constexpr uint32_t kExpandVectorsInFlight = 8;
constexpr uint32_t kExpandSlotBatch = 8;  // a token's slots whose rows are read at once

struct MoeExpandParams {
  const void *x;           // [num_tokens, row_vectors x 16 bytes]
  const int32_t *slot_row; // [num_tokens * top_k]: the row each (token, slot) is copied to; -1 = none
  void *out;               // [out_rows, row_vectors x 16 bytes]
  const uint32_t *routed_rows;  // the routed rows (a_offsets[local_experts]); rows past them get zeros
  uint32_t *device_status; // checked mode; null = off
  uint32_t num_tokens;
  uint32_t top_k;
  uint32_t out_rows;
  uint32_t row_vectors;    // 16-byte vectors a row
  uint32_t slot_parts;     // warps that split a token's slots (1..top_k): more warps where tokens are few
};

// The layer's routing and token copy in one launch (ptx/moe/route_one_cta.cuh,
// route_expand): the one-CTA routing's parameters, then the copy's.
struct MoeRouteExpandParams {
  MoeRouteParams route;
  MoeExpandParams expand;
};

// The decode down projection with the combine (ptx/moe/decode_down.cuh): a
// CTA of four warps a tile of one token's kDecodeDownCols output columns,
// each warp loading kDecodeDownBatch (slot, K step) units at once.
constexpr uint32_t kDecodeDownThreads = 128;
constexpr uint32_t kDecodeDownCols = 4;
constexpr uint32_t kDecodeDownBatch = 4;
constexpr uint32_t kDecodeDownCtasPerSm = 4;  // the kernels' launch bounds
// Slots a token may have on this path: one warp's lanes hold them.
constexpr uint32_t kDecodeDownMaxTopK = 32;

struct MoeDecodeDownParams {
  const void *h;              // [h_rows, inter]: gate_up's SwiGLU rows, in sorted order
  const void *w_down;         // [local_experts, hidden, inter]
  const int32_t *topk_ids;    // [T * k]
  const float *topk_weights;  // [T * k]
  const int32_t *slot_row;    // [T * k]: the h row of each (token, slot); -1 = none
  void *out;                  // [T, hidden]
  uint32_t num_tokens;
  uint32_t top_k;             // <= kDecodeDownMaxTopK
  uint32_t hidden;            // a multiple of kDecodeDownCols
  uint32_t inter;             // a multiple of 8
  uint32_t h_rows;
  int32_t num_experts;
  int32_t first_expert;
  uint32_t local_experts;
};

}  // namespace ggemm::moe
