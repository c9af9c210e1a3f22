// GPU stress tests (issue 6), every result against the CPU reference:
//
// - StressGpu.ManyThreadsStreamsAndHandles: 4 host threads, each on its own
//   non-blocking stream, two on the shared handle and two on handles of
//   their own (created and destroyed in the thread), together ~2000 random
//   small calls (grouped matmul with every dtype pair, both weight layouts,
//   every epilogue, activation planes, -1 expert ids, active counts below
//   num_groups, exact / zero / underestimated max_rows_per_group; LoRA
//   shrink and expand with random ranks, dims, scales, store / accumulate).
//   Fresh random data per call; outputs poisoned (0xFF) with a poisoned guard
//   band after them, so unwritten elements, rows outside every group and
//   writes past the output all fail. GGEMM_STRESS_CALLS overrides the total
//   (e.g. lower under compute-sanitizer); GGEMM_STRESS_TRACE=1 prints each
//   call before it is enqueued; GGEMM_STRESS_SEED replays a run's calls (the
//   seed is printed first), GGEMM_STRESS_THREADS runs 1..4 of the threads,
//   GGEMM_STRESS_CALL_SEED runs the one call of that seed (each call's seed
//   is in its trace line) on the shared handle (for narrowing down the
//   racecheck hang that docs/debugging.md records).
// - StressGpu.BitwiseDeterministic: the same mid-size grouped matmul (both
//   weight layouts) and LoRA shrink + expand pair, run twice on one stream
//   and once, concurrently with the second run, on another stream through
//   another handle: the outputs are bitwise identical (and match the
//   reference).
// - StressGpu.GraphOfGroupedAndLoraReplaysWithNewRouting: a grouped matmul, a
//   LoRA shrink and the expand that reads its P, captured in one CUDA graph
//   and replayed 20 times with fresh inputs and random new offsets, ids,
//   active counts (cudaMemcpyAsync into the captured device arrays).
//
// Worker threads never use gtest assertions: each collects its failures as
// strings, which the main thread reports after joining.
// Skipped, with the reason, without a GPU.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "dtype.h"
#include "ggemm_reference.h"
#include "gpu_env.h"
#include "test_util.h"

namespace ggemm::testing {
namespace {

const char *epilogue_label(ggemm_epilogue e) {
  return e == GGEMM_EPILOGUE_STORE ? "store" : e == GGEMM_EPILOGUE_ACCUMULATE ? "accumulate" : "row_scale";
}

// Index of the first element where a and b differ bitwise, or -1.
int64_t first_difference(const Bytes &a, const Bytes &b, size_t elem_bytes) {
  if (a.size() != b.size()) return 0;
  for (size_t i = 0; i < a.size(); i += elem_bytes)
    if (std::memcmp(a.data() + i, b.data() + i, elem_bytes) != 0) return int64_t(i / elem_bytes);
  return -1;
}

// Checks that `bytes` bytes at `p` are all 0xFF (the guard band after an output).
bool guard_intact(const uint8_t *p, size_t bytes) {
  for (size_t i = 0; i < bytes; ++i)
    if (p[i] != 0xFF) return false;
  return true;
}

// ---------------------------------------------------------------------------
// Routing: random groups for one call.

constexpr int64_t kMaxGroups = 8;
constexpr int64_t kMaxRowsPerGroup = 200;
constexpr int64_t kMaxUnowned = 16;
constexpr int64_t kMaxM = kMaxGroups * kMaxRowsPerGroup + kMaxUnowned;
constexpr int64_t kMaxDim = 512;   // n, k, q_dim, kv_dim, hidden
constexpr int64_t kMaxRank = 64;
constexpr int64_t kMaxIds = 8;     // experts / adapters
constexpr size_t kGuard = 4096;    // poisoned bytes after every output

struct Routing {
  std::vector<uint32_t> offsets;  // [groups + 1]
  std::vector<int32_t> ids;       // [groups]
  uint32_t stats[2] = {0, 0};     // max rows in a group, active groups
  int64_t m = 0;                  // rows of the call: every group's rows, then unowned rows
  int64_t max_rows_arg = 0;       // max_rows_per_group argument

  int64_t groups() const { return int64_t(ids.size()); }
  int64_t grouped_rows() const { return int64_t(offsets.back()); }

  std::string describe() const {
    std::ostringstream s;
    s << "m=" << m << " groups=[";
    for (size_t g = 0; g < ids.size(); ++g) s << (g ? " " : "") << offsets[g + 1] - offsets[g] << ":" << ids[g];
    s << "] active=" << stats[1] << " max_rows_per_group=" << max_rows_arg;
    return s.str();
  }
};

// 1..8 groups of 0..200 rows (some empty, some decode-sized), 1 in 7 with id
// -1, 0..16 rows after the last group; 1 in 4 calls has an active count
// below the number of groups. max_rows_per_group is 0 (= m), exact, or an
// underestimate (which the contract allows: it only sizes the launch).
Routing random_routing(Rng &rng, int64_t num_ids) {
  Routing r;
  const int64_t groups = rng.uniform_int(1, kMaxGroups);
  r.offsets.push_back(0);
  int64_t max_rows = 0;
  for (int64_t g = 0; g < groups; ++g) {
    const int64_t kind = rng.uniform_int(0, 9);
    const int64_t rows = kind == 0 ? 0 : kind <= 3 ? rng.uniform_int(1, 16) : rng.uniform_int(0, kMaxRowsPerGroup);
    r.offsets.push_back(uint32_t(r.offsets.back() + rows));
    max_rows = std::max(max_rows, rows);
    r.ids.push_back(rng.uniform_int(0, 6) == 0 ? -1 : int32_t(rng.uniform_int(0, num_ids - 1)));
  }
  r.m = r.grouped_rows() + rng.uniform_int(0, kMaxUnowned);
  r.stats[0] = uint32_t(max_rows);
  r.stats[1] = uint32_t(rng.uniform_int(0, 3) == 0 ? rng.uniform_int(0, groups) : groups);
  switch (rng.uniform_int(0, 2)) {
    case 0: r.max_rows_arg = 0; break;
    case 1: r.max_rows_arg = max_rows; break;
    default: r.max_rows_arg = std::max<int64_t>(1, max_rows / 2); break;
  }
  return r;
}

// ---------------------------------------------------------------------------
// The worker threads of the multi-thread test.

// Failures of one worker thread, reported by the main thread after the join.
struct Failures {
  std::vector<std::string> messages;  // the first few
  int64_t count = 0;
  void add(const std::string &m) {
    ++count;
    if (messages.size() < 10) messages.push_back(m);
  }
};

#define W_CUDA(w, ctx, expr)                                                                              \
  do {                                                                                                    \
    const cudaError_t e_ = (expr);                                                                        \
    if (e_ != cudaSuccess) {                                                                              \
      (w).log.add((ctx) + ": " #expr " -> " + cudaGetErrorName(e_) + ": " + cudaGetErrorString(e_));     \
      return false;                                                                                       \
    }                                                                                                     \
  } while (0)

// GGEMM_STRESS_TRACE=1 prints every call's description (thread, call, seed,
// shapes) to stderr before it is enqueued: when a run hangs, each thread's
// last line names the call in flight.
bool trace_calls() {
  static const bool on = [] {
    const char *env = std::getenv("GGEMM_STRESS_TRACE");
    return env && *env && *env != '0';
  }();
  return on;
}

#define W_GGEMM(w, ctx, expr)                                                                             \
  do {                                                                                                    \
    if (trace_calls()) std::fprintf(stderr, "[ trace    ] %s\n", (ctx).c_str());                          \
    const ggemm_status s_ = (expr);                                                                       \
    if (s_ != GGEMM_STATUS_SUCCESS) {                                                                     \
      (w).log.add((ctx) + ": " #expr " -> " + ggemm_status_string(s_) + ": " + ggemm_last_error_message()); \
      return false;                                                                                       \
    }                                                                                                     \
  } while (0)

// Records a failed comparison (the call goes on: later checks still run).
#define W_CHECK(w, ctx, what, result)                                           \
  do {                                                                          \
    const ::testing::AssertionResult r_ = (result);                             \
    if (!r_) (w).log.add((ctx) + ": " + (what) + ": " + r_.message());          \
  } while (0)

constexpr size_t kSlotBytes = size_t(8) << 20;
// Every matrix of a call fits a slot, its guard band included.
static_assert(size_t(3 * kMaxM * kMaxDim) * 2 <= kSlotBytes, "A with planes");
static_assert(size_t(kMaxIds * kMaxDim * kMaxDim) * 2 <= kSlotBytes, "B");
static_assert(size_t(kMaxM * kMaxDim) * 4 + kGuard <= kSlotBytes, "C / q_out");
static_assert(size_t(2 * kMaxM * kMaxDim) * 4 + kGuard <= kSlotBytes, "kv_out");
static_assert(size_t(3 * kMaxM * kMaxRank) * 4 + kGuard <= kSlotBytes, "P");
static_assert(size_t(kMaxIds * 3 * kMaxRank * kMaxDim) * 2 <= kSlotBytes, "lora_a");
static_assert(size_t(kMaxIds * 3 * kMaxDim * kMaxRank) * 2 <= kSlotBytes, "lora_b");

struct Worker {
  int index = 0;
  bool own_handle = false;
  ggemm_handle_t handle = nullptr;
  cudaStream_t stream = nullptr;
  unsigned ref_threads = 1;
  uint64_t seed = 0;
  uint64_t only_call_seed = 0;  // nonzero: the one call to run (GGEMM_STRESS_CALL_SEED)
  int planned = 0;
  int done = 0;
  int grouped = 0, shrinks = 0, expands = 0;
  Failures log;
  DeviceBuffer slot[4];
  DeviceBuffer d_offsets, d_ids, d_stats;
};

bool put(Worker &w, const std::string &ctx, const DeviceBuffer &d, const void *h, size_t bytes) {
  if (bytes == 0) return true;
  W_CUDA(w, ctx, cudaMemcpyAsync(d.get(), h, bytes, cudaMemcpyHostToDevice, w.stream));
  return true;
}

bool get(Worker &w, const std::string &ctx, Bytes *h, const DeviceBuffer &d) {
  if (h->empty()) return true;
  W_CUDA(w, ctx, cudaMemcpyAsync(h->data(), d.get(), h->size(), cudaMemcpyDeviceToHost, w.stream));
  return true;
}

bool put_routing(Worker &w, const std::string &ctx, const Routing &r) {
  return put(w, ctx, w.d_offsets, r.offsets.data(), r.offsets.size() * 4) &&
         put(w, ctx, w.d_ids, r.ids.data(), r.ids.size() * 4) && put(w, ctx, w.d_stats, r.stats, 8);
}

// Points a call's routing fields at the worker's device copies of `r`;
// `ids` is the call's id array (expert_ids or adapter_ids).
template <typename Args>
void route_on_device(Args &x, const int32_t *Args::*ids, const Worker &w, const Routing &r) {
  x.a_offsets = w.d_offsets.as<uint32_t>();
  x.*ids = w.d_ids.as<int32_t>();
  x.expert_usage_stats = w.d_stats.as<uint32_t>();
  x.num_groups = r.groups();
  x.max_rows_per_group = r.max_rows_arg;
}

// The same routing fields on the host, for the reference.
template <typename Args>
void route_on_host(Args &h, const int32_t *Args::*ids, const Routing &r) {
  h.a_offsets = r.offsets.data();
  h.*ids = r.ids.data();
  h.expert_usage_stats = r.stats;
}

ggemm_dtype random_operand(Rng &rng) { return rng.uniform_int(0, 1) ? kBf16 : kFp16; }
ggemm_dtype random_output(Rng &rng) {
  const int64_t i = rng.uniform_int(0, 2);
  return i == 0 ? kBf16 : i == 1 ? kFp16 : kFp32;
}
int64_t random_dim(Rng &rng, int64_t max) { return 8 * rng.uniform_int(1, max / 8); }
float random_scale(Rng &rng) {
  static const float kScales[] = {1.0f, 0.5f, 0.25f, 2.0f, -1.0f};  // exact in fp32
  return kScales[rng.uniform_int(0, 4)];
}

// One random grouped matmul, checked against the reference.
bool run_grouped(Worker &w, Rng &rng, const std::string &where) {
  const ggemm_dtype in = random_operand(rng), out = random_output(rng);
  const int64_t n = random_dim(rng, kMaxDim), k = random_dim(rng, kMaxDim), E = rng.uniform_int(1, kMaxIds);
  const bool tb = rng.uniform_int(0, 1) != 0;
  int64_t s0 = 0, s1 = 0;
  if (rng.uniform_int(0, 4) == 0) {  // activation planes
    s0 = 8 * rng.uniform_int(1, n / 8);
    s1 = 8 * rng.uniform_int(s0 / 8, n / 8);
  }
  const ggemm_epilogue ep = ggemm_epilogue(rng.uniform_int(0, 2));
  const Routing r = random_routing(rng, E);
  const int64_t m = r.m, planes = s0 ? 3 : 1;
  // The groups as group ends (a_offsets past its leading zero) one call in four.
  const bool ends = rng.uniform_int(0, 3) == 0;

  std::ostringstream d;
  d << where << " grouped_matmul " << dtype_label(in) << "->" << dtype_label(out) << " n=" << n << " k=" << k
    << " E=" << E << (tb ? " B[E,N,K]" : " B[E,K,N]") << " splits=(" << s0 << "," << s1 << ") "
    << epilogue_label(ep) << (ends ? " group_ends " : " ") << r.describe();
  const std::string ctx = d.str();

  Bytes a(size_t(planes * m * k) * esize(in)), b(size_t(E * n * k) * esize(in));
  Bytes c(size_t(m * n) * esize(out) + kGuard), scale(size_t(std::max<int64_t>(m, 1)) * 4);
  fill_random(in, a.data(), size_t(planes * m * k), rng);
  fill_random(in, b.data(), size_t(E * n * k), rng);
  poison(c.data(), c.size());
  if (ep == GGEMM_EPILOGUE_ACCUMULATE) fill_random(out, c.data(), size_t(r.grouped_rows() * n), rng);
  fill_random(kFp32, scale.data(), size_t(std::max<int64_t>(m, 1)), rng, -1.0f, 1.0f);  // |row_scale| <= 1

  if (!put(w, ctx, w.slot[0], a.data(), a.size()) || !put(w, ctx, w.slot[1], b.data(), b.size()) ||
      !put(w, ctx, w.slot[2], c.data(), c.size()) || !put(w, ctx, w.slot[3], scale.data(), scale.size()) ||
      !put_routing(w, ctx, r))
    return false;

  ggemm_grouped_matmul_args x;
  std::memset(&x, 0, sizeof x);
  x.struct_size = sizeof x;
  x.a_dtype = x.b_dtype = in;
  x.c_dtype = out;
  x.m = m, x.n = n, x.k = k, x.num_experts = E;
  x.a = w.slot[0].get(), x.b = w.slot[1].get(), x.c = w.slot[2].get();
  x.transpose_b = tb ? 1 : 0;
  route_on_device(x, &ggemm_grouped_matmul_args::expert_ids, w, r);
  if (ends) x.group_ends = x.a_offsets + 1, x.a_offsets = nullptr;
  x.a_plane_split0 = s0, x.a_plane_split1 = s1;
  x.epilogue = ep;
  x.row_scale = w.slot[3].as<float>();
  x.config = nullptr;
  W_GGEMM(w, ctx, ggemm_grouped_matmul(w.handle, &x, w.stream));

  Bytes got(c.size());
  if (!get(w, ctx, &got, w.slot[2])) return false;
  W_CUDA(w, ctx, cudaStreamSynchronize(w.stream));

  Bytes want = c;
  ggemm_grouped_matmul_args h = x;
  h.a = a.data(), h.b = b.data(), h.c = want.data();
  route_on_host(h, &ggemm_grouped_matmul_args::expert_ids, r);  // the reference reads a_offsets
  h.group_ends = nullptr;
  h.row_scale = reinterpret_cast<const float *>(scale.data());
  ref::grouped_matmul(h, w.ref_threads);

  const size_t c_bytes = size_t(m * n) * esize(out);
  W_CHECK(w, ctx, "C", compare_matrix(out, want.data(), got.data(), m, n, default_atol(out, k), default_rtol(out)));
  if (!guard_intact(got.data() + c_bytes, kGuard)) w.log.add(ctx + ": written past the end of C");
  ++w.grouped;
  return true;
}

// One random LoRA shrink, checked against the reference.
bool run_shrink(Worker &w, Rng &rng, const std::string &where) {
  const ggemm_dtype in = random_operand(rng), pt = random_output(rng);
  const int64_t k = random_dim(rng, kMaxDim), R = random_dim(rng, kMaxRank), G = rng.uniform_int(1, kMaxIds);
  const float scale = random_scale(rng);
  const bool acc = rng.uniform_int(0, 1) != 0;
  const Routing r = random_routing(rng, G);
  const int64_t m = r.m;

  std::ostringstream d;
  d << where << " lora_shrink_qkv " << dtype_label(in) << "->" << dtype_label(pt) << " k=" << k << " rank=" << R
    << " adapters=" << G << " scale=" << scale << (acc ? " accumulate " : " store ") << r.describe();
  const std::string ctx = d.str();

  Bytes x(size_t(m * k) * esize(in)), a(size_t(G * 3 * R * k) * esize(in));
  Bytes p(size_t(3 * m * R) * esize(pt) + kGuard);
  fill_random(in, x.data(), size_t(m * k), rng);
  fill_random(in, a.data(), size_t(G * 3 * R * k), rng);
  poison(p.data(), p.size());
  if (acc) {  // owned rows start at ~2x a typical |output| (see tests/test_gpu_lora.cpp)
    const float t = 2.0f * std::fabs(scale) * std::sqrt(float(k)) / 3.0f;
    for (int64_t plane = 0; plane < 3; ++plane)
      fill_random(pt, p.data() + size_t(plane * m * R) * esize(pt), size_t(r.grouped_rows() * R), rng, -t, t);
  }
  if (!put(w, ctx, w.slot[0], x.data(), x.size()) || !put(w, ctx, w.slot[1], a.data(), a.size()) ||
      !put(w, ctx, w.slot[2], p.data(), p.size()) || !put_routing(w, ctx, r))
    return false;

  ggemm_lora_shrink_qkv_args s;
  std::memset(&s, 0, sizeof s);
  s.struct_size = sizeof s;
  s.x_dtype = in, s.p_dtype = pt;
  s.m = m, s.k = k, s.rank = R, s.num_adapters = G;
  s.x = w.slot[0].get(), s.lora_a = w.slot[1].get(), s.p = w.slot[2].get();
  route_on_device(s, &ggemm_lora_shrink_qkv_args::adapter_ids, w, r);
  s.scale = scale;
  s.accumulate = acc ? 1 : 0;
  s.config = nullptr;
  W_GGEMM(w, ctx, ggemm_lora_shrink_qkv(w.handle, &s, w.stream));

  Bytes got(p.size());
  if (!get(w, ctx, &got, w.slot[2])) return false;
  W_CUDA(w, ctx, cudaStreamSynchronize(w.stream));

  Bytes want = p;
  ggemm_lora_shrink_qkv_args h = s;
  h.x = x.data(), h.lora_a = a.data(), h.p = want.data();
  route_on_host(h, &ggemm_lora_shrink_qkv_args::adapter_ids, r);
  ref::lora_shrink_qkv(h, w.ref_threads);

  W_CHECK(w, ctx, "P", compare_matrix(pt, want.data(), got.data(), 3 * m, R, lora_atol(pt, k, scale), default_rtol(pt)));
  if (!guard_intact(got.data() + size_t(3 * m * R) * esize(pt), kGuard)) w.log.add(ctx + ": written past the end of P");
  ++w.shrinks;
  return true;
}

// One random LoRA expand (P random in [-1, 1]), checked against the reference.
bool run_expand(Worker &w, Rng &rng, const std::string &where) {
  const ggemm_dtype pt = random_operand(rng), out = random_output(rng);
  const int64_t R = random_dim(rng, kMaxRank), Q = random_dim(rng, kMaxDim), KV = random_dim(rng, kMaxDim);
  const int64_t G = rng.uniform_int(1, kMaxIds), n = Q + 2 * KV;
  const float scale = random_scale(rng);
  const bool acc = rng.uniform_int(0, 1) != 0;
  const Routing r = random_routing(rng, G);
  const int64_t m = r.m;

  std::ostringstream d;
  d << where << " lora_expand_qkv " << dtype_label(pt) << "->" << dtype_label(out) << " rank=" << R << " q_dim=" << Q
    << " kv_dim=" << KV << " adapters=" << G << " scale=" << scale << (acc ? " accumulate " : " store ")
    << r.describe();
  const std::string ctx = d.str();

  const size_t os = esize(out), q_bytes = size_t(m * Q) * os, kv_bytes = size_t(2 * m * KV) * os;
  Bytes p(size_t(3 * m * R) * esize(pt)), b(size_t(G * n * R) * esize(pt));
  Bytes q(q_bytes + kGuard), kv(kv_bytes + kGuard);
  fill_random(pt, p.data(), size_t(3 * m * R), rng);
  fill_random(pt, b.data(), size_t(G * n * R), rng);
  poison(q.data(), q.size());
  poison(kv.data(), kv.size());
  if (acc) {  // owned rows start at ~2x a typical |output|
    const float t = 2.0f * std::fabs(scale) * std::sqrt(float(R)) / 3.0f;
    const size_t own = size_t(r.grouped_rows());
    fill_random(out, q.data(), own * size_t(Q), rng, -t, t);
    fill_random(out, kv.data(), own * size_t(KV), rng, -t, t);                      // K rows
    fill_random(out, kv.data() + size_t(m * KV) * os, own * size_t(KV), rng, -t, t);  // V rows
  }
  if (!put(w, ctx, w.slot[0], p.data(), p.size()) || !put(w, ctx, w.slot[1], b.data(), b.size()) ||
      !put(w, ctx, w.slot[2], q.data(), q.size()) || !put(w, ctx, w.slot[3], kv.data(), kv.size()) ||
      !put_routing(w, ctx, r))
    return false;

  ggemm_lora_expand_qkv_args e;
  std::memset(&e, 0, sizeof e);
  e.struct_size = sizeof e;
  e.p_dtype = pt, e.out_dtype = out;
  e.m = m, e.rank = R, e.q_dim = Q, e.kv_dim = KV, e.num_adapters = G;
  e.p = w.slot[0].get(), e.lora_b = w.slot[1].get(), e.q_out = w.slot[2].get(), e.kv_out = w.slot[3].get();
  route_on_device(e, &ggemm_lora_expand_qkv_args::adapter_ids, w, r);
  e.scale = scale;
  e.accumulate = acc ? 1 : 0;
  e.config = nullptr;
  W_GGEMM(w, ctx, ggemm_lora_expand_qkv(w.handle, &e, w.stream));

  Bytes got_q(q.size()), got_kv(kv.size());
  if (!get(w, ctx, &got_q, w.slot[2]) || !get(w, ctx, &got_kv, w.slot[3])) return false;
  W_CUDA(w, ctx, cudaStreamSynchronize(w.stream));

  Bytes want_q = q, want_kv = kv;
  ggemm_lora_expand_qkv_args h = e;
  h.p = p.data(), h.lora_b = b.data(), h.q_out = want_q.data(), h.kv_out = want_kv.data();
  route_on_host(h, &ggemm_lora_expand_qkv_args::adapter_ids, r);
  ref::lora_expand_qkv(h, w.ref_threads);

  const double atol = lora_atol(out, R, scale), rtol = default_rtol(out);
  W_CHECK(w, ctx, "q_out", compare_matrix(out, want_q.data(), got_q.data(), m, Q, atol, rtol));
  W_CHECK(w, ctx, "kv_out (K rows [0, M), V rows [M, 2M))",
          compare_matrix(out, want_kv.data(), got_kv.data(), 2 * m, KV, atol, rtol));
  if (!guard_intact(got_q.data() + q_bytes, kGuard)) w.log.add(ctx + ": written past the end of q_out");
  if (!guard_intact(got_kv.data() + kv_bytes, kGuard)) w.log.add(ctx + ": written past the end of kv_out");
  ++w.expands;
  return true;
}

bool worker_setup(Worker &w, ggemm_handle_t shared) {
  const std::string ctx = "thread " + std::to_string(w.index) + " setup";
  W_CUDA(w, ctx, cudaStreamCreateWithFlags(&w.stream, cudaStreamNonBlocking));
  if (w.own_handle) {
    W_GGEMM(w, ctx, ggemm_create(&w.handle, 0));
  } else {
    w.handle = shared;
  }
  bool allocated = true;
  for (DeviceBuffer &s : w.slot) allocated = allocated && s.alloc(kSlotBytes);
  allocated = allocated && w.d_offsets.alloc((kMaxGroups + 1) * 4) && w.d_ids.alloc(kMaxGroups * 4) &&
              w.d_stats.alloc(8);
  if (!allocated) {
    const cudaError_t e = cudaGetLastError();
    w.log.add(ctx + ": cudaMalloc failed: " + cudaGetErrorName(e) + ": " + cudaGetErrorString(e));
    return false;
  }
  return true;
}

void worker_main(Worker *w, ggemm_handle_t shared) {
  if (worker_setup(*w, shared)) {
    for (int i = 0; i < w->planned; ++i) {
      // Each call has its own seed, printed with any failure of it.
      const uint64_t call_seed =
          w->only_call_seed ? w->only_call_seed : w->seed ^ (uint64_t(i + 1) * 0x9e3779b97f4a7c15ull);
      Rng rng(call_seed);
      const std::string where = "thread " + std::to_string(w->index) + (w->own_handle ? " (own handle)" : " (shared handle)") +
                                " call " + std::to_string(i) + " seed " + std::to_string(call_seed) + ":";
      const int64_t op = rng.uniform_int(0, 9);  // 60% grouped, 20% shrink, 20% expand
      const bool ok = op < 6 ? run_grouped(*w, rng, where) : op < 8 ? run_shrink(*w, rng, where) : run_expand(*w, rng, where);
      if (!ok) break;  // a CUDA or ggemm call failed: the thread's state is suspect
      ++w->done;
    }
  }
  // Everything this thread enqueued has completed (each call synchronises).
  if (w->stream) {
    const cudaError_t e = cudaStreamSynchronize(w->stream);
    if (e != cudaSuccess)
      w->log.add("thread " + std::to_string(w->index) + ": cudaStreamSynchronize -> " + cudaGetErrorName(e));
  }
  if (w->own_handle && w->handle) {
    const ggemm_status s = ggemm_destroy(w->handle);
    if (s != GGEMM_STATUS_SUCCESS)
      w->log.add("thread " + std::to_string(w->index) + ": ggemm_destroy -> " + ggemm_status_string(s) + ": " +
                 ggemm_last_error_message());
  }
  if (w->stream) {
    const cudaError_t e = cudaStreamDestroy(w->stream);
    if (e != cudaSuccess) w->log.add("thread " + std::to_string(w->index) + ": cudaStreamDestroy -> " + cudaGetErrorName(e));
  }
}

// A positive integer from the environment, or `fallback`.
uint64_t env_or(const char *name, uint64_t fallback) {
  const char *env = std::getenv(name);
  if (env && *env) {
    const unsigned long long v = std::strtoull(env, nullptr, 10);
    if (v > 0) return v;
  }
  return fallback;
}

TEST(StressGpu, ManyThreadsStreamsAndHandles) {
  GGEMM_REQUIRE_GPU(shared);
  const uint64_t seed = env_or("GGEMM_STRESS_SEED", fresh_seed());
  SCOPED_TRACE("seed " + std::to_string(seed));
  // Threads 0 and 2 share the process handle, 1 and 3 own one each.
  const uint64_t only_call_seed = env_or("GGEMM_STRESS_CALL_SEED", 0);
  const int thread_count = only_call_seed ? 1 : int(std::min<uint64_t>(env_or("GGEMM_STRESS_THREADS", 4), 4));
  const int total = only_call_seed ? 1 : int(env_or("GGEMM_STRESS_CALLS", 2000));
  std::printf("[ stress   ] seed %llu, %d calls on %d threads\n", (unsigned long long)seed, total, thread_count);
  std::fflush(stdout);
  const unsigned hw = std::max(1u, std::thread::hardware_concurrency());

  std::vector<std::unique_ptr<Worker>> workers;
  for (int t = 0; t < thread_count; ++t) {
    auto w = std::make_unique<Worker>();
    w->index = t;
    w->own_handle = t % 2 == 1;  // threads 1, 3: a handle of their own
    w->ref_threads = std::max(1u, hw / thread_count);
    w->seed = seed + uint64_t(t) * 0x632be59bd9b4e019ull;
    w->only_call_seed = only_call_seed;
    w->planned = total / thread_count + (t < total % thread_count ? 1 : 0);
    workers.push_back(std::move(w));
  }
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (auto &w : workers) threads.emplace_back(worker_main, w.get(), shared);
  for (std::thread &t : threads) t.join();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  int grouped = 0, shrinks = 0, expands = 0, done = 0;
  for (const auto &w : workers) {
    grouped += w->grouped, shrinks += w->shrinks, expands += w->expands, done += w->done;
    EXPECT_EQ(w->done, w->planned) << "thread " << w->index << " stopped early";
    if (w->log.count == 0) continue;
    std::ostringstream s;
    s << "thread " << w->index << (w->own_handle ? " (own handle)" : " (shared handle)") << ": " << w->log.count
      << " failure(s); the first " << w->log.messages.size() << ":";
    for (const std::string &m : w->log.messages) s << "\n--- " << m;
    ADD_FAILURE() << s.str();
  }
  EXPECT_EQ(done, total);
  std::printf("[ stress   ] %d calls (%d grouped_matmul, %d lora_shrink_qkv, %d lora_expand_qkv) on %d threads in %.1f s\n",
              done, grouped, shrinks, expands, thread_count, seconds);
}

// ---------------------------------------------------------------------------
// Determinism.

// Destroys a handle (after the device is idle) on scope exit.
struct HandleGuard {
  ggemm_handle_t h = nullptr;
  ~HandleGuard() {
    if (h) {
      cudaDeviceSynchronize();
      ggemm_destroy(h);
    }
  }
};

struct StreamGuard {
  cudaStream_t s = nullptr;
  ~StreamGuard() {
    if (s) {
      cudaStreamSynchronize(s);
      cudaStreamDestroy(s);
    }
  }
};

void upload(DeviceBuffer &d, const void *h, size_t bytes) {
  ASSERT_TRUE(d.alloc(bytes)) << "cudaMalloc of " << bytes << " bytes";
  CUDA_OK(cudaMemcpy(d.get(), h, bytes, cudaMemcpyHostToDevice));
}

void download(Bytes *h, const DeviceBuffer &d, size_t bytes) {
  h->resize(bytes);
  CUDA_OK(cudaMemcpy(h->data(), d.get(), bytes, cudaMemcpyDeviceToHost));
}

// `groups` groups of lo..hi rows, ids spread over `ids` (none inactive),
// 5 rows after the last group.
Routing fixed_routing(Rng &rng, int64_t groups, int64_t lo, int64_t hi, int64_t ids) {
  Routing r;
  r.offsets.push_back(0);
  int64_t max_rows = 0;
  for (int64_t g = 0; g < groups; ++g) {
    const int64_t rows = rng.uniform_int(lo, hi);
    r.offsets.push_back(uint32_t(r.offsets.back() + rows));
    r.ids.push_back(int32_t((g * 5 + 3) % ids));
    max_rows = std::max(max_rows, rows);
  }
  r.m = r.grouped_rows() + 5;
  r.stats[0] = uint32_t(max_rows);
  r.stats[1] = uint32_t(groups);
  r.max_rows_arg = max_rows;
  return r;
}

TEST(StressGpu, BitwiseDeterministic) {
  GGEMM_REQUIRE_GPU(handle);
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  Rng rng(seed);
  HandleGuard other;
  GGEMM_OK(ggemm_create(&other.h, 0));
  StreamGuard s1, s2;
  CUDA_OK(cudaStreamCreateWithFlags(&s1.s, cudaStreamNonBlocking));
  CUDA_OK(cudaStreamCreateWithFlags(&s2.s, cudaStreamNonBlocking));

  // Grouped matmul: 8 groups of 200..400 rows, n = k = 1024, both layouts.
  for (const bool tb : {true, false}) {
    SCOPED_TRACE(tb ? "grouped_matmul B[E,N,K] bf16->bf16" : "grouped_matmul B[E,K,N] bf16->fp32");
    const ggemm_dtype in = kBf16, out = tb ? kBf16 : kFp32;
    const int64_t n = 1024, k = 1024, E = 8;
    const Routing r = fixed_routing(rng, 8, 200, 400, E);
    const int64_t m = r.m;
    Bytes a(size_t(m * k) * 2), b(size_t(E * n * k) * 2), c(size_t(m * n) * esize(out));
    fill_random(in, a.data(), size_t(m * k), rng);
    fill_random(in, b.data(), size_t(E * n * k), rng);
    poison(c.data(), c.size());
    DeviceBuffer d_a, d_b, d_c[3], d_off, d_ids, d_stats;
    ASSERT_NO_FATAL_FAILURE(upload(d_a, a.data(), a.size()));
    ASSERT_NO_FATAL_FAILURE(upload(d_b, b.data(), b.size()));
    for (DeviceBuffer &dc : d_c) ASSERT_NO_FATAL_FAILURE(upload(dc, c.data(), c.size()));
    ASSERT_NO_FATAL_FAILURE(upload(d_off, r.offsets.data(), r.offsets.size() * 4));
    ASSERT_NO_FATAL_FAILURE(upload(d_ids, r.ids.data(), r.ids.size() * 4));
    ASSERT_NO_FATAL_FAILURE(upload(d_stats, r.stats, 8));

    ggemm_grouped_matmul_args x;
    std::memset(&x, 0, sizeof x);
    x.struct_size = sizeof x;
    x.a_dtype = x.b_dtype = in;
    x.c_dtype = out;
    x.m = m, x.n = n, x.k = k, x.num_experts = E;
    x.a = d_a.get(), x.b = d_b.get();
    x.transpose_b = tb ? 1 : 0;
    x.a_offsets = d_off.as<uint32_t>(), x.expert_ids = d_ids.as<int32_t>(), x.expert_usage_stats = d_stats.as<uint32_t>();
    x.num_groups = r.groups();
    x.max_rows_per_group = r.max_rows_arg;
    x.epilogue = GGEMM_EPILOGUE_STORE;
    // Run 0 alone on s1; then run 1 (s1, shared handle) and run 2 (s2, the
    // other handle) at the same time.
    x.c = d_c[0].get();
    GGEMM_OK(ggemm_grouped_matmul(handle, &x, s1.s));
    CUDA_OK(cudaStreamSynchronize(s1.s));
    x.c = d_c[1].get();
    GGEMM_OK(ggemm_grouped_matmul(handle, &x, s1.s));
    x.c = d_c[2].get();
    GGEMM_OK(ggemm_grouped_matmul(other.h, &x, s2.s));
    CUDA_OK(cudaStreamSynchronize(s1.s));
    CUDA_OK(cudaStreamSynchronize(s2.s));
    Bytes got[3];
    for (int i = 0; i < 3; ++i) ASSERT_NO_FATAL_FAILURE(download(&got[i], d_c[i], c.size()));

    Bytes want = c;
    ggemm_grouped_matmul_args h = x;
    h.a = a.data(), h.b = b.data(), h.c = want.data();
    h.a_offsets = r.offsets.data(), h.expert_ids = r.ids.data(), h.expert_usage_stats = r.stats;
    ref::grouped_matmul(h);
    EXPECT_TRUE(compare_matrix(out, want.data(), got[0].data(), m, n, default_atol(out, k), default_rtol(out)));
    EXPECT_EQ(first_difference(got[0], got[1], esize(out)), -1) << "second run on the same stream and handle differs";
    EXPECT_EQ(first_difference(got[0], got[2], esize(out)), -1) << "run on another stream and handle differs";
  }

  // LoRA shrink + expand: 8 groups of 100..300 rows, hidden 2048, rank 32,
  // q_dim 2048, kv_dim 512, fp16 operands, bf16 outputs.
  {
    SCOPED_TRACE("lora_shrink_qkv + lora_expand_qkv");
    const ggemm_dtype in = kFp16, out = kBf16;
    const int64_t K = 2048, R = 32, Q = 2048, KV = 512, G = 8, n = Q + 2 * KV;
    const float shrink_scale = 0.5f, expand_scale = 1.0f;
    const Routing r = fixed_routing(rng, 8, 100, 300, G);
    const int64_t m = r.m;
    Bytes x(size_t(m * K) * 2), la(size_t(G * 3 * R * K) * 2), lb(size_t(G * n * R) * 2);
    Bytes p(size_t(3 * m * R) * 2), q(size_t(m * Q) * 2), kv(size_t(2 * m * KV) * 2);
    fill_random(in, x.data(), size_t(m * K), rng);
    fill_random(in, la.data(), size_t(G * 3 * R * K), rng);
    fill_random(in, lb.data(), size_t(G * n * R), rng);
    poison(p.data(), p.size());
    poison(q.data(), q.size());
    poison(kv.data(), kv.size());
    DeviceBuffer d_x, d_la, d_lb, d_p[3], d_q[3], d_kv[3], d_off, d_ids, d_stats;
    ASSERT_NO_FATAL_FAILURE(upload(d_x, x.data(), x.size()));
    ASSERT_NO_FATAL_FAILURE(upload(d_la, la.data(), la.size()));
    ASSERT_NO_FATAL_FAILURE(upload(d_lb, lb.data(), lb.size()));
    for (int i = 0; i < 3; ++i) {
      ASSERT_NO_FATAL_FAILURE(upload(d_p[i], p.data(), p.size()));
      ASSERT_NO_FATAL_FAILURE(upload(d_q[i], q.data(), q.size()));
      ASSERT_NO_FATAL_FAILURE(upload(d_kv[i], kv.data(), kv.size()));
    }
    ASSERT_NO_FATAL_FAILURE(upload(d_off, r.offsets.data(), r.offsets.size() * 4));
    ASSERT_NO_FATAL_FAILURE(upload(d_ids, r.ids.data(), r.ids.size() * 4));
    ASSERT_NO_FATAL_FAILURE(upload(d_stats, r.stats, 8));

    ggemm_lora_shrink_qkv_args s;
    std::memset(&s, 0, sizeof s);
    s.struct_size = sizeof s;
    s.x_dtype = in, s.p_dtype = in;
    s.m = m, s.k = K, s.rank = R, s.num_adapters = G;
    s.x = d_x.get(), s.lora_a = d_la.get();
    s.a_offsets = d_off.as<uint32_t>(), s.adapter_ids = d_ids.as<int32_t>(), s.expert_usage_stats = d_stats.as<uint32_t>();
    s.num_groups = r.groups();
    s.max_rows_per_group = r.max_rows_arg;
    s.scale = shrink_scale;
    ggemm_lora_expand_qkv_args e;
    std::memset(&e, 0, sizeof e);
    e.struct_size = sizeof e;
    e.p_dtype = in, e.out_dtype = out;
    e.m = m, e.rank = R, e.q_dim = Q, e.kv_dim = KV, e.num_adapters = G;
    e.lora_b = d_lb.get();
    e.a_offsets = s.a_offsets, e.adapter_ids = s.adapter_ids, e.expert_usage_stats = s.expert_usage_stats;
    e.num_groups = r.groups();
    e.max_rows_per_group = r.max_rows_arg;
    e.scale = expand_scale;
    auto enqueue = [&](int i, ggemm_handle_t hd, cudaStream_t st) {
      s.p = d_p[i].get();
      e.p = d_p[i].get(), e.q_out = d_q[i].get(), e.kv_out = d_kv[i].get();
      GGEMM_OK(ggemm_lora_shrink_qkv(hd, &s, st));
      GGEMM_OK(ggemm_lora_expand_qkv(hd, &e, st));
    };
    ASSERT_NO_FATAL_FAILURE(enqueue(0, handle, s1.s));
    CUDA_OK(cudaStreamSynchronize(s1.s));
    ASSERT_NO_FATAL_FAILURE(enqueue(1, handle, s1.s));
    ASSERT_NO_FATAL_FAILURE(enqueue(2, other.h, s2.s));
    CUDA_OK(cudaStreamSynchronize(s1.s));
    CUDA_OK(cudaStreamSynchronize(s2.s));
    Bytes got_p[3], got_q[3], got_kv[3];
    for (int i = 0; i < 3; ++i) {
      ASSERT_NO_FATAL_FAILURE(download(&got_p[i], d_p[i], p.size()));
      ASSERT_NO_FATAL_FAILURE(download(&got_q[i], d_q[i], q.size()));
      ASSERT_NO_FATAL_FAILURE(download(&got_kv[i], d_kv[i], kv.size()));
    }

    // Run 0 against the references: the shrink's P, and the expand of the
    // device's P (its products are bounded by max |P|, not 1).
    Bytes want_p = p;
    ggemm_lora_shrink_qkv_args hs = s;
    hs.x = x.data(), hs.lora_a = la.data(), hs.p = want_p.data();
    hs.a_offsets = r.offsets.data(), hs.adapter_ids = r.ids.data(), hs.expert_usage_stats = r.stats;
    ref::lora_shrink_qkv(hs);
    EXPECT_TRUE(compare_matrix(in, want_p.data(), got_p[0].data(), 3 * m, R, lora_atol(in, K, shrink_scale),
                               default_rtol(in)))
        << "P";
    Bytes want_q = q, want_kv = kv;
    ggemm_lora_expand_qkv_args he = e;
    he.p = got_p[0].data(), he.lora_b = lb.data(), he.q_out = want_q.data(), he.kv_out = want_kv.data();
    he.a_offsets = r.offsets.data(), he.adapter_ids = r.ids.data(), he.expert_usage_stats = r.stats;
    ref::lora_expand_qkv(he);
    const double atol = lora_atol(out, R, expand_scale, std::max(1.0, max_abs(in, got_p[0])));
    EXPECT_TRUE(compare_matrix(out, want_q.data(), got_q[0].data(), m, Q, atol, default_rtol(out))) << "q_out";
    EXPECT_TRUE(compare_matrix(out, want_kv.data(), got_kv[0].data(), 2 * m, KV, atol, default_rtol(out))) << "kv_out";

    for (int i = 1; i < 3; ++i) {
      const char *which = i == 1 ? "second run on the same stream and handle" : "run on another stream and handle";
      EXPECT_EQ(first_difference(got_p[0], got_p[i], esize(in)), -1) << which << ": P differs";
      EXPECT_EQ(first_difference(got_q[0], got_q[i], esize(out)), -1) << which << ": q_out differs";
      EXPECT_EQ(first_difference(got_kv[0], got_kv[i], esize(out)), -1) << which << ": kv_out differs";
    }
  }
  // Teardown, checked (the guards only clean up after an early return).
  CUDA_OK(cudaStreamDestroy(std::exchange(s1.s, nullptr)));
  CUDA_OK(cudaStreamDestroy(std::exchange(s2.s, nullptr)));
  GGEMM_OK(ggemm_destroy(std::exchange(other.h, nullptr)));
}

// ---------------------------------------------------------------------------
// A multi-operation CUDA graph replayed with new routing.

// Random routing within a fixed capacity: `groups` groups (the arrays'
// size) whose rows sum to at most `capacity`, ids in [0, ids) or -1, an
// active count in [0, groups] (all groups half of the time).
Routing replay_routing(Rng &rng, int64_t groups, int64_t capacity, int64_t ids) {
  Routing r;
  r.offsets.push_back(0);
  int64_t budget = capacity, max_rows = 0;
  const int64_t big = rng.uniform_int(0, 4) == 0 ? rng.uniform_int(0, groups - 1) : -1;  // one group takes the rest
  for (int64_t g = 0; g < groups; ++g) {
    const int64_t rows = g == big ? budget : rng.uniform_int(0, std::min<int64_t>(budget, 2 * capacity / groups));
    budget -= rows;
    r.offsets.push_back(uint32_t(r.offsets.back() + rows));
    r.ids.push_back(rng.uniform_int(0, 5) == 0 ? -1 : int32_t(rng.uniform_int(0, ids - 1)));
    max_rows = std::max(max_rows, rows);
  }
  r.m = capacity;
  r.stats[0] = uint32_t(max_rows);
  r.stats[1] = uint32_t(rng.uniform_int(0, 1) ? groups : rng.uniform_int(0, groups));
  return r;
}

TEST(StressGpu, GraphOfGroupedAndLoraReplaysWithNewRouting) {
  GGEMM_REQUIRE_GPU(handle);
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  Rng rng(seed);

  // Grouped matmul: bf16 -> fp16, B[E, K, N], row-scale epilogue.
  const ggemm_dtype g_in = kBf16, g_out = kFp16;
  const int64_t gM = 1200, gGroups = 6, gN = 384, gK = 256, gE = 5;
  // LoRA: bf16 operands; the shrink stores P in bf16 (scale 0.5), the
  // expand reads it and accumulates into fp32 outputs (scale 0.5).
  const ggemm_dtype l_in = kBf16, l_out = kFp32;
  const int64_t lM = 1000, lGroups = 5, lK = 512, lR = 16, lQ = 512, lKV = 128, lG = 4, lN = lQ + 2 * lKV;
  const float shrink_scale = 0.5f, expand_scale = 0.5f;

  DeviceBuffer d_a, d_b, d_c, d_scale, g_off, g_ids, g_stats;
  DeviceBuffer d_x, d_la, d_lb, d_p, d_q, d_kv, l_off, l_ids, l_stats;
  const size_t a_bytes = size_t(gM * gK) * 2, b_bytes = size_t(gE * gN * gK) * 2, c_bytes = size_t(gM * gN) * 2;
  const size_t x_bytes = size_t(lM * lK) * 2, la_bytes = size_t(lG * 3 * lR * lK) * 2, lb_bytes = size_t(lG * lN * lR) * 2;
  const size_t p_bytes = size_t(3 * lM * lR) * 2, q_bytes = size_t(lM * lQ) * 4, kv_bytes = size_t(2 * lM * lKV) * 4;
  const std::vector<std::pair<DeviceBuffer *, size_t>> allocations = {
      {&d_a, a_bytes},   {&d_b, b_bytes},   {&d_c, c_bytes},   {&d_scale, size_t(gM) * 4},
      {&g_off, size_t(gGroups + 1) * 4},    {&g_ids, size_t(gGroups) * 4},      {&g_stats, 8},
      {&d_x, x_bytes},   {&d_la, la_bytes}, {&d_lb, lb_bytes}, {&d_p, p_bytes},   {&d_q, q_bytes},
      {&d_kv, kv_bytes}, {&l_off, size_t(lGroups + 1) * 4},    {&l_ids, size_t(lGroups) * 4}, {&l_stats, 8}};
  for (const auto &[buf, bytes] : allocations) ASSERT_TRUE(buf->alloc(bytes)) << "cudaMalloc of " << bytes << " bytes";

  // Valid routing for the capture (the launch sizes come from host values:
  // max_rows_per_group = 0, i.e. m, since the replays change the groups).
  Routing gr = replay_routing(rng, gGroups, gM, gE), lr = replay_routing(rng, lGroups, lM, lG);
  CUDA_OK(cudaMemcpy(g_off.get(), gr.offsets.data(), gr.offsets.size() * 4, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(g_ids.get(), gr.ids.data(), gr.ids.size() * 4, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(g_stats.get(), gr.stats, 8, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(l_off.get(), lr.offsets.data(), lr.offsets.size() * 4, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(l_ids.get(), lr.ids.data(), lr.ids.size() * 4, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(l_stats.get(), lr.stats, 8, cudaMemcpyHostToDevice));

  ggemm_grouped_matmul_args g;
  std::memset(&g, 0, sizeof g);
  g.struct_size = sizeof g;
  g.a_dtype = g.b_dtype = g_in;
  g.c_dtype = g_out;
  g.m = gM, g.n = gN, g.k = gK, g.num_experts = gE;
  g.a = d_a.get(), g.b = d_b.get(), g.c = d_c.get();
  g.transpose_b = 0;
  g.a_offsets = g_off.as<uint32_t>(), g.expert_ids = g_ids.as<int32_t>(), g.expert_usage_stats = g_stats.as<uint32_t>();
  g.num_groups = gGroups;
  g.max_rows_per_group = 0;
  g.epilogue = GGEMM_EPILOGUE_ROW_SCALE;
  g.row_scale = d_scale.as<float>();

  ggemm_lora_shrink_qkv_args s;
  std::memset(&s, 0, sizeof s);
  s.struct_size = sizeof s;
  s.x_dtype = s.p_dtype = l_in;
  s.m = lM, s.k = lK, s.rank = lR, s.num_adapters = lG;
  s.x = d_x.get(), s.lora_a = d_la.get(), s.p = d_p.get();
  s.a_offsets = l_off.as<uint32_t>(), s.adapter_ids = l_ids.as<int32_t>(), s.expert_usage_stats = l_stats.as<uint32_t>();
  s.num_groups = lGroups;
  s.max_rows_per_group = 0;
  s.scale = shrink_scale;
  s.accumulate = 0;

  ggemm_lora_expand_qkv_args e;
  std::memset(&e, 0, sizeof e);
  e.struct_size = sizeof e;
  e.p_dtype = l_in, e.out_dtype = l_out;
  e.m = lM, e.rank = lR, e.q_dim = lQ, e.kv_dim = lKV, e.num_adapters = lG;
  e.p = d_p.get(), e.lora_b = d_lb.get(), e.q_out = d_q.get(), e.kv_out = d_kv.get();
  e.a_offsets = s.a_offsets, e.adapter_ids = s.adapter_ids, e.expert_usage_stats = s.expert_usage_stats;
  e.num_groups = lGroups;
  e.max_rows_per_group = 0;
  e.scale = expand_scale;
  e.accumulate = 1;

  StreamGuard stream;
  CUDA_OK(cudaStreamCreateWithFlags(&stream.s, cudaStreamNonBlocking));
  struct GraphGuard {
    cudaGraph_t g = nullptr;
    cudaGraphExec_t x = nullptr;
    ~GraphGuard() {
      if (x) cudaGraphExecDestroy(x);
      if (g) cudaGraphDestroy(g);
    }
  } guard;
  CUDA_OK(cudaStreamBeginCapture(stream.s, cudaStreamCaptureModeThreadLocal));
  const ggemm_status st_g = ggemm_grouped_matmul(handle, &g, stream.s);
  const std::string msg_g = ggemm_last_error_message();
  const ggemm_status st_s = ggemm_lora_shrink_qkv(handle, &s, stream.s);
  const std::string msg_s = ggemm_last_error_message();
  const ggemm_status st_e = ggemm_lora_expand_qkv(handle, &e, stream.s);
  const std::string msg_e = ggemm_last_error_message();
  const cudaError_t end = cudaStreamEndCapture(stream.s, &guard.g);  // always end the capture
  ASSERT_EQ(st_g, GGEMM_STATUS_SUCCESS) << "grouped_matmul: " << ggemm_status_string(st_g) << ": " << msg_g;
  ASSERT_EQ(st_s, GGEMM_STATUS_SUCCESS) << "lora_shrink_qkv: " << ggemm_status_string(st_s) << ": " << msg_s;
  ASSERT_EQ(st_e, GGEMM_STATUS_SUCCESS) << "lora_expand_qkv: " << ggemm_status_string(st_e) << ": " << msg_e;
  CUDA_OK(end);
  CUDA_OK(cudaGraphInstantiate(&guard.x, guard.g, 0));
  size_t nodes = 0;
  CUDA_OK(cudaGraphGetNodes(guard.g, nullptr, &nodes));
  EXPECT_GE(nodes, 3u) << "the graph should hold the three launches";

  constexpr int kReplays = 20;
  for (int rep = 0; rep < kReplays; ++rep) {
    gr = replay_routing(rng, gGroups, gM, gE);
    lr = replay_routing(rng, lGroups, lM, lG);
    SCOPED_TRACE("replay " + std::to_string(rep) + ": grouped " + gr.describe() + "; lora " + lr.describe());
    // Fresh inputs; outputs poisoned (q_out / kv_out: the rows of every
    // group random, for the accumulate).
    Bytes a(a_bytes), b(b_bytes), c(c_bytes), scale(size_t(gM) * 4);
    Bytes x(x_bytes), la(la_bytes), lb(lb_bytes), p(p_bytes), q(q_bytes), kv(kv_bytes);
    fill_random(g_in, a.data(), size_t(gM * gK), rng);
    fill_random(g_in, b.data(), size_t(gE * gN * gK), rng);
    fill_random(kFp32, scale.data(), size_t(gM), rng, -1.0f, 1.0f);
    poison(c.data(), c.size());
    fill_random(l_in, x.data(), size_t(lM * lK), rng);
    fill_random(l_in, la.data(), size_t(lG * 3 * lR * lK), rng);
    fill_random(l_in, lb.data(), size_t(lG * lN * lR), rng);
    poison(p.data(), p.size());
    poison(q.data(), q.size());
    poison(kv.data(), kv.size());
    {
      // ~2x a typical |delta|: P ~ shrink_scale * sqrt(K) / 3, products ~ P / sqrt(3).
      const float t = 2.0f * expand_scale * std::sqrt(float(lR)) * shrink_scale * std::sqrt(float(lK)) /
                      (3.0f * std::sqrt(3.0f));
      const size_t own = size_t(lr.grouped_rows());
      fill_random(l_out, q.data(), own * size_t(lQ), rng, -t, t);
      fill_random(l_out, kv.data(), own * size_t(lKV), rng, -t, t);
      fill_random(l_out, kv.data() + size_t(lM * lKV) * 4, own * size_t(lKV), rng, -t, t);
    }
    const cudaStream_t st = stream.s;
    const std::vector<std::tuple<DeviceBuffer *, const void *, size_t>> uploads = {
        {&g_off, gr.offsets.data(), gr.offsets.size() * 4}, {&g_ids, gr.ids.data(), gr.ids.size() * 4},
        {&g_stats, gr.stats, 8},
        {&l_off, lr.offsets.data(), lr.offsets.size() * 4}, {&l_ids, lr.ids.data(), lr.ids.size() * 4},
        {&l_stats, lr.stats, 8},
        {&d_a, a.data(), a_bytes}, {&d_b, b.data(), b_bytes}, {&d_c, c.data(), c_bytes},
        {&d_scale, scale.data(), scale.size()},
        {&d_x, x.data(), x_bytes}, {&d_la, la.data(), la_bytes}, {&d_lb, lb.data(), lb_bytes},
        {&d_p, p.data(), p_bytes}, {&d_q, q.data(), q_bytes}, {&d_kv, kv.data(), kv_bytes}};
    // The routing arrays the graph's launches read, rewritten in stream order
    // before the replay; then fresh inputs and poisoned outputs.
    for (const auto &[dst, src, bytes] : uploads)
      CUDA_OK(cudaMemcpyAsync(dst->get(), src, bytes, cudaMemcpyHostToDevice, st));
    CUDA_OK(cudaGraphLaunch(guard.x, st));
    Bytes got_c(c_bytes), got_p(p_bytes), got_q(q_bytes), got_kv(kv_bytes);
    CUDA_OK(cudaMemcpyAsync(got_c.data(), d_c.get(), c_bytes, cudaMemcpyDeviceToHost, st));
    CUDA_OK(cudaMemcpyAsync(got_p.data(), d_p.get(), p_bytes, cudaMemcpyDeviceToHost, st));
    CUDA_OK(cudaMemcpyAsync(got_q.data(), d_q.get(), q_bytes, cudaMemcpyDeviceToHost, st));
    CUDA_OK(cudaMemcpyAsync(got_kv.data(), d_kv.get(), kv_bytes, cudaMemcpyDeviceToHost, st));
    CUDA_OK(cudaStreamSynchronize(st));

    // Grouped matmul.
    Bytes want_c = c;
    ggemm_grouped_matmul_args hg = g;
    hg.a = a.data(), hg.b = b.data(), hg.c = want_c.data();
    hg.a_offsets = gr.offsets.data(), hg.expert_ids = gr.ids.data(), hg.expert_usage_stats = gr.stats;
    hg.row_scale = reinterpret_cast<const float *>(scale.data());
    ref::grouped_matmul(hg);
    EXPECT_TRUE(compare_matrix(g_out, want_c.data(), got_c.data(), gM, gN, default_atol(g_out, gK), default_rtol(g_out)))
        << "grouped_matmul C";
    // Shrink.
    Bytes want_p = p;
    ggemm_lora_shrink_qkv_args hs = s;
    hs.x = x.data(), hs.lora_a = la.data(), hs.p = want_p.data();
    hs.a_offsets = lr.offsets.data(), hs.adapter_ids = lr.ids.data(), hs.expert_usage_stats = lr.stats;
    ref::lora_shrink_qkv(hs);
    EXPECT_TRUE(compare_matrix(l_in, want_p.data(), got_p.data(), 3 * lM, lR, lora_atol(l_in, lK, shrink_scale),
                               default_rtol(l_in)))
        << "lora_shrink_qkv P";
    // Expand of the device's P, accumulating into q / kv.
    Bytes want_q = q, want_kv = kv;
    ggemm_lora_expand_qkv_args he = e;
    he.p = got_p.data(), he.lora_b = lb.data(), he.q_out = want_q.data(), he.kv_out = want_kv.data();
    he.a_offsets = lr.offsets.data(), he.adapter_ids = lr.ids.data(), he.expert_usage_stats = lr.stats;
    ref::lora_expand_qkv(he);
    const double atol = lora_atol(l_out, lR, expand_scale, std::max(1.0, max_abs(l_in, got_p)));
    EXPECT_TRUE(compare_matrix(l_out, want_q.data(), got_q.data(), lM, lQ, atol, default_rtol(l_out)))
        << "lora_expand_qkv q_out";
    EXPECT_TRUE(compare_matrix(l_out, want_kv.data(), got_kv.data(), 2 * lM, lKV, atol, default_rtol(l_out)))
        << "lora_expand_qkv kv_out";
  }
  CUDA_OK(cudaGraphExecDestroy(std::exchange(guard.x, nullptr)));
  CUDA_OK(cudaGraphDestroy(std::exchange(guard.g, nullptr)));
  CUDA_OK(cudaStreamDestroy(std::exchange(stream.s, nullptr)));
}

}  // namespace
}  // namespace ggemm::testing
