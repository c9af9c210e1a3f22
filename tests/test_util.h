// test_util.h — helpers shared by every ggemm test (header-only).
#ifndef GGEMM_TESTS_TEST_UTIL_H
#define GGEMM_TESTS_TEST_UTIL_H

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "dtype.h"
#include "ggemm.h"

namespace ggemm::testing {

constexpr ggemm_dtype kBf16 = GGEMM_DTYPE_BF16;
constexpr ggemm_dtype kFp16 = GGEMM_DTYPE_FP16;
constexpr ggemm_dtype kFp32 = GGEMM_DTYPE_FP32;

// Raw elements of a host matrix, as the reference reads and writes them.
using Bytes = std::vector<uint8_t>;

inline size_t esize(ggemm_dtype t) { return ref::dtype_size(t); }

// The test-name generator for INSTANTIATE_TEST_SUITE_P over cases that carry
// their own `name`, so that a failure names the case.
struct CaseName {
  template <typename Info>
  std::string operator()(const Info &info) const {
    return info.param.name;
  }
};

// Seeded random source; fixed seeds make a failure reproducible.
struct Rng {
  std::mt19937_64 engine;

  explicit Rng(uint64_t seed = 0x9e3779b97f4a7c15ull) : engine(seed) {}

  float uniform(float lo, float hi) { return std::uniform_real_distribution<float>(lo, hi)(engine); }
  // Uniform integer in [lo, hi] (inclusive).
  int64_t uniform_int(int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(engine);
  }
};

// Fills `count` elements at `host` with uniform values in [lo, hi], each
// rounded to `dtype` so it is exactly representable there. If every element
// came out zero, element 0 is set to the non-zero bound (a zero buffer would
// let a kernel that writes nothing pass).
inline void fill_random(ggemm_dtype dtype, void* host, size_t count, Rng& rng, float lo = -1.0f,
                        float hi = 1.0f) {
  bool any_nonzero = false;
  for (size_t i = 0; i < count; ++i) {
    ref::store_from_float(dtype, host, i, rng.uniform(lo, hi));
    any_nonzero = any_nonzero || ref::load_as_float(dtype, host, i) != 0.0f;
  }
  if (count > 0 && !any_nonzero) ref::store_from_float(dtype, host, 0, hi != 0.0f ? hi : lo);
}

// 0xFF bytes: a NaN in bf16, fp16 and fp32, so an element the code under test
// should not have written can be told apart from any value it computes.
inline void poison(void* host, size_t bytes) {
  if (bytes > 0) std::memset(host, 0xFF, bytes);  // host may be null when empty
}

// `v` stored in `dt`. Hand-computed cases state values the dtype holds
// exactly; one that it does not fails the test, naming the value.
inline Bytes pack_exact(ggemm_dtype dt, const std::vector<float> &v) {
  Bytes mem(v.size() * esize(dt));
  for (size_t i = 0; i < v.size(); ++i) {
    EXPECT_EQ(ref::round_to_dtype(dt, v[i]), v[i]) << "test value " << v[i] << " is not exact";
    ref::store_from_float(dt, mem.data(), i, v[i]);
  }
  return mem;
}

// `count` poisoned elements of `dt` (see poison()).
inline Bytes poisoned_bytes(ggemm_dtype dt, size_t count) {
  Bytes mem(count * esize(dt));
  poison(mem.data(), mem.size());
  return mem;
}

// The bits of element `idx` of `dt`.
inline uint32_t bits_at(ggemm_dtype dt, const Bytes &mem, size_t idx) {
  if (esize(dt) == 2) {
    uint16_t h;
    std::memcpy(&h, mem.data() + idx * 2, 2);
    return h;
  }
  uint32_t u;
  std::memcpy(&u, mem.data() + idx * 4, 4);
  return u;
}

// Element `idx` still holds poison: nothing wrote it.
inline bool is_poison(ggemm_dtype dt, const Bytes &mem, size_t idx) {
  return bits_at(dt, mem, idx) == (esize(dt) == 2 ? 0xFFFFu : 0xFFFFFFFFu);
}

// Row `row` of a row-major [*, cols] matrix `what` equals `want` exactly.
inline void expect_row(ggemm_dtype dt, const Bytes &mem, int64_t cols, int64_t row, const std::vector<float> &want,
                       const char *what) {
  ASSERT_EQ(want.size(), static_cast<size_t>(cols));
  for (int64_t c = 0; c < cols; ++c)
    EXPECT_EQ(ref::load_as_float(dt, mem.data(), static_cast<size_t>(row * cols + c)), want[static_cast<size_t>(c)])
        << what << "[" << row << ", " << c << "]";
}

// No element of row `row` of `what` was written.
inline void expect_row_poisoned(ggemm_dtype dt, const Bytes &mem, int64_t cols, int64_t row, const char *what) {
  for (int64_t c = 0; c < cols; ++c)
    EXPECT_TRUE(is_poison(dt, mem, static_cast<size_t>(row * cols + c)))
        << what << "[" << row << ", " << c << "] was written";
}

// Compares two row-major [rows, cols] matrices of `dtype`. Element (r, c)
// passes iff |exp - act| <= atol + rtol * |exp| (equal infinities pass),
// plus extra_atol[r * cols + c] when a per-element addition is given (fp32,
// [rows, cols]: a bound that varies by element); where `expected` is NaN
// (poison: the element must not have been written), `actual` must be bitwise
// identical to it.
inline ::testing::AssertionResult compare_matrix(ggemm_dtype dtype, const void* expected,
                                                 const void* actual, int64_t rows, int64_t cols,
                                                 double atol, double rtol, int max_report = 10,
                                                 const float* extra_atol = nullptr) {
  const size_t esize = ref::dtype_size(dtype);
  const unsigned char* exp_bytes = static_cast<const unsigned char*>(expected);
  const unsigned char* act_bytes = static_cast<const unsigned char*>(actual);
  auto hex = [&](const unsigned char* p) {
    uint32_t bits = 0;
    if (esize == 2) {
      uint16_t b16;
      std::memcpy(&b16, p, 2);
      bits = b16;
    } else {
      std::memcpy(&bits, p, 4);
    }
    std::ostringstream s;
    s << "0x" << std::hex << bits;
    return s.str();
  };

  int64_t mismatches = 0;
  std::ostringstream report;
  report.precision(9);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      const size_t idx = static_cast<size_t>(r * cols + c);
      const double e = ref::load_as_float(dtype, expected, idx);
      const double a = ref::load_as_float(dtype, actual, idx);
      bool ok;
      double tol = 0.0;
      if (std::isnan(e)) {
        ok = std::memcmp(exp_bytes + idx * esize, act_bytes + idx * esize, esize) == 0;
      } else {
        tol = atol + rtol * std::fabs(e) + (extra_atol ? extra_atol[idx] : 0.0);
        ok = e == a || std::fabs(e - a) <= tol;  // NaN actual fails both tests
      }
      if (ok) continue;
      if (mismatches < max_report) {
        report << "\n  (" << r << ", " << c << "): expected " << e << " ["
               << hex(exp_bytes + idx * esize) << "], actual " << a << " ["
               << hex(act_bytes + idx * esize) << "]";
        if (std::isnan(e))
          report << " (poisoned element was written)";
        else
          report << ", |diff| " << std::fabs(e - a) << " > tol " << tol;
      }
      ++mismatches;
    }
  }
  if (mismatches == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << mismatches << " of " << rows * cols << " elements mismatch ([" << rows << ", " << cols
         << "], atol " << atol << (extra_atol ? " + per element" : "") << ", rtol " << rtol << "); first " << std::min<int64_t>(mismatches, max_report)
         << ":" << report.str();
}

// Tolerances for comparing a kernel's output (bf16/fp16 operands, fp32
// accumulation) with the CPU reference run on the same inputs, as
// |ref - out| <= atol + rtol * |ref|. They assume operands of magnitude <= 1
// (fill_random's default) and |row_scale| <= 1; scale atol with the operand
// magnitudes otherwise.
//
// rtol: the reference and the kernel each round their own fp32 sum to the
// output dtype, and a last-bit difference between the sums can land them on
// neighbouring values: one ulp apart, i.e. up to 2^-7 |ref| for bf16 (8-bit
// significand) and 2^-10 |ref| for fp16 (11-bit); half of that (2^-8, 2^-11)
// is the error of each rounding alone, which is the bound against an
// unrounded fp32 reference. fp32 output has no output rounding; a few fp32
// ulps (2^-21) cover the final ROW_SCALE multiply.
//
// atol: products of bf16/fp16 operands are exact in fp32, so the two sides
// differ only by summation order (and the tensor cores' internal alignment).
// Each side's error is ~ sqrt(K) * 2^-24 * sum_k |a*b| (random-walk growth),
// with sum_k |a*b| <= K for |a|, |b| <= 1; both sides count, hence
// 2 * sqrt(K) * K * 2^-24 (K = 1024: 0.0039, against typical |C| ~ 10 and a
// bf16 ulp there of 0.0625). fp16 outputs add one subnormal step (2^-24).
//
// ACCUMULATE: if C_old and the result nearly cancel, the ulp flip of the
// rounded result is relative to |result|, not |ref|; pass a larger atol there.
//
// A wrong element is off by O(sqrt(K)) times the operand scale (a wrong plane
// or expert: a different sum; one missing 64-deep k-block: ~ sqrt(64)/3), far
// above both terms.
inline double default_rtol(ggemm_dtype out) {
  switch (out) {
    case GGEMM_DTYPE_BF16:
      return std::ldexp(1.0, -7);
    case GGEMM_DTYPE_FP16:
      return std::ldexp(1.0, -10);
    case GGEMM_DTYPE_FP32:
      return std::ldexp(1.0, -21);
  }
  return 0.0;
}

inline double default_atol(ggemm_dtype out, int64_t k) {
  const double kd = static_cast<double>(k > 0 ? k : 1);
  const double accumulation = 2.0 * std::sqrt(kd) * kd * std::ldexp(1.0, -24);
  return accumulation + (out == GGEMM_DTYPE_FP16 ? std::ldexp(1.0, -24) : 0.0);
}

// The LoRA tolerance (tests/test_gpu_lora.cpp's file comment): the
// summation term of default_atol for depth k, times |scale| (it multiplies
// the fp32 sum and so its summation-order differences) and times a bound on
// |a * b| where the operands are not within [-1, 1]; the fp16 subnormal step
// is one output rounding, not scaled.
inline double lora_atol(ggemm_dtype out, int64_t k, double scale, double product_bound = 1.0) {
  return std::fabs(scale) * product_bound * default_atol(GGEMM_DTYPE_FP32, k) +
         (out == GGEMM_DTYPE_FP16 ? std::ldexp(1.0, -24) : 0.0);
}

// The largest finite |element| of a host matrix of `dt` (poison is NaN).
inline double max_abs(ggemm_dtype dt, const std::vector<uint8_t> &mem) {
  double m = 0;
  const size_t n = mem.size() / ref::dtype_size(dt);
  for (size_t i = 0; i < n; ++i) {
    const double v = std::fabs(ref::load_as_float(dt, mem.data(), i));
    if (std::isfinite(v)) m = std::max(m, v);
  }
  return m;
}

}  // namespace ggemm::testing

#endif  // GGEMM_TESTS_TEST_UTIL_H
