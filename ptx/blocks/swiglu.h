// silu(gate) * up in fp32, as every SwiGLU epilogue computes it (sm_90a's,
// sm_100a's), so both architectures round the same value once.
// (__fdividef: IEEE division calls a slow path that spills the sm_90a
// epilogue; past gate -87 it returns 0 where silu is below 1e-36.)
#pragma once
#include "../instr/arch.h"

#if defined(__CUDACC__)
namespace ggemm {

GGEMM_DEVICE float swiglu(float gate, float up) { return __fdividef(gate, 1.f + __expf(-gate)) * up; }

}  // namespace ggemm
#endif
