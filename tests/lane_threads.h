// 32 host threads standing in for the lanes of a warp, so that the CPU
// tests run code written for a whole warp (GroupedTileScheduler::next_lanes)
// exactly as the kernels do: every lane operation is a rendezvous of the 32
// threads, with the semantics of the warp instruction it stands for
// (__shfl_up_sync, __shfl_sync, __ballot_sync, __ffs).
#pragma once
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace ggemm::testing {

// What the 32 threads share: a slot per lane and a reusable barrier.
class LaneGroup {
 public:
  static constexpr uint32_t kLanes = 32;

  // Every lane waits here until all 32 have arrived. Lanes that stop
  // meeting (code that lets a warp's lanes diverge: undefined on the GPU)
  // must not hang the test: after 10 s without the others the group is
  // marked diverged and no sync waits any more.
  void sync() {
    std::unique_lock<std::mutex> lock(mutex_);
    if (diverged_) return;
    const uint64_t generation = generation_;
    if (++arrived_ == kLanes) {
      arrived_ = 0;
      ++generation_;
      all_arrived_.notify_all();
    } else if (!all_arrived_.wait_for(lock, std::chrono::seconds(10),
                                      [&] { return generation_ != generation || diverged_; })) {
      diverged_ = true;
      all_arrived_.notify_all();
    }
  }

  bool diverged() {
    std::lock_guard<std::mutex> lock(mutex_);
    return diverged_;
  }

  uint64_t slot[kLanes] = {};

 private:
  std::mutex mutex_;
  std::condition_variable all_arrived_;
  uint32_t arrived_ = 0;
  uint64_t generation_ = 0;
  bool diverged_ = false;
};

// One lane's view: the operations GroupedTileScheduler::next_lanes asks of
// its `lanes` argument. Each writes this lane's value, meets the others,
// reads, and meets them again before any slot is written anew.
class ThreadLanes {
 public:
  ThreadLanes(LaneGroup &group, uint32_t lane) : group_(group), lane_(lane) {}

  uint32_t id() const { return lane_; }

  template <typename T>
  T shfl_up(T v, uint32_t delta) const {
    return exchange(v, lane_ >= delta ? lane_ - delta : lane_);
  }
  template <typename T>
  T shfl(T v, uint32_t from) const {
    return exchange(v, from % LaneGroup::kLanes);
  }
  uint32_t ballot(bool p) const {
    group_.slot[lane_] = p ? 1 : 0;
    group_.sync();
    uint32_t mask = 0;
    for (uint32_t l = 0; l < LaneGroup::kLanes; ++l) mask |= uint32_t(group_.slot[l] != 0) << l;
    group_.sync();
    return mask;
  }
  uint32_t first_lane(uint32_t mask) const {  // mask != 0
    uint32_t l = 0;
    while (!(mask >> l & 1u)) ++l;
    return l;
  }

 private:
  template <typename T>
  T exchange(T v, uint32_t from) const {
    group_.slot[lane_] = uint64_t(v);
    group_.sync();
    const T got = T(group_.slot[from]);
    group_.sync();
    return got;
  }

  LaneGroup &group_;
  uint32_t lane_;
};

// Runs body(lanes) on 32 threads, one per lane, and waits for all of them.
// Returns false when the lanes stopped meeting (LaneGroup::sync).
inline bool run_lanes(const std::function<void(const ThreadLanes &)> &body) {
  LaneGroup group;
  std::vector<std::thread> threads;
  for (uint32_t l = 0; l < LaneGroup::kLanes; ++l)
    threads.emplace_back([&group, &body, l] { body(ThreadLanes(group, l)); });
  for (std::thread &t : threads) t.join();
  return !group.diverged();
}

}  // namespace ggemm::testing
