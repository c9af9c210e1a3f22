#include "runtime/device.h"

#include "runtime/tensor_map.h"

#include <cstdint>
#include <memory>
#include <new>
#include <vector>

// The embedded fatbins (cmake/fatbins.S.in), each with the one architecture
// it holds code for (90, 100).
extern "C" const void *const ggemm_fatbin_table[];
extern "C" const uint32_t ggemm_fatbin_arch[];
extern "C" const uint32_t ggemm_fatbin_count;

namespace ggemm {

uint32_t arch_number(Arch a) { return a == Arch::kSm100a ? 100 : 90; }

const char *arch_name(Arch a) { return a == Arch::kSm100a ? "sm_100a" : "sm_90a"; }

bool arch_for_compute_capability(int major, int minor, Arch *out) {
  // Exact matches only: 'a' code is not forward-compatible, so sm_100a SASS
  // does not run on 10.3 (B300) or any later Blackwell, nor sm_90a on 10.x.
  if (major == 9 && minor == 0) {
    *out = Arch::kSm90a;
    return true;
  }
  if (major == 10 && minor == 0) {
    *out = Arch::kSm100a;
    return true;
  }
  return false;
}

StatusOr<std::unique_ptr<Device>> Device::create(int ordinal) {
  const Driver *drv = nullptr;
  GGEMM_ASSIGN_OR_RETURN(drv, load_driver());
  int count = 0;
  GGEMM_CU(*drv, cuDeviceGetCount(&count));
  if (ordinal < 0 || ordinal >= count)
    return error(GGEMM_STATUS_NO_DEVICE, "device_ordinal %d: the driver sees %d CUDA device(s)", ordinal, count);

  std::unique_ptr<Device> d(new (std::nothrow) Device());
  if (!d) return error(GGEMM_STATUS_OUT_OF_MEMORY, "allocating the handle");
  d->drv_ = drv;
  d->props_.ordinal = ordinal;
  GGEMM_CU(*drv, cuDeviceGet(&d->dev_, ordinal));
  GGEMM_CU(*drv, cuDeviceGetAttribute(&d->props_.cc_major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, d->dev_));
  GGEMM_CU(*drv, cuDeviceGetAttribute(&d->props_.cc_minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, d->dev_));
  GGEMM_CU(*drv, cuDeviceGetAttribute(&d->props_.sm_count, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, d->dev_));
  GGEMM_CU(*drv, cuDeviceGetAttribute(&d->props_.smem_optin,
                                      CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, d->dev_));

  if (!arch_for_compute_capability(d->props_.cc_major, d->props_.cc_minor, &d->arch_))
    return error(GGEMM_STATUS_UNSUPPORTED_DEVICE,
                "device %d has compute capability %d.%d; ggemm has kernels for compute capability 9.0 (sm_90a: "
                "H100, H200) and 10.0 (sm_100a: B200, GB200) only (sm_100a code does not run on 10.3, e.g. "
                "B300)",
                ordinal, d->props_.cc_major, d->props_.cc_minor);

  GGEMM_CU(*drv, cuDevicePrimaryCtxRetain(&d->ctx_, d->dev_));
  {
    // The driver answers this only with a context current (without one the
    // probe's encode fails, and every plan would lose its K-sliced stages).
    ScopedContext ctx(*d);
    GGEMM_RETURN_IF_ERROR(ctx.status());
    d->props_.sliced_tensor_maps = sliced_views_supported(*drv);
  }
  // Library loading is context-independent (cuLibrary*), so no push here.
  // Only this architecture's fatbins: each holds code for one architecture,
  // and the driver refuses to load one with nothing for this device.
  for (uint32_t i = 0; i < ggemm_fatbin_count; ++i) {
    if (ggemm_fatbin_arch[i] != arch_number(d->arch_)) continue;
    CUlibrary lib = nullptr;
    const CUresult loaded = drv->cuLibraryLoadData(&lib, ggemm_fatbin_table[i], nullptr, nullptr, 0, nullptr, nullptr, 0);
    if (loaded != CUDA_SUCCESS) return fatbin_load_error(*drv, loaded, arch_name(d->arch_));
    d->libraries_.push_back(lib);
    // Index every kernel by name now, so a lookup is one map probe and never
    // a failed driver call (those would be noise in compute-sanitizer logs).
    unsigned count = 0;
    GGEMM_CU(*drv, cuLibraryGetKernelCount(&count, lib));
    std::vector<CUkernel> kernels(count);
    if (count) GGEMM_CU(*drv, cuLibraryEnumerateKernels(kernels.data(), count, lib));
    for (CUkernel k : kernels) {
      const char *name = nullptr;
      GGEMM_CU(*drv, cuKernelGetName(&name, k));
      d->kernel_index_.emplace(name, k);
    }
  }
  if (d->libraries_.empty())
    return error(GGEMM_STATUS_UNSUPPORTED_DEVICE, "device %d is %s, but this build embeds no %s kernels", ordinal,
                 arch_name(d->arch_), arch_name(d->arch_));
  return d;
}

Device::~Device() {
  for (CUlibrary lib : libraries_) drv_->cuLibraryUnload(lib);
  if (ctx_) drv_->cuDevicePrimaryCtxRelease(dev_);
}

StatusOr<CUkernel> Device::kernel(const std::string &name) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = kernels_.find(name);
  if (it != kernels_.end()) return it->second;
  auto found = kernel_index_.find(name);
  CUkernel k = found == kernel_index_.end() ? nullptr : found->second;
  if (!k) return error(GGEMM_STATUS_INTERNAL_ERROR, "kernel %s is not in the embedded fatbins", name.c_str());
  // The opt-in limit covers static and dynamic shared memory together: a
  // kernel's static shared memory, if it has any, leaves that much less for
  // the dynamic layout.
  int static_bytes = 0;
  GGEMM_CU(*drv_, cuKernelGetAttribute(&static_bytes, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, k, dev_));
  GGEMM_CU(*drv_, cuKernelSetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                       props_.smem_optin - static_bytes, k, dev_));
  kernels_.emplace(name, k);
  return k;
}

Status Device::ScopedContext::push() {
  GGEMM_CU(d_.driver(), cuCtxPushCurrent(d_.ctx_));
  return OkStatus();
}

Device::ScopedContext::~ScopedContext() {
  if (status_.ok()) {
    CUcontext popped;
    d_.driver().cuCtxPopCurrent(&popped);
  }
}

}  // namespace ggemm
