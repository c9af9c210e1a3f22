// CPU reference of ggemm_lora_shrink_qkv and ggemm_lora_expand_qkv (docs/design.md
// §1.2-1.3); see ggemm_reference.h.
//
// Both are one grouped product over a fused weight [G, N, Kd] (shrink: N = 3R,
// Kd = hidden; expand: N = q_dim + 2 kv_dim, Kd = R) whose column n reads an
// activation plane and lands at its own place in the outputs. Each fused
// column is described once by a Column (activation plane; output base, row
// shift, leading dimension and column), so one engine serves both:
//   shrink  column c: plane 0 (X),        P[c / R][m][c % R]
//   expand  column j: plane 0, 1 or 2 (P[plane][m][:]), q_out[m][j],
//           kv_out[m][j - q_dim] or kv_out[M + m][j - q_dim - kv_dim].
//
// Plan (as grouped_matmul_ref.cpp): per used adapter, widen its weights once
// to float [N][Kd] and the activation rows of its groups once per used plane;
// split (row block, column block) tiles across threads. Every output element
// is one float dot product with a fixed summation order, so the result does
// not depend on the thread count.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <map>
#include <thread>
#include <vector>

#include "ggemm_reference.h"
#include "ref_common.h"

namespace ggemm::ref {
namespace {

using detail::parallel_for;
using detail::Span;
using detail::widen;

// Where fused column n reads and writes: activation row m + plane * M; output
// element (m + row_shift) * ld + col of `out`.
struct Column {
  int plane;
  void* out;
  int64_t row_shift;
  int64_t ld;
  int64_t col;
  size_t index(int64_t m) const { return static_cast<size_t>((m + row_shift) * ld + col); }
};

// One grouped product with per-column routing (the common part of both ops).
struct FusedProblem {
  ggemm_dtype in_dtype;   // activations and weights
  ggemm_dtype out_dtype;  // every output
  int64_t m;              // rows per activation plane (tokens)
  int64_t depth;          // reduction depth Kd
  int64_t num_adapters;
  const void* act;      // [planes * M, Kd]
  const void* weights;  // [G, N, Kd]
  std::vector<Column> columns;  // N entries
  const uint32_t* a_offsets;
  const int32_t* adapter_ids;
  const uint32_t* usage_stats;
  int64_t num_groups;
  float scale;
  bool accumulate;
};

constexpr int64_t kRowBlock = 16;
constexpr int64_t kColBlock = 64;

void run_fused(const FusedProblem& p, unsigned threads) {
  const int64_t M = p.m;
  const size_t n_cols = p.columns.size();
  if (M <= 0 || n_cols == 0) return;
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  const size_t k_len = static_cast<size_t>(p.depth > 0 ? p.depth : 0);

  // Groups exactly as the kernel's scheduler reads them.
  const detail::GroupSpans spans =
      detail::group_spans(p.a_offsets + 1, p.adapter_ids, p.usage_stats, p.num_groups, p.num_adapters, M);
  const std::map<int32_t, std::vector<Span>>& by_adapter = spans.by_id;
  const std::vector<Span>& inactive = spans.inactive;

  // Inactive groups: zeros in every output row they own (store), or no
  // change at all (accumulate: += 0 leaves even -0 and NaN as they were).
  if (!p.accumulate)
    for (const Span& s : inactive)
      for (int64_t m = s.start; m < s.end; ++m)
        for (const Column& c : p.columns) store_from_float(p.out_dtype, c.out, c.index(m), 0.0f);

  // A dense slot per activation plane some column reads.
  int plane_slot[3] = {-1, -1, -1};
  std::vector<int> slot_plane, col_slot(n_cols);
  for (size_t n = 0; n < n_cols; ++n) {
    const int pl = p.columns[n].plane;
    if (plane_slot[pl] < 0) {
      plane_slot[pl] = static_cast<int>(slot_plane.size());
      slot_plane.push_back(pl);
    }
    col_slot[n] = plane_slot[pl];
  }
  const size_t num_slots = slot_plane.size();

  std::vector<float> w_f(by_adapter.empty() ? 0 : n_cols * k_len);  // reused per adapter
  for (const auto& [adapter, spans] : by_adapter) {
    std::vector<int64_t> rows;  // local row i <-> token rows[i]
    for (const Span& s : spans)
      for (int64_t m = s.start; m < s.end; ++m) rows.push_back(m);
    const size_t R = rows.size();

    // a_f[(slot * R + i) * Kd + k] = act[rows[i] + plane * M][k]
    std::vector<float> a_f(num_slots * R * k_len);
    parallel_for(num_slots * R, threads, [&](size_t t) {
      const size_t slot = t / R, i = t % R;
      const size_t a_row = static_cast<size_t>(rows[i] + slot_plane[slot] * M);
      widen(p.in_dtype, p.act, a_row * k_len, k_len, a_f.data() + t * k_len);
    });

    const size_t base = static_cast<size_t>(adapter) * n_cols * k_len;  // size_t: may pass 4 GiB
    const size_t n_blocks = (n_cols + kColBlock - 1) / kColBlock;
    parallel_for(n_blocks, threads, [&](size_t nb) {
      const size_t n0 = nb * kColBlock, n1 = std::min(n_cols, n0 + kColBlock);
      widen(p.in_dtype, p.weights, base + n0 * k_len, (n1 - n0) * k_len, w_f.data() + n0 * k_len);
    });

    const size_t r_blocks = (R + kRowBlock - 1) / kRowBlock;
    parallel_for(r_blocks * n_blocks, threads, [&](size_t t) {
      const size_t i0 = (t / n_blocks) * kRowBlock, i1 = std::min(R, i0 + kRowBlock);
      const size_t n0 = (t % n_blocks) * kColBlock, n1 = std::min(n_cols, n0 + kColBlock);
      float result[kRowBlock];
      for (size_t n = n0; n < n1; ++n) {
        const float* w = w_f.data() + n * k_len;
        const float* a_slot = a_f.data() + static_cast<size_t>(col_slot[n]) * R * k_len;
        detail::dot_block(w, a_slot, i0, i1, k_len, result);

        const Column& c = p.columns[n];
        for (size_t i = i0; i < i1; ++i) {
          const size_t idx = c.index(rows[i]);
          const float v = p.scale * result[i - i0];  // fp32 multiply
          if (p.accumulate)  // the old value joins in fp32; one rounding
            store_from_float(p.out_dtype, c.out, idx, load_as_float(p.out_dtype, c.out, idx) + v);
          else
            store_from_float(p.out_dtype, c.out, idx, v);
        }
      }
    });
  }
}

}  // namespace

void lora_shrink_qkv(const ggemm_lora_shrink_qkv_args& args, unsigned threads) {
  const int64_t R = args.rank;
  if (args.m <= 0 || R <= 0) return;
  FusedProblem p;
  p.in_dtype = args.x_dtype;
  p.out_dtype = args.p_dtype;
  p.m = args.m;
  p.depth = args.k;
  p.num_adapters = args.num_adapters;
  p.act = args.x;
  p.weights = args.lora_a;
  p.columns.reserve(static_cast<size_t>(3 * R));
  for (int64_t c = 0; c < 3 * R; ++c)  // plane c / R of P, column c % R; X has one plane
    p.columns.push_back({0, args.p, (c / R) * args.m, R, c % R});
  p.a_offsets = args.a_offsets;
  p.adapter_ids = args.adapter_ids;
  p.usage_stats = args.expert_usage_stats;
  p.num_groups = args.num_groups;
  p.scale = args.scale;
  p.accumulate = args.accumulate != 0;
  run_fused(p, threads);
}

void lora_expand_qkv(const ggemm_lora_expand_qkv_args& args, unsigned threads) {
  const int64_t M = args.m, Q = args.q_dim, KV = args.kv_dim;
  if (M <= 0 || args.rank <= 0 || Q < 0 || KV < 0) return;
  FusedProblem p;
  p.in_dtype = args.p_dtype;
  p.out_dtype = args.out_dtype;
  p.m = M;
  p.depth = args.rank;
  p.num_adapters = args.num_adapters;
  p.act = args.p;
  p.weights = args.lora_b;
  p.columns.reserve(static_cast<size_t>(Q + 2 * KV));
  for (int64_t j = 0; j < Q; ++j) p.columns.push_back({0, args.q_out, 0, Q, j});           // Q
  for (int64_t j = 0; j < KV; ++j) p.columns.push_back({1, args.kv_out, 0, KV, j});        // K
  for (int64_t j = 0; j < KV; ++j) p.columns.push_back({2, args.kv_out, M, KV, j});        // V
  p.a_offsets = args.a_offsets;
  p.adapter_ids = args.adapter_ids;
  p.usage_stats = args.expert_usage_stats;
  p.num_groups = args.num_groups;
  p.scale = args.scale;
  p.accumulate = args.accumulate != 0;
  run_fused(p, threads);
}

}  // namespace ggemm::ref
