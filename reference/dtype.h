// dtype.h — host conversions between float and ggemm's storage dtypes.
//
// Bit-exact, portable (no compiler half/bfloat types): the CPU reference and
// the tests must round exactly as the GPU epilogue does (round to nearest,
// ties to even), independent of host compiler or flags.
#ifndef GGEMM_REFERENCE_DTYPE_H
#define GGEMM_REFERENCE_DTYPE_H

#include <cstddef>
#include <cstdint>

#include "ggemm.h"

namespace ggemm::ref {

// bfloat16: round to nearest even; NaN stays a (quiet) NaN of the same sign;
// values past the largest bf16 round to infinity.
uint16_t float_to_bf16(float v);
float bf16_to_float(uint16_t bits);  // exact

// IEEE binary16: round to nearest even, including into the subnormal range;
// overflow (|v| >= 65520) gives infinity; NaN stays a quiet NaN.
uint16_t float_to_fp16(float v);
float fp16_to_float(uint16_t bits);  // exact

// Bytes per element: 2 for bf16/fp16, 4 for fp32, 0 for an unknown dtype.
size_t dtype_size(ggemm_dtype dtype);

// v rounded to the nearest value representable in `dtype` (fp32: v itself).
float round_to_dtype(ggemm_dtype dtype, float v);

// Element `index` of the array at `base`, widened exactly to float.
float load_as_float(ggemm_dtype dtype, const void* base, size_t index);

// Stores v into element `index` of the array at `base`, rounded to `dtype`
// (round to nearest even); fp32 stores v unchanged.
void store_from_float(ggemm_dtype dtype, void* base, size_t index, float v);

}  // namespace ggemm::ref

#endif  // GGEMM_REFERENCE_DTYPE_H
