// The sm_90a epilogue's buffer rule (ptx/sm90/staging_buffers.h), driven
// through random sequences of whole (TMA-stored) and masked chunks against a
// model of the bulk store groups: a chunk may only start writing a buffer
// once no pending group reads it. The rule it replaced is shown to break.
#include <gtest/gtest.h>

#include <cstdint>
#include <deque>
#include <random>

#include "ptx/sm90/staging_buffers.h"

namespace ggemm::sm90 {
namespace {

// Pending store groups, oldest first, each the buffer it reads. A wait for
// "at most n pending" retires the oldest until n remain; the hardware may
// also retire the oldest at any time.
struct StoreGroups {
  std::deque<uint32_t> pending;
  void wait_until_at_most(uint32_t n) {
    while (pending.size() > n) pending.pop_front();
  }
  bool reads(uint32_t buffer) const {
    for (uint32_t b : pending)
      if (b == buffer) return true;
    return false;
  }
};

TEST(StagingBuffers, NoChunkOverwritesABufferAPendingStoreReads) {
  for (uint32_t buffers : {1u, 2u}) {
    for (uint64_t seed = 1; seed <= 200; ++seed) {
      std::mt19937_64 rng(seed);
      StagingBuffers sb(buffers);
      StoreGroups groups;
      uint32_t expected_buffer = 0;
      for (int chunk = 0; chunk < 64; ++chunk) {
        // The hardware finished some of the oldest groups meanwhile.
        const uint32_t done = std::uniform_int_distribution<uint32_t>(0, 2)(rng);
        for (uint32_t i = 0; i < done && !groups.pending.empty(); ++i) groups.pending.pop_front();

        const StagingBuffers::Chunk c = sb.next_chunk();
        ASSERT_EQ(c.buffer, expected_buffer) << "buffers alternate (or stay 0 with one)";
        expected_buffer = buffers == 2 ? expected_buffer ^ 1u : 0u;
        ASSERT_LE(c.pending_allowed, 1u);
        groups.wait_until_at_most(c.pending_allowed);
        ASSERT_FALSE(groups.reads(c.buffer))
            << "seed " << seed << ", chunk " << chunk << ": buffer " << c.buffer << " rewritten while a store reads it";
        if (std::bernoulli_distribution(0.6)(rng)) {  // stored whole: one group
          groups.pending.push_back(c.buffer);
          sb.stored_whole();
        }
      }
    }
  }
}

// With two buffers the rule waits for all groups only when it must: after a
// whole chunk on the other buffer, one group may stay in flight.
TEST(StagingBuffers, OverlapsWhenTheNewestStoreReadsTheOtherBuffer) {
  StagingBuffers sb(2);
  StagingBuffers::Chunk c = sb.next_chunk();  // buffer 0
  sb.stored_whole();
  c = sb.next_chunk();  // buffer 1: the newest group reads 0
  EXPECT_EQ(c.buffer, 1u);
  EXPECT_EQ(c.pending_allowed, 1u);
  // Masked: no group. The next chunk writes buffer 0, which the newest
  // group still reads: all groups must finish. (The old rule allowed 1 here.)
  c = sb.next_chunk();
  EXPECT_EQ(c.buffer, 0u);
  EXPECT_EQ(c.pending_allowed, 0u);
}

// The rule before the fix: with two buffers, always "all but the newest".
TEST(StagingBuffers, TheOldRuleOverwritesAfterAMaskedChunk) {
  StoreGroups groups;
  groups.pending.push_back(0);  // chunk 0: buffer 0, stored whole
  // chunk 1: buffer 1, masked (no group); chunk 2: buffer 0, old rule waits for <= 1 pending
  groups.wait_until_at_most(1);
  EXPECT_TRUE(groups.reads(0)) << "the old rule lets chunk 2 overwrite buffer 0 under its pending store";
}

}  // namespace
}  // namespace ggemm::sm90
