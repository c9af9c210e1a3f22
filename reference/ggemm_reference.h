// ggemm_reference.h — CPU reference of the ggemm contract (docs/design.md §1).
#ifndef GGEMM_REFERENCE_H
#define GGEMM_REFERENCE_H

#include "dtype.h"
#include "ggemm.h"

namespace ggemm::ref {

// The CPU reference of ggemm_grouped_matmul. Every pointer in `args` (a, b,
// c, a_offsets or group_ends, expert_ids, expert_usage_stats, row_scale) is
// HOST memory; `args` is the whole struct (sizeof). C is updated in place
// exactly where the GPU kernel writes, and nowhere else:
//   - num_active = min(expert_usage_stats[1], num_groups);
//   - group g < num_active owns rows [start, end) with
//       start = prev_end, end = clamp(a_offsets[g+1], start, M)
//     (prev_end = 0 for g = 0; group_ends[g] in place of a_offsets[g+1] when
//     group_ends is set; a_offsets[0] is never read), so malformed offsets
//     never overlap or overrun;
//   - rows in no group are never read or written;
//   - an expert id outside [0, num_experts) makes the group inactive: its rows
//     become zeros (STORE, ROW_SCALE) or stay as they were (ACCUMULATE);
//   - products are summed in fp32 from exactly widened operands, then
//       STORE:      C = round(result)
//       ROW_SCALE:  C = round(result * row_scale[m])        (fp32 multiply)
//       ACCUMULATE: C = round(float(C) + result)            (one rounding)
//       SWIGLU:     C[m, j] = round(silu(r[j]) * r[N/2 + j]) for j < N/2, C [M, N/2]
//     where round() is round-to-nearest-even into c_dtype (identity for fp32);
//   - with a_row_index (gather), row m reads A row a_row_index[m] (zeros when
//     outside [0, a_rows)).
// Assumes otherwise valid arguments (no validation beyond not crashing).
// `threads` = 0 uses std::thread::hardware_concurrency(). The result does not
// depend on the thread count.
void grouped_matmul(const ggemm_grouped_matmul_args& args, unsigned threads = 0);

// The CPU references of ggemm_lora_shrink_qkv and ggemm_lora_expand_qkv
// (docs/design.md §1.3, §1.2). Every pointer in `args` is HOST memory; the outputs
// (P for the shrink; q_out and kv_out for the expand) are updated in place
// exactly where the GPU kernel writes, and nowhere else. Groups follow
// grouped_matmul's rules above (num_active = min(expert_usage_stats[1],
// num_groups); clamped offsets; rows in no group never read or written); an
// adapter id outside [0, num_adapters) makes its group inactive: every output
// row of the group becomes zeros (store), or stays as it was (accumulate).
// For row m of an active group and fused column n:
//   result = fp32 sum over k of exactly widened products,
//   v      = scale * result                            (fp32 multiply),
//   store:       out = round(v)
//   accumulate:  out = round(float(out) + v)           (one rounding).
// Shrink: X [M, K], lora_a [G, 3R, K]; fused column c in [0, 3R) lands in
//   P[c / R][m][c % R] of P [3, M, R].
// Expand: P [3, M, R], lora_b [G, q_dim + 2 kv_dim, R]; fused column j reads
//   plane 0 (j < q_dim), 1 (j < q_dim + kv_dim) or 2 (otherwise) of P, i.e.
//   P[plane][m][:], and lands in q_out[m][j], kv_out[m][j - q_dim] or
//   kv_out[M + m][j - q_dim - kv_dim] (q_out [M, q_dim], kv_out [2M, kv_dim]).
// Assumes otherwise valid arguments; `threads` as for grouped_matmul (the
// result does not depend on it).
void lora_shrink_qkv(const ggemm_lora_shrink_qkv_args& args, unsigned threads = 0);
void lora_expand_qkv(const ggemm_lora_expand_qkv_args& args, unsigned threads = 0);

}  // namespace ggemm::ref

#endif  // GGEMM_REFERENCE_H
