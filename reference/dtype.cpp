#include "dtype.h"

#include <cstring>

namespace ggemm::ref {
namespace {

uint32_t float_bits(float v) {
  uint32_t u;
  std::memcpy(&u, &v, sizeof u);
  return u;
}

float bits_float(uint32_t u) {
  float v;
  std::memcpy(&v, &u, sizeof v);
  return v;
}

}  // namespace

uint16_t float_to_bf16(float v) {
  const uint32_t u = float_bits(v);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) {
    // NaN: truncating could clear every mantissa bit left (giving inf), so
    // keep the sign and the top payload bits and force the quiet bit.
    return static_cast<uint16_t>((u >> 16) | 0x0040u);
  }
  // Round to nearest even on the 16 dropped bits: add 0x7FFF plus the lowest
  // kept bit; a carry out of the mantissa bumps the exponent (up to inf).
  const uint32_t rounding = 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<uint16_t>((u + rounding) >> 16);
}

float bf16_to_float(uint16_t bits) { return bits_float(static_cast<uint32_t>(bits) << 16); }

uint16_t float_to_fp16(float v) {
  const uint32_t u = float_bits(v);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t mag = u & 0x7FFFFFFFu;

  if (mag > 0x7F800000u) return static_cast<uint16_t>(sign | 0x7E00u);  // NaN -> quiet NaN
  // 65520 = 65504 + half an ulp: the tie rounds to the even neighbour, 65536,
  // which is out of range; so everything from 65520 up (and inf) is inf.
  if (mag >= 0x477FF000u) return static_cast<uint16_t>(sign | 0x7C00u);

  const uint32_t exp = mag >> 23;  // biased float exponent
  if (exp < 113) {
    // Below 2^-14: a half subnormal, counting units of 2^-24. With the
    // implicit bit, v = mant * 2^(exp - 150), so v / 2^-24 = mant >> (126 - exp).
    const uint32_t shift = 126 - exp;
    if (shift > 24) return sign;  // < 2^-25: rounds to zero (2^-25 itself is shift 24)
    const uint32_t mant = (mag & 0x7FFFFFu) | 0x800000u;
    uint32_t q = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1u);
    const uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1u))) ++q;  // may carry into 0x400 = 2^-14: correct
    return static_cast<uint16_t>(sign | q);
  }

  // Normal: rebias the exponent (127 -> 15) and keep 10 mantissa bits; the
  // rounding carry propagates into the exponent as it should.
  uint32_t h = (mag - (112u << 23)) >> 13;
  const uint32_t rem = mag & 0x1FFFu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
  return static_cast<uint16_t>(sign | h);
}

float fp16_to_float(uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  const uint32_t exp = (bits >> 10) & 0x1Fu;
  const uint32_t mant = bits & 0x3FFu;
  if (exp == 0) {
    // Zero or subnormal: mant * 2^-24, exact in float.
    const float mag = static_cast<float>(mant) * bits_float(0x33800000u);  // 2^-24
    return sign ? -mag : mag;
  }
  if (exp == 31) return bits_float(sign | 0x7F800000u | (mant << 13));  // inf / NaN
  return bits_float(sign | ((exp + 112u) << 23) | (mant << 13));
}

size_t dtype_size(ggemm_dtype dtype) {
  switch (dtype) {
    case GGEMM_DTYPE_BF16:
    case GGEMM_DTYPE_FP16:
      return 2;
    case GGEMM_DTYPE_FP32:
      return 4;
  }
  return 0;
}

float round_to_dtype(ggemm_dtype dtype, float v) {
  switch (dtype) {
    case GGEMM_DTYPE_BF16:
      return bf16_to_float(float_to_bf16(v));
    case GGEMM_DTYPE_FP16:
      return fp16_to_float(float_to_fp16(v));
    case GGEMM_DTYPE_FP32:
      break;
  }
  return v;
}

float load_as_float(ggemm_dtype dtype, const void* base, size_t index) {
  switch (dtype) {
    case GGEMM_DTYPE_BF16:
      return bf16_to_float(static_cast<const uint16_t*>(base)[index]);
    case GGEMM_DTYPE_FP16:
      return fp16_to_float(static_cast<const uint16_t*>(base)[index]);
    case GGEMM_DTYPE_FP32:
      return static_cast<const float*>(base)[index];
  }
  return 0.0f;
}

void store_from_float(ggemm_dtype dtype, void* base, size_t index, float v) {
  switch (dtype) {
    case GGEMM_DTYPE_BF16:
      static_cast<uint16_t*>(base)[index] = float_to_bf16(v);
      return;
    case GGEMM_DTYPE_FP16:
      static_cast<uint16_t*>(base)[index] = float_to_fp16(v);
      return;
    case GGEMM_DTYPE_FP32:
      static_cast<float*>(base)[index] = v;
      return;
  }
}

}  // namespace ggemm::ref
