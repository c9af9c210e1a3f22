// The C ABI: validate, translate, never throw (every entry point catches).
#include <exception>
#include <new>

#include "api/src/validate.h"
#include "ggemm.h"
#include "runtime/device.h"
#include "runtime/launch_grouped.h"
#include "runtime/status.h"

struct ggemm_handle_st {
  static constexpr uint64_t kMagic = 0x6767656d6d5f6831ull;  // "ggemm_h1"
  uint64_t magic = kMagic;
  ggemm::Device *device = nullptr;
};

namespace {

// Runs `body`, turning any C++ exception into a status: nothing escapes the ABI.
template <typename F>
ggemm_status guarded(F &&body) {
  ggemm::clear_error();
  try {
    return body();
  } catch (const std::bad_alloc &) {
    return ggemm::fail(GGEMM_STATUS_OUT_OF_MEMORY, "host memory allocation failed");
  } catch (const std::exception &e) {
    return ggemm::fail(GGEMM_STATUS_INTERNAL_ERROR, "internal error: %s", e.what());
  } catch (...) {
    return ggemm::fail(GGEMM_STATUS_INTERNAL_ERROR, "internal error: unknown exception");
  }
}

bool valid_handle(ggemm_handle_t h) { return h && h->magic == ggemm_handle_st::kMagic && h->device; }

}  // namespace

extern "C" int ggemm_version(void) { return GGEMM_VERSION; }

extern "C" ggemm_status ggemm_create(ggemm_handle_t *handle, int device_ordinal) {
  return guarded([&] {
    if (!handle) return ggemm::fail(GGEMM_STATUS_NULL_POINTER, "handle is NULL");
    *handle = nullptr;
    ggemm::Device *dev = nullptr;
    GGEMM_TRY(ggemm::Device::create(device_ordinal, &dev));
    ggemm_handle_st *h = new (std::nothrow) ggemm_handle_st();
    if (!h) {
      delete dev;
      return ggemm::fail(GGEMM_STATUS_OUT_OF_MEMORY, "allocating the handle");
    }
    h->device = dev;
    *handle = h;
    return GGEMM_STATUS_SUCCESS;
  });
}

extern "C" ggemm_status ggemm_destroy(ggemm_handle_t handle) {
  return guarded([&] {
    if (!handle) return GGEMM_STATUS_SUCCESS;
    if (!valid_handle(handle)) return ggemm::fail(GGEMM_STATUS_INVALID_HANDLE, "handle was not made by ggemm_create");
    handle->magic = 0;
    delete handle->device;
    delete handle;
    return GGEMM_STATUS_SUCCESS;
  });
}

extern "C" ggemm_status ggemm_grouped_matmul(ggemm_handle_t handle, const ggemm_grouped_matmul_args *args,
                                             ggemm_stream_t stream) {
  return guarded([&] {
    // Arguments first: their checks need no device, so a caller learns what
    // is wrong with a call even before it has a handle.
    GGEMM_TRY(ggemm::validate_grouped_matmul_args(args));
    if (!valid_handle(handle))
      return ggemm::fail(GGEMM_STATUS_INVALID_HANDLE, "handle is NULL or was not made by ggemm_create");
    if (args->m == 0) return GGEMM_STATUS_SUCCESS;
    return ggemm::launch_grouped_matmul(*handle->device, *args, reinterpret_cast<CUstream>(stream));
  });
}
