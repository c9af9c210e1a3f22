// The C ABI: validate, translate, never throw (every entry point catches).
#include "api/src/handle.h"
#include "api/src/validate.h"
#include "ggemm.h"
#include "runtime/device.h"
#include "runtime/launch_grouped.h"
#include "runtime/plan.h"

namespace ggemm::api {

ggemm_status launch(ggemm_handle_t handle, const GroupedLaunch &l, ggemm_stream_t stream) {
  Device &dev = *handle->device;
  GGEMM_TRY(validate_config(l.config, dev.arch(), dev.props(), l.shape));
  return report(launch_grouped(dev, l, reinterpret_cast<CUstream>(stream)));
}

}  // namespace ggemm::api

namespace {

using ggemm::api::check_handle;
using ggemm::api::guarded;
using ggemm::api::launch;
using ggemm::api::valid_handle;

// A view of the whole of C for every segment (plain grouped matmul).
void view_all(ggemm::GroupedLaunch &l, void *c, int64_t m, int64_t n) {
  for (auto &v : l.views) v = ggemm::OutputViewDesc{c, n, 0, m, n};
}

// The routing and config fields every operation shares, and the handle's
// checked mode.
template <typename Args>
void copy_routing(ggemm::GroupedLaunch &l, const Args &a, const int32_t *ids, ggemm_handle_t handle) {
  l.device_status = ggemm::api::checked_mode_word(handle);
  l.a_offsets = a.a_offsets;
  l.expert_ids = ids;
  l.usage_stats = a.expert_usage_stats;
  l.shape.num_groups = a.num_groups;
  l.shape.max_rows_per_group = a.max_rows_per_group;
  l.config = a.config;
}

}  // namespace

extern "C" int ggemm_version(void) { return GGEMM_VERSION; }

extern "C" ggemm_status ggemm_create(ggemm_handle_t *handle, int device_ordinal) {
  return guarded([&] {
    if (!handle) return ggemm::fail(GGEMM_STATUS_NULL_POINTER, "handle is NULL");
    *handle = nullptr;
    ggemm::StatusOr<std::unique_ptr<ggemm::Device>> dev = ggemm::Device::create(device_ordinal);
    if (!dev.ok()) return ggemm::report(dev.status());
    ggemm_handle_st *h = new (std::nothrow) ggemm_handle_st();
    if (!h) return ggemm::fail(GGEMM_STATUS_OUT_OF_MEMORY, "allocating the handle");
    h->device = dev->release();
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

extern "C" ggemm_status ggemm_set_device_status(ggemm_handle_t handle, uint32_t *device_status) {
  return guarded([&] {
    GGEMM_TRY(check_handle(handle));
    if (reinterpret_cast<uintptr_t>(device_status) % 4 != 0)
      return ggemm::fail(GGEMM_STATUS_MISALIGNED_POINTER, "device_status %p is not 4-byte aligned",
                         static_cast<void *>(device_status));
    handle->device_status.store(device_status, std::memory_order_release);
    return GGEMM_STATUS_SUCCESS;
  });
}

extern "C" ggemm_status ggemm_grouped_matmul(ggemm_handle_t handle, const ggemm_grouped_matmul_args *args,
                                             ggemm_stream_t stream) {
  return guarded([&] {
    // Arguments first: their checks need no device, so a caller learns what
    // is wrong with a call even before it has a handle.
    ggemm_grouped_matmul_args a;  // the caller's struct, of any version ggemm.h names
    GGEMM_TRY(ggemm::validate_grouped_matmul_args(args, &a));
    GGEMM_TRY(check_handle(handle));
    if (a.m == 0) return GGEMM_STATUS_SUCCESS;
    const bool planes = a.a_plane_split0 != 0 || a.a_plane_split1 != 0;
    ggemm::GroupedLaunch l{};
    l.op = "grouped_matmul";
    l.shape.a_dtype = a.a_dtype;
    l.shape.c_dtype = a.c_dtype;
    l.shape.m = a.m, l.shape.n = a.n, l.shape.k = a.k;
    l.shape.transpose_b = a.transpose_b != 0;
    l.shape.split0 = a.a_plane_split0, l.shape.split1 = a.a_plane_split1;
    l.shape.a_planes = planes;
    l.shape.epilogue = a.epilogue;
    l.num_experts = a.num_experts;
    l.shape.gather = a.a_row_index != nullptr;
    l.a = a.a;
    l.a_rows = l.shape.gather ? a.a_rows : planes ? 3 * a.m : a.m;
    l.a_row_index = a.a_row_index;
    l.b = a.b;
    // SwiGLU's outputs are half the weight rows wide.
    view_all(l, a.c, a.m, a.epilogue == GGEMM_EPILOGUE_SWIGLU ? a.n / 2 : a.n);
    copy_routing(l, a, a.expert_ids, handle);
    if (a.group_ends) {
      // The kernels read a_offsets[g + 1] for group g's end and never
      // a_offsets[0] (ptx/blocks/tile_scheduler.h), so the ends serve as
      // a_offsets from one entry before them: no copy, no extra launch.
      // Integer arithmetic: the address is device memory, never dereferenced here.
      l.a_offsets = reinterpret_cast<const uint32_t *>(reinterpret_cast<uintptr_t>(a.group_ends) - sizeof(uint32_t));
      l.first_offset_implicit = true;
    }
    l.row_scale = a.row_scale;
    l.alpha = 1.f;
    return launch(handle, l, stream);
  });
}

// LoRA-A shrink: the grouped GEMM over fused columns [0, 3R) of lora_a, cut
// into three R-wide segments whose views are the planes of P.
extern "C" ggemm_status ggemm_lora_shrink_qkv(ggemm_handle_t handle, const ggemm_lora_shrink_qkv_args *args,
                                              ggemm_stream_t stream) {
  return guarded([&] {
    GGEMM_TRY(ggemm::validate_lora_shrink_args(args));
    GGEMM_TRY(check_handle(handle));
    if (args->m == 0) return GGEMM_STATUS_SUCCESS;
    const ggemm_lora_shrink_qkv_args &a = *args;
    const int64_t r = a.rank;
    ggemm::GroupedLaunch l{};
    l.op = "lora_shrink_qkv";
    l.shape.a_dtype = a.x_dtype;
    l.shape.c_dtype = a.p_dtype;
    l.shape.m = a.m, l.shape.n = 3 * r, l.shape.k = a.k;
    l.shape.transpose_b = true;
    l.shape.split0 = r, l.shape.split1 = 2 * r;
    l.shape.a_planes = false;
    l.shape.epilogue = a.accumulate ? GGEMM_EPILOGUE_ACCUMULATE : GGEMM_EPILOGUE_STORE;
    l.num_experts = a.num_adapters;
    l.a = a.x;
    l.a_rows = a.m;
    l.b = a.lora_a;
    for (int s = 0; s < 3; ++s)
      l.views[s] = ggemm::OutputViewDesc{static_cast<char *>(a.p) + size_t(s) * a.m * r * ggemm::dtype_bytes(a.p_dtype), r,
                                         s * r, a.m, r};
    copy_routing(l, a, a.adapter_ids, handle);
    l.alpha = a.scale;
    return launch(handle, l, stream);
  });
}

// LoRA-B expand: the grouped GEMM over fused columns [0, q + 2 kv) of
// lora_b; segment s reads plane s of P and writes q_out, kv_out's K rows or
// kv_out's V rows.
extern "C" ggemm_status ggemm_lora_expand_qkv(ggemm_handle_t handle, const ggemm_lora_expand_qkv_args *args,
                                              ggemm_stream_t stream) {
  return guarded([&] {
    GGEMM_TRY(ggemm::validate_lora_expand_args(args));
    GGEMM_TRY(check_handle(handle));
    if (args->m == 0) return GGEMM_STATUS_SUCCESS;
    const ggemm_lora_expand_qkv_args &a = *args;
    const int64_t q = a.q_dim, kv = a.kv_dim;
    ggemm::GroupedLaunch l{};
    l.op = "lora_expand_qkv";
    l.shape.a_dtype = a.p_dtype;
    l.shape.c_dtype = a.out_dtype;
    l.shape.m = a.m, l.shape.n = q + 2 * kv, l.shape.k = a.rank;
    l.shape.transpose_b = true;
    l.shape.split0 = q, l.shape.split1 = q + kv;
    l.shape.a_planes = true;
    l.shape.epilogue = a.accumulate ? GGEMM_EPILOGUE_ACCUMULATE : GGEMM_EPILOGUE_STORE;
    l.num_experts = a.num_adapters;
    l.a = a.p;
    l.a_rows = 3 * a.m;
    l.b = a.lora_b;
    char *v_rows = static_cast<char *>(a.kv_out) + size_t(a.m) * kv * ggemm::dtype_bytes(a.out_dtype);
    l.views[0] = ggemm::OutputViewDesc{a.q_out, q, 0, a.m, q};
    l.views[1] = ggemm::OutputViewDesc{a.kv_out, kv, q, a.m, kv};
    l.views[2] = ggemm::OutputViewDesc{v_rows, kv, q + kv, a.m, kv};
    copy_routing(l, a, a.adapter_ids, handle);
    l.alpha = a.scale;
    return launch(handle, l, stream);
  });
}
