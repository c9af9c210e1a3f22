// A device as a handle sees it: the driver, the primary context, properties
// read once at creation, and the kernels loaded from the embedded fatbins.
#pragma once
#include <cuda.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/driver.h"

namespace ggemm {

// The architectures ggemm has kernels for. Each is arch-specific ('a') code
// that runs on exactly one compute capability: sm_90a on 9.0 (H100, H200),
// sm_100a on 10.0 (B200, GB200) — not on 10.3 (B300), 11.x or 12.x.
enum class Arch { kSm90a, kSm100a };

// 90 or 100: the tag of the embedded fatbins of that architecture
// (ggemm_fatbin_arch[], cmake/fatbins.S.in).
uint32_t arch_number(Arch a);
// "sm_90a" or "sm_100a".
const char *arch_name(Arch a);
// The architecture whose kernels run on compute capability major.minor;
// false if there is none (the caller refuses the device).
bool arch_for_compute_capability(int major, int minor, Arch *out);

struct DeviceProps {
  int ordinal = 0;
  int cc_major = 0, cc_minor = 0;
  int sm_count = 0;
  int smem_optin = 0;  // opt-in shared memory per block, bytes
  // Whether the driver encodes K-sliced tensor maps (a dimension whose stride
  // is smaller than the one before it; Sm90GroupedParams::k_slices): asked
  // once by Device::create; plans use one slice per stage without them.
  bool sliced_tensor_maps = true;
};

class Device {
 public:
  ~Device();
  // Loads the driver, checks the device and loads the kernels.
  static StatusOr<std::unique_ptr<Device>> create(int ordinal);

  const Driver &driver() const { return *drv_; }
  const DeviceProps &props() const { return props_; }
  Arch arch() const { return arch_; }

  // Looks up a kernel by name (cached) and raises its dynamic shared-memory
  // limit to the device's opt-in maximum, once per kernel. Thread-safe.
  StatusOr<CUkernel> kernel(const std::string &name);

  // Makes the handle's context current for a scope.
  class ScopedContext {
   public:
    explicit ScopedContext(const Device &d) : d_(d) { status_ = push(); }
    ~ScopedContext();
    const Status &status() const { return status_; }

   private:
    Status push();
    const Device &d_;
    Status status_;
  };

 private:
  Device() = default;
  const Driver *drv_ = nullptr;
  DeviceProps props_;
  Arch arch_ = Arch::kSm90a;
  CUdevice dev_ = 0;
  CUcontext ctx_ = nullptr;
  std::vector<CUlibrary> libraries_;
  std::unordered_map<std::string, CUkernel> kernel_index_;  // every embedded kernel; read-only after create
  std::mutex mu_;  // guards kernels_
  std::unordered_map<std::string, CUkernel> kernels_;  // those already given their shared-memory limit
};

}  // namespace ggemm
