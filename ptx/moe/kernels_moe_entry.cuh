// The MoE layer's extern "C" entry points (routing, the token copy, the
// decode down projection, combine), compiled into each architecture's
// fatbin by ptx/<arch>/kernels_moe.cu. Plain CUDA C++ (no tensor cores):
// the same source for sm_90a and sm_100a. The runtime launches them by
// these names (runtime/launch_moe.cpp).
#pragma once
#include "../instr/grid_dependency.h"
#include "combine.cuh"
#include "decode_down.cuh"
#include "expand_rows.cuh"
#include "route.cuh"
#include "route_one_cta.cuh"

// Every entry first lets the stream's next kernel be placed, then waits for
// the earlier ones (ptx/instr/grid_dependency.h).
#define GGEMM_MOE_KERNEL_PROLOGUE()       \
  ggemm::ptx::launch_dependent_grids(); \
  ggemm::ptx::wait_prior_grids()

// The whole routing in one warp (one CTA of 32 threads), for calls of at most
// kOneWarpMaxSlots slots.
extern "C" __global__ void __launch_bounds__(32, 1)
    ggemm_moe_route_one_warp(const __grid_constant__ ggemm::moe::MoeRouteParams p) {
  GGEMM_MOE_KERNEL_PROLOGUE();
  ggemm::moe::route_one_warp(p);
}

// The count pass (calls of more than one chunk): one CTA per chunk; dynamic
// shared memory holds the chunk's 16-bit counters, (local_experts + 1) / 2
// words.
extern "C" __global__ void __launch_bounds__(ggemm::moe::kRouteThreads)
    ggemm_moe_route_count(const __grid_constant__ ggemm::moe::MoeRouteParams p) {
  GGEMM_MOE_KERNEL_PROLOGUE();
  ggemm::moe::route_count(p);
}

// The scatter pass: one CTA per chunk (one CTA, and the whole routing, when
// the slots make one chunk of more than kOneCtaMaxExperts experts); dynamic
// shared memory holds the warps' counts and the bases,
// kRouteBytesPerWindowExpert a window expert.
extern "C" __global__ void __launch_bounds__(ggemm::moe::kRouteThreads, 1)
    ggemm_moe_route_scatter(const __grid_constant__ ggemm::moe::MoeRouteParams p) {
  GGEMM_MOE_KERNEL_PROLOGUE();
  ggemm::moe::route_scatter(p);
}

// The routing of one chunk in one CTA, a thread a slot (calls of at most
// kRouteThreads slots and kOneCtaMaxExperts local experts); dynamic shared
// memory holds kOneCtaBytesPerExpert an expert.
extern "C" __global__ void __launch_bounds__(ggemm::moe::kRouteThreads, 1)
    ggemm_moe_route_one_cta(const __grid_constant__ ggemm::moe::MoeRouteParams p) {
  GGEMM_MOE_KERNEL_PROLOGUE();
  ggemm::moe::route_one_cta_only(p);
}

// The layer's one-CTA routing and its token copy in one launch: each CTA
// routes for itself (CTA 0 writes the routing arrays), then copies its
// share of the rows; dynamic shared memory as ggemm_moe_route_one_cta's.
extern "C" __global__ void __launch_bounds__(ggemm::moe::kRouteThreads, 1)
    ggemm_moe_route_expand(const __grid_constant__ ggemm::moe::MoeRouteExpandParams p) {
  GGEMM_MOE_KERNEL_PROLOGUE();
  ggemm::moe::route_expand(p.route, p.expand);
}

// The expand copy: a warp a token's stretch of the row at a time
// (grid-stride), any element type (16-byte vectors).
extern "C" __global__ void __launch_bounds__(ggemm::moe::kExpandThreads)
    ggemm_moe_expand_rows(const __grid_constant__ ggemm::moe::MoeExpandParams p) {
  GGEMM_MOE_KERNEL_PROLOGUE();
  ggemm::moe::expand_rows(p);
}

#define GGEMM_MOE_DEFINE_COMBINE(Y, YN, OUT, ON)                                              \
  extern "C" __global__ void __launch_bounds__(ggemm::moe::kCombineThreads)                   \
      ggemm_moe_combine_##YN##_##ON(const __grid_constant__ ggemm::moe::MoeCombineParams p) { \
    GGEMM_MOE_KERNEL_PROLOGUE();                                                              \
    ggemm::moe::combine<Y, OUT>(p);                                                           \
  }
GGEMM_MOE_DEFINE_COMBINE(__nv_bfloat16, bf16, __nv_bfloat16, bf16)
GGEMM_MOE_DEFINE_COMBINE(__nv_bfloat16, bf16, float, fp32)
GGEMM_MOE_DEFINE_COMBINE(__half, fp16, __half, fp16)
GGEMM_MOE_DEFINE_COMBINE(__half, fp16, float, fp32)

// The decode down projection with the combine: a tile a CTA at a time
// (grid-stride), four CTAs an SM. Its first weights are prefetched into L2
// before the wait (decode_down_prefetch; the one pre-wait global access of
// these kernels, relaxed id loads and L2 prefetches only: check_sass.py).
#define GGEMM_MOE_DEFINE_DECODE_DOWN(T, TN)                                                        \
  extern "C" __global__ void __launch_bounds__(ggemm::moe::kDecodeDownThreads,                     \
                                               ggemm::moe::kDecodeDownCtasPerSm)                   \
      ggemm_moe_decode_down_##TN(const __grid_constant__ ggemm::moe::MoeDecodeDownParams p) {     \
    ggemm::ptx::launch_dependent_grids();                                                          \
    ggemm::moe::decode_down_prefetch<T>(p);                                                        \
    ggemm::ptx::wait_prior_grids();                                                                \
    ggemm::moe::decode_down<T>(p);                                                                 \
  }
GGEMM_MOE_DEFINE_DECODE_DOWN(__nv_bfloat16, bf16)
GGEMM_MOE_DEFINE_DECODE_DOWN(__half, fp16)
