#include "runtime/driver.h"

#include <dlfcn.h>

#include <cstdio>

#include <mutex>

namespace ggemm {
namespace {

using GetProcAddress = CUresult (*)(const char *, void **, int, cuuint64_t,
                                    CUdriverProcAddressQueryResult *);

struct Loaded {
  Driver driver;
  ggemm_status status = GGEMM_STATUS_INTERNAL_ERROR;
  char message[512] = "";
};

Loaded load_once() {
  Loaded l;
  void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    l.status = GGEMM_STATUS_DRIVER_NOT_FOUND;
    snprintf(l.message, sizeof l.message,
             "the NVIDIA driver (libcuda.so.1) could not be loaded: %s", dlerror());
    return l;
  }
  auto get_proc = reinterpret_cast<GetProcAddress>(dlsym(lib, "cuGetProcAddress_v2"));
  if (!get_proc) {
    l.status = GGEMM_STATUS_DRIVER_NOT_FOUND;
    snprintf(l.message, sizeof l.message,
             "libcuda.so.1 has no cuGetProcAddress_v2: the driver is older than CUDA 12");
    return l;
  }
#define GGEMM_RESOLVE(name, version)                                                               \
  {                                                                                         \
    void *fn = nullptr;                                                                     \
    CUdriverProcAddressQueryResult q;                                                       \
    if (get_proc(#name, &fn, version, CU_GET_PROC_ADDRESS_DEFAULT, &q) != CUDA_SUCCESS || !fn) { \
      l.status = GGEMM_STATUS_DRIVER_NOT_FOUND;                                             \
      snprintf(l.message, sizeof l.message, "the NVIDIA driver lacks %s (a driver for CUDA %d.%d or newer is needed)", #name, version / 1000, version % 1000 / 10); \
      return l;                                                                             \
    }                                                                                       \
    l.driver.name = reinterpret_cast<decltype(l.driver.name)>(fn);                          \
  }
  GGEMM_DRIVER_FUNCTIONS(GGEMM_RESOLVE)
#undef GGEMM_RESOLVE
  CUresult r = l.driver.cuInit(0);
  if (r == CUDA_ERROR_NO_DEVICE) {
    l.status = GGEMM_STATUS_NO_DEVICE;
    snprintf(l.message, sizeof l.message, "the NVIDIA driver found no CUDA device (cuInit: CUDA_ERROR_NO_DEVICE)");
    return l;
  }
  if (r != CUDA_SUCCESS) {
    const char *name = "?";
    l.driver.cuGetErrorName(r, &name);
    l.status = GGEMM_STATUS_DRIVER_ERROR;
    snprintf(l.message, sizeof l.message, "cuInit failed: %s", name);
    return l;
  }
  l.status = GGEMM_STATUS_SUCCESS;
  return l;  // the library stays loaded for the life of the process
}

}  // namespace

ggemm_status load_driver(const Driver **out) {
  static const Loaded loaded = load_once();  // thread-safe, once
  if (loaded.status != GGEMM_STATUS_SUCCESS) return fail(loaded.status, "%s", loaded.message);
  *out = &loaded.driver;
  return GGEMM_STATUS_SUCCESS;
}

ggemm_status driver_fail(const Driver &d, CUresult r, const char *call) {
  const char *name = "unknown CUresult";
  if (d.cuGetErrorName) d.cuGetErrorName(r, &name);
  return fail(r == CUDA_ERROR_OUT_OF_MEMORY ? GGEMM_STATUS_OUT_OF_MEMORY : GGEMM_STATUS_DRIVER_ERROR,
              "CUDA driver call failed: %s returned %s (%d)", call, name, int(r));
}

}  // namespace ggemm
