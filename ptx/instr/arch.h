// Architecture guards shared by every ptx/ header.
//
// Device code for a family compiles to its instructions only when the
// compilation target has them; anywhere else it traps with a message rather
// than silently doing nothing (STYLE.md, practice 3). Host compilation passes
// sees only declarations.
#pragma once

#include <cstdint>

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define GGEMM_SM90A 1
#else
#define GGEMM_SM90A 0
#endif

#if defined(__CUDA_ARCH__) && (defined(__CUDA_ARCH_FEAT_SM100_ALL) || defined(__CUDA_ARCH_SPECIFIC__) && __CUDA_ARCH_SPECIFIC__ == 1000)
#define GGEMM_SM100A 1
#else
#define GGEMM_SM100A 0
#endif

#if defined(__CUDA_ARCH__)
// Reached only when a kernel was compiled for an architecture that lacks the
// instruction; the launch then fails loudly instead of computing garbage.
#define GGEMM_ARCH_TRAP(what)                                                   \
  do {                                                                          \
    printf("ggemm: %s is not available on this architecture\n", what);         \
    asm volatile("trap;");                                                      \
  } while (0)
#elif defined(__CUDACC__)
// The host pass of a whole .cu (bench/tma_probe.cu) parses device bodies it
// never runs.
#define GGEMM_ARCH_TRAP(what) ((void)0)
#endif

#if defined(__CUDACC__)
#define GGEMM_HOST_DEVICE __host__ __device__
#define GGEMM_DEVICE __device__ __forceinline__
#define GGEMM_UNROLL _Pragma("unroll")  // in code the host compiler also reads
#else
#define GGEMM_HOST_DEVICE
#define GGEMM_UNROLL
#endif
