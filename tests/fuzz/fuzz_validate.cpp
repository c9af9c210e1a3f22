// libFuzzer harness: argument validation through the public C ABI.
//
// Each input is decoded into a ggemm_grouped_matmul_args (dtypes and enum
// fields as arbitrary ints, as a C caller may pass them; dims including
// zero, negative, 2^31 and overflow-prone values; pointers NULL, misaligned
// or arbitrary) and an optional ggemm_config, then passed to
// ggemm_grouped_matmul(NULL, &args, NULL). With a NULL handle nothing can
// launch, and validation runs before the handle check, so every pointer is a
// fake address that must never be dereferenced (ASan reports it if it is).
//
// Inputs whose first byte is 0xF0, 0xF1 or 0xF2 drive the MoE layer's calls
// instead (ggemm_moe_route, ggemm_moe_combine, ggemm_moe_ffn and the
// workspace queries; fuzz_validate_moe.h).
//
// Properties (each violation aborts, so libFuzzer reports it):
//   1. no crash, no ASan/UBSan report;
//   2. the status is never SUCCESS (the handle is NULL);
//   3. the status is a known ggemm_status, one ggemm_grouped_matmul may
//      return without a device (INVALID_HANDLE or a validation status);
//   4. every failure leaves a non-empty ggemm_last_error_message();
//   5. the status agrees with a model of the contract in ggemm.h (below):
//      arguments the model finds valid reach the handle check
//      (INVALID_HANDLE); arguments it finds invalid are refused with a
//      status of one of the problems they have;
//   6. the library reads no byte of the args struct past its struct_size
//      (the struct is allocated with exactly that many bytes when smaller);
//   7. ggemm_status_string, called from C with any int, gives a name (the
//      status's own for a known value, never NULL).
//
// When the contract changes (a new check, a relaxed rule), update model().
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <set>
#include <string>

#include <fuzzer/FuzzedDataProvider.h>

#include "ggemm.h"

// c_caller.c: ggemm_status_string((ggemm_status)value), called from C.
extern "C" const char *ggemm_fuzz_status_string_of_int(int value);

namespace {

static_assert(sizeof(ggemm_dtype) == sizeof(int32_t), "enum fields are written as 32-bit ints");
static_assert(sizeof(ggemm_epilogue) == sizeof(int32_t), "enum fields are written as 32-bit ints");

// ---- decoding ---------------------------------------------------------------

constexpr int64_t k2p31 = int64_t(1) << 31;

// Two's-complement addition without signed overflow (the harness itself must
// be free of UB: values near INT64_MIN/MAX are nudged on purpose).
int64_t wrap_add(int64_t x, int64_t y) { return int64_t(uint64_t(x) + uint64_t(y)); }

int64_t pick_dim(FuzzedDataProvider &p) {
  static const int64_t special[] = {0,
                                    1,
                                    -1,
                                    7,
                                    8,
                                    9,
                                    16,
                                    24,
                                    64,
                                    128,
                                    256,
                                    4096,
                                    7168,
                                    65536,
                                    65537,
                                    715827882,  // floor((2^31 - 1) / 3): 3 * m still below 2^31
                                    715827883,  // 3 * m past 2^31
                                    k2p31 - 8,
                                    k2p31 - 1,
                                    k2p31,
                                    k2p31 + 8,
                                    int64_t(1) << 32,
                                    int64_t(1) << 61,
                                    int64_t(1) << 62,
                                    std::numeric_limits<int64_t>::max(),
                                    std::numeric_limits<int64_t>::min(),
                                    std::numeric_limits<int64_t>::min() + 8,
                                    -8,
                                    -k2p31};
  switch (p.ConsumeIntegralInRange<int>(0, 4)) {
    case 0: return p.PickValueInArray(special);
    case 1: return p.ConsumeIntegralInRange<int64_t>(-16, 1 << 12);
    case 2: return 8 * p.ConsumeIntegralInRange<int64_t>(0, int64_t(1) << 28);
    case 3: return wrap_add(p.PickValueInArray(special), p.ConsumeIntegralInRange<int64_t>(-9, 9));
    default: return p.ConsumeIntegral<int64_t>();
  }
}

// A 32-bit value for an enum or int field: valid values, near misses, extremes.
int32_t pick_enum(FuzzedDataProvider &p) {
  static const int32_t special[] = {0, 1, 2, 3, 4, -1, 7, 8, 255, 256, 65535,
                                    std::numeric_limits<int32_t>::max(), std::numeric_limits<int32_t>::min()};
  switch (p.ConsumeIntegralInRange<int>(0, 2)) {
    case 0: return p.ConsumeIntegralInRange<int32_t>(0, 3);
    case 1: return p.PickValueInArray(special);
    default: return p.ConsumeIntegral<int32_t>();
  }
}

// A fake address: never dereferenced.
uintptr_t pick_ptr(FuzzedDataProvider &p) {
  static const uintptr_t special[] = {0,
                                      1,
                                      2,
                                      4,
                                      8,
                                      15,
                                      16,
                                      0x1000,
                                      0x7f0000001000ull,
                                      0x7f0000001004ull,
                                      0x7f0000001008ull,
                                      std::numeric_limits<uintptr_t>::max(),
                                      std::numeric_limits<uintptr_t>::max() - 15,
                                      std::numeric_limits<uintptr_t>::max() - 3,
                                      uintptr_t(1) << 63};
  switch (p.ConsumeIntegralInRange<int>(0, 4)) {
    case 0: return 0;
    case 1: return uintptr_t(p.ConsumeIntegralInRange<uint32_t>(1, 1u << 24)) << 4;  // 16-byte aligned
    case 2: return (uintptr_t(p.ConsumeIntegralInRange<uint32_t>(1, 1u << 24)) << 4) +
                   p.ConsumeIntegralInRange<uintptr_t>(1, 15);  // misaligned
    case 3: return p.PickValueInArray(special);
    default: return p.ConsumeIntegral<uintptr_t>();
  }
}

template <typename T>
T *fake(uintptr_t addr) {
  return reinterpret_cast<T *>(addr);
}

// Writes an int into an enum field byte-wise, as a C caller may, without a
// C++ enum conversion of an out-of-range value.
template <typename E>
void set_enum(E *field, int32_t v) {
  std::memcpy(field, &v, sizeof v);
}
template <typename E>
int32_t get_enum(const E *field) {
  int32_t v;
  std::memcpy(&v, field, sizeof v);
  return v;
}

// ---- the contract, as ggemm.h states it ------------------------------------

struct Verdict {
  std::set<ggemm_status> must;  // problems the library is required to refuse
  std::set<ggemm_status> may;   // statuses it may also give (unspecified corners)
};

bool aligned(const void *p, uintptr_t a) { return (reinterpret_cast<uintptr_t>(p) & (a - 1)) == 0; }

// The struct's size in 0.1.0, before group_ends: accepted, group_ends NULL.
constexpr size_t kArgsSize010 = offsetof(ggemm_grouped_matmul_args, group_ends);

Verdict model(const ggemm_grouped_matmul_args &caller, bool config_given) {
  Verdict v;
  auto must = [&](bool bad, ggemm_status s) {
    if (bad) v.must.insert(s);
  };
  if (caller.struct_size != sizeof(ggemm_grouped_matmul_args) && caller.struct_size != kArgsSize010) {
    v.must.insert(GGEMM_STATUS_INVALID_VALUE);
    return v;  // the rest of the struct has no defined meaning
  }
  // The fields past an earlier version's size are not the caller's: zero.
  ggemm_grouped_matmul_args a = caller;
  if (a.struct_size == kArgsSize010) a.group_ends = nullptr;
  const int32_t at = get_enum(&a.a_dtype), bt = get_enum(&a.b_dtype), ct = get_enum(&a.c_dtype);
  must(at != GGEMM_DTYPE_BF16 && at != GGEMM_DTYPE_FP16, GGEMM_STATUS_INVALID_DTYPE);
  must(bt != at, GGEMM_STATUS_INVALID_DTYPE);
  must(ct != GGEMM_DTYPE_BF16 && ct != GGEMM_DTYPE_FP16 && ct != GGEMM_DTYPE_FP32, GGEMM_STATUS_INVALID_DTYPE);

  // Dimensions: TMA global dimensions and the kernels' row indices are 32-bit.
  auto bad_dim = [](int64_t d, bool mult8) { return d <= 0 || d >= k2p31 || (mult8 && d % 8 != 0); };
  must(a.m < 0 || a.m >= k2p31, GGEMM_STATUS_INVALID_DIMENSION);
  must(bad_dim(a.n, true), GGEMM_STATUS_INVALID_DIMENSION);
  must(bad_dim(a.k, true), GGEMM_STATUS_INVALID_DIMENSION);
  must(bad_dim(a.num_experts, false), GGEMM_STATUS_INVALID_DIMENSION);
  must(a.max_rows_per_group < 0, GGEMM_STATUS_INVALID_DIMENSION);
  // C has at most 2^42 elements (the kernels count a group's tiles in 32 bits).
  if (a.m > 0 && a.m < k2p31 && !bad_dim(a.n, true))
    must(uint64_t(a.m) * uint64_t(a.n) > (uint64_t(1) << 42), GGEMM_STATUS_INVALID_DIMENSION);
  // B's byte size must be addressable: E * N * K elements at most 2^61.
  if (!bad_dim(a.n, true) && !bad_dim(a.k, true) && !bad_dim(a.num_experts, false)) {
    const unsigned __int128 elems = (unsigned __int128)a.num_experts * uint64_t(a.n) * uint64_t(a.k);
    must(elems > ((unsigned __int128)1 << 61), GGEMM_STATUS_INVALID_DIMENSION);
    // Close to the limit the exact bound is the library's to choose.
    if (elems > ((unsigned __int128)1 << 60)) v.may.insert(GGEMM_STATUS_INVALID_DIMENSION);
  }

  must(a.num_groups < 1 || a.num_groups > GGEMM_MAX_GROUPS, GGEMM_STATUS_INVALID_GROUP_COUNT);
  must(a.transpose_b != 0 && a.transpose_b != 1, GGEMM_STATUS_INVALID_VALUE);
  const int32_t ep = get_enum(&a.epilogue);
  must(ep != GGEMM_EPILOGUE_STORE && ep != GGEMM_EPILOGUE_ACCUMULATE && ep != GGEMM_EPILOGUE_ROW_SCALE &&
           ep != GGEMM_EPILOGUE_SWIGLU,
       GGEMM_STATUS_INVALID_VALUE);

  const int64_t s0 = a.a_plane_split0, s1 = a.a_plane_split1;
  const bool planes = s0 != 0 || s1 != 0;
  // SwiGLU: K-major gate_up weights, N = 2I with I a multiple of 8, 16-bit
  // C, no plane splits.
  if (ep == GGEMM_EPILOGUE_SWIGLU) {
    must(a.transpose_b == 0 || planes, GGEMM_STATUS_INVALID_VALUE);
    must(!bad_dim(a.n, true) && a.n % 16 != 0, GGEMM_STATUS_INVALID_DIMENSION);
    must(get_enum(&a.c_dtype) == GGEMM_DTYPE_FP32, GGEMM_STATUS_INVALID_DTYPE);
  }
  // The groups come from a_offsets or group_ends, never both (whatever m is).
  must(a.a_offsets && a.group_ends, GGEMM_STATUS_INVALID_VALUE);
  // Gather on load: no plane splits; A's rows a 32-bit dimension whose
  // bytes stay addressable with K.
  if (a.a_row_index) {
    must(planes, GGEMM_STATUS_INVALID_VALUE);
    must(a.a_rows < 1 || a.a_rows >= k2p31, GGEMM_STATUS_INVALID_DIMENSION);
    if (a.a_rows >= 1 && !bad_dim(a.k, true))
      must((unsigned __int128)a.a_rows * uint64_t(a.k) > ((unsigned __int128)1 << 61), GGEMM_STATUS_INVALID_DIMENSION);
  }
  if (s0 != 0 || s1 != 0) {
    must(s0 <= 0 || s1 < s0 || s1 > a.n || s0 % 8 != 0 || s1 % 8 != 0, GGEMM_STATUS_INVALID_VALUE);
    // A then has 3 * M rows, which must stay a 32-bit dimension.
    must(a.m >= 0 && a.m < k2p31 && 3 * a.m >= k2p31, GGEMM_STATUS_INVALID_DIMENSION);
  }

  // Pointers: required when there is work (M > 0); with M == 0 the call is a
  // no-op, so checking them is the library's choice.
  std::set<ggemm_status> ptr;
  auto matrix = [&](const void *p) {
    if (!p) ptr.insert(GGEMM_STATUS_NULL_POINTER);
    else if (!aligned(p, 16)) ptr.insert(GGEMM_STATUS_MISALIGNED_POINTER);
  };
  auto index = [&](const void *p) {
    if (!p) ptr.insert(GGEMM_STATUS_NULL_POINTER);
    else if (!aligned(p, 4)) ptr.insert(GGEMM_STATUS_MISALIGNED_POINTER);
  };
  matrix(a.a);
  matrix(a.b);
  matrix(a.c);
  if (a.group_ends && !a.a_offsets) index(a.group_ends);
  else if (!a.group_ends) index(a.a_offsets);  // NULL: neither is given
  index(a.expert_ids);
  index(a.expert_usage_stats);
  if (ep == GGEMM_EPILOGUE_ROW_SCALE) index(a.row_scale);
  if (a.a_row_index && !aligned(a.a_row_index, 4)) ptr.insert(GGEMM_STATUS_MISALIGNED_POINTER);
  (a.m > 0 ? v.must : v.may).insert(ptr.begin(), ptr.end());

  // The config override: its struct_size needs no device and is checked
  // with the arguments, whatever m; its fields depend on the device and are
  // checked after the handle, so they never decide a call without one.
  if (config_given) must(caller.config->struct_size != sizeof(ggemm_config), GGEMM_STATUS_INVALID_VALUE);
  return v;
}

[[noreturn]] void violation(const char *what, ggemm_status got, const ggemm_grouped_matmul_args *a,
                            const Verdict *v) {
  std::fprintf(stderr, "\n*** fuzz_validate: %s\n    status %d (%s), message \"%s\"\n", what, int(got),
               ggemm_status_string(got), ggemm_last_error_message());
  if (a) {
    std::fprintf(stderr,
                 "    struct_size=%zu a/b/c_dtype=%d/%d/%d m=%lld n=%lld k=%lld E=%lld groups=%lld "
                 "max_rows=%lld transpose_b=%d epilogue=%d splits=(%lld,%lld)\n"
                 "    a=%p b=%p c=%p a_offsets=%p group_ends=%p expert_ids=%p stats=%p row_scale=%p config=%p\n",
                 a->struct_size, get_enum(&a->a_dtype), get_enum(&a->b_dtype), get_enum(&a->c_dtype),
                 (long long)a->m, (long long)a->n, (long long)a->k, (long long)a->num_experts,
                 (long long)a->num_groups, (long long)a->max_rows_per_group, a->transpose_b,
                 get_enum(&a->epilogue), (long long)a->a_plane_split0, (long long)a->a_plane_split1, a->a, a->b,
                 a->c, (const void *)a->a_offsets,
                 (const void *)(a->struct_size >= sizeof *a ? a->group_ends : nullptr), (const void *)a->expert_ids,
                 (const void *)a->expert_usage_stats, (const void *)a->row_scale, (const void *)a->config);
  }
  if (v) {
    std::fprintf(stderr, "    model: must {");
    for (ggemm_status s : v->must) std::fprintf(stderr, " %s", ggemm_status_string(s));
    std::fprintf(stderr, " } may {");
    for (ggemm_status s : v->may) std::fprintf(stderr, " %s", ggemm_status_string(s));
    std::fprintf(stderr, " }\n");
  }
  std::abort();
}

// Checks that hold for every status a NULL-handle call returns.
void check_common(ggemm_status st, const ggemm_grouped_matmul_args *a, const Verdict *v) {
  switch (st) {
    case GGEMM_STATUS_SUCCESS:
      violation("SUCCESS with a NULL handle", st, a, v);
    case GGEMM_STATUS_NULL_POINTER:
    case GGEMM_STATUS_MISALIGNED_POINTER:
    case GGEMM_STATUS_INVALID_DIMENSION:
    case GGEMM_STATUS_INVALID_DTYPE:
    case GGEMM_STATUS_INVALID_GROUP_COUNT:
    case GGEMM_STATUS_INVALID_CONFIG:
    case GGEMM_STATUS_INVALID_VALUE:
    case GGEMM_STATUS_INVALID_HANDLE:
      break;
    default:
      violation("a status ggemm_grouped_matmul may not return without a device", st, a, v);
  }
  const char *msg = ggemm_last_error_message();
  if (!msg || !*msg) violation("failure with an empty ggemm_last_error_message()", st, a, v);
  const char *name = ggemm_status_string(st);
  if (!name || std::strncmp(name, "GGEMM_STATUS_", 13) != 0 || std::strstr(name, "unknown"))
    violation("ggemm_status_string gives no name for the status", st, a, v);
}

bool verbose() {
  static const bool on = [] {
    const char *v = std::getenv("GGEMM_FUZZ_VERBOSE");
    return v && *v == '1';
  }();
  return on;
}

// Property 7: any int a C caller passes to ggemm_status_string has a name.
void check_status_string(int32_t v) {
  const char *name = ggemm_fuzz_status_string_of_int(v);
  if (!name || std::strncmp(name, "GGEMM_STATUS_", 13) != 0) {
    std::fprintf(stderr, "\n*** fuzz_validate: ggemm_status_string(%d) gives %s\n", v, name ? name : "NULL");
    std::abort();
  }
  const bool known = v >= GGEMM_STATUS_SUCCESS && v <= GGEMM_STATUS_INTERNAL_ERROR;
  if (known == (std::strstr(name, "unknown") != nullptr)) {
    std::fprintf(stderr, "\n*** fuzz_validate: ggemm_status_string(%d) gives \"%s\"\n", v, name);
    std::abort();
  }
}

#include "fuzz_validate_moe.h"

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  FuzzedDataProvider p(data, size);
  const uint8_t mode = p.ConsumeIntegral<uint8_t>();

  if (mode == 0xFE) {
    const int32_t v = pick_enum(p);
    if (verbose()) std::fprintf(stderr, "[fuzz_validate] ggemm_status_string(%d)\n", v);
    check_status_string(v);
    return 0;
  }

  // The MoE layer's calls and workspace queries (fuzz_validate_moe.h).
  if (mode >= 0xF0 && mode <= 0xF2) {
    fuzz_moe(p, mode);
    return 0;
  }

  // A NULL args pointer.
  if (mode == 0xFF) {
    const ggemm_status st = ggemm_grouped_matmul(nullptr, nullptr, nullptr);
    check_common(st, nullptr, nullptr);
    if (st != GGEMM_STATUS_NULL_POINTER) violation("args == NULL is not NULL_POINTER", st, nullptr, nullptr);
    return 0;
  }

  ggemm_grouped_matmul_args a;
  std::memset(&a, 0, sizeof a);
  // Mostly the right struct_size, so the checks behind it are reached.
  switch (p.ConsumeIntegralInRange<int>(0, 15)) {
    case 0: a.struct_size = p.ConsumeIntegral<size_t>(); break;
    case 1: a.struct_size = p.ConsumeIntegralInRange<size_t>(0, 2 * sizeof a); break;
    case 15: a.struct_size = kArgsSize010; break;  // a caller built against 0.1.0
    default: a.struct_size = sizeof a; break;
  }
  // Start from a valid call, then let the input perturb any field, so that
  // both deep (one bad field) and shallow (many) inputs are common.
  set_enum(&a.a_dtype, GGEMM_DTYPE_BF16);
  set_enum(&a.b_dtype, GGEMM_DTYPE_BF16);
  set_enum(&a.c_dtype, GGEMM_DTYPE_BF16);
  a.m = 64;
  a.n = 256;
  a.k = 128;
  a.num_experts = 8;
  a.a = fake<const void>(0x10000);
  a.b = fake<const void>(0x20000);
  a.c = fake<void>(0x30000);
  a.transpose_b = 1;
  a.a_offsets = fake<const uint32_t>(0x40000);
  a.expert_ids = fake<const int32_t>(0x50000);
  a.expert_usage_stats = fake<const uint32_t>(0x60000);
  a.num_groups = 4;
  set_enum(&a.epilogue, GGEMM_EPILOGUE_STORE);

  const uint32_t perturb = p.ConsumeIntegral<uint32_t>();
  auto on = [&](int bit) { return (perturb >> bit) & 1u; };
  if (on(0)) set_enum(&a.a_dtype, pick_enum(p));
  if (on(1)) set_enum(&a.b_dtype, on(20) ? get_enum(&a.a_dtype) : pick_enum(p));
  if (on(2)) set_enum(&a.c_dtype, pick_enum(p));
  if (on(3)) a.m = pick_dim(p);
  if (on(4)) a.n = pick_dim(p);
  if (on(5)) a.k = pick_dim(p);
  if (on(6)) a.num_experts = pick_dim(p);
  if (on(7)) a.a = fake<const void>(pick_ptr(p));
  if (on(8)) a.b = fake<const void>(pick_ptr(p));
  if (on(9)) a.c = fake<void>(pick_ptr(p));
  if (on(10)) a.transpose_b = pick_enum(p);
  if (on(11)) a.a_offsets = fake<const uint32_t>(pick_ptr(p));
  if (on(12)) a.expert_ids = fake<const int32_t>(pick_ptr(p));
  if (on(13)) a.expert_usage_stats = fake<const uint32_t>(pick_ptr(p));
  if (on(14)) a.num_groups = pick_dim(p);
  if (on(15)) a.max_rows_per_group = pick_dim(p);
  if (on(16)) {
    a.a_plane_split0 = pick_dim(p);
    a.a_plane_split1 =
        on(21) ? wrap_add(a.a_plane_split0, 8 * p.ConsumeIntegralInRange<int64_t>(-2, 64)) : pick_dim(p);
  }
  if (on(17)) set_enum(&a.epilogue, pick_enum(p));
  if (on(18)) a.row_scale = fake<const float>(pick_ptr(p));
  if (on(22)) {  // gather on load
    a.a_row_index = fake<const int32_t>(pick_ptr(p));
    a.a_rows = pick_dim(p);
  }
  if (on(23)) {  // group ends, mostly in place of a_offsets
    a.group_ends = fake<const uint32_t>(pick_ptr(p));
    if (!on(24)) a.a_offsets = nullptr;
  }

  // An optional config override (a real struct: a library with a handle
  // would read it, so it is never a fake address).
  ggemm_config cfg;
  std::memset(&cfg, 0, sizeof cfg);
  const bool config_given = on(19);
  if (config_given) {
    cfg.struct_size = p.ConsumeBool() ? sizeof cfg : p.ConsumeIntegralInRange<size_t>(0, 2 * sizeof cfg);
    int *fields[] = {&cfg.tile_n,    &cfg.tile_m,    &cfg.tile_k,  &cfg.mma_m,    &cfg.mma_n,
                     &cfg.mma_k,     &cfg.cluster_m, &cfg.cluster_n, &cfg.cta_group, &cfg.stages,
                     &cfg.a_swizzle, &cfg.b_swizzle};
    static const int values[] = {0, 1, 2, 4, 16, 32, 64, 128, 256, 512, -1, 3, 33};
    for (int *f : fields) {
      switch (p.ConsumeIntegralInRange<int>(0, 3)) {
        case 0: *f = 0; break;
        case 1:
        case 2: *f = p.PickValueInArray(values); break;
        default: *f = p.ConsumeIntegral<int>(); break;
      }
    }
    a.config = &cfg;
  }

  // The args as the library sees them: exactly struct_size bytes when that
  // is smaller than the struct (an older caller), so ASan reports any read
  // past what the caller declared. At least the struct_size field itself.
  const size_t bytes = a.struct_size < sizeof a ? std::max(a.struct_size, sizeof a.struct_size) : sizeof a;
  std::unique_ptr<unsigned char[]> buf(new unsigned char[bytes]);
  std::memcpy(buf.get(), &a, bytes);
  const auto *passed = reinterpret_cast<const ggemm_grouped_matmul_args *>(buf.get());

  const ggemm_status st = ggemm_grouped_matmul(nullptr, passed, nullptr);
  const Verdict v = model(a, config_given);
  if (verbose()) {  // GGEMM_FUZZ_VERBOSE=1: what each input decodes to
    std::fprintf(stderr, "[fuzz_validate] %s: %s\n", ggemm_status_string(st), ggemm_last_error_message());
    if (config_given)
      std::fprintf(stderr, "[fuzz_validate] config: struct_size %zu tile_m %d stages %d cta_group %d\n",
                   cfg.struct_size, cfg.tile_m, cfg.stages, cfg.cta_group);
  }
  check_common(st, &a, &v);

  if (v.must.empty()) {
    if (st != GGEMM_STATUS_INVALID_HANDLE && !v.may.count(st))
      violation("valid arguments refused (expected INVALID_HANDLE)", st, &a, &v);
  } else {
    if (st == GGEMM_STATUS_INVALID_HANDLE) violation("invalid arguments reached the handle check", st, &a, &v);
    if (!v.must.count(st) && !v.may.count(st))
      violation("refused with a status that matches none of the arguments' problems", st, &a, &v);
  }

  // The message belongs to this thread's last call: a call that fails differently
  // replaces it, and a valid-but-no-handle call still explains itself.
  const std::string first = ggemm_last_error_message();
  if (ggemm_grouped_matmul(nullptr, nullptr, nullptr) != GGEMM_STATUS_NULL_POINTER)
    violation("args == NULL is not NULL_POINTER", st, nullptr, nullptr);
  if (first == ggemm_last_error_message())
    violation("the message did not change with the next failing call", st, &a, &v);
  return 0;
}
