// The L2 prefetch of small operands (ptx/blocks/l2_prefetch.h): the shares the CTAs
// of a launch prefetch (together exactly the operand's bytes rounded down to
// 16, disjoint, 16-byte aligned, none past the end), and which operands.
#include <gtest/gtest.h>

#include <cstdint>

#include "ptx/blocks/l2_prefetch.h"

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

// Which operands are staged: a few MB in short shares. The figures are the
// benchmark's: the LoRA expand's weights (1.5 MB over 132
// CTAs) yes; the decode shrink's (3 MB over 8 CTAs: 384 KB shares) no; the
// R 64 shrink's 12 MB weights and every prefill operand no.
TEST(L2PrefetchWorthwhile, SmallOperandsInShortSharesOnly) {
  EXPECT_TRUE(l2_prefetch_worthwhile(1572864, 132));
  EXPECT_TRUE(l2_prefetch_worthwhile(3145728, 128));
  EXPECT_FALSE(l2_prefetch_worthwhile(3145728, 8));
  EXPECT_FALSE(l2_prefetch_worthwhile(uint64_t(12) << 20, 132));
  EXPECT_TRUE(l2_prefetch_worthwhile(kL2PrefetchMaxBytes, 128));
  EXPECT_FALSE(l2_prefetch_worthwhile(kL2PrefetchMaxBytes + 16, 1000));
  EXPECT_TRUE(l2_prefetch_worthwhile(kL2PrefetchMaxShareBytes, 1));
  EXPECT_FALSE(l2_prefetch_worthwhile(kL2PrefetchMaxShareBytes + 16, 1));
  EXPECT_TRUE(l2_prefetch_worthwhile(0, 1));
}

}  // namespace
}  // namespace ggemm
