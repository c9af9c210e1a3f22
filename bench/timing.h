// timing.h — device-event timing of one call, with the L2 flushed before it.
// Header-only: ggemm_demo's sources are fixed to demo.cpp + gpu_buffers.cpp.
#ifndef GGEMM_BENCH_TIMING_H
#define GGEMM_BENCH_TIMING_H

#include <cuda_runtime.h>

#include <algorithm>
#include <vector>

#include "gpu_buffers.h"

namespace ggemm::bench {

// Overwrites a buffer of twice the L2 size, so the next call starts with
// none of its operands cached (a decode call's weights would otherwise be
// served from L2 on the second repetition).
class L2Flusher {
 public:
  L2Flusher() {
    int device = 0, l2_bytes = 0;
    CUDA_CHECK(cudaGetDevice(&device));
    CUDA_CHECK(cudaDeviceGetAttribute(&l2_bytes, cudaDevAttrL2CacheSize, device));
    buffer_ = DeviceBuffer(2 * static_cast<size_t>(std::max(l2_bytes, 1 << 20)));
  }
  void flush(cudaStream_t stream) {
    value_ ^= 0x5a;  // a different value each time: nothing can be skipped as already written
    CUDA_CHECK(cudaMemsetAsync(buffer_.get(), value_, buffer_.bytes(), stream));
  }
  size_t bytes() const { return buffer_.bytes(); }

 private:
  DeviceBuffer buffer_;
  int value_ = 0;
};

// Two events reused for every measurement.
class EventTimer {
 public:
  EventTimer() {
    CUDA_CHECK(cudaEventCreate(&start_));
    CUDA_CHECK(cudaEventCreate(&stop_));
  }
  ~EventTimer() {
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
  }
  EventTimer(const EventTimer&) = delete;
  EventTimer& operator=(const EventTimer&) = delete;

  // Milliseconds of the work `enqueue()` puts on `stream`. The flush is
  // enqueued before the start event, so it is outside the timed region; it
  // also gives the host ~30 us of device work to get the call queued behind.
  template <class Fn>
  float time(cudaStream_t stream, L2Flusher* flusher, Fn&& enqueue) {
    if (flusher) flusher->flush(stream);
    CUDA_CHECK(cudaEventRecord(start_, stream));
    enqueue();
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaEventRecord(stop_, stream));
    CUDA_CHECK(cudaEventSynchronize(stop_));
    float ms = 0.0f;
    CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
    return ms;
  }

 private:
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
};

inline double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const size_t h = v.size() / 2;
  return v.size() % 2 ? v[h] : 0.5 * (v[h - 1] + v[h]);
}

// Median milliseconds of `reps` timed calls after `warmup` untimed ones
// (module loading, cuBLAS heuristics and first-touch stay out of it).
template <class Fn>
double median_ms(cudaStream_t stream, L2Flusher* flusher, int warmup, int reps, Fn&& enqueue) {
  for (int i = 0; i < warmup; ++i) enqueue();
  CUDA_CHECK(cudaGetLastError());
  CUDA_CHECK(cudaStreamSynchronize(stream));
  EventTimer timer;
  std::vector<double> ms;
  for (int i = 0; i < reps; ++i) ms.push_back(timer.time(stream, flusher, enqueue));
  return median(ms);
}

}  // namespace ggemm::bench

#endif  // GGEMM_BENCH_TIMING_H
