// Internal to the CPU reference: the pieces every operation's reference
// shares (threading, widening, the dot-product kernel, and the group walk
// exactly as the GPU scheduler reads the routing arrays).
#pragma once
#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <thread>
#include <vector>

#include "dtype.h"

namespace ggemm::ref::detail {

// Runs fn(i) for every i in [0, count) on up to `threads` threads (the calling
// thread included), handing items out one at a time so uneven items balance.
template <class Fn>
void parallel_for(size_t count, unsigned threads, const Fn& fn) {
  const size_t workers = std::min<size_t>(threads, count);
  if (workers <= 1) {
    for (size_t i = 0; i < count; ++i) fn(i);
    return;
  }
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i; (i = next.fetch_add(1, std::memory_order_relaxed)) < count;) fn(i);
  };
  std::vector<std::thread> pool;
  pool.reserve(workers - 1);
  for (size_t t = 1; t < workers; ++t) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
}

// Widens `count` elements of `base`, starting at element `first`, to float.
// The switch sits outside the loop so the loop stays a simple stream.
inline void widen(ggemm_dtype dtype, const void* base, size_t first, size_t count, float* out) {
  switch (dtype) {
    case GGEMM_DTYPE_BF16: {
      const uint16_t* p = static_cast<const uint16_t*>(base) + first;
      for (size_t i = 0; i < count; ++i) out[i] = bf16_to_float(p[i]);
      return;
    }
    case GGEMM_DTYPE_FP16: {
      const uint16_t* p = static_cast<const uint16_t*>(base) + first;
      for (size_t i = 0; i < count; ++i) out[i] = fp16_to_float(p[i]);
      return;
    }
    case GGEMM_DTYPE_FP32: {
      const float* p = static_cast<const float*>(base) + first;
      std::copy(p, p + count, out);
      return;
    }
  }
}

// Dot products of one weight row with R activation rows. kLanes independent
// partial sums per row let the compiler vectorise without reassociating
// (no -ffast-math), and the reduction order is the same for every R, so an
// element's value does not depend on which rows shared its tile.
constexpr int kLanes = 8;

template <int R>
inline void dot_rows(const float* w, const float* const* a, size_t k_len, float* out) {
  float acc[R][kLanes] = {};
  size_t k = 0;
  for (; k + kLanes <= k_len; k += kLanes)
    for (int r = 0; r < R; ++r)
      for (int j = 0; j < kLanes; ++j) acc[r][j] += a[r][k + j] * w[k + j];
  for (int j = 0; k + j < k_len; ++j)  // tail (K is a multiple of 8 in the contract)
    for (int r = 0; r < R; ++r) acc[r][j] += a[r][k + j] * w[k + j];
  for (int r = 0; r < R; ++r)
    out[r] = ((acc[r][0] + acc[r][1]) + (acc[r][2] + acc[r][3])) +
             ((acc[r][4] + acc[r][5]) + (acc[r][6] + acc[r][7]));
}

struct Span {  // rows [start, end) of one group
  int64_t start;
  int64_t end;
};

// result[i - i0] = dot(w, row i of a_rows) for rows i in [i0, i1) of a
// [rows][k_len] float block, four rows at a time (same order for every row).
inline void dot_block(const float* w, const float* a_rows, size_t i0, size_t i1, size_t k_len, float* result) {
  const float* a[4];
  size_t i = i0;
  for (; i + 4 <= i1; i += 4) {
    for (size_t j = 0; j < 4; ++j) a[j] = a_rows + (i + j) * k_len;
    dot_rows<4>(w, a, k_len, &result[i - i0]);
  }
  for (; i < i1; ++i) {
    a[0] = a_rows + i * k_len;
    dot_rows<1>(w, a, k_len, &result[i - i0]);
  }
}

// The groups of a call as the kernel's scheduler reads them: the first
// min(usage_stats[1], num_groups) group ends (ends[g] = a_offsets[g + 1], or
// the call's group_ends), group 0 from row 0 and group g from group g - 1's
// end, each end clamped into [start, M] so groups never overlap or overrun
// M; an id outside [0, num_ids) marks the group inactive.
struct GroupSpans {
  std::map<int32_t, std::vector<Span>> by_id;  // valid ids, in id order
  std::vector<Span> inactive;
};

inline GroupSpans group_spans(const uint32_t* ends, const int32_t* ids, const uint32_t* usage_stats,
                              int64_t num_groups, int64_t num_ids, int64_t M) {
  GroupSpans spans;
  const int64_t num_active = std::min<int64_t>(static_cast<int64_t>(usage_stats[1]), num_groups);
  int64_t prev_end = 0;
  for (int64_t g = 0; g < num_active; ++g) {
    const int64_t start = prev_end;
    const int64_t end = std::clamp<int64_t>(ends[g], start, M);
    prev_end = end;
    if (end == start) continue;
    const int32_t id = ids[g];
    if (id < 0 || id >= num_ids)
      spans.inactive.push_back({start, end});
    else
      spans.by_id[id].push_back({start, end});
  }
  return spans;
}

}  // namespace ggemm::ref::detail
