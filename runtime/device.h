// A device as a handle sees it: the driver, the primary context, properties
// read once at creation, and the kernels loaded from the embedded fatbins.
#pragma once
#include <cuda.h>

#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/driver.h"

namespace ggemm {

enum class Arch { kSm90a, kSm100a };

struct DeviceProps {
  int ordinal = 0;
  int cc_major = 0, cc_minor = 0;
  int sm_count = 0;
  int smem_optin = 0;  // opt-in shared memory per block, bytes
};

class Device {
 public:
  ~Device();
  // Loads the driver, checks the device and loads the kernels.
  static ggemm_status create(int ordinal, Device **out);

  const Driver &driver() const { return *drv_; }
  const DeviceProps &props() const { return props_; }
  Arch arch() const { return arch_; }

  // Looks up a kernel by name (cached) and raises its dynamic shared-memory
  // limit to the device's opt-in maximum, once per kernel. Thread-safe.
  ggemm_status kernel(const std::string &name, CUkernel *out);

  // Makes the handle's context current for a scope.
  class ScopedContext {
   public:
    explicit ScopedContext(const Device &d) : d_(d) { status_ = push(); }
    ~ScopedContext();
    ggemm_status status() const { return status_; }

   private:
    ggemm_status push();
    const Device &d_;
    ggemm_status status_;
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
