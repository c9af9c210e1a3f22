// The launch configuration every ggemm kernel launch is built from
// (cuLaunchKernelEx): a 1-D block, a grid of x (and y) CTAs, and the
// attributes: programmatic dependent launch (every kernel waits for the
// stream's earlier work before its first global access,
// ptx/instr/grid_dependency.h), plus a cluster where asked.
#pragma once
#include <cuda.h>

#include <cstdint>

namespace ggemm {

class LaunchConfig {
 public:
  LaunchConfig(uint32_t threads, uint32_t smem_bytes, CUstream stream, uint32_t cluster_size = 1) {
    config_.gridDimX = config_.gridDimY = config_.gridDimZ = 1;
    config_.blockDimX = threads;
    config_.blockDimY = config_.blockDimZ = 1;
    config_.sharedMemBytes = smem_bytes;
    config_.hStream = stream;
    attrs_[0].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attrs_[0].value.programmaticStreamSerializationAllowed = 1;
    attrs_[1].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    attrs_[1].value.clusterDim.x = cluster_size;
    attrs_[1].value.clusterDim.y = attrs_[1].value.clusterDim.z = 1;
    config_.attrs = attrs_;
    config_.numAttrs = cluster_size > 1 ? 2 : 1;
  }
  // config_.attrs points into this object.
  LaunchConfig(const LaunchConfig &) = delete;
  LaunchConfig &operator=(const LaunchConfig &) = delete;

  void set_grid(uint32_t x, uint32_t y = 1) {
    config_.gridDimX = x;
    config_.gridDimY = y;
  }
  uint32_t grid_x() const { return config_.gridDimX; }
  const CUlaunchConfig *get() const { return &config_; }

  // The same launch with the cluster attribute alone: what
  // cuOccupancyMaxActiveClusters is asked about.
  CUlaunchConfig cluster_only() {
    CUlaunchConfig c = config_;
    c.attrs = &attrs_[1];
    c.numAttrs = 1;
    return c;
  }

 private:
  CUlaunchConfig config_{};
  CUlaunchAttribute attrs_[2]{};
};

}  // namespace ggemm
