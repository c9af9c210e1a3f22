// The CUDA driver, loaded at run time (dlopen of libcuda.so.1): libggemm links
// no CUDA library, so it loads on machines without a driver and reports the
// absence as GGEMM_STATUS_DRIVER_NOT_FOUND instead of failing to load.
#pragma once
#include <cuda.h>

#include <string>

#include "runtime/status.h"

namespace ggemm {

// One pointer per driver entry point we use, resolved through
// cuGetProcAddress for the ABI of the CUDA version that introduced it (the
// second column): a 12.0 driver runs everything but kernel enumeration, which
// needs 12.4.
#define GGEMM_DRIVER_FUNCTIONS(X)          \
  X(cuInit, 12000)                         \
  X(cuDriverGetVersion, 12000)             \
  X(cuGetErrorName, 12000)                 \
  X(cuDeviceGetCount, 12000)               \
  X(cuDeviceGet, 12000)                    \
  X(cuDeviceGetAttribute, 12000)           \
  X(cuDevicePrimaryCtxRetain, 12000)       \
  X(cuDevicePrimaryCtxRelease, 12000)      \
  X(cuCtxPushCurrent, 12000)               \
  X(cuCtxPopCurrent, 12000)                \
  X(cuLibraryLoadData, 12000)              \
  X(cuLibraryUnload, 12000)                \
  X(cuLibraryGetKernelCount, 12040)        \
  X(cuLibraryEnumerateKernels, 12040)      \
  X(cuKernelGetName, 12030)                \
  X(cuKernelGetAttribute, 12000)           \
  X(cuKernelSetAttribute, 12000)           \
  X(cuLaunchKernelEx, 12000)               \
  X(cuOccupancyMaxActiveClusters, 12000)   \
  X(cuTensorMapEncodeTiled, 12000)         \
  GGEMM_DRIVER_TRACE_FUNCTIONS(X)

// Trace builds (cmake -DGGEMM_TRACE=ON) also allocate, copy and synchronise
// for the event buffer (runtime/trace.cpp); other builds resolve none of it.
#if GGEMM_TRACE
#define GGEMM_DRIVER_TRACE_FUNCTIONS(X) \
  X(cuMemAlloc, 12000)                  \
  X(cuMemFree, 12000)                   \
  X(cuMemsetD8Async, 12000)             \
  X(cuMemcpyDtoH, 12000)                \
  X(cuStreamSynchronize, 12000)         \
  X(cuStreamIsCapturing, 12000)
#else
#define GGEMM_DRIVER_TRACE_FUNCTIONS(X)
#endif

struct Driver {
#define GGEMM_DRIVER_MEMBER(name, version) decltype(&::name) name = nullptr;
  GGEMM_DRIVER_FUNCTIONS(GGEMM_DRIVER_MEMBER)
#undef GGEMM_DRIVER_MEMBER
};

// Loads and initialises the driver once per process (thread-safe): the
// process-wide table, or why there is none.
StatusOr<const Driver *> load_driver();

// A failed driver call as an error naming the call and its CUresult
// (OUT_OF_MEMORY for CUDA_ERROR_OUT_OF_MEMORY, else DRIVER_ERROR).
Status driver_error(const Driver &d, CUresult r, const char *call);

// Why code built with CUDA `build_version` (CUDA_VERSION: 13000 is 13.0)
// may not load on a driver of `driver_version` (cuDriverGetVersion): a
// sentence naming both and what to do when the driver's major version is
// older, else "" (within a major version a failed load has another cause).
std::string driver_older_than_build(int driver_version, int build_version);

// A fatbin that failed to load (cuLibraryLoadData returned r): with a driver
// of an older major version than the toolkit that built the kernels, an
// error that says so; otherwise driver_error's (OUT_OF_MEMORY kept).
Status fatbin_load_error(const Driver &d, CUresult r, const char *arch);

}  // namespace ggemm

#define GGEMM_CU(drv, call)                                                  \
  do {                                                                       \
    CUresult ggemm_cu_result_ = (drv).call;                                  \
    if (ggemm_cu_result_ != CUDA_SUCCESS) return ::ggemm::driver_error((drv), ggemm_cu_result_, #call); \
  } while (0)
