// sm_100a plans (compiled and unit-tested; never run on Blackwell hardware).
// Decode calls of groups of a few rows go to the decode GEMV, as on sm_90a
// (plan_common.cpp, decode_gemv_filter). Everything else to the persistent
// tcgen05 kernel: its token tile and
// swizzle from the shared rules (plan_common.cpp) or the config, cta_group 2
// only when the config asks for it (no Blackwell GPU has measured the
// difference) and never for gather or SwiGLU, narrow tiles for decode as on
// sm_90a, and every stage that fits.
#include <algorithm>

#include "ptx/blocks/grouped_params.h"
#include "ptx/sm100/smem_layout.h"
#include "ptx/sm90/smem_layout.h"
#include "runtime/plan_rules.h"

namespace ggemm {

StatusOr<KernelPlan> plan_sm100(const DeviceProps &props, const GroupedShape &shape,
                                const ggemm_config *config, const PlanRequest &request) {
  // The decode GEMV first, as on sm_90a (plan_common.cpp, decode_gemv_filter).
  if (const uint32_t tile_m = decode_gemv_filter(props, shape, config, request.decode_gemv))
    return plan_decode_gemv(Arch::kSm100a, props, shape, tile_m);
  const TileChoice tile = choose_tile(Arch::kSm100a, props, shape, config);
  const bool swiglu = shape.epilogue == GGEMM_EPILOGUE_SWIGLU;
  // Gather on load and the SwiGLU epilogue (compiled, never run on
  // Blackwell hardware): cta_group 1 only. Not because a pair would break
  // SwiGLU's interleave (each CTA's 128 rows are 8 whole octet pairs of
  // the 5-D view, its own tensor-memory lanes, so the gate and up of a
  // feature would still meet in one warp), but because the pair's loads
  // complete on the leader's barrier, and neither the 5-D weight load nor
  // the gather4 has that form written (ptx/sm100/producer.cuh); the pair
  // kernels do not compile either path. Automatic plans never pick a pair.
  if (tile.cta_group == 2 && (shape.gather || swiglu))
    return error(GGEMM_STATUS_INVALID_CONFIG, "config->cta_group = 2: %s runs with cta_group 1 on sm_100a",
                 shape.gather ? "gather on load (a_row_index)" : "the SwiGLU epilogue");
  KernelPlan p;
  GGEMM_ASSIGN_OR_RETURN(p, persistent_plan_of_tile(Arch::kSm100a, shape, tile));
  // SwiGLU loads whole octet-pair tiles as on sm_90a (plan_common.cpp,
  // weights_box_rows). Every tile_m: the epilogue reads tensor memory 8
  // columns at a time, so unlike sm_90a's registers nothing limits it; one
  // K slice a stage, as every sm_100a stage is.
  // Narrow tiles for decode (plan_rules.h): 64-row weight boxes, and the
  // walker's tiles as wide (GroupedGemmSm100Config::walk_tile_n); never
  // run on Blackwell hardware.
  if (narrow_tiles(props, shape, config, p)) narrow_plan(&p, shape);
  const uint32_t fit = sm100::max_stages(p.tile_m, p.swizzle_bytes, uint32_t(props.smem_optin), p.cluster_size);
  if (fit < 2) return refuse_fit(tile, shape, props, fit);
  p.stages = tile.stages;
  if (p.stages == 0) {
    p.stages = fit;
  } else if (p.stages > fit || p.stages < 2) {
    return refuse_stages(p.stages, fit, props);
  }
  p.threads = sm100::kThreads;
  // More than half the opt-in shared memory, so one CTA runs per SM: each
  // allocates up to all 512 tensor-memory columns (two tile_m 256
  // accumulators), and a second CTA on the SM would wait for the first to
  // finish. Enough whatever the driver reserves a block: the opt-in limit is
  // the SM's shared memory less that reserve (B200: 233,472 - 1,024), and
  // every block takes the reserve too, so two blocks would need 2 x (dynamic
  // + static + reserve) >= the SM's size + reserve + 1 bytes.
  p.smem_bytes = std::max<uint32_t>(
      sm100::make_smem_layout(p.tile_m, p.swizzle_bytes, p.stages, p.cluster_size).total_bytes(),
      uint32_t(props.smem_optin) / 2 + 1);
  // The sm_100a epilogue stores from registers and never reads tmap_out; the
  // maps are encoded as for sm_90a all the same, so the params mean one thing.
  p.out_box_tokens = sm90::sm90_epilogue_stage_tokens(p.tile_m);
  p.max_clusters = max_clusters(p, shape, props);
  return p;
}

}  // namespace ggemm
