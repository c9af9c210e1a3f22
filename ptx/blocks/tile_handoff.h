// The tile walk, done once per CTA and handed to the other roles through
// shared memory.
//
// Walking the tile sequence (GroupedTileScheduler::next) is a chain of
// dependent global loads: crossing a group reads its offsets, and which
// weights a tile needs (expert_ids) is known only after that. Were every role
// to walk, that chain would sit between a consumer's epilogue and its next
// mainloop, on the critical path of every tile. Instead one walker warp
// (the kernel's otherwise idle warp: its lanes together,
// GroupedTileScheduler::next_warp, or lane 0 alone where a step crosses
// few groups, GroupedGemmParams::walk_lanes) walks,
// its lane 0 publishing each tile (inactive ones too: their consumers write
// zeros) into a ring of kTileSlots slots, up
// to kTileSlots ahead of the slowest receiver, and a slot holding rows = 0
// ends the sequence. The producer, the consumers and the loader warps
// (sm_90a's gather loader or row-scale loader) read a slot at
// shared-memory latency.
//
// Each slot has a full barrier (1 arrival: the walker, after writing the
// slot; its release orders the writes before the receivers' acquire in the
// wait) and an empty barrier (one arrival per receiving thread, or per
// loader warp, after its last read, before the walker may overwrite the
// slot).
#pragma once
#include <cstdint>

#include "../instr/arch.h"
#include "../instr/mbarrier.h"
#include "tile_scheduler.h"

namespace ggemm {

constexpr uint32_t kTileSlots = 8;  // a power of two

// One published tile and its linear index (for traces); rows = 0 marks the
// end.
struct alignas(16) TileSlot {
  GroupedTile tile;
  uint32_t index;
};
static_assert(sizeof(TileSlot) == 32, "two 16-byte words");

// Shared-memory bytes of the handoff: the full and empty barriers, then the
// slots (16-byte aligned when the region is).
constexpr uint32_t kTileHandoffBytes = kTileSlots * (2 * 8 + sizeof(TileSlot));

#if defined(__CUDACC__)
// A role's position in the ring (a count of the tiles passed). The region
// (kTileHandoffBytes of shared memory, 16-byte aligned) comes with each call
// instead of living in the object: the kernels keep it in static shared
// memory, addressed by immediates, so no register holds its address through
// a tile (the consumers at tile_m 256 have none to spare).
class TileHandoff {
 public:
  // One thread, with the kernel's other barrier inits (before its fence and
  // the CTA-wide sync that publish them).
  // `receivers`: the threads that release each slot.
  GGEMM_DEVICE static void init(uint8_t *region, uint32_t receivers) {
    for (uint32_t s = 0; s < kTileSlots; ++s) {
      ptx::mbarrier_init(full(region, s), 1);
      ptx::mbarrier_init(empty(region, s), receivers);
    }
  }

  // Walker: tile `index` (rows >= 1), or with rows = 0 the end.
  GGEMM_DEVICE void publish(uint8_t *region, const GroupedTile &t, uint32_t index) {
    // A fresh barrier's "previous phase" (parity 1) counts as complete.
    ptx::mbarrier_wait_parity(empty(region, slot_index()), phase() ^ 1);
    TileSlot *slot = slots(region) + slot_index();
    slot->tile = t;
    slot->index = index;
    ptx::mbarrier_arrive(full(region, slot_index()));
    ++count_;
  }
  GGEMM_DEVICE void finish(uint8_t *region) {
    const GroupedTile end{};
    publish(region, end, 0);
  }

  // Receiver (the producer thread, every consumer thread, a loader warp's
  // lanes): the next slot,
  // once published; tile.rows == 0 there is the end. The slot stays valid
  // until release(): a consumer reads its fields where it needs them instead
  // of holding seven registers through the tile.
  // kTrapCall: the wait's timeout traps through a call (ptx/instr/
  // mbarrier.h; for receivers in a setmaxnreg.inc region near its budget).
  template <bool kTrapCall = false>
  GGEMM_DEVICE const TileSlot &wait(uint8_t *region) const {
    ptx::mbarrier_wait_parity<kTrapCall>(full(region, slot_index()), phase());
    return slots(region)[slot_index()];
  }
  // Done with the slot wait() returned (not called for the end's).
  GGEMM_DEVICE void release(uint8_t *region) {
    ptx::mbarrier_arrive(empty(region, slot_index()));
    ++count_;
  }

  // Receiving warp (sm_90a's GatherLoaderSm90 and RowScaleLoaderSm90,
  // sm_100a's gather producer; every lane calls it, lane 0 releases for the
  // warp): the next tile, copied, or false at the end.
  GGEMM_DEVICE bool take_warp(uint8_t *region, GroupedTile *t) {
    *t = wait(region).tile;
    __syncwarp();  // every lane has read the slot before lane 0 frees it
    if (t->rows == 0) return false;  // the end: never reused, nothing to release
    if (threadIdx.x % 32 == 0) {
      release(region);
    } else {
      ++count_;
    }
    return true;
  }

  // Receiver that copies the tile and frees its slot at once: the next tile
  // and its index, or false at the end.
  GGEMM_DEVICE bool take(uint8_t *region, GroupedTile *t, uint32_t *index) {
    const TileSlot &slot = wait(region);
    *t = slot.tile;
    *index = slot.index;
    if (t->rows == 0) return false;  // the end: never reused, nothing to release
    release(region);
    return true;
  }

 private:
  GGEMM_DEVICE static uint64_t *full(uint8_t *region, uint32_t s) { return reinterpret_cast<uint64_t *>(region) + s; }
  GGEMM_DEVICE static uint64_t *empty(uint8_t *region, uint32_t s) {
    return reinterpret_cast<uint64_t *>(region) + kTileSlots + s;
  }
  GGEMM_DEVICE static TileSlot *slots(uint8_t *region) {
    return reinterpret_cast<TileSlot *>(region + 2 * kTileSlots * sizeof(uint64_t));
  }

  // Slot and parity from one count of the tiles passed (kTileSlots is a
  // power of two): the producer has 40 registers.
  GGEMM_DEVICE uint32_t slot_index() const { return count_ % kTileSlots; }
  GGEMM_DEVICE uint32_t phase() const { return (count_ / kTileSlots) & 1; }

  uint32_t count_ = 0;
};
#endif

}  // namespace ggemm
