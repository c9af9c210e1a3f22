// Event traces of kernel launches, for diagnostic builds only
// (cmake -DGGEMM_TRACE=ON; ptx/blocks/trace.h says what the kernels record).
//
// With GGEMM_TRACE_FILE=path set, a traced launch gets an event buffer, is
// synchronised after it, and appends one record to the file:
//   header (TraceFileHeader below), then grid x kTraceRoles x kTraceEvents
//   pairs of uint64 (value, kind << 32 | arg).
// GGEMM_TRACE_SKIP=n leaves the first n launches of the process untraced
// (warm-up calls), GGEMM_TRACE_COUNT=m traces at most m (default 1).
// Launches into a capturing stream are never traced (the synchronisation
// would break the capture). bench/dev/trace_report.py reads the file.
//
// Tracing synchronises the stream and copies ~13 MB per traced launch:
// timings of the traced calls themselves are not meaningful, only the
// cycle counts inside them.
#pragma once
#include <cuda.h>

#include <cstdint>

#include "ptx/blocks/grouped_params.h"
#include "ptx/blocks/trace.h"
#include "runtime/driver.h"
#include "runtime/status.h"

namespace ggemm {

struct TraceFileHeader {
  char magic[8];      // "GGTRACE1"
  char kernel[96];    // kernel name, NUL-terminated
  uint32_t grid;      // CTAs
  uint32_t roles;     // kTraceRoles
  uint32_t events;    // kTraceEvents per role
  uint32_t tile_m, tile_n, stages, k, swizzle_bytes;
};

#if GGEMM_TRACE
class LaunchTrace {
 public:
  LaunchTrace() = default;
  LaunchTrace(const LaunchTrace &) = delete;
  LaunchTrace &operator=(const LaunchTrace &) = delete;
  ~LaunchTrace();

  // Decides whether this launch is traced; if so allocates and zeroes the
  // buffer and points p->trace at it (else leaves it null).
  Status begin(const Driver &drv, CUstream stream, uint32_t grid, GroupedGemmParams *p);
  // After the launch: waits for it, appends the record, frees the buffer.
  Status end(const Driver &drv, CUstream stream, const TraceFileHeader &header);

 private:
  const Driver *drv_ = nullptr;
  CUdeviceptr buffer_ = 0;
  size_t bytes_ = 0;
};
#endif

}  // namespace ggemm
