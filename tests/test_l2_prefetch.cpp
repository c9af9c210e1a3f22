// The shares of an operand that the CTAs of a launch prefetch into L2
// (ptx/l2_prefetch.h): together exactly the operand's bytes rounded down to
// 16, disjoint, 16-byte aligned, none past the end.
#include <gtest/gtest.h>

#include <cstdint>

#include "ptx/l2_prefetch.h"

namespace ggemm {
namespace {

TEST(L2PrefetchShare, CoversTheOperandOnceInAlignedShares) {
  for (uint64_t total : {uint64_t(0), uint64_t(15), uint64_t(16), uint64_t(1000), uint64_t(1572864),
                         uint64_t(3145728 + 40), uint64_t(8) << 20})
    for (uint32_t ctas : {1u, 7u, 8u, 132u, 1000u}) {
      SCOPED_TRACE(::testing::Message() << "total " << total << ", ctas " << ctas);
      uint64_t next = 0;  // the shares come in CTA order, back to back
      for (uint32_t c = 0; c < ctas; ++c) {
        uint64_t begin;
        uint32_t bytes;
        l2_prefetch_share(total, c, ctas, &begin, &bytes);
        if (bytes == 0) continue;
        EXPECT_EQ(begin, next) << "CTA " << c;
        EXPECT_EQ(begin % 16, 0u);
        EXPECT_EQ(bytes % 16, 0u);
        EXPECT_LE(begin + bytes, total);
        next = begin + bytes;
      }
      EXPECT_EQ(next, total / 16 * 16);
    }
}

}  // namespace
}  // namespace ggemm
