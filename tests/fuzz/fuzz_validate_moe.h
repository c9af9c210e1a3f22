// fuzz_validate's MoE half (included by fuzz_validate.cpp inside its
// anonymous namespace, after the decoders and Verdict): ggemm_moe_route,
// ggemm_moe_combine and ggemm_moe_ffn with a NULL handle, and the two
// workspace queries, each against a model of ggemm.h's contract as
// api/src/validate_moe.cpp implements it. Properties 1 to 5 of the grouped
// matmul's harness hold here too (no crash or sanitizer report, never
// SUCCESS, a known status, a message on every failure, the status one of the
// arguments' problems); the workspace queries must succeed exactly when the
// dims are valid. (struct_size is fuzzed, but the whole struct is always
// passed: the read-past-struct_size property is the grouped matmul's only.)
//
// When validate_moe.cpp changes, update the models here.

[[noreturn]] void moe_violation(const char *op, const char *what, ggemm_status got, const Verdict &v) {
  std::fprintf(stderr, "\n*** fuzz_validate (%s): %s\n    status %d (%s), message \"%s\"\n    model: must {", op, what,
               int(got), ggemm_status_string(got), ggemm_last_error_message());
  for (ggemm_status s : v.must) std::fprintf(stderr, " %s", ggemm_status_string(s));
  std::fprintf(stderr, " } may {");
  for (ggemm_status s : v.may) std::fprintf(stderr, " %s", ggemm_status_string(s));
  std::fprintf(stderr, " }\n");
  std::abort();
}

// The verdict check every MoE call shares (NULL handle).
void check_moe_verdict(const char *op, ggemm_status st, const Verdict &v) {
  if (st == GGEMM_STATUS_SUCCESS) moe_violation(op, "SUCCESS with a NULL handle", st, v);
  const char *msg = ggemm_last_error_message();
  if (!msg || !*msg) moe_violation(op, "failure with an empty ggemm_last_error_message()", st, v);
  if (v.must.empty()) {
    if (st != GGEMM_STATUS_INVALID_HANDLE && !v.may.count(st))
      moe_violation(op, "valid arguments refused (expected INVALID_HANDLE)", st, v);
  } else {
    if (st == GGEMM_STATUS_INVALID_HANDLE) moe_violation(op, "invalid arguments reached the handle check", st, v);
    if (!v.must.count(st) && !v.may.count(st))
      moe_violation(op, "refused with a status that matches none of the arguments' problems", st, v);
  }
}

// The workspace query agrees with the dims' verdict: it answers exactly when
// they are valid.
void check_workspace_query(const char *op, ggemm_status st, const Verdict &dims) {
  if (dims.must.empty() != (st == GGEMM_STATUS_SUCCESS))
    moe_violation(op, "the workspace query disagrees with the dims' model", st, dims);
  if (st != GGEMM_STATUS_SUCCESS && !dims.must.count(st))
    moe_violation(op, "the workspace query refused with a status that is none of the dims' problems", st, dims);
}

size_t pick_struct_size(FuzzedDataProvider &p, size_t right) {
  switch (p.ConsumeIntegralInRange<int>(0, 15)) {
    case 0: return p.ConsumeIntegral<size_t>();
    case 1: return p.ConsumeIntegralInRange<size_t>(0, 2 * right);
    default: return right;
  }
}

// Dims shared by route and ffn: tokens, top_k, the rank's experts.
void model_slots(Verdict &v, int64_t t, int64_t k) {
  v.must.erase(GGEMM_STATUS_SUCCESS);
  const bool t_ok = t >= 0 && t < k2p31, k_ok = k >= 1 && k <= 64;
  if (!t_ok || !k_ok) v.must.insert(GGEMM_STATUS_INVALID_DIMENSION);
  if (t_ok && k_ok && t * k >= k2p31) v.must.insert(GGEMM_STATUS_INVALID_DIMENSION);
}
void model_experts(Verdict &v, int64_t e, int64_t first, int64_t local) {
  const bool e_ok = e >= 1 && e < k2p31, local_ok = local >= 1 && local <= GGEMM_MAX_GROUPS;
  if (!e_ok) v.must.insert(GGEMM_STATUS_INVALID_DIMENSION);
  if (!local_ok) v.must.insert(GGEMM_STATUS_INVALID_GROUP_COUNT);
  if (first < 0) v.must.insert(GGEMM_STATUS_INVALID_VALUE);
  if (e_ok && local_ok && first >= 0 && first > e - local) v.must.insert(GGEMM_STATUS_INVALID_VALUE);
}
void model_pointer(std::set<ggemm_status> &out, const void *ptr, uintptr_t alignment) {
  if (!ptr) out.insert(GGEMM_STATUS_NULL_POINTER);
  else if (!aligned(ptr, alignment)) out.insert(GGEMM_STATUS_MISALIGNED_POINTER);
}

void fuzz_moe_route(FuzzedDataProvider &p) {
  ggemm_moe_route_args a;
  std::memset(&a, 0, sizeof a);
  a.struct_size = pick_struct_size(p, sizeof a);
  a.num_tokens = 100, a.top_k = 4, a.num_experts = 16, a.first_expert = 4, a.local_experts = 8;
  const uint32_t perturb = p.ConsumeIntegral<uint32_t>();
  auto on = [&](int bit) { return (perturb >> bit) & 1u; };
  if (on(0)) a.num_tokens = pick_dim(p);
  if (on(1)) a.top_k = pick_dim(p);
  if (on(2)) a.num_experts = pick_dim(p);
  if (on(3)) a.first_expert = pick_dim(p);
  if (on(4)) a.local_experts = pick_dim(p);
  Verdict dims;
  if (a.struct_size != sizeof a) {
    dims.must.insert(GGEMM_STATUS_INVALID_VALUE);
  } else {
    model_slots(dims, a.num_tokens, a.top_k);
    model_experts(dims, a.num_experts, a.first_expert, a.local_experts);
  }
  size_t needed = 0;
  check_workspace_query("ggemm_moe_route_workspace_size", ggemm_moe_route_workspace_size(&a, &needed), dims);

  uintptr_t addr = 0x100000;
  auto next = [&] { return addr += 0x10000; };
  a.topk_ids = fake<const int32_t>(on(5) ? pick_ptr(p) : next());
  a.topk_weights = fake<const float>(on(6) ? pick_ptr(p) : next());
  a.a_offsets = fake<uint32_t>(on(7) ? pick_ptr(p) : next());
  a.expert_ids = fake<int32_t>(on(8) ? pick_ptr(p) : next());
  a.expert_usage_stats = fake<uint32_t>(on(9) ? pick_ptr(p) : next());
  a.row_token = fake<int32_t>(on(10) ? pick_ptr(p) : next());
  a.row_slot = fake<int32_t>(on(11) ? pick_ptr(p) : next());
  a.row_weight = fake<float>(on(12) ? pick_ptr(p) : next());
  a.slot_row = fake<int32_t>(on(13) ? pick_ptr(p) : next());
  a.workspace = fake<void>(on(14) ? pick_ptr(p) : next());
  a.workspace_bytes = on(15) ? p.ConsumeIntegral<size_t>() : needed;

  Verdict v = dims;
  if (dims.must.empty()) {
    // The groups' arrays and the workspace always; the slots' when T > 0.
    model_pointer(v.must, a.a_offsets, 4);
    model_pointer(v.must, a.expert_ids, 4);
    model_pointer(v.must, a.expert_usage_stats, 4);
    if (a.num_tokens > 0)
      for (const void *q : {static_cast<const void *>(a.topk_ids), static_cast<const void *>(a.topk_weights),
                            static_cast<const void *>(a.row_token), static_cast<const void *>(a.row_slot),
                            static_cast<const void *>(a.row_weight), static_cast<const void *>(a.slot_row)})
        model_pointer(v.must, q, 4);
    model_pointer(v.must, a.workspace, 16);
    if (a.workspace_bytes < needed) v.must.insert(GGEMM_STATUS_INVALID_VALUE);
  }
  check_moe_verdict("ggemm_moe_route", ggemm_moe_route(nullptr, &a, nullptr), v);
}

void fuzz_moe_combine(FuzzedDataProvider &p) {
  ggemm_moe_combine_args a;
  std::memset(&a, 0, sizeof a);
  a.struct_size = pick_struct_size(p, sizeof a);
  set_enum(&a.y_dtype, GGEMM_DTYPE_BF16);
  set_enum(&a.out_dtype, GGEMM_DTYPE_FP32);
  a.num_tokens = 100, a.top_k = 4, a.hidden = 256, a.y_rows = 400;
  a.y = fake<const void>(0x100000), a.slot_row = fake<const int32_t>(0x200000), a.out = fake<void>(0x300000);
  const uint32_t perturb = p.ConsumeIntegral<uint32_t>();
  auto on = [&](int bit) { return (perturb >> bit) & 1u; };
  if (on(0)) set_enum(&a.y_dtype, pick_enum(p));
  if (on(1)) set_enum(&a.out_dtype, pick_enum(p));
  if (on(2)) a.num_tokens = pick_dim(p);
  if (on(3)) a.top_k = pick_dim(p);
  if (on(4)) a.hidden = pick_dim(p);
  if (on(5)) a.y_rows = pick_dim(p);
  if (on(6)) a.y = fake<const void>(pick_ptr(p));
  if (on(7)) a.slot_row = fake<const int32_t>(pick_ptr(p));
  if (on(8)) a.out = fake<void>(pick_ptr(p));
  if (on(9)) a.accumulate = pick_enum(p);
  Verdict v;
  if (a.struct_size != sizeof a) {
    v.must.insert(GGEMM_STATUS_INVALID_VALUE);
  } else {
    const int32_t yt = get_enum(&a.y_dtype), ot = get_enum(&a.out_dtype);
    if (yt != GGEMM_DTYPE_BF16 && yt != GGEMM_DTYPE_FP16) v.must.insert(GGEMM_STATUS_INVALID_DTYPE);
    if (ot != yt && ot != GGEMM_DTYPE_FP32) v.must.insert(GGEMM_STATUS_INVALID_DTYPE);
    model_slots(v, a.num_tokens, a.top_k);
    if (a.hidden <= 0 || a.hidden >= k2p31 || a.hidden % 8 != 0) v.must.insert(GGEMM_STATUS_INVALID_DIMENSION);
    if (a.y_rows < 0 || a.y_rows >= k2p31) v.must.insert(GGEMM_STATUS_INVALID_DIMENSION);
    if (a.accumulate != 0 && a.accumulate != 1) v.must.insert(GGEMM_STATUS_INVALID_VALUE);
    if (a.accumulate == 1 && ot != GGEMM_DTYPE_FP32) v.must.insert(GGEMM_STATUS_INVALID_VALUE);
    std::set<ggemm_status> ptr;
    model_pointer(ptr, a.y, 16);
    model_pointer(ptr, a.slot_row, 4);
    model_pointer(ptr, a.out, 16);
    (a.num_tokens > 0 ? v.must : v.may).insert(ptr.begin(), ptr.end());
  }
  check_moe_verdict("ggemm_moe_combine", ggemm_moe_combine(nullptr, &a, nullptr), v);
}

void fuzz_moe_ffn(FuzzedDataProvider &p) {
  ggemm_moe_ffn_args a;
  std::memset(&a, 0, sizeof a);
  a.struct_size = pick_struct_size(p, sizeof a);
  set_enum(&a.dtype, GGEMM_DTYPE_BF16);
  a.num_tokens = 100, a.hidden = 256, a.intermediate = 128, a.top_k = 4;
  a.num_experts = 16, a.first_expert = 0, a.local_experts = 16;
  const uint32_t perturb = p.ConsumeIntegral<uint32_t>();
  auto on = [&](int bit) { return (perturb >> bit) & 1u; };
  if (on(0)) set_enum(&a.dtype, pick_enum(p));
  if (on(1)) a.num_tokens = pick_dim(p);
  if (on(2)) a.hidden = pick_dim(p);
  if (on(3)) a.intermediate = pick_dim(p);
  if (on(4)) a.top_k = pick_dim(p);
  if (on(5)) a.num_experts = pick_dim(p);
  if (on(6)) a.first_expert = pick_dim(p);
  if (on(7)) a.local_experts = pick_dim(p);
  Verdict dims;
  if (a.struct_size != sizeof a) {
    dims.must.insert(GGEMM_STATUS_INVALID_VALUE);
  } else {
    const int32_t dt = get_enum(&a.dtype);
    if (dt != GGEMM_DTYPE_BF16 && dt != GGEMM_DTYPE_FP16) dims.must.insert(GGEMM_STATUS_INVALID_DTYPE);
    model_slots(dims, a.num_tokens, a.top_k);
    auto bad_width = [](int64_t w) { return w <= 0 || w >= k2p31 || w % 8 != 0; };
    if (bad_width(a.hidden) || bad_width(a.intermediate)) dims.must.insert(GGEMM_STATUS_INVALID_DIMENSION);
    if (!bad_width(a.intermediate) && 2 * a.intermediate >= k2p31) dims.must.insert(GGEMM_STATUS_INVALID_DIMENSION);
    model_experts(dims, a.num_experts, a.first_expert, a.local_experts);
    const bool shape_ok = !bad_width(a.hidden) && !bad_width(a.intermediate) && a.num_tokens >= 0 &&
                          a.num_tokens < k2p31 && a.top_k >= 1 && a.top_k <= 64;
    if (shape_ok) {
      // The grouped matmuls' outputs (2^42 elements at most) and the
      // weights' byte sizes: the exact bound near the limit is the library's.
      const unsigned __int128 rows = (unsigned __int128)a.num_tokens * uint64_t(a.top_k);
      const unsigned __int128 widest = uint64_t(std::max(a.hidden, 2 * a.intermediate));
      if (rows * widest > ((unsigned __int128)1 << 42)) dims.must.insert(GGEMM_STATUS_INVALID_DIMENSION);
      if (a.local_experts >= 1) {
        const unsigned __int128 w = (unsigned __int128)a.local_experts * uint64_t(a.hidden) * uint64_t(a.intermediate);
        if (w > ((unsigned __int128)1 << 61)) dims.must.insert(GGEMM_STATUS_INVALID_DIMENSION);
        if (w > ((unsigned __int128)1 << 59)) dims.may.insert(GGEMM_STATUS_INVALID_DIMENSION);
      }
    }
  }
  size_t needed = 0;
  const ggemm_status query = ggemm_moe_ffn_workspace_size(&a, &needed);
  if (dims.may.empty()) check_workspace_query("ggemm_moe_ffn_workspace_size", query, dims);

  uintptr_t addr = 0x100000;
  auto next = [&] { return addr += 0x10000; };
  a.x = fake<const void>(on(8) ? pick_ptr(p) : next());
  a.w_gate_up = fake<const void>(on(9) ? pick_ptr(p) : next());
  a.w_down = fake<const void>(on(10) ? pick_ptr(p) : next());
  a.topk_ids = fake<const int32_t>(on(11) ? pick_ptr(p) : next());
  a.topk_weights = fake<const float>(on(12) ? pick_ptr(p) : next());
  a.out = fake<void>(on(13) ? pick_ptr(p) : next());
  a.workspace = fake<void>(on(14) ? pick_ptr(p) : next());
  a.workspace_bytes = on(15) ? p.ConsumeIntegral<size_t>() : needed;
  Verdict v = dims;
  if (dims.must.empty() && query == GGEMM_STATUS_SUCCESS && a.num_tokens > 0) {
    model_pointer(v.must, a.x, 16);
    model_pointer(v.must, a.w_gate_up, 16);
    model_pointer(v.must, a.w_down, 16);
    model_pointer(v.must, a.topk_ids, 4);
    model_pointer(v.must, a.topk_weights, 4);
    model_pointer(v.must, a.out, 16);
    model_pointer(v.must, a.workspace, 16);
    if (a.workspace_bytes < needed) v.must.insert(GGEMM_STATUS_INVALID_VALUE);
  }
  check_moe_verdict("ggemm_moe_ffn", ggemm_moe_ffn(nullptr, &a, nullptr), v);
}

// Modes 0xF0..0xF2 of the input's first byte.
void fuzz_moe(FuzzedDataProvider &p, uint8_t mode) {
  if (mode == 0xF0) fuzz_moe_route(p);
  if (mode == 0xF1) fuzz_moe_combine(p);
  if (mode == 0xF2) fuzz_moe_ffn(p);
}
