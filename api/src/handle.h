// What every C ABI entry point file shares (api/src/ggemm_api.cpp,
// api/src/moe_api.cpp): the handle, the exception guard, the handle check and
// the launch of a grouped matmul described as a GroupedLaunch.
#pragma once
#include <atomic>
#include <cstdint>
#include <exception>
#include <new>

#include "api/src/errors.h"
#include "ggemm.h"
#include "runtime/device.h"
#include "runtime/launch_grouped.h"

struct ggemm_handle_st {
  static constexpr uint64_t kMagic = 0x6767656d6d5f6831ull;  // "ggemm_h1"
  uint64_t magic = kMagic;
  ggemm::Device *device = nullptr;
  std::atomic<uint32_t *> device_status{nullptr};  // checked mode; null = off
};

namespace ggemm::api {

// Runs `body`, turning any C++ exception into a status: nothing escapes the ABI.
template <typename F>
ggemm_status guarded(F &&body) {
  clear_error();
  try {
    return body();
  } catch (const std::bad_alloc &) {
    return fail(GGEMM_STATUS_OUT_OF_MEMORY, "host memory allocation failed");
  } catch (const std::exception &e) {
    return fail(GGEMM_STATUS_INTERNAL_ERROR, "internal error: %s", e.what());
  } catch (...) {
    return fail(GGEMM_STATUS_INTERNAL_ERROR, "internal error: unknown exception");
  }
}

inline bool valid_handle(ggemm_handle_t h) { return h && h->magic == ggemm_handle_st::kMagic && h->device; }

inline ggemm_status check_handle(ggemm_handle_t h) {
  if (!valid_handle(h)) return fail(GGEMM_STATUS_INVALID_HANDLE, "handle is NULL or was not made by ggemm_create");
  return GGEMM_STATUS_SUCCESS;
}

// The handle's checked-mode word (null: off), as launches take it.
inline uint32_t *checked_mode_word(ggemm_handle_t h) { return h->device_status.load(std::memory_order_acquire); }

// The config override's checks (they need the device's architecture), then
// the launch; a runtime error becomes the C ABI's status and message.
ggemm_status launch(ggemm_handle_t handle, const GroupedLaunch &l, ggemm_stream_t stream);

}  // namespace ggemm::api
