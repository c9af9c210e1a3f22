// Which epilogue staging buffer a chunk uses, and how long it must wait for
// earlier TMA stores to finish reading it. __host__ __device__, so the CPU
// tests drive it through random chunk sequences against a model of the bulk
// store groups (tests/test_scheduler.cpp, StagingBuffers).
//
// Each chunk of a warpgroup's epilogue is written into a buffer and then
// either stored whole by TMA (one bulk group committed) or written out with
// masked generic stores (no group). Groups finish reading in commit order. So
// before a chunk is written into buffer b: if the newest group reads b, all
// groups must finish (wait_group.read 0); otherwise every group reading b is
// older than the newest one, and all but the newest suffice (wait 1).
// (Waiting for "all but the newest" whenever there are two buffers is not
// enough: it assumes the newest group reads the other buffer, which is false
// after a masked chunk, and a store can then read a buffer being rewritten.)
#pragma once
#include <cstdint>

#include "../instr/arch.h"

namespace ggemm::sm90 {

class StagingBuffers {
 public:
  GGEMM_HOST_DEVICE explicit StagingBuffers(uint32_t buffers) : bits_(buffers == 2 ? kTwo : 0u) {}

  // The buffer the next chunk writes (0 or 1), and the number of the newest
  // store groups that may still be pending when it starts writing (0 or 1).
  struct Chunk {
    uint32_t buffer;
    uint32_t pending_allowed;
  };
  GGEMM_HOST_DEVICE Chunk next_chunk() {
    const uint32_t b = bits_ & kNext;
    const bool two = bits_ & kTwo;
    const bool newest_reads_b = !two || ((bits_ & kNewest) >> 1) == b;
    bits_ = (bits_ & ~(kNext | kLast)) | (two ? b ^ 1u : 0u) | (b << 2);
    return Chunk{b, newest_reads_b ? 0u : 1u};
  }

  // The chunk just begun was stored whole by TMA: its group is now the newest.
  GGEMM_HOST_DEVICE void stored_whole() { bits_ = (bits_ & ~kNewest) | ((bits_ & kLast) >> 1); }

 private:
  // One word, so the state costs one register in kernels that have none to
  // spare: the next chunk's buffer, the newest group's buffer, the buffer of
  // the chunk begun last, and whether there are two buffers.
  static constexpr uint32_t kNext = 1u, kNewest = 2u, kLast = 4u, kTwo = 8u;
  uint32_t bits_;
};

}  // namespace ggemm::sm90
