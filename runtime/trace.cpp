#include "runtime/trace.h"

#if GGEMM_TRACE
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

namespace ggemm {
namespace {

long env_long(const char *name, long fallback) {
  const char *v = std::getenv(name);
  return v && *v ? std::strtol(v, nullptr, 10) : fallback;
}

std::atomic<long> g_launches{0};
std::mutex g_file_mutex;  // one record at a time, whole

}  // namespace

LaunchTrace::~LaunchTrace() {
  if (buffer_) drv_->cuMemFree(buffer_);
}

Status LaunchTrace::begin(const Driver &drv, CUstream stream, uint32_t grid, GroupedGemmParams *p) {
  p->trace = nullptr;
  if (!std::getenv("GGEMM_TRACE_FILE")) return OkStatus();
  CUstreamCaptureStatus capture = CU_STREAM_CAPTURE_STATUS_NONE;
  GGEMM_CU(drv, cuStreamIsCapturing(stream, &capture));
  if (capture != CU_STREAM_CAPTURE_STATUS_NONE) return OkStatus();
  const long index = g_launches.fetch_add(1);
  const long skip = env_long("GGEMM_TRACE_SKIP", 0), count = env_long("GGEMM_TRACE_COUNT", 1);
  if (index < skip || index >= skip + count) return OkStatus();
  drv_ = &drv;
  bytes_ = size_t(grid) * kTraceWordsPerCta * sizeof(uint64_t);
  GGEMM_CU(drv, cuMemAlloc(&buffer_, bytes_));
  GGEMM_CU(drv, cuMemsetD8Async(buffer_, 0, bytes_, stream));
  p->trace = reinterpret_cast<uint64_t *>(buffer_);
  return OkStatus();
}

Status LaunchTrace::end(const Driver &drv, CUstream stream, const TraceFileHeader &header) {
  if (!buffer_) return OkStatus();
  GGEMM_CU(drv, cuStreamSynchronize(stream));
  std::vector<uint64_t> words(bytes_ / sizeof(uint64_t));
  GGEMM_CU(drv, cuMemcpyDtoH(words.data(), buffer_, bytes_));
  const char *path = std::getenv("GGEMM_TRACE_FILE");
  std::lock_guard<std::mutex> lock(g_file_mutex);
  FILE *f = std::fopen(path, "ab");
  if (!f) {
    std::fprintf(stderr, "[ggemm] GGEMM_TRACE_FILE=%s: cannot open for appending\n", path);
    return OkStatus();  // a diagnostic aid: the call itself succeeded
  }
  std::fwrite(&header, sizeof header, 1, f);
  std::fwrite(words.data(), sizeof(uint64_t), words.size(), f);
  std::fclose(f);
  std::fprintf(stderr, "[ggemm] traced %s (%u CTAs) into %s\n", header.kernel, header.grid, path);
  return OkStatus();
}

}  // namespace ggemm
#endif
