// GPU tests of ggemm_lora_shrink_qkv and ggemm_lora_expand_qkv against the
// CPU reference (reference/lora_qkv_ref.cpp): fresh random inputs every run
// (the seed is printed with any failure), outputs poisoned (0xFF) before the
// call, so every row of P, q_out and kv_out (K half rows [0, M), V half rows
// [M, 2M)) that no active group owns must keep its poison bit for bit.
// Skipped, with the reason, without a GPU.
//
// Cases: (q_dim, kv_dim) in {(4096,1024), (8192,1024), (512,256), (768,256),
// (384,128), (4096,4096)} plus one not tile-aligned pair; ranks 8..128; 1 to
// 32 adapters with -1, out-of-range and empty groups; M from 1 to 8192 (the
// largest M only with small dims, so that no case costs the CPU reference
// much more than a GFLOP); bf16/fp16 operands with bf16/fp16/fp32 outputs;
// scale 1 and 0.5 (alpha / rank); store and accumulate (owned rows start
// random, so the result must be old + scale * delta rounded once: storing
// instead, or adding twice, is off by |old| or |delta|, both of the size of
// the output, far past the tolerance).
//
// Tolerances: tests/test_util.h's default_atol / default_rtol, with the
// atol's accumulation term multiplied by |scale| (scale multiplies the fp32
// sum, and with it the summation-order differences; multiplying by 0.5 is
// exact) and by a bound on |a * b| where operands are not within [-1, 1]
// (the chained expand reads P, whose elements are sums of K products). The
// fp16 subnormal step is not scaled: it is one output rounding.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <ctime>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "dtype.h"
#include "ggemm_reference.h"
#include "gpu_env.h"
#include "test_util.h"

namespace ggemm::testing {
namespace {

enum class Op { kShrink, kExpand, kChain };

// One test case. Dims: q_dim, kv_dim (expand), hidden (shrink's K), rank.
struct LoraCase {
  std::string name;
  Op op = Op::kExpand;
  int64_t q_dim = 4096, kv_dim = 1024, rank = 16;
  int64_t hidden = 0;            // shrink K; 0 = q_dim (the model's hidden size)
  std::vector<int64_t> rows;     // rows per group
  std::vector<int32_t> ids;      // adapter per group; -1 = no adapter
  int64_t adapters = 1;          // G
  ggemm_dtype in = kBf16;        // x / lora_a (shrink); p / lora_b (expand); all of them (chain)
  ggemm_dtype out = kBf16;       // p (shrink); q_out / kv_out (expand, chain)
  float scale = 1.0f;            // the expand's (chain) or the op's scale
  float shrink_scale = 1.0f;     // chain only: the shrink's scale
  bool accumulate = false;       // the op's (chain: the expand's; its shrink stores)
  int64_t unowned_rows = 3;      // rows after the last group: never written
  int64_t active = -1;           // expert_usage_stats[1]; -1 = all groups
};

std::ostream &operator<<(std::ostream &os, const LoraCase &c) { return os << c.name; }

// `groups` groups over `owned` rows, sizes skewed (weights 1..4), ids
// spread over the adapters. With holes: every 5th group is empty and every
// 7th (from the 4th) has no adapter (-1).
struct Layout {
  std::vector<int64_t> rows;
  std::vector<int32_t> ids;
};
Layout spread(int64_t owned, int groups, int64_t adapters, bool holes) {
  Layout l;
  std::vector<int64_t> w(static_cast<size_t>(groups));
  int64_t wsum = 0;
  for (int g = 0; g < groups; ++g) {
    w[size_t(g)] = (holes && g % 5 == 4) ? 0 : 1 + (g * 7) % 4;
    wsum += w[size_t(g)];
  }
  int64_t given = 0;
  for (int g = 0; g < groups; ++g) {
    const int64_t r = wsum ? owned * w[size_t(g)] / wsum : 0;
    l.rows.push_back(r);
    given += r;
  }
  for (int g = 0; given < owned; g = (g + 1) % groups)  // the remainder, one row each, to non-empty groups
    if (w[size_t(g)] || wsum == 0) ++l.rows[size_t(g)], ++given;
  for (int g = 0; g < groups; ++g)
    l.ids.push_back((holes && g % 7 == 3) ? -1 : int32_t((g * 5 + 1) % adapters));
  return l;
}

LoraCase make(Op op, std::string name, int64_t q, int64_t kv, int64_t rank, const Layout &l, int64_t adapters,
              ggemm_dtype in, ggemm_dtype out, float scale = 1.0f, bool accumulate = false) {
  LoraCase c;
  c.name = std::move(name);
  c.op = op;
  c.q_dim = q, c.kv_dim = kv, c.rank = rank;
  c.rows = l.rows, c.ids = l.ids, c.adapters = adapters;
  c.in = in, c.out = out, c.scale = scale, c.accumulate = accumulate;
  return c;
}

// Everything one case needs, on host and device.
struct Problem {
  LoraCase c;
  int64_t m = 0, k = 0, n = 0;  // tokens; shrink depth; expand's fused columns
  int64_t owned_end = 0;        // rows [0, owned_end) belong to active groups
  std::vector<uint32_t> offsets;
  std::vector<int32_t> ids;
  uint32_t stats[2] = {0, 0};
  Bytes x, a, p, b, q, kv;  // host: inputs and the outputs' initial contents
  DeviceBuffer d_x, d_a, d_p, d_b, d_q, d_kv, d_offsets, d_ids, d_stats;

  bool shrinks() const { return c.op != Op::kExpand; }
  bool expands() const { return c.op != Op::kShrink; }
  ggemm_dtype p_dtype() const { return c.op == Op::kShrink ? c.out : c.in; }

  Problem(const LoraCase &cs, Rng &rng) : c(cs) {
    offsets.push_back(0);
    int64_t max_rows = 0;
    for (int64_t r : c.rows) {
      offsets.push_back(uint32_t(offsets.back() + r));
      max_rows = std::max(max_rows, r);
    }
    ids = c.ids;
    const int64_t groups = int64_t(ids.size());
    const int64_t active = c.active < 0 ? groups : std::min(c.active, groups);
    owned_end = offsets[size_t(active)];
    m = offsets.back() + c.unowned_rows;
    k = c.hidden ? c.hidden : c.q_dim;
    n = c.q_dim + 2 * c.kv_dim;
    stats[0] = uint32_t(max_rows);
    stats[1] = uint32_t(c.active < 0 ? groups : c.active);

    const size_t R = size_t(c.rank), M = size_t(m), G = size_t(c.adapters);
    const size_t in_size = ref::dtype_size(c.in), out_size = ref::dtype_size(c.out);
    if (shrinks()) {
      x.resize(M * size_t(k) * in_size);
      a.resize(G * 3 * R * size_t(k) * in_size);
      fill_random(c.in, x.data(), M * size_t(k), rng);
      fill_random(c.in, a.data(), G * 3 * R * size_t(k), rng);
    }
    // P: the expand's random input, or the shrink's output (poisoned; owned
    // rows random when the shrink accumulates).
    const size_t p_size = ref::dtype_size(p_dtype());
    p.resize(3 * M * R * p_size);
    if (c.op == Op::kExpand) {
      fill_random(c.in, p.data(), 3 * M * R, rng);
    } else {
      poison(p.data(), p.size());
      if (c.op == Op::kShrink && c.accumulate) {
        const float t = 2.0f * std::fabs(c.scale) * std::sqrt(float(k)) / 3.0f;  // ~2x a typical |output|
        for (size_t plane = 0; plane < 3; ++plane)
          fill_random(c.out, p.data() + plane * M * R * p_size, size_t(owned_end) * R, rng, -t, t);
      }
    }
    if (expands()) {
      b.resize(G * size_t(n) * R * in_size);
      fill_random(c.in, b.data(), G * size_t(n) * R, rng);
      q.resize(M * size_t(c.q_dim) * out_size);
      kv.resize(2 * M * size_t(c.kv_dim) * out_size);
      poison(q.data(), q.size());
      poison(kv.data(), kv.size());
      if (c.accumulate) {
        // ~2x a typical |output|: expand of random P is ~ sqrt(R)/3; chained,
        // P itself is ~ shrink_scale * sqrt(K)/3 and the products ~ 1/sqrt(3).
        const float typical = c.op == Op::kExpand
                                  ? std::sqrt(float(c.rank)) / 3.0f
                                  : std::sqrt(float(c.rank)) * std::fabs(c.shrink_scale) * std::sqrt(float(k)) /
                                        (3.0f * std::sqrt(3.0f));
        const float t = 2.0f * std::fabs(c.scale) * typical;
        const size_t Q = size_t(c.q_dim), KV = size_t(c.kv_dim), own = size_t(owned_end);
        fill_random(c.out, q.data(), own * Q, rng, -t, t);
        fill_random(c.out, kv.data(), own * KV, rng, -t, t);                      // K half
        fill_random(c.out, kv.data() + M * KV * out_size, own * KV, rng, -t, t);  // V half
      }
    }
  }

  ggemm_lora_shrink_qkv_args shrink_args(bool device) const {
    ggemm_lora_shrink_qkv_args s;
    std::memset(&s, 0, sizeof s);
    s.struct_size = sizeof s;
    s.x_dtype = c.in;
    s.p_dtype = p_dtype();
    s.m = m;
    s.k = k;
    s.rank = c.rank;
    s.num_adapters = c.adapters;
    s.num_groups = int64_t(ids.size());
    s.max_rows_per_group = stats[0];
    s.scale = c.op == Op::kChain ? c.shrink_scale : c.scale;
    s.accumulate = c.op == Op::kShrink && c.accumulate;
    s.config = nullptr;
    if (device) {
      s.x = d_x.get(), s.lora_a = d_a.get(), s.p = d_p.get();
      s.a_offsets = d_offsets.as<uint32_t>(), s.adapter_ids = d_ids.as<int32_t>();
      s.expert_usage_stats = d_stats.as<uint32_t>();
    } else {
      s.x = x.data(), s.lora_a = a.data();  // p: set by the caller
      s.a_offsets = offsets.data(), s.adapter_ids = ids.data(), s.expert_usage_stats = stats;
    }
    return s;
  }

  ggemm_lora_expand_qkv_args expand_args(bool device) const {
    ggemm_lora_expand_qkv_args e;
    std::memset(&e, 0, sizeof e);
    e.struct_size = sizeof e;
    e.p_dtype = c.in;
    e.out_dtype = c.out;
    e.m = m;
    e.rank = c.rank;
    e.q_dim = c.q_dim;
    e.kv_dim = c.kv_dim;
    e.num_adapters = c.adapters;
    e.num_groups = int64_t(ids.size());
    e.max_rows_per_group = stats[0];
    e.scale = c.scale;
    e.accumulate = c.accumulate;
    e.config = nullptr;
    if (device) {
      e.p = d_p.get(), e.lora_b = d_b.get(), e.q_out = d_q.get(), e.kv_out = d_kv.get();
      e.a_offsets = d_offsets.as<uint32_t>(), e.adapter_ids = d_ids.as<int32_t>();
      e.expert_usage_stats = d_stats.as<uint32_t>();
    } else {
      e.p = p.data(), e.lora_b = b.data();  // outputs (and p in a chain): set by the caller
      e.a_offsets = offsets.data(), e.adapter_ids = ids.data(), e.expert_usage_stats = stats;
    }
    return e;
  }
};

void put(DeviceBuffer &d, const Bytes &h) {
  ASSERT_TRUE(d.alloc(h.size())) << "cudaMalloc of " << h.size() << " bytes";
  if (!h.empty()) CUDA_OK(cudaMemcpy(d.get(), h.data(), h.size(), cudaMemcpyHostToDevice));
}

void upload(Problem &p) {
  auto put_raw = [](DeviceBuffer &d, const void *h, size_t bytes) {
    ASSERT_TRUE(d.alloc(bytes)) << "cudaMalloc of " << bytes << " bytes";
    CUDA_OK(cudaMemcpy(d.get(), h, bytes, cudaMemcpyHostToDevice));
  };
  ASSERT_NO_FATAL_FAILURE(put(p.d_x, p.x));
  ASSERT_NO_FATAL_FAILURE(put(p.d_a, p.a));
  ASSERT_NO_FATAL_FAILURE(put(p.d_p, p.p));
  ASSERT_NO_FATAL_FAILURE(put(p.d_b, p.b));
  ASSERT_NO_FATAL_FAILURE(put(p.d_q, p.q));
  ASSERT_NO_FATAL_FAILURE(put(p.d_kv, p.kv));
  ASSERT_NO_FATAL_FAILURE(put_raw(p.d_offsets, p.offsets.data(), p.offsets.size() * 4));
  ASSERT_NO_FATAL_FAILURE(put_raw(p.d_ids, p.ids.data(), p.ids.size() * 4));
  ASSERT_NO_FATAL_FAILURE(put_raw(p.d_stats, p.stats, 8));
}

Bytes download(const DeviceBuffer &d) {
  Bytes h(d.bytes());
  if (!h.empty()) {
    EXPECT_EQ(cudaMemcpy(h.data(), d.get(), h.size(), cudaMemcpyDeviceToHost), cudaSuccess);
  }
  return h;
}

// The references, on the problem's host copies (outputs start from the
// problem's initial contents).
Bytes reference_shrink(const Problem &p) {
  Bytes out = p.p;
  ggemm_lora_shrink_qkv_args s = p.shrink_args(false);
  s.p = out.data();
  ref::lora_shrink_qkv(s);
  return out;
}

void reference_expand(const Problem &p, const Bytes &p_in, Bytes *q, Bytes *kv) {
  *q = p.q;
  *kv = p.kv;
  ggemm_lora_expand_qkv_args e = p.expand_args(false);
  e.p = p_in.data();
  e.q_out = q->data();
  e.kv_out = kv->data();
  ref::lora_expand_qkv(e);
}

::testing::AssertionResult compare_p(const Problem &p, const Bytes &want, const Bytes &got, double atol) {
  return compare_matrix(p.p_dtype(), want.data(), got.data(), 3 * p.m, p.c.rank, atol, default_rtol(p.p_dtype()));
}

class LoraGpu : public ::testing::TestWithParam<LoraCase> {};

TEST_P(LoraGpu, MatchesReference) {
  GGEMM_REQUIRE_GPU(handle);
  const LoraCase &c = GetParam();
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  Rng rng(seed);
  Problem p(c, rng);
  ASSERT_NO_FATAL_FAILURE(upload(p));

  // The call(s): a chain runs the shrink then the expand on one stream, P
  // staying on the device in between.
  if (p.shrinks()) {
    const ggemm_lora_shrink_qkv_args s = p.shrink_args(true);
    GGEMM_OK(ggemm_lora_shrink_qkv(handle, &s, nullptr));
  }
  if (p.expands()) {
    const ggemm_lora_expand_qkv_args e = p.expand_args(true);
    GGEMM_OK(ggemm_lora_expand_qkv(handle, &e, nullptr));
  }
  CUDA_OK(cudaGetLastError());
  CUDA_OK(cudaDeviceSynchronize());

  if (c.op == Op::kShrink) {
    const Bytes got = download(p.d_p);
    const Bytes want = reference_shrink(p);
    EXPECT_TRUE(compare_p(p, want, got, lora_atol(c.out, p.k, c.scale))) << "P";
    return;
  }

  const Bytes got_q = download(p.d_q), got_kv = download(p.d_kv);
  const double rtol = default_rtol(c.out);
  if (c.op == Op::kExpand) {
    Bytes want_q, want_kv;
    reference_expand(p, p.p, &want_q, &want_kv);
    const double atol = lora_atol(c.out, c.rank, c.scale);
    EXPECT_TRUE(compare_matrix(c.out, want_q.data(), got_q.data(), p.m, c.q_dim, atol, rtol)) << "q_out";
    EXPECT_TRUE(compare_matrix(c.out, want_kv.data(), got_kv.data(), 2 * p.m, c.kv_dim, atol, rtol))
        << "kv_out (K rows [0, M), V rows [M, 2M))";
    return;
  }

  // Chain. (1) The device's P, read back afterwards, against the reference
  // shrink; (2) q_out / kv_out against the reference expand of the device's
  // P (isolates the expand, default tolerances); (3) q_out / kv_out against
  // the two-step reference: reference shrink, P rounded to its dtype, then
  // reference expand. In (3) an element of P may round to the neighbouring
  // value on one side (the shrinks' sums differ in order), by at most
  // d_r = rtol_p |P_r| + atol_p; that moves an output by at most
  // |scale| * sum_r |B[j, r]| d_r, which is added to its tolerance:
  // computed exactly by the reference expand of |P| and of ones, against |B|.
  const ggemm_dtype pt = p.p_dtype();
  const Bytes got_p = download(p.d_p);
  const Bytes ref_p = reference_shrink(p);
  const double atol_p = lora_atol(pt, p.k, c.shrink_scale);
  EXPECT_TRUE(compare_p(p, ref_p, got_p, atol_p)) << "P (the shrink's output, read back after the chain)";

  Bytes want_q, want_kv;
  reference_expand(p, got_p, &want_q, &want_kv);
  // B is within [-1, 1], so a term P_r * B[j, r] is bounded by max |P|.
  const double atol_e = lora_atol(c.out, c.rank, c.scale, std::max(1.0, max_abs(pt, got_p)));
  EXPECT_TRUE(compare_matrix(c.out, want_q.data(), got_q.data(), p.m, c.q_dim, atol_e, rtol))
      << "q_out vs the reference expand of the device's P";
  EXPECT_TRUE(compare_matrix(c.out, want_kv.data(), got_kv.data(), 2 * p.m, c.kv_dim, atol_e, rtol))
      << "kv_out vs the reference expand of the device's P";

  Bytes two_q, two_kv;
  reference_expand(p, ref_p, &two_q, &two_kv);
  // Bound inputs: |P| and ones (same dtype: both exact), |B|; fp32 outputs.
  const size_t pe = size_t(3 * p.m * c.rank), be = p.b.size() / ref::dtype_size(pt);
  Bytes abs_p(ref_p.size()), ones(ref_p.size()), abs_b(p.b.size());
  for (size_t i = 0; i < pe; ++i) {
    const float v = ref::load_as_float(pt, ref_p.data(), i);
    ref::store_from_float(pt, abs_p.data(), i, std::isnan(v) ? 0.0f : std::fabs(v));  // rows in no group: 0
    ref::store_from_float(pt, ones.data(), i, 1.0f);
  }
  for (size_t i = 0; i < be; ++i)
    ref::store_from_float(pt, abs_b.data(), i, std::fabs(ref::load_as_float(pt, p.b.data(), i)));
  auto bound_expand = [&](const Bytes &p_in, std::vector<float> *bq, std::vector<float> *bkv) {
    bq->assign(size_t(p.m * c.q_dim), 0.0f);
    bkv->assign(size_t(2 * p.m * c.kv_dim), 0.0f);
    ggemm_lora_expand_qkv_args e = p.expand_args(false);
    e.p = p_in.data();
    e.lora_b = abs_b.data();
    e.out_dtype = kFp32;
    e.scale = 1.0f;
    e.accumulate = 0;
    e.q_out = bq->data();
    e.kv_out = bkv->data();
    ref::lora_expand_qkv(e);
  };
  std::vector<float> bp_q, bp_kv, b1_q, b1_kv;
  bound_expand(abs_p, &bp_q, &bp_kv);  // sum_r |B| |P_r|
  bound_expand(ones, &b1_q, &b1_kv);   // sum_r |B|
  const double rtol_p = default_rtol(pt), s = std::fabs(c.scale);
  auto extra = [&](const std::vector<float> &bp, const std::vector<float> &b1) {
    std::vector<float> e(bp.size());
    for (size_t i = 0; i < e.size(); ++i) e[i] = float(s * (rtol_p * bp[i] + atol_p * b1[i]));
    return e;
  };
  const double atol_two = lora_atol(c.out, c.rank, c.scale, std::max(1.0, max_abs(pt, ref_p)));
  // Each element's tolerance adds its extra(...) to atol_two.
  EXPECT_TRUE(compare_matrix(c.out, two_q.data(), got_q.data(), p.m, c.q_dim, atol_two, rtol, 10,
                             extra(bp_q, b1_q).data()))
      << "q_out vs the two-step reference";
  EXPECT_TRUE(compare_matrix(c.out, two_kv.data(), got_kv.data(), 2 * p.m, c.kv_dim, atol_two, rtol, 10,
                             extra(bp_kv, b1_kv).data()))
      << "kv_out vs the two-step reference";
}

std::vector<LoraCase> cases() {
  std::vector<LoraCase> v;
  const Op E = Op::kExpand, S = Op::kShrink, C = Op::kChain;
  auto add = [&](LoraCase c) { v.push_back(std::move(c)); };

  // ---- expand: every listed (q_dim, kv_dim), ranks 8..128, every dtype pair.
  add(make(E, "expand_llama8b_r16_m4096_g8", 4096, 1024, 16, spread(4096, 8, 8, true), 8, kBf16, kBf16));
  add(make(E, "expand_llama8b_r64_m1000_g8_fp16_scale05", 4096, 1024, 64, spread(1000, 8, 8, false), 8, kFp16, kFp16,
           0.5f));
  add(make(E, "expand_llama8b_r128_m300_g32_fp32out_acc", 4096, 1024, 128, spread(300, 32, 32, true), 32, kBf16,
           kFp32, 0.5f, true));
  {
    LoraCase c = make(E, "expand_llama8b_r8_m1", 4096, 1024, 8, {{1}, {0}}, 1, kBf16, kBf16);
    c.unowned_rows = 0;
    add(c);
  }
  add(make(E, "expand_llama8b_r16_m64_g8_decode_acc", 4096, 1024, 16, spread(64, 8, 8, false), 8, kBf16, kBf16, 0.5f,
           true));
  add(make(E, "expand_llama70b_r32_m1024_g4", 8192, 1024, 32, spread(1024, 4, 4, false), 4, kBf16, kBf16));
  add(make(E, "expand_llama70b_r8_m7_g4_fp16_fp32out", 8192, 1024, 8, {{2, 0, 5, 0}, {1, 0, 2, -1}}, 3, kFp16, kFp32,
           0.5f));
  add(make(E, "expand_d512_256_r64_m8192_g16_scale05", 512, 256, 64, spread(8192, 16, 16, true), 16, kBf16, kBf16,
           0.5f));
  add(make(E, "expand_d512_256_r32_m100_g32_fp16", 512, 256, 32, spread(100, 32, 32, true), 32, kFp16, kFp16));
  add(make(E, "expand_d768_256_r16_m2000_g32_fp16_bf16out_acc", 768, 256, 16, spread(2000, 32, 32, true), 32, kFp16,
           kBf16, 1.0f, true));
  add(make(E, "expand_d384_128_r64_m8192_g3_fp16out", 384, 128, 64, spread(8192, 3, 3, false), 3, kBf16, kFp16));
  add(make(E, "expand_d384_128_r128_m1024_g5_fp32out_scale05", 384, 128, 128, spread(1024, 5, 5, true), 5, kBf16,
           kFp32, 0.5f));
  add(make(E, "expand_d4096_4096_r64_m256_g5", 4096, 4096, 64, spread(256, 5, 5, true), 5, kBf16, kBf16));
  add(make(E, "expand_d4096_4096_r8_m33_g3_fp32out_acc", 4096, 4096, 8, spread(33, 3, 2, false), 2, kBf16, kFp32,
           0.5f, true));
  // Not tile-aligned (multiples of 8 only): the slower path must still be right.
  add(make(E, "expand_unaligned_d328_136_r24_m300_g3", 328, 136, 24, spread(300, 3, 3, false), 3, kBf16, kBf16));
  // Group edge cases.
  {
    LoraCase c = make(E, "expand_active_below_groups", 512, 256, 16, {{50, 60, 70, 80}, {0, 1, 2, 3}}, 4, kBf16, kBf16);
    c.active = 2;  // groups 2 and 3 are past the active count: untouched
    add(c);
  }
  {
    LoraCase c = make(E, "expand_zero_active_acc", 512, 256, 16, {{50, 60}, {0, 1}}, 2, kBf16, kBf16, 1.0f, true);
    c.active = 0;
    add(c);
  }
  add(make(E, "expand_adapter_ids_out_of_range", 768, 256, 16, {{40, 30, 20, 10}, {3, -7, 0, 2}}, 3, kBf16, kBf16));
  add(make(E, "expand_adapter_ids_out_of_range_acc", 768, 256, 16, {{40, 30, 20, 10}, {3, -7, 0, 2}}, 3, kBf16, kFp32,
           0.5f, true));

  // ---- shrink: hidden = the model's hidden size (q_dim here) unless set.
  add(make(S, "shrink_k4096_r16_m2048_g8", 4096, 1024, 16, spread(2048, 8, 8, true), 8, kBf16, kBf16));
  add(make(S, "shrink_k4096_r64_m512_g8_fp16_scale05", 4096, 1024, 64, spread(512, 8, 8, false), 8, kFp16, kFp16,
           0.5f));
  add(make(S, "shrink_k4096_r128_m200_g32_fp32out_acc", 4096, 1024, 128, spread(200, 32, 32, true), 32, kBf16, kFp32,
           0.5f, true));
  {
    LoraCase c = make(S, "shrink_k4096_r8_m1", 4096, 1024, 8, {{1}, {0}}, 1, kBf16, kBf16);
    c.unowned_rows = 0;
    add(c);
  }
  add(make(S, "shrink_k4096_r16_m64_g8_decode", 4096, 1024, 16, spread(64, 8, 8, false), 8, kBf16, kBf16));
  add(make(S, "shrink_k8192_r32_m256_g4", 8192, 1024, 32, spread(256, 4, 4, false), 4, kBf16, kBf16));
  add(make(S, "shrink_k512_r32_m8192_g16", 512, 256, 32, spread(8192, 16, 16, true), 16, kBf16, kBf16));
  add(make(S, "shrink_k768_r16_m2000_g32_fp16_acc", 768, 256, 16, spread(2000, 32, 32, true), 32, kFp16, kFp16, 1.0f,
           true));
  add(make(S, "shrink_k384_r128_m1024_g3_fp16out", 384, 128, 128, spread(1024, 3, 3, false), 3, kBf16, kFp16));
  add(make(S, "shrink_k4096_r64_m7_g4_fp16_fp32out", 4096, 4096, 64, {{2, 0, 5, 0}, {1, 0, 2, -1}}, 3, kFp16, kFp32,
           0.5f));
  {
    LoraCase c = make(S, "shrink_unaligned_k200_r8_m100_g3_fp16_bf16out", 200, 8, 8, spread(100, 3, 3, false), 3,
                      kFp16, kBf16);
    c.hidden = 200;
    add(c);
  }
  {
    LoraCase c = make(S, "shrink_active_below_groups", 512, 256, 16, {{50, 60, 70, 80}, {0, 1, 2, 3}}, 4, kBf16, kBf16);
    c.active = 2;
    add(c);
  }
  {
    LoraCase c = make(S, "shrink_zero_active", 512, 256, 16, {{50, 60}, {0, 1}}, 2, kBf16, kBf16);
    c.active = 0;
    add(c);
  }
  add(make(S, "shrink_adapter_ids_out_of_range_acc", 768, 256, 16, {{40, 30, 20, 10}, {3, -7, 0, 2}}, 3, kBf16, kBf16,
           0.5f, true));

  // ---- shrink then expand (P stays on the device): K = q_dim (hidden).
  add(make(C, "chain_llama8b_r16_m512_g8_scale05", 4096, 1024, 16, spread(512, 8, 8, true), 8, kBf16, kBf16, 0.5f));
  add(make(C, "chain_llama70b_r64_m128_g4_fp16_fp32out_acc", 8192, 1024, 64, spread(128, 4, 4, false), 4, kFp16,
           kFp32, 0.5f, true));
  add(make(C, "chain_d4096_4096_r128_m64_g3_fp16out", 4096, 4096, 128, spread(64, 3, 3, true), 3, kBf16, kFp16));
  add(make(C, "chain_d384_128_r32_m4096_g16", 384, 128, 32, spread(4096, 16, 16, true), 16, kBf16, kBf16));
  {
    LoraCase c = make(C, "chain_d512_256_r8_m1", 512, 256, 8, {{1}, {0}}, 1, kBf16, kBf16);
    c.unowned_rows = 0;
    add(c);
  }
  {
    LoraCase c = make(C, "chain_d768_256_r16_m300_g32_fp16_bf16out_acc_shrink_scale05", 768, 256, 16,
                      spread(300, 32, 32, true), 32, kFp16, kBf16, 2.0f, true);
    c.shrink_scale = 0.5f;
    add(c);
  }
  return v;
}

INSTANTIATE_TEST_SUITE_P(Shapes, LoraGpu, ::testing::ValuesIn(cases()), CaseName());

// Runs without a GPU: every case above is a call (or two) the C ABI
// accepts, so a case written wrong fails here, not on the GPU as a refused
// call. The arguments are checked before the handle, so with no handle a
// valid call stops at the handle.
TEST(LoraCases, AreCallsTheAbiAccepts) {
  Rng rng(fresh_seed());
  for (const LoraCase &c : cases()) {
    SCOPED_TRACE(c.name);
    Problem p(c, rng);
    if (p.shrinks()) {
      ggemm_lora_shrink_qkv_args s = p.shrink_args(false);
      Bytes out = p.p;
      s.p = out.data();
      EXPECT_EQ(ggemm_lora_shrink_qkv(nullptr, &s, nullptr), GGEMM_STATUS_INVALID_HANDLE)
          << ggemm_last_error_message();
    }
    if (p.expands()) {
      ggemm_lora_expand_qkv_args e = p.expand_args(false);
      Bytes p_in = p.p, q = p.q, kv = p.kv;
      e.p = p_in.data();
      e.q_out = q.data();
      e.kv_out = kv.data();
      EXPECT_EQ(ggemm_lora_expand_qkv(nullptr, &e, nullptr), GGEMM_STATUS_INVALID_HANDLE)
          << ggemm_last_error_message();
    }
  }
}

// One call captured in a CUDA graph, replayed with other offsets, adapter
// ids and active counts written to the same device arrays between replays.
void replay_with_new_device_counts(Op op) {
  GGEMM_REQUIRE_GPU(handle);
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  Rng rng(seed);
  LoraCase c = make(op, "graph", 768, 256, 16, {{100, 50, 200, 10}, {0, -1, 1, 3}}, 4, kBf16, kBf16);
  c.unowned_rows = 200;  // room for the replays' larger groups
  Problem p(c, rng);
  ASSERT_NO_FATAL_FAILURE(upload(p));
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  ggemm_lora_shrink_qkv_args s = p.shrink_args(true);
  ggemm_lora_expand_qkv_args e = p.expand_args(true);
  s.max_rows_per_group = e.max_rows_per_group = 0;  // the replays change the sizes
  CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  const ggemm_status st =
      op == Op::kShrink ? ggemm_lora_shrink_qkv(handle, &s, stream) : ggemm_lora_expand_qkv(handle, &e, stream);
  cudaGraph_t captured = nullptr;
  const cudaError_t end = cudaStreamEndCapture(stream, &captured);
  ASSERT_EQ(st, GGEMM_STATUS_SUCCESS) << ggemm_status_string(st) << ": " << ggemm_last_error_message();
  CUDA_OK(end);
  graph = captured;
  CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));

  const std::vector<std::vector<int64_t>> replays = {
      {100, 50, 200, 10}, {0, 300, 1, 160}, {7, 7, 7, 7}, {400, 0, 0, 0}, {1, 1, 1, 1}};
  const std::vector<uint32_t> actives = {4, 4, 2, 1, 4};
  for (size_t r = 0; r < replays.size(); ++r) {
    std::vector<uint32_t> offsets = {0};
    uint32_t max_rows = 0;
    for (int64_t x : replays[r]) {
      offsets.push_back(uint32_t(offsets.back() + x));
      max_rows = std::max(max_rows, uint32_t(x));
    }
    p.offsets = offsets;
    p.ids = {int32_t(r % 4), -1, int32_t((r + 1) % 4), r % 2 ? 3 : 1};
    p.stats[0] = max_rows;
    p.stats[1] = actives[r];
    CUDA_OK(cudaMemcpyAsync(p.d_offsets.get(), p.offsets.data(), p.offsets.size() * 4, cudaMemcpyHostToDevice, stream));
    CUDA_OK(cudaMemcpyAsync(p.d_ids.get(), p.ids.data(), p.ids.size() * 4, cudaMemcpyHostToDevice, stream));
    CUDA_OK(cudaMemcpyAsync(p.d_stats.get(), p.stats, 8, cudaMemcpyHostToDevice, stream));
    // Fresh poison in the outputs before every replay.
    if (op == Op::kShrink) {
      CUDA_OK(cudaMemcpyAsync(p.d_p.get(), p.p.data(), p.p.size(), cudaMemcpyHostToDevice, stream));
    } else {
      CUDA_OK(cudaMemcpyAsync(p.d_q.get(), p.q.data(), p.q.size(), cudaMemcpyHostToDevice, stream));
      CUDA_OK(cudaMemcpyAsync(p.d_kv.get(), p.kv.data(), p.kv.size(), cudaMemcpyHostToDevice, stream));
    }
    CUDA_OK(cudaGraphLaunch(exec, stream));
    CUDA_OK(cudaStreamSynchronize(stream));
    SCOPED_TRACE("replay " + std::to_string(r));
    if (op == Op::kShrink) {
      const Bytes got = download(p.d_p);
      EXPECT_TRUE(compare_p(p, reference_shrink(p), got, lora_atol(c.out, p.k, c.scale)));
    } else {
      const Bytes got_q = download(p.d_q), got_kv = download(p.d_kv);
      Bytes want_q, want_kv;
      reference_expand(p, p.p, &want_q, &want_kv);
      const double atol = lora_atol(c.out, c.rank, c.scale), rtol = default_rtol(c.out);
      EXPECT_TRUE(compare_matrix(c.out, want_q.data(), got_q.data(), p.m, c.q_dim, atol, rtol)) << "q_out";
      EXPECT_TRUE(compare_matrix(c.out, want_kv.data(), got_kv.data(), 2 * p.m, c.kv_dim, atol, rtol)) << "kv_out";
    }
  }
  CUDA_OK(cudaGraphExecDestroy(exec));
  CUDA_OK(cudaGraphDestroy(graph));
  CUDA_OK(cudaStreamDestroy(stream));
}

TEST(LoraExpandGpuGraph, ReplayWithNewDeviceCounts) { replay_with_new_device_counts(Op::kExpand); }
TEST(LoraShrinkGpuGraph, ReplayWithNewDeviceCounts) { replay_with_new_device_counts(Op::kShrink); }

// Accumulate twice in a row (the base projection's output gets two deltas):
// the second call must add onto the first call's rounded result, once.
TEST(LoraExpandGpuAccumulate, TwoCallsEachAddOnce) {
  GGEMM_REQUIRE_GPU(handle);
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  Rng rng(seed);
  LoraCase c = make(Op::kExpand, "acc2", 512, 256, 16, spread(500, 4, 4, true), 4, kBf16, kFp32, 0.5f, true);
  Problem p(c, rng);
  ASSERT_NO_FATAL_FAILURE(upload(p));
  const ggemm_lora_expand_qkv_args e = p.expand_args(true);
  GGEMM_OK(ggemm_lora_expand_qkv(handle, &e, nullptr));
  GGEMM_OK(ggemm_lora_expand_qkv(handle, &e, nullptr));
  CUDA_OK(cudaDeviceSynchronize());
  const Bytes got_q = download(p.d_q), got_kv = download(p.d_kv);
  Bytes q1, kv1, q2, kv2;
  reference_expand(p, p.p, &q1, &kv1);
  p.q = q1;  // the second call starts from the first call's result
  p.kv = kv1;
  reference_expand(p, p.p, &q2, &kv2);
  const double atol = 2 * lora_atol(c.out, c.rank, c.scale), rtol = 2 * default_rtol(c.out);
  EXPECT_TRUE(compare_matrix(c.out, q2.data(), got_q.data(), p.m, c.q_dim, atol, rtol)) << "q_out";
  EXPECT_TRUE(compare_matrix(c.out, kv2.data(), got_kv.data(), 2 * p.m, c.kv_dim, atol, rtol)) << "kv_out";
}

}  // namespace
}  // namespace ggemm::testing
