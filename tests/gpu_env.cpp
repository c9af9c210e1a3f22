#include "gpu_env.h"

#include <mutex>

namespace ggemm::testing {

ggemm_handle_t gpu_handle(std::string *why_not) {
  static std::once_flag once;
  static ggemm_handle_t handle = nullptr;
  static std::string reason;
  std::call_once(once, [] {
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0) {
      reason = std::string("the CUDA runtime sees no device (") + cudaGetErrorString(e) + ")";
      return;
    }
    ggemm_status s = ggemm_create(&handle, 0);
    if (s != GGEMM_STATUS_SUCCESS) {
      reason = std::string("ggemm_create: ") + ggemm_status_string(s) + ": " + ggemm_last_error_message();
      handle = nullptr;
    }
  });
  if (!handle && why_not) *why_not = reason;
  return handle;
}

}  // namespace ggemm::testing
