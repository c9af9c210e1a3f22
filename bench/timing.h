// timing.h — device-event timing of one call, with the L2 flushed before it,
// and of calls back to back in a busy stream (in_stream_ms).
// Header-only: ggemm_demo's sources are fixed to demo.cpp + gpu_buffers.cpp.
#ifndef GGEMM_BENCH_TIMING_H
#define GGEMM_BENCH_TIMING_H

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "timing_flags.h"
#include "gpu_buffers.h"
#include "harness_ptx.h"
#include "ptx_kernel.h"

namespace ggemm::bench {

// Leaves the L2 holding none of the next call's operands, and (by default)
// no dirty lines. A memset of twice the L2 size evicts everything, but its
// own writes then sit dirty in the L2, and the timed call pays their
// write-back to DRAM as it allocates lines: up to the L2's 50-60 MB of
// write traffic charged to whichever call runs next (~12 us at copy
// bandwidth; on the H200 the LoRA shrink's 32 MB read ran 19.2 us after
// the memset alone, 16.7 after this flush). So after the memset a read
// sweep of the same buffer writes those lines back and leaves the L2 full
// of clean, unrelated lines: the flush's cost stays in the untimed flush.
// GGEMM_BENCH_L2_FLUSH=dirty keeps the memset alone (the figures before
// v0.13).
class L2Flusher {
 public:
  L2Flusher() {
    int device = 0, l2_bytes = 0, sms = 0;
    CUDA_CHECK(cudaGetDevice(&device));
    CUDA_CHECK(cudaDeviceGetAttribute(&l2_bytes, cudaDevAttrL2CacheSize, device));
    CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    buffer_ = DeviceBuffer(2 * static_cast<size_t>(std::max(l2_bytes, 1 << 20)));
    sink_ = DeviceBuffer(16);
    sweep_blocks_ = unsigned(2 * std::max(sms, 1));
    clean_ = absl::GetFlag(FLAGS_l2_flush) != "dirty";
    if (clean_) {
      // The harness's streaming kernel, reading, one 16-byte load at a time a
      // thread (grid-stride, as the sweep always read).
      const std::string error = sweep_.load(stream_ptx(1).c_str(), "ggemm_bench_stream");
      if (!error.empty()) {
        std::fprintf(stderr, "ggemm_bench: the L2 flush's read sweep: %s\n", error.c_str());
        std::exit(1);
      }
    }
  }
  void flush(cudaStream_t stream) {
    value_ ^= 0x5a;  // a different value each time: nothing can be skipped as already written
    CUDA_CHECK(cudaMemsetAsync(buffer_.get(), value_, buffer_.bytes(), stream));
    if (!clean_) return;
    void* base = buffer_.get();
    unsigned long long vectors = buffer_.bytes() / 16;
    uint32_t write = 0;  // loads
    void* sink = sink_.get();
    void* args[] = {&base, &vectors, &write, &sink};
    const CUresult r = sweep_.launch(sweep_blocks_, 1024, 0, stream, args);
    if (r != CUDA_SUCCESS) {
      std::fprintf(stderr, "ggemm_bench: launching the L2 flush's read sweep returned CUresult %d\n", int(r));
      std::exit(1);
    }
  }
  size_t bytes() const { return buffer_.bytes(); }
  // How the flush works, for the benchmark's context line.
  const char* describe() const {
    return clean_ ? "memset, then a read sweep of it (the L2 left clean)" : "memset (the L2 left dirty)";
  }

 private:
  DeviceBuffer buffer_, sink_;
  PtxKernel sweep_;
  unsigned sweep_blocks_ = 0;
  bool clean_ = true;
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

// Back-to-back calls, as a model's forward pass makes them: `calls`
// enqueues captured into one CUDA graph, no flush between them (warm L2);
// each launch of the graph is timed between events and divided by `calls`.
// Where the calls cannot be captured (a call that launches a graph of its
// own, say), the same calls are enqueued back to back on the stream instead,
// and captured() says so.
class BackToBack {
 public:
  BackToBack() = default;
  BackToBack(const BackToBack&) = delete;
  BackToBack& operator=(const BackToBack&) = delete;
  ~BackToBack() {
    if (exec_) cudaGraphExecDestroy(exec_);
  }

  // Captures `calls` enqueues; "" on success (captured or not), else the
  // first enqueue's error. `enqueue` returns "" or an error message.
  template <class Fn>
  std::string prepare(cudaStream_t stream, int calls, Fn&& enqueue) {
    calls_ = calls;
    std::string err;
    cudaGraph_t graph = nullptr;
    if (cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal) == cudaSuccess) {
      for (int i = 0; i < calls && err.empty(); ++i) err = enqueue();
      const cudaError_t end = cudaStreamEndCapture(stream, &graph);
      if (end == cudaSuccess && err.empty() && graph &&
          cudaGraphInstantiate(&exec_, graph, 0) != cudaSuccess)
        exec_ = nullptr;
    }
    if (graph) cudaGraphDestroy(graph);
    (void)cudaGetLastError();  // a refused capture leaves its error: not the calls'
    if (!exec_) {  // not capturable: check that the calls run at all
      err.clear();
      for (int i = 0; i < calls && err.empty(); ++i) err = enqueue();
      CUDA_CHECK(cudaStreamSynchronize(stream));
    }
    return err;
  }

  bool captured() const { return exec_ != nullptr; }

  // Milliseconds per call of one back-to-back run. `during()` runs on the
  // host once the run is enqueued, while the GPU works through it (a reading
  // of the clock and power under load).
  template <class Fn, class During>
  float time_per_call(cudaStream_t stream, EventTimer& timer, Fn&& enqueue, During&& during) {
    const float ms = timer.time(stream, nullptr, [&] {
      if (exec_) {
        CUDA_CHECK(cudaGraphLaunch(exec_, stream));
      } else {
        for (int i = 0; i < calls_; ++i) enqueue();
      }
      during();
    });
    return ms / float(calls_);
  }

 private:
  cudaGraphExec_t exec_ = nullptr;
  int calls_ = 0;
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

// Milliseconds per call of `enqueue` in a busy stream, as a serving
// engine's stream runs it: `calls` calls back to back, each after a flush,
// between one pair of events, less the same flushes alone. A call's launch
// is then queued behind the flush before it, so the ~2.8 us that a lone
// call between two events pays for its launch and the events
// (harness_null_kernel_*) mostly overlap the flush; and what the call
// leaves dirty in the L2 is written back during the next flush, so it is
// charged to the call. The flushes also keep the host ahead of the device
// (a graph launch takes the host ~2-3 us), so warm-L2 rows, without them,
// have no such figure. Every row that reports the figure takes the defaults.
//
// The figure is a small difference of two ~1 ms sequences (20 flushes of
// ~55 us each), so a drift of the clocks between the two sides moves it by
// microseconds: an earlier version (three alternations, with-calls timed
// first each time) gave the same empty kernel 2.63 us on a freshly started
// machine and 1.24 after minutes of other rows. So the flushes
// run once untimed first, the `pairs` pairs alternate which side goes first,
// and the figure is the median of the pairs' differences.
template <class Fn>
double in_stream_ms(cudaStream_t stream, L2Flusher& flusher, Fn&& enqueue, int calls = 20, int pairs = 8) {
  EventTimer timer;
  auto with_calls = [&] {
    return timer.time(stream, nullptr, [&] {
      for (int i = 0; i < calls; ++i) {
        flusher.flush(stream);
        enqueue();
      }
    });
  };
  auto flushes_alone = [&] {
    return timer.time(stream, nullptr, [&] {
      for (int i = 0; i < calls; ++i) flusher.flush(stream);
    });
  };
  flushes_alone();  // untimed: the clocks settle under the flushes' load first
  std::vector<double> differences;
  for (int r = 0; r < pairs; ++r) {
    double with = 0, alone = 0;
    if (r % 2 == 0) {
      with = with_calls();
      alone = flushes_alone();
    } else {
      alone = flushes_alone();
      with = with_calls();
    }
    differences.push_back(with - alone);
  }
  return median(differences) / calls;
}

}  // namespace ggemm::bench

#endif  // GGEMM_BENCH_TIMING_H
