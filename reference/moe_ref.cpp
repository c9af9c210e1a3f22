// CPU reference of the MoE layer; see moe_reference.h.
#include <algorithm>
#include <cmath>
#include <vector>

#include "dtype.h"
#include "moe_reference.h"

namespace ggemm::ref {
namespace {

constexpr uint32_t kFaultIdOutOfRange = GGEMM_DEVICE_FAULT_ID_OUT_OF_RANGE;
constexpr uint32_t kFaultWeightNotFinite = GGEMM_DEVICE_FAULT_WEIGHT_NOT_FINITE;
constexpr uint32_t kFaultIndexOutOfRange = GGEMM_DEVICE_FAULT_INDEX_OUT_OF_RANGE;

// The pairs routed here, in sorted order: (local expert, slot).
struct Routed {
  int64_t expert;
  int64_t slot;
};

std::vector<Routed> sorted_pairs(const int32_t *ids, const float *weights, int64_t slots, int64_t num_experts,
                                 int64_t first_expert, int64_t local_experts, uint32_t *faults) {
  std::vector<Routed> pairs;
  for (int64_t s = 0; s < slots; ++s) {
    const int64_t e = moe_local_expert(ids[s], weights[s], num_experts, first_expert, local_experts, faults);
    if (e >= 0) pairs.push_back({e, s});
  }
  // Slots are visited in order, so a stable sort by expert leaves each
  // expert's slots in slot order.
  std::stable_sort(pairs.begin(), pairs.end(), [](const Routed &a, const Routed &b) { return a.expert < b.expert; });
  return pairs;
}

// An fp32 dot product of n widened elements, in index order.
float dot(ggemm_dtype dt, const void *a, size_t a_at, const void *b, size_t b_at, int64_t n) {
  float sum = 0.f;
  for (int64_t i = 0; i < n; ++i)
    sum += load_as_float(dt, a, a_at + size_t(i)) * load_as_float(dt, b, b_at + size_t(i));
  return sum;
}

}  // namespace

int64_t moe_local_expert(int32_t id, float weight, int64_t num_experts, int64_t first_expert, int64_t local_experts,
                         uint32_t *faults) {
  if (id == -1) return -1;
  if (id < -1 || id >= num_experts) {
    *faults |= kFaultIdOutOfRange;
    return -1;
  }
  const int64_t local = int64_t(id) - first_expert;
  if (local < 0 || local >= local_experts) return -1;  // another rank's expert
  if (!std::isfinite(weight)) {
    *faults |= kFaultWeightNotFinite;
    return -1;
  }
  return local;
}

uint32_t moe_route(const ggemm_moe_route_args &a) {
  uint32_t faults = 0;
  const int64_t slots = a.num_tokens * a.top_k, experts = a.local_experts;
  const std::vector<Routed> pairs =
      sorted_pairs(a.topk_ids, a.topk_weights, slots, a.num_experts, a.first_expert, experts, &faults);
  const int64_t routed = int64_t(pairs.size());

  std::vector<int64_t> rows_of(size_t(experts), 0);
  for (const Routed &p : pairs) ++rows_of[size_t(p.expert)];
  int64_t groups = 0, first_row = 0, most = 0;
  for (int64_t e = 0; e < experts; ++e) {
    if (rows_of[size_t(e)] == 0) continue;
    a.a_offsets[groups] = uint32_t(first_row);
    a.expert_ids[groups] = int32_t(e);
    ++groups;
    first_row += rows_of[size_t(e)];
    most = std::max(most, rows_of[size_t(e)]);
  }
  for (int64_t g = groups; g <= experts; ++g) a.a_offsets[g] = uint32_t(routed);
  for (int64_t g = groups; g < experts; ++g) a.expert_ids[g] = -1;
  a.expert_usage_stats[0] = uint32_t(most);
  a.expert_usage_stats[1] = uint32_t(groups);

  for (int64_t s = 0; s < slots; ++s) a.slot_row[s] = -1;
  for (int64_t m = 0; m < slots; ++m) {
    if (m < routed) {
      const int64_t s = pairs[size_t(m)].slot;
      a.row_token[m] = int32_t(s / a.top_k);
      a.row_slot[m] = int32_t(s);
      a.row_weight[m] = a.topk_weights[s];
      a.slot_row[s] = int32_t(m);
    } else {
      a.row_token[m] = -1;
      a.row_slot[m] = -1;
      a.row_weight[m] = 0.f;
    }
  }
  return faults;
}

uint32_t moe_combine(const ggemm_moe_combine_args &a) {
  uint32_t faults = 0;
  const int64_t hidden = a.hidden;
  std::vector<float> sum(static_cast<size_t>(hidden));
  for (int64_t t = 0; t < a.num_tokens; ++t) {
    std::fill(sum.begin(), sum.end(), 0.f);
    for (int64_t j = 0; j < a.top_k; ++j) {
      const int32_t r = a.slot_row[t * a.top_k + j];
      if (r == -1) continue;
      if (r < -1 || r >= a.y_rows) {
        faults |= kFaultIndexOutOfRange;
        continue;
      }
      for (int64_t n = 0; n < hidden; ++n) sum[size_t(n)] += load_as_float(a.y_dtype, a.y, size_t(r * hidden + n));
    }
    for (int64_t n = 0; n < hidden; ++n) {
      const size_t at = size_t(t * hidden + n);
      const float old = a.accumulate ? load_as_float(a.out_dtype, a.out, at) : 0.f;
      store_from_float(a.out_dtype, a.out, at, a.accumulate ? old + sum[size_t(n)] : sum[size_t(n)]);
    }
  }
  return faults;
}

uint32_t moe_ffn(const ggemm_moe_ffn_args &a) {
  uint32_t faults = 0;
  const ggemm_dtype dt = a.dtype;
  const int64_t H = a.hidden, I = a.intermediate, k = a.top_k;
  std::vector<float> out_row(static_cast<size_t>(H));
  std::vector<uint8_t> h_stored(static_cast<size_t>(I) * dtype_size(dt));
  for (int64_t t = 0; t < a.num_tokens; ++t) {
    std::fill(out_row.begin(), out_row.end(), 0.f);
    for (int64_t j = 0; j < k; ++j) {
      const int64_t s = t * k + j;
      const float weight = a.topk_weights[s];
      const int64_t e =
          moe_local_expert(a.topk_ids[s], weight, a.num_experts, a.first_expert, a.local_experts, &faults);
      if (e < 0) continue;
      const size_t gate_up_base = size_t(e) * size_t(2 * I) * size_t(H), down_base = size_t(e) * size_t(H) * size_t(I);
      for (int64_t i = 0; i < I; ++i) {
        const float g = dot(dt, a.x, size_t(t * H), a.w_gate_up, gate_up_base + size_t(i * H), H);
        const float u = dot(dt, a.x, size_t(t * H), a.w_gate_up, gate_up_base + size_t((I + i) * H), H);
        const float silu = g / (1.f + std::exp(-g));
        store_from_float(dt, h_stored.data(), size_t(i), silu * u);
      }
      for (int64_t n = 0; n < H; ++n) {
        const float d = dot(dt, h_stored.data(), 0, a.w_down, down_base + size_t(n * I), I);
        out_row[size_t(n)] += round_to_dtype(dt, d * weight);
      }
    }
    for (int64_t n = 0; n < H; ++n) store_from_float(dt, a.out, size_t(t * H + n), out_row[size_t(n)]);
  }
  return faults;
}

}  // namespace ggemm::ref
