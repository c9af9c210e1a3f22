// libFuzzer harness: the CPU reference ggemm::ref::grouped_matmul.
//
// Shapes are small and bounded (M <= 64, N, K <= 64, E <= 4, groups <= 8) and
// in the contract (a == b dtype in bf16/fp16, c in bf16/fp16/fp32, valid
// plane splits), while everything the device reads at run time is arbitrary:
// a_offsets (decreasing, past M, 0xFFFFFFFF; or the same ends passed as
// group_ends), expert ids (negative, at or past E), the active count in
// expert_usage_stats[1] (past num_groups). Every
// buffer is its own heap block of exactly the size the contract gives (A has
// 3 * M rows with plane splits; row_scale is NULL unless the epilogue reads
// it), so ASan reports any read or write outside it.
//
// Properties (each violation aborts, so libFuzzer reports it):
//   1. no crash, no ASan/UBSan report;
//   2. rows in no group are bitwise untouched (C starts poisoned; compared
//      with a copy), the groups being derived here from ggemm_reference.h's
//      rule, independently of the reference's code;
//   3. rows of inactive groups (expert id outside [0, E)) are zeros for
//      STORE / ROW_SCALE and untouched for ACCUMULATE;
//   4. the inputs (A, B, a_offsets / group_ends, expert_ids, stats, row_scale) are unchanged;
//   5. with finite inputs, active rows match a naive double-precision
//      product within the rounding of c_dtype;
//   6. the result does not depend on the thread count (bitwise).
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include <fuzzer/FuzzedDataProvider.h>

#include "ggemm_reference.h"

namespace {

using ggemm::ref::load_as_float;

// A heap block of exactly `bytes` bytes (ASan's redzones sit right after it).
struct Block {
  std::unique_ptr<uint8_t[]> p;
  size_t bytes = 0;
  explicit Block(size_t n) : p(new uint8_t[n]), bytes(n) {}
  void *data() { return p.get(); }
  std::vector<uint8_t> copy() const { return std::vector<uint8_t>(p.get(), p.get() + bytes); }
  bool equals(const std::vector<uint8_t> &v) const {
    return v.size() == bytes && (bytes == 0 || std::memcmp(v.data(), p.get(), bytes) == 0);
  }
};

// Deterministic filler seeded by the input, so that inputs stay small.
struct XorShift {
  uint64_t s;
  explicit XorShift(uint64_t seed) : s(seed * 0x9E3779B97F4A7C15ull + 0x2545F4914F6CDD1Dull) {}
  uint64_t next() {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return s;
  }
  float uniform(float lo, float hi) { return lo + (hi - lo) * float(next() >> 40) * (1.0f / 16777216.0f); }
};

// Fills `count` elements of `dtype`: finite values in [-range, range] (each
// exactly representable in the dtype), or, when `raw`, arbitrary bit patterns
// (NaN, inf, subnormals).
void fill(ggemm_dtype dtype, void *base, size_t count, XorShift &rng, bool raw, float range) {
  for (size_t i = 0; i < count; ++i) {
    if (raw) {
      const uint64_t r = rng.next();
      if (dtype == GGEMM_DTYPE_FP32) {
        const uint32_t u = uint32_t(r);
        std::memcpy(static_cast<uint8_t *>(base) + 4 * i, &u, 4);
      } else {
        const uint16_t u = uint16_t(r);
        std::memcpy(static_cast<uint8_t *>(base) + 2 * i, &u, 2);
      }
    } else {
      ggemm::ref::store_from_float(dtype, base, i, rng.uniform(-range, range));
    }
  }
}

size_t esize(ggemm_dtype t) { return t == GGEMM_DTYPE_FP32 ? 4 : 2; }

[[noreturn]] void violation(const char *what, const ggemm_grouped_matmul_args &a, int64_t row, int64_t col,
                            const uint32_t *off, const int32_t *ids, const uint32_t *stats) {
  std::fprintf(stderr,
               "\n*** fuzz_reference: %s (row %lld, column %lld)\n"
               "    m=%lld n=%lld k=%lld E=%lld groups=%lld a/c dtype=%d/%d transpose_b=%d epilogue=%d "
               "splits=(%lld,%lld) stats=[%u,%u]\n    a_offsets:",
               what, (long long)row, (long long)col, (long long)a.m, (long long)a.n, (long long)a.k,
               (long long)a.num_experts, (long long)a.num_groups, int(a.a_dtype), int(a.c_dtype), a.transpose_b,
               int(a.epilogue), (long long)a.a_plane_split0, (long long)a.a_plane_split1, stats[0], stats[1]);
  for (int64_t g = 0; g <= a.num_groups; ++g) std::fprintf(stderr, " %u", off[g]);
  std::fprintf(stderr, "\n    expert_ids:");
  for (int64_t g = 0; g < a.num_groups; ++g) std::fprintf(stderr, " %d", ids[g]);
  std::fprintf(stderr, "\n");
  std::abort();
}

uint32_t pick_offset(FuzzedDataProvider &p, int64_t M) {
  static const uint32_t special[] = {0, 1, 0x7FFFFFFFu, 0x80000000u, 0xFFFFFFFEu, 0xFFFFFFFFu};
  switch (p.ConsumeIntegralInRange<int>(0, 5)) {
    case 0: return p.PickValueInArray(special);
    case 1: return p.ConsumeIntegral<uint32_t>();
    case 2: return uint32_t(M) + p.ConsumeIntegralInRange<uint32_t>(0, 3);
    default: return p.ConsumeIntegralInRange<uint32_t>(0, uint32_t(M) + 2);
  }
}

int32_t pick_expert(FuzzedDataProvider &p, int64_t E) {
  static const int32_t special[] = {-1, -2, INT32_MIN, INT32_MAX, 4, 5, 64};
  switch (p.ConsumeIntegralInRange<int>(0, 7)) {
    case 0: return p.PickValueInArray(special);
    case 1: return p.ConsumeIntegral<int32_t>();
    case 2: return int32_t(E);  // one past the last expert
    default: return p.ConsumeIntegralInRange<int32_t>(-1, int32_t(E) - 1);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  FuzzedDataProvider p(data, size);

  // ---- shape and options ----------------------------------------------------
  const int64_t M = p.ConsumeIntegralInRange<int64_t>(0, 64);
  const bool mult8 = p.ConsumeIntegralInRange<int>(0, 3) != 0;  // the contract's N, K; or any
  const int64_t N = mult8 ? 8 * p.ConsumeIntegralInRange<int64_t>(1, 8) : p.ConsumeIntegralInRange<int64_t>(1, 64);
  const int64_t K = mult8 ? 8 * p.ConsumeIntegralInRange<int64_t>(1, 8) : p.ConsumeIntegralInRange<int64_t>(1, 64);
  const int64_t E = p.ConsumeIntegralInRange<int64_t>(1, 4);
  const int64_t G = p.ConsumeIntegralInRange<int64_t>(1, 8);
  const ggemm_dtype in_t = p.ConsumeBool() ? GGEMM_DTYPE_BF16 : GGEMM_DTYPE_FP16;
  static const ggemm_dtype out_types[] = {GGEMM_DTYPE_BF16, GGEMM_DTYPE_FP16, GGEMM_DTYPE_FP32};
  const ggemm_dtype out_t = p.PickValueInArray(out_types);
  static const ggemm_epilogue epilogues[] = {GGEMM_EPILOGUE_STORE, GGEMM_EPILOGUE_ACCUMULATE,
                                             GGEMM_EPILOGUE_ROW_SCALE};
  const ggemm_epilogue epi = p.PickValueInArray(epilogues);
  const bool transpose_b = p.ConsumeBool();
  int64_t s0 = 0, s1 = 0;
  if (p.ConsumeBool()) {  // plane splits: 0 < s0 <= s1 <= N
    s0 = p.ConsumeIntegralInRange<int64_t>(1, N);
    s1 = p.ConsumeIntegralInRange<int64_t>(s0, N);
    if (mult8) {  // keep them multiples of 8 when N is
      s0 = std::max<int64_t>(8, s0 / 8 * 8);
      s1 = std::max<int64_t>(s0, s1 / 8 * 8);
    }
  }
  const bool planes = s0 != 0;
  const bool raw_data = p.ConsumeIntegralInRange<int>(0, 4) == 0;  // NaN/inf/any bits
  const bool check_threads = p.ConsumeBool();
  const uint64_t seed = p.ConsumeIntegral<uint64_t>();

  // ---- the device-side arrays: arbitrary, sometimes well formed -------------
  Block off_b((G + 1) * sizeof(uint32_t)), ids_b(G * sizeof(int32_t)), stats_b(2 * sizeof(uint32_t));
  auto *off = static_cast<uint32_t *>(off_b.data());
  auto *ids = static_cast<int32_t *>(ids_b.data());
  auto *stats = static_cast<uint32_t *>(stats_b.data());
  if (p.ConsumeBool()) {  // prefix sums ending at M, as a router writes them
    off[0] = 0;
    for (int64_t g = 0; g < G; ++g)
      off[g + 1] = g + 1 == G ? uint32_t(M)
                              : std::min<uint32_t>(uint32_t(M), off[g] + p.ConsumeIntegralInRange<uint32_t>(0, 24));
  } else {
    for (int64_t g = 0; g <= G; ++g) off[g] = pick_offset(p, M);
  }
  for (int64_t g = 0; g < G; ++g) ids[g] = pick_expert(p, E);
  stats[0] = p.ConsumeIntegral<uint32_t>();  // max rows: sizing only, never trusted
  switch (p.ConsumeIntegralInRange<int>(0, 3)) {
    case 0: stats[1] = p.ConsumeIntegral<uint32_t>(); break;
    case 1: stats[1] = p.ConsumeBool() ? 0xFFFFFFFFu : 0x80000000u; break;
    default: stats[1] = p.ConsumeIntegralInRange<uint32_t>(0, uint32_t(G) + 2); break;
  }
  // The same groups as group_ends (a_offsets[1..], in a block of G entries
  // of its own), a_offsets NULL. Decoded last, so earlier inputs keep their meaning.
  const bool ends_given = p.ConsumeBool();
  Block ends_b(G * sizeof(uint32_t));
  std::memcpy(ends_b.data(), off + 1, G * sizeof(uint32_t));

  // ---- host buffers of exactly the contract's sizes -------------------------
  const size_t a_rows = size_t(planes ? 3 * M : M);
  Block A(a_rows * size_t(K) * esize(in_t)), B(size_t(E * N * K) * esize(in_t)), C(size_t(M * N) * esize(out_t));
  std::unique_ptr<Block> S;
  XorShift rng(seed);
  fill(in_t, A.data(), a_rows * size_t(K), rng, raw_data, 2.0f);
  fill(in_t, B.data(), size_t(E * N * K), rng, raw_data, 2.0f);
  // C's poison: all-ones (NaN in every dtype) or values, so that ACCUMULATE
  // starts from something real.
  if (raw_data || (seed & 1))
    fill(out_t, C.data(), size_t(M * N), rng, raw_data, 8.0f);
  else
    std::memset(C.data(), 0xFF, C.bytes);
  if (epi == GGEMM_EPILOGUE_ROW_SCALE) {
    S.reset(new Block(size_t(M) * sizeof(float)));
    fill(GGEMM_DTYPE_FP32, S->data(), size_t(M), rng, raw_data, 4.0f);
  }
  const bool finite_inputs = !raw_data && !(epi == GGEMM_EPILOGUE_ACCUMULATE && !(seed & 1));

  ggemm_grouped_matmul_args a;
  std::memset(&a, 0, sizeof a);
  a.struct_size = sizeof a;
  a.a_dtype = a.b_dtype = in_t;
  a.c_dtype = out_t;
  a.m = M;
  a.n = N;
  a.k = K;
  a.num_experts = E;
  a.a = A.data();
  a.b = B.data();
  a.c = C.data();
  a.transpose_b = transpose_b ? 1 : 0;
  a.a_offsets = ends_given ? nullptr : off;
  a.group_ends = ends_given ? static_cast<const uint32_t *>(ends_b.data()) : nullptr;
  a.expert_ids = ids;
  a.expert_usage_stats = stats;
  a.num_groups = G;
  a.max_rows_per_group = 0;
  a.a_plane_split0 = s0;
  a.a_plane_split1 = s1;
  a.epilogue = epi;
  a.row_scale = S ? static_cast<const float *>(S->data()) : nullptr;
  a.config = nullptr;

  const std::vector<uint8_t> a0 = A.copy(), b0 = B.copy(), c0 = C.copy(), off0 = off_b.copy(), ids0 = ids_b.copy(),
                             stats0 = stats_b.copy(), ends0 = ends_b.copy();
  const std::vector<uint8_t> s0_copy = S ? S->copy() : std::vector<uint8_t>();

  if (const char *v = std::getenv("GGEMM_FUZZ_VERBOSE"); v && *v == '1') {  // what each input decodes to
    std::fprintf(stderr,
                 "[fuzz_reference] m=%lld n=%lld k=%lld E=%lld groups=%lld in/out dtype=%d/%d epilogue=%d "
                 "transpose_b=%d splits=(%lld,%lld) raw=%d threads=%d stats=[%u,%u] offsets:",
                 (long long)M, (long long)N, (long long)K, (long long)E, (long long)G, int(in_t), int(out_t),
                 int(epi), int(transpose_b), (long long)s0, (long long)s1, int(raw_data), int(check_threads),
                 stats[0], stats[1]);
    for (int64_t g = 0; g <= G; ++g) std::fprintf(stderr, " %u", off[g]);
    std::fprintf(stderr, " ids:");
    for (int64_t g = 0; g < G; ++g) std::fprintf(stderr, " %d", ids[g]);
    std::fprintf(stderr, "\n");
  }

  ggemm::ref::grouped_matmul(a, 1);

  // ---- property 4: inputs untouched -----------------------------------------
  if (!A.equals(a0) || !B.equals(b0) || !off_b.equals(off0) || !ids_b.equals(ids0) || !stats_b.equals(stats0) ||
      !ends_b.equals(ends0) || (S && !S->equals(s0_copy)))
    violation("an input buffer was modified", a, -1, -1, off, ids, stats);

  // ---- the groups, from the rule in ggemm_reference.h ------------------------
  // owner[m] = group of row m, or -1.
  std::vector<int64_t> owner(size_t(M), -1);
  const int64_t num_active = std::min<int64_t>(int64_t(stats[1]), G);
  int64_t prev_end = 0;
  for (int64_t g = 0; g < num_active; ++g) {  // a_offsets[0] is never read: group 0 from row 0
    const int64_t start = prev_end;
    const int64_t end = std::min<int64_t>(std::max<int64_t>(off[g + 1], start), M);
    for (int64_t m = start; m < end; ++m) owner[size_t(m)] = g;
    prev_end = end;
  }

  const size_t cb = esize(out_t);
  auto c_bits = [&](const void *base, int64_t m, int64_t n) {
    uint32_t v = 0;
    std::memcpy(&v, static_cast<const uint8_t *>(base) + (size_t(m * N + n)) * cb, cb);
    return v;
  };
  for (int64_t m = 0; m < M; ++m) {
    const int64_t g = owner[size_t(m)];
    const bool active = g >= 0 && ids[g] >= 0 && ids[g] < E;
    for (int64_t n = 0; n < N; ++n) {
      const uint32_t got = c_bits(C.data(), m, n), before = c_bits(c0.data(), m, n);
      if (g < 0) {  // property 2
        if (got != before) violation("a row in no group was written", a, m, n, off, ids, stats);
      } else if (!active) {  // property 3
        if (epi == GGEMM_EPILOGUE_ACCUMULATE ? got != before : got != 0)
          violation(epi == GGEMM_EPILOGUE_ACCUMULATE ? "an inactive group's row changed under ACCUMULATE"
                                                     : "an inactive group's row is not zero",
                    a, m, n, off, ids, stats);
      } else if (finite_inputs) {  // property 5
        const int64_t e = ids[g];
        const int64_t plane = planes ? (n >= s0) + (n >= s1) : 0;
        double sum = 0, mag = 0;
        for (int64_t k = 0; k < K; ++k) {
          const double av = load_as_float(in_t, a0.data(), size_t((m + plane * M) * K + k));
          const size_t wi = transpose_b ? size_t((e * N + n) * K + k) : size_t((e * K + k) * N + n);
          const double wv = load_as_float(in_t, b0.data(), wi);
          sum += av * wv;
          mag += std::fabs(av * wv);
        }
        double want = sum, scale = 1;
        if (epi == GGEMM_EPILOGUE_ROW_SCALE) {
          float rs;
          std::memcpy(&rs, s0_copy.data() + size_t(m) * sizeof rs, sizeof rs);
          scale = std::fabs(double(rs));
          want = sum * double(rs);
        }
        double old = 0;
        if (epi == GGEMM_EPILOGUE_ACCUMULATE) {
          old = load_as_float(out_t, c0.data(), size_t(m * N + n));
          want += old;
        }
        const double gotv = load_as_float(out_t, C.data(), size_t(m * N + n));
        // fp32 accumulation error (K terms) plus one rounding into c_dtype.
        const double ulp = out_t == GGEMM_DTYPE_BF16 ? 0x1p-8 : out_t == GGEMM_DTYPE_FP16 ? 0x1p-11 : 0x1p-24;
        const double tol = (mag * scale + std::fabs(old)) * (double(K + 2) * 0x1p-24) +
                           (std::fabs(want) + mag * scale * double(K) * 0x1p-24) * ulp + 1e-30 + 0x1p-24;
        if (!(std::fabs(gotv - want) <= tol)) {
          std::fprintf(stderr, "    got %.9g, want %.9g (tolerance %.3g)\n", gotv, want, tol);
          violation("an active row differs from the naive product", a, m, n, off, ids, stats);
        }
      }
    }
  }

  // ---- property 6: thread-count independence ---------------------------------
  if (check_threads && M > 0) {
    Block C2(C.bytes);
    std::memcpy(C2.data(), c0.data(), C.bytes);
    a.c = C2.data();
    ggemm::ref::grouped_matmul(a, 3);
    if (std::memcmp(C2.data(), C.data(), C.bytes) != 0)
      violation("the result depends on the thread count (1 vs 3)", a, -1, -1, off, ids, stats);
  }
  return 0;
}
