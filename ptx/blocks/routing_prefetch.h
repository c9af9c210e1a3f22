// Starts the routing arrays on their way into this SM's L1 at kernel entry.
//
// The tile walk reads them as a chain: expert_usage_stats[1] says how many
// groups there are, a_offsets which group a tile lies in, expert_ids which
// weights it needs, and only then can the producer issue its first TMA load.
// Cold (the router wrote them long ago, or a benchmark flushed L2), each link
// is a separate trip to memory; prefetched together at entry, while the
// barriers are initialised, they cost one.
#pragma once
#include <cstdint>

#include "grouped_params.h"
#include "../instr/prefetch.h"

#if defined(__CUDACC__)
namespace ggemm::ptx {

// Called by every lane of one warp. Lane 0 takes the usage word; lanes 1..8
// the first 8 lines of the group ends a_offsets[1..] (the walk never reads
// a_offsets[0], which is not there when the call gave group ends), lanes
// 9..16 those of expert_ids (the walk's first 256 groups); addresses stay
// inside the arrays.
GGEMM_DEVICE void prefetch_routing(const GroupedGemmParams &p, uint32_t lane) {
  constexpr uint32_t kPerLine = 128 / 4;  // uint32_t / int32_t entries per 128-byte line
  if (lane == 0) {
    prefetch_l1(&p.usage_stats[1]);
  } else if (lane <= 8) {
    const uint32_t i = (lane - 1) * kPerLine;
    if (i < p.num_groups) prefetch_l1(&p.a_offsets[i + 1]);
  } else if (lane <= 16) {
    const uint32_t i = (lane - 9) * kPerLine;
    if (i < p.num_groups) prefetch_l1(&p.expert_ids[i]);
  }
}

}  // namespace ggemm::ptx
#endif
