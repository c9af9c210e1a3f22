// ggemm_reference.h — CPU reference of the ggemm contract (DESIGN.md §1).
#ifndef GGEMM_REFERENCE_H
#define GGEMM_REFERENCE_H

#include "dtype.h"
#include "ggemm.h"

namespace ggemm::ref {

// The CPU reference of ggemm_grouped_matmul. Every pointer in `args` (a, b,
// c, a_offsets, expert_ids, expert_usage_stats, row_scale) is HOST memory.
// C is updated in place exactly where the GPU kernel writes, and nowhere
// else:
//   - num_active = min(expert_usage_stats[1], num_groups);
//   - group g < num_active owns rows [start, end) with
//       start = clamp(a_offsets[g], prev_end, M), end = clamp(a_offsets[g+1], start, M)
//     (prev_end = 0 for g = 0), so malformed offsets never overlap or overrun;
//   - rows in no group are never read or written;
//   - an expert id outside [0, num_experts) makes the group inactive: its rows
//     become zeros (STORE, ROW_SCALE) or stay as they were (ACCUMULATE);
//   - products are summed in fp32 from exactly widened operands, then
//       STORE:      C = round(result)
//       ROW_SCALE:  C = round(result * row_scale[m])        (fp32 multiply)
//       ACCUMULATE: C = round(float(C) + result)            (one rounding)
//     where round() is round-to-nearest-even into c_dtype (identity for fp32).
// Assumes otherwise valid arguments (no validation beyond not crashing).
// `threads` = 0 uses std::thread::hardware_concurrency(). The result does not
// depend on the thread count.
void grouped_matmul(const ggemm_grouped_matmul_args& args, unsigned threads = 0);

}  // namespace ggemm::ref

#endif  // GGEMM_REFERENCE_H
