// CPU reference of ggemm_grouped_matmul (docs/design.md §1.1); see ggemm_reference.h.
//
// Plan: per used expert, widen its weights once to a float [N][K] buffer
// (transposing the [K][N] layout) and the activation rows of its groups once
// to float; then split (row block, column block) tiles across threads. Each
// output element is one contiguous float dot product with a fixed summation
// order, so the result does not depend on the thread count.
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

// Tile sizes: a task covers kRowBlock rows x kColBlock columns, which keeps
// its activation rows and the current weight row in cache for K up to ~8k.
constexpr int64_t kRowBlock = 16;
constexpr int64_t kColBlock = 64;

}  // namespace

void grouped_matmul(const ggemm_grouped_matmul_args& args, unsigned threads) {
  const int64_t M = args.m, N = args.n, K = args.k;
  if (M <= 0 || N <= 0) return;
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  const size_t n_cols = static_cast<size_t>(N), k_len = static_cast<size_t>(K > 0 ? K : 0);

  // Groups exactly as the kernel's scheduler reads them: their ends.
  const uint32_t* ends = args.group_ends ? args.group_ends : args.a_offsets + 1;
  const detail::GroupSpans spans =
      detail::group_spans(ends, args.expert_ids, args.expert_usage_stats, args.num_groups, args.num_experts, M);
  const std::map<int32_t, std::vector<Span>>& by_expert = spans.by_id;
  const std::vector<Span>& inactive = spans.inactive;

  const ggemm_dtype c_dtype = args.c_dtype;
  const bool accumulate = args.epilogue == GGEMM_EPILOGUE_ACCUMULATE;
  // SwiGLU: C is [M, N/2], C[m, j] = silu(r[m, j]) * r[m, N/2 + j].
  const bool swiglu = args.epilogue == GGEMM_EPILOGUE_SWIGLU;
  const size_t c_cols = swiglu ? n_cols / 2 : n_cols;

  // Inactive groups contribute 0: zeros for STORE / ROW_SCALE, C += 0 (no
  // change) for ACCUMULATE.
  if (!accumulate)
    for (const Span& s : inactive)
      for (int64_t m = s.start; m < s.end; ++m)
        for (size_t n = 0; n < c_cols; ++n)
          store_from_float(c_dtype, args.c, static_cast<size_t>(m) * c_cols + n, 0.0f);

  // Activation plane of each column, and a dense slot per plane actually used
  // so that planes no column reads are never touched.
  const bool planes_on = !(args.a_plane_split0 == 0 && args.a_plane_split1 == 0);
  std::vector<int> col_slot(n_cols);
  int plane_slot[3] = {-1, -1, -1};
  int num_slots = 0;
  std::vector<int> slot_plane;
  for (size_t n = 0; n < n_cols; ++n) {
    const int64_t col = static_cast<int64_t>(n);
    const int p = planes_on ? (col >= args.a_plane_split0) + (col >= args.a_plane_split1) : 0;
    if (plane_slot[p] < 0) {
      plane_slot[p] = num_slots++;
      slot_plane.push_back(p);
    }
    col_slot[n] = plane_slot[p];
  }

  std::vector<float> w_f(by_expert.empty() ? 0 : n_cols * k_len);  // reused per expert
  for (const auto& [e, spans] : by_expert) {
    // Local row i <-> global row rows[i], over all this expert's groups.
    std::vector<int64_t> rows;
    for (const Span& s : spans)
      for (int64_t m = s.start; m < s.end; ++m) rows.push_back(m);
    const size_t R = rows.size();

    // Activations: a_f[(slot * R + i) * K + k] = A[rows[i] + plane * M, k],
    // or with a gather A[a_row_index[rows[i]], k] (zeros outside [0, a_rows)).
    std::vector<float> a_f(static_cast<size_t>(num_slots) * R * k_len);
    parallel_for(static_cast<size_t>(num_slots) * R, threads, [&](size_t t) {
      const size_t slot = t / R, i = t % R;
      int64_t a_row = rows[i] + slot_plane[slot] * M;
      if (args.a_row_index) {
        a_row = args.a_row_index[rows[i]];
        if (a_row < 0 || a_row >= args.a_rows) {
          std::fill(a_f.begin() + t * k_len, a_f.begin() + (t + 1) * k_len, 0.0f);
          return;
        }
      }
      widen(args.a_dtype, args.a, static_cast<size_t>(a_row) * k_len, k_len, a_f.data() + t * k_len);
    });

    // Weights as W[n][k] (size_t indexing: B may exceed 4 GiB).
    const size_t e_base = static_cast<size_t>(e) * n_cols * k_len;
    const size_t n_blocks = (n_cols + kColBlock - 1) / kColBlock;
    parallel_for(n_blocks, threads, [&](size_t nb) {
      const size_t n0 = nb * kColBlock, n1 = std::min(n_cols, n0 + kColBlock);
      if (args.transpose_b) {
        // B[e][n][k]: already K-major, widen row by row.
        widen(args.b_dtype, args.b, e_base + n0 * k_len, (n1 - n0) * k_len, w_f.data() + n0 * k_len);
      } else {
        // B[e][k][n]: widen a contiguous piece of each k row, then scatter.
        float piece[kColBlock];
        for (size_t k = 0; k < k_len; ++k) {
          widen(args.b_dtype, args.b, e_base + k * n_cols + n0, n1 - n0, piece);
          for (size_t n = n0; n < n1; ++n) w_f[n * k_len + k] = piece[n - n0];
        }
      }
    });

    // SwiGLU's fp32 results, combined once every column is known.
    std::vector<float> swiglu_r(swiglu ? R * n_cols : 0);
    // Products and epilogue, one (row block, column block) tile per task.
    const size_t r_blocks = (R + kRowBlock - 1) / kRowBlock;
    parallel_for(r_blocks * n_blocks, threads, [&](size_t t) {
      const size_t i0 = (t / n_blocks) * kRowBlock, i1 = std::min(R, i0 + kRowBlock);
      const size_t n0 = (t % n_blocks) * kColBlock, n1 = std::min(n_cols, n0 + kColBlock);
      float result[kRowBlock];
      for (size_t n = n0; n < n1; ++n) {
        const float* w = w_f.data() + n * k_len;
        const float* a_slot = a_f.data() + static_cast<size_t>(col_slot[n]) * R * k_len;
        detail::dot_block(w, a_slot, i0, i1, k_len, result);

        for (size_t i = i0; i < i1; ++i) {
          const size_t m = static_cast<size_t>(rows[i]);
          const size_t idx = m * n_cols + n;
          const float r = result[i - i0];
          switch (args.epilogue) {
            case GGEMM_EPILOGUE_SWIGLU:
              swiglu_r[i * n_cols + n] = r;
              break;
            case GGEMM_EPILOGUE_STORE:
              store_from_float(c_dtype, args.c, idx, r);
              break;
            case GGEMM_EPILOGUE_ROW_SCALE:
              store_from_float(c_dtype, args.c, idx, r * args.row_scale[m]);
              break;
            case GGEMM_EPILOGUE_ACCUMULATE:
              // The old value joins the fp32 result; the sum is rounded once.
              store_from_float(c_dtype, args.c, idx, load_as_float(c_dtype, args.c, idx) + r);
              break;
          }
        }
      }
    });
    if (swiglu)
      parallel_for(R, threads, [&](size_t i) {
        const size_t m = static_cast<size_t>(rows[i]);
        for (size_t j = 0; j < c_cols; ++j) {
          const float gate = swiglu_r[i * n_cols + j], up = swiglu_r[i * n_cols + c_cols + j];
          store_from_float(c_dtype, args.c, m * c_cols + j, gate / (1.0f + std::exp(-gate)) * up);
        }
      });
  }
}

}  // namespace ggemm::ref
