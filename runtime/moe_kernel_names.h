// The MoE layer's kernels (ptx/moe/kernels_moe_entry.cuh), by the names the
// runtime launches them by (runtime/launch_moe.cpp). One source builds them
// into each architecture's MoE fatbin; tests/test_plan_runtime.cpp checks
// every name below is in both, so a kernel left out of one fails on the CPU,
// not as a launch's INTERNAL_ERROR on a GPU no test has run (sm_100a).
#pragma once

namespace ggemm::moe_kernel {

inline constexpr const char *kRouteOneWarp = "ggemm_moe_route_one_warp";
inline constexpr const char *kRouteOneCta = "ggemm_moe_route_one_cta";
inline constexpr const char *kRouteCount = "ggemm_moe_route_count";
inline constexpr const char *kRouteScatter = "ggemm_moe_route_scatter";
inline constexpr const char *kRouteExpand = "ggemm_moe_route_expand";
inline constexpr const char *kExpandRows = "ggemm_moe_expand_rows";
inline constexpr const char *kDecodeDownBf16 = "ggemm_moe_decode_down_bf16";
inline constexpr const char *kDecodeDownFp16 = "ggemm_moe_decode_down_fp16";
inline constexpr const char *kCombineBf16Bf16 = "ggemm_moe_combine_bf16_bf16";
inline constexpr const char *kCombineBf16Fp32 = "ggemm_moe_combine_bf16_fp32";
inline constexpr const char *kCombineFp16Fp16 = "ggemm_moe_combine_fp16_fp16";
inline constexpr const char *kCombineFp16Fp32 = "ggemm_moe_combine_fp16_fp32";

inline constexpr const char *kAll[] = {
    kRouteOneWarp,   kRouteOneCta,     kRouteCount,      kRouteScatter,    kRouteExpand,     kExpandRows,
    kDecodeDownBf16, kDecodeDownFp16,  kCombineBf16Bf16, kCombineBf16Fp32, kCombineFp16Fp16, kCombineFp16Fp32,
};

}  // namespace ggemm::moe_kernel
