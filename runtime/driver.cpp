#include "runtime/driver.h"

#include <dlfcn.h>

#include <cstdio>
#include <mutex>
#include <string>

namespace ggemm {
namespace {

using GetProcAddress = CUresult (*)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);

// dlopen, resolve every entry point of GGEMM_DRIVER_FUNCTIONS, cuInit.
Status load(Driver *d) {
  void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib)
    return error(GGEMM_STATUS_DRIVER_NOT_FOUND, "the NVIDIA driver (libcuda.so.1) could not be loaded: %s",
                 dlerror());
  auto get_proc = reinterpret_cast<GetProcAddress>(dlsym(lib, "cuGetProcAddress_v2"));
  if (!get_proc)
    return error(GGEMM_STATUS_DRIVER_NOT_FOUND,
                 "libcuda.so.1 has no cuGetProcAddress_v2: the driver is older than CUDA 12");
#define GGEMM_RESOLVE(name, version)                                                                         \
  {                                                                                                          \
    void *fn = nullptr;                                                                                      \
    CUdriverProcAddressQueryResult q;                                                                        \
    if (get_proc(#name, &fn, version, CU_GET_PROC_ADDRESS_DEFAULT, &q) != CUDA_SUCCESS || !fn)               \
      return error(GGEMM_STATUS_DRIVER_NOT_FOUND,                                                            \
                   "the NVIDIA driver lacks %s (a driver for CUDA %d.%d or newer is needed)", #name,         \
                   version / 1000, version % 1000 / 10);                                                     \
    d->name = reinterpret_cast<decltype(d->name)>(fn);                                                       \
  }
  GGEMM_DRIVER_FUNCTIONS(GGEMM_RESOLVE)
#undef GGEMM_RESOLVE
  const CUresult r = d->cuInit(0);
  if (r == CUDA_ERROR_NO_DEVICE)
    return error(GGEMM_STATUS_NO_DEVICE, "the NVIDIA driver found no CUDA device (cuInit: CUDA_ERROR_NO_DEVICE)");
  if (r != CUDA_SUCCESS) return driver_error(*d, r, "cuInit(0)");
  return OkStatus();  // the library stays loaded for the life of the process
}

}  // namespace

StatusOr<const Driver *> load_driver() {
  static std::once_flag once;
  static Driver driver;
  static Status loaded;
  std::call_once(once, [] { loaded = load(&driver); });
  if (!loaded.ok()) return loaded;
  return &driver;
}

namespace {

// The CUresult's name for messages ("unknown CUresult" if the driver has none).
const char *result_name(const Driver &d, CUresult r) {
  const char *name = "unknown CUresult";
  if (d.cuGetErrorName) d.cuGetErrorName(r, &name);
  return name;
}

}  // namespace

Status driver_error(const Driver &d, CUresult r, const char *call) {
  return error(r == CUDA_ERROR_OUT_OF_MEMORY ? GGEMM_STATUS_OUT_OF_MEMORY : GGEMM_STATUS_DRIVER_ERROR,
               "CUDA driver call failed: %s returned %s (%d)", call, result_name(d, r), int(r));
}

std::string driver_older_than_build(int driver_version, int build_version) {
  // Within one major version the driver loads code of a later minor one
  // (CUDA's minor version compatibility; the fatbins hold SASS only), so
  // only an older major version is named.
  if (driver_version / 1000 >= build_version / 1000) return "";
  char text[320];
  std::snprintf(text, sizeof text,
                "the NVIDIA driver supports CUDA %d.%d and ggemm's kernels were built with CUDA %d.%d: update the "
                "driver to one for CUDA %d.%d or newer, or build ggemm with a CUDA toolkit no newer than the driver",
                driver_version / 1000, driver_version % 1000 / 10, build_version / 1000, build_version % 1000 / 10,
                build_version / 1000, build_version % 1000 / 10);
  return text;
}

Status fatbin_load_error(const Driver &d, CUresult r, const char *arch) {
  int version = 0;
  if (r != CUDA_ERROR_OUT_OF_MEMORY && d.cuDriverGetVersion(&version) == CUDA_SUCCESS) {
    const std::string why = driver_older_than_build(version, CUDA_VERSION);
    if (!why.empty())
      return error(GGEMM_STATUS_DRIVER_ERROR,
                   "loading ggemm's %s kernels failed (cuLibraryLoadData returned %s (%d)): %s", arch,
                   result_name(d, r), int(r), why.c_str());
  }
  return driver_error(d, r, "cuLibraryLoadData");
}

}  // namespace ggemm
