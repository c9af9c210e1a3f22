// Small operands staged in L2 at kernel start (GroupedGemmParams::l2_prefetch).
//
// A decode or LoRA call runs a few tiles per CTA, each behind a chain of
// memory round trips: the routing, then the tile's operands from DRAM, a
// latency the few tiles cannot hide. When an operand is small (the runtime decides), every
// CTA starts its 1 / gridDim share of it on the way into L2 before anything
// else, so the operand loads that follow the routing find L2 instead of
// DRAM. One bulk prefetch per operand per CTA; the shares are 16-byte
// aligned and never reach past the operand's last byte.
#pragma once
#include <cstdint>

#include "../instr/arch.h"
#include "grouped_params.h"
#include "../instr/tma.h"

namespace ggemm {

// Bytes [*begin, *begin + *bytes) of `total` that CTA `cta` of `ctas`
// prefetches: shares of a multiple of 16 bytes, the last one short; total
// is rounded down to 16 (the tail, under 16 bytes, is left to the loads).
GGEMM_HOST_DEVICE constexpr void l2_prefetch_share(uint64_t total, uint32_t cta, uint32_t ctas, uint64_t *begin,
                                                   uint32_t *bytes) {
  const uint64_t whole = total / 16 * 16;
  const uint64_t share = ((whole + ctas - 1) / ctas + 15) / 16 * 16;  // shares x ctas >= whole
  const uint64_t b = share * cta;
  *begin = b;
  *bytes = b < whole ? uint32_t(whole - b < share ? whole - b : share) : 0;
}

// Whether the runtime stages an operand of `total` bytes in L2 for a grid of
// `ctas`: only a few MB (8 MiB, a sixth of the H200's L2; larger operands are
// streamed by the tiles themselves, and prefill's tile order keeps them in L2
// as they are reused), and only in short shares (64 KB, a few stages): a
// CTA's share goes through its SM's TMA unit ahead of the CTA's own first
// loads, so a long share delays them (a few CTAs, each queueing hundreds of
// KB of weights, lose more than the prefetch gains).
constexpr uint64_t kL2PrefetchMaxBytes = uint64_t(8) << 20;
constexpr uint64_t kL2PrefetchMaxShareBytes = uint64_t(64) << 10;
GGEMM_HOST_DEVICE constexpr bool l2_prefetch_worthwhile(uint64_t total, uint32_t ctas) {
  return total <= kL2PrefetchMaxBytes && total <= kL2PrefetchMaxShareBytes * ctas;
}

#if defined(__CUDACC__)
namespace ptx {
// One thread per CTA.
GGEMM_DEVICE void prefetch_small_operands(const GroupedGemmParams &p) {
  for (int i = 0; i < 2; ++i) {
    uint64_t begin;
    uint32_t bytes;
    l2_prefetch_share(p.l2_prefetch_bytes[i], blockIdx.x, gridDim.x, &begin, &bytes);
    if (bytes) bulk_prefetch_l2(static_cast<const uint8_t *>(p.l2_prefetch[i]) + begin, bytes);
  }
}
}  // namespace ptx
#endif

}  // namespace ggemm
