// What names a grouped-GEMM kernel instantiation on every architecture: its
// operand and output types, tile_m and weight layout. Each architecture's
// kernel config (GroupedGemmSm90Config, GroupedGemmSm100Config) derives from
// it and adds its own constants; the roles read them all as Cfg::k*.
#pragma once
#include "grouped_params.h"

namespace ggemm {

template <typename ElemT, typename OutT, int TileM, WeightLayout Layout>
struct GroupedKernelShape {
  using Elem = ElemT;  // operands: __nv_bfloat16 or __half
  using Out = OutT;    // outputs: __nv_bfloat16, __half or float
  static constexpr int kTileM = TileM;
  static constexpr WeightLayout kLayout = Layout;
};

}  // namespace ggemm
