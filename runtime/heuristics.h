// Config choice for the sm_90a grouped GEMM: candidates filtered by commented
// rules, and the validation of a caller's override.
#pragma once
#include <cstdint>
#include <string>

#include "ggemm.h"
#include "runtime/device.h"

namespace ggemm {

struct GroupedShape {
  ggemm_dtype a_dtype, c_dtype;
  int64_t m, n, k;
  bool transpose_b;
  int64_t num_groups;
  int64_t max_rows_per_group;  // 0 = unknown (M)
  ggemm_epilogue epilogue = GGEMM_EPILOGUE_STORE;
  int64_t col_blocks = 0;  // 128-wide column tiles per row block; 0 = ceil(n / 128)
};

struct Sm90Config {
  uint32_t tile_m = 0;         // tokens per tile (wgmma N)
  uint32_t tile_n = 128;       // features per tile (two m64 warpgroups)
  uint32_t swizzle_bytes = 0;  // 128, 64, 32; tile_k = swizzle_bytes / 2
  uint32_t stages = 0;
  uint32_t staging_buffers = 1;  // epilogue buffers per consumer warpgroup
};

// Picks (or validates, when `override` is non-NULL) the config for a call.
// Refuses configs no kernel can run with INVALID_CONFIG naming the field.
ggemm_status choose_sm90_config(const DeviceProps &props, const GroupedShape &shape,
                                const ggemm_config *override, Sm90Config *out);

// The kernel's entry-point name for a config (ptx/sm90/kernel_table.h).
std::string sm90_kernel_name(ggemm_dtype a, ggemm_dtype c, bool transpose_b, uint32_t tile_m);

uint32_t dtype_bytes(ggemm_dtype t);
const char *dtype_name(ggemm_dtype t);

}  // namespace ggemm
