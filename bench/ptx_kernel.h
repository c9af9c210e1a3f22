// ptx_kernel.h — a kernel from PTX text, loaded and launched through the
// driver's entry points (queried from the runtime, so nothing links
// libcuda): how the benchmark's harness rows and its L2 flush run kernels of
// their own from .cpp sources. Header-only: ggemm_demo's sources are fixed
// to demo.cpp + gpu_buffers.cpp.
#ifndef GGEMM_BENCH_PTX_KERNEL_H
#define GGEMM_BENCH_PTX_KERNEL_H

#include <cuda.h>
#include <cuda_runtime.h>

#include <string>

#include "gpu_buffers.h"

namespace ggemm::bench {

// A driver function by name, or false.
template <class Fn>
bool driver_entry(const char* name, Fn* fn) {
  cudaDriverEntryPointQueryResult found{};
  return cudaGetDriverEntryPointByVersion(name, reinterpret_cast<void**>(fn), 12000, cudaEnableDefault, &found) ==
             cudaSuccess &&
         found == cudaDriverEntryPointSuccess && *fn;
}

class PtxKernel {
 public:
  PtxKernel() = default;
  ~PtxKernel() { unload(); }
  PtxKernel(const PtxKernel&) = delete;
  PtxKernel& operator=(const PtxKernel&) = delete;

  // Loads `entry` of `ptx` into the runtime's primary context; "" or why not.
  std::string load(const char* ptx, const char* entry) {
    decltype(&cuModuleLoadData) load_data = nullptr;
    decltype(&cuModuleGetFunction) get_function = nullptr;
    if (!driver_entry("cuModuleLoadData", &load_data) || !driver_entry("cuModuleGetFunction", &get_function) ||
        !driver_entry("cuFuncSetAttribute", &set_attribute_) || !driver_entry("cuLaunchKernel", &launch_))
      return "the driver lacks a module or launch entry point";
    CUDA_CHECK(cudaFree(nullptr));  // the runtime's primary context is current from here on
    CUresult r = load_data(&module_, ptx);
    if (r != CUDA_SUCCESS) return std::string("cuModuleLoadData of ") + entry + " returned CUresult " + std::to_string(int(r));
    r = get_function(&function_, module_, entry);
    if (r != CUDA_SUCCESS) return std::string("cuModuleGetFunction(") + entry + ") returned CUresult " + std::to_string(int(r));
    return "";
  }
  // Unloads the module (while its context lives: before the runtime's
  // teardown).
  void unload() {
    decltype(&cuModuleUnload) unload_module = nullptr;
    if (module_ && driver_entry("cuModuleUnload", &unload_module)) unload_module(module_);
    module_ = nullptr;
    function_ = nullptr;
  }

  CUresult set_max_dynamic_smem(int bytes) const {
    return set_attribute_(function_, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, bytes);
  }
  CUresult launch(unsigned grid, unsigned block, unsigned smem, cudaStream_t stream, void** args) const {
    return launch_(function_, grid, 1, 1, block, 1, 1, smem, reinterpret_cast<CUstream>(stream), args, nullptr);
  }

 private:
  CUmodule module_ = nullptr;
  CUfunction function_ = nullptr;
  decltype(&cuFuncSetAttribute) set_attribute_ = nullptr;
  decltype(&cuLaunchKernel) launch_ = nullptr;
};

}  // namespace ggemm::bench

#endif  // GGEMM_BENCH_PTX_KERNEL_H
