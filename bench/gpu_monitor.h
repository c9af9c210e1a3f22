// gpu_monitor.h — the SM clock and board power of the benchmark's GPU, read
// through NVML (libnvidia-ml.so.1, opened at run time: the benchmark links
// no NVML and runs without it). Sustained rows run at the H200's 700 W cap,
// where the clock, not the schedule, sets the time; each such row reports
// the clock and power read between its timed iterations.
#ifndef GGEMM_BENCH_GPU_MONITOR_H
#define GGEMM_BENCH_GPU_MONITOR_H

#include <cuda_runtime.h>
#include <dlfcn.h>

#include <cstdio>

namespace ggemm::bench {

class GpuMonitor {
 public:
  // The monitor of CUDA device `device` (found by its PCI bus id, so
  // CUDA_VISIBLE_DEVICES cannot point it at another board); ok() is false
  // where NVML is missing or does not know the device.
  explicit GpuMonitor(int device) {
    void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return;
    auto init = reinterpret_cast<int (*)()>(dlsym(lib, "nvmlInit_v2"));
    auto by_bus = reinterpret_cast<int (*)(const char*, Device*)>(dlsym(lib, "nvmlDeviceGetHandleByPciBusId_v2"));
    clock_ = reinterpret_cast<int (*)(Device, int, unsigned*)>(dlsym(lib, "nvmlDeviceGetClockInfo"));
    power_ = reinterpret_cast<int (*)(Device, unsigned*)>(dlsym(lib, "nvmlDeviceGetPowerUsage"));
    char bus[32] = {};
    if (!init || !by_bus || !clock_ || !power_ || init() != 0 ||
        cudaDeviceGetPCIBusId(bus, sizeof bus, device) != cudaSuccess || by_bus(bus, &device_) != 0)
      device_ = nullptr;
  }

  bool ok() const { return device_ != nullptr; }

  // The SM clock now, MHz; 0 when unknown.
  unsigned sm_mhz() const {
    unsigned v = 0;
    return ok() && clock_(device_, kNvmlClockSm, &v) == 0 ? v : 0;
  }
  // The board's power draw now, watts; 0 when unknown.
  double power_w() const {
    unsigned mw = 0;
    return ok() && power_(device_, &mw) == 0 ? mw * 1e-3 : 0.0;
  }

 private:
  using Device = struct nvmlDevice_st*;  // NVML's opaque handle
  static constexpr int kNvmlClockSm = 1;  // nvmlClockType_t NVML_CLOCK_SM
  Device device_ = nullptr;
  int (*clock_)(Device, int, unsigned*) = nullptr;
  int (*power_)(Device, unsigned*) = nullptr;
};

}  // namespace ggemm::bench

#endif  // GGEMM_BENCH_GPU_MONITOR_H
