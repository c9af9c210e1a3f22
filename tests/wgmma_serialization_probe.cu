// The kernel build's wgmma-serialisation guard (cmake/nvcc_no_wgmma_serialization.sh)
// must fail on a kernel whose wgmmas ptxas serialises, and pass the same
// kernel without the cause. With GGEMM_SERIALISE a plain instruction writes
// an accumulator register between two wgmmas of a chain (CUDA 13's ptxas
// reports it as C7511, the wgmma pipeline's registers).
#include <cstdint>

#include "ptx/instr/sm90/wgmma.h"

extern "C" __global__ void __launch_bounds__(128) wgmma_chain(float *out, uint64_t desc_a, uint64_t desc_b, int steps) {
  using namespace ggemm::sm90;
  float acc[32];
#pragma unroll
  for (int i = 0; i < 32; ++i) acc[i] = 0.f;
  for (int s = 0; s < steps; ++s) {
    wgmma_fence();
    WgmmaM64K16<64, __nv_bfloat16, 0>::run(acc, desc_a + s, desc_b + s, 1u);
#if GGEMM_SERIALISE
    acc[0] += 1.f;  // a non-wgmma definition of an accumulator inside the chain
#endif
    WgmmaM64K16<64, __nv_bfloat16, 0>::run(acc, desc_a + 2 * s, desc_b + 2 * s, 1u);
    wgmma_commit_group();
    wgmma_wait_group<1>();
    fence_accumulators(acc);
  }
  wgmma_wait_group<0>();
  fence_accumulators(acc);
#pragma unroll
  for (int i = 0; i < 32; ++i) out[threadIdx.x * 32 + i] = acc[i];
}
