#include "runtime/kernel_registry.h"

#include <algorithm>

#include "ptx/sm100/kernel_table.h"
#include "ptx/sm90/kernel_table.h"
#include "ptx/sm90/short_k_layout.h"

namespace ggemm {
namespace {

#define GGEMM_STRINGIFY_(x) #x
#define GGEMM_STRINGIFY(x) GGEMM_STRINGIFY_(x)

// The tables' dtype and layout name tokens as values.
constexpr ggemm_dtype kDtype_bf16 = GGEMM_DTYPE_BF16, kDtype_fp16 = GGEMM_DTYPE_FP16, kDtype_fp32 = GGEMM_DTYPE_FP32;
constexpr bool kKMajor_kmajor = true, kKMajor_mnmajor = false;

// A persistent kernel of the sm_90a table (NAME: the entry point) in FAMILY.
#define GGEMM_SM90_PERSISTENT_ENTRY(NAME, FAMILY, EN, ON, LN, TM, CL) \
  KernelEntry{GGEMM_STRINGIFY(NAME), Arch::kSm90a, KernelFamily::FAMILY, kDtype_##EN, kDtype_##ON, kKMajor_##LN, TM, CL},
#define GGEMM_SM90_ENTRY(E, EN, O, ON, L, LN, TM, CL, SUF) \
  GGEMM_SM90_PERSISTENT_ENTRY(GGEMM_SM90_KERNEL_NAME(EN, ON, LN, TM, SUF), kPersistent, EN, ON, LN, TM, CL)
#define GGEMM_SM90_STORE_ENTRY(E, EN, O, ON, L, LN, TM, CL, SUF) \
  GGEMM_SM90_PERSISTENT_ENTRY(GGEMM_SM90_STORE_KERNEL_NAME(EN, ON, LN, TM, SUF), kPersistentStore, EN, ON, LN, TM, CL)
#define GGEMM_SM90_ACCUMULATE_ENTRY(E, EN, O, ON, L, LN, TM, CL, SUF)                                             \
  GGEMM_SM90_PERSISTENT_ENTRY(GGEMM_SM90_ACCUMULATE_KERNEL_NAME(EN, ON, LN, TM, SUF), kPersistentAccumulate, EN, \
                              ON, LN, TM, CL)
#define GGEMM_SM90_SHORT_K_ENTRY(E, EN, O, ON, TM)                                                              \
  KernelEntry{GGEMM_STRINGIFY(GGEMM_SM90_SHORT_K_KERNEL_NAME(EN, ON, TM)), Arch::kSm90a, KernelFamily::kShortK, \
              kDtype_##EN, kDtype_##ON, true, TM, 1},
#define GGEMM_SM90_SHORT_K_SPLIT_ENTRY(E, EN, O, ON, TM)                                            \
  KernelEntry{GGEMM_STRINGIFY(GGEMM_SM90_SHORT_K_SPLIT_KERNEL_NAME(EN, ON, TM)), Arch::kSm90a,       \
              KernelFamily::kShortKSplit, kDtype_##EN, kDtype_##ON, true, TM, sm90::kShortKSplit},
#define GGEMM_SM90_SWIGLU_ENTRY(E, EN, O, ON, TM)                                                    \
  KernelEntry{GGEMM_STRINGIFY(GGEMM_SM90_SWIGLU_KERNEL_NAME(EN, ON, TM)), Arch::kSm90a,                \
              KernelFamily::kPersistentSwiglu, kDtype_##EN, kDtype_##ON, true, TM, 1},
#define GGEMM_SM90_DECODE_GEMV_ENTRY(E, EN, O, ON, TM, CTAS)                                       \
  KernelEntry{GGEMM_STRINGIFY(GGEMM_SM90_DECODE_GEMV_KERNEL_NAME(EN, ON, TM, CTAS)), Arch::kSm90a,   \
              KernelFamily::kDecodeGemv, kDtype_##EN, kDtype_##ON, true, TM, CTAS},
#define GGEMM_SM90_DECODE_GEMV_ROUTED_ENTRY(E, EN, O, ON, TM, CTAS)                                     \
  KernelEntry{GGEMM_STRINGIFY(GGEMM_SM90_DECODE_GEMV_ROUTED_KERNEL_NAME(EN, ON, TM, CTAS)), Arch::kSm90a,  \
              KernelFamily::kDecodeGemvRouted, kDtype_##EN, kDtype_##ON, true, TM, CTAS},
#define GGEMM_SM90_TOKEN_MAJOR_ENTRY(E, EN, O, ON)                                                     \
  KernelEntry{GGEMM_STRINGIFY(GGEMM_SM90_TOKEN_MAJOR_KERNEL_NAME(EN, ON)), Arch::kSm90a,                   \
              KernelFamily::kTokenMajor, kDtype_##EN, kDtype_##ON, true, 128, 1},
#define GGEMM_SM90_TOKEN_MAJOR_SWIGLU_ENTRY(E, EN, O, ON)                                                 \
  KernelEntry{GGEMM_STRINGIFY(GGEMM_SM90_TOKEN_MAJOR_SWIGLU_KERNEL_NAME(EN, ON)), Arch::kSm90a,            \
              KernelFamily::kTokenMajorSwiglu, kDtype_##EN, kDtype_##ON, true, 128, 1},
#define GGEMM_SM100_DECODE_GEMV_ENTRY(E, EN, O, ON, TM, CTAS)                                      \
  KernelEntry{GGEMM_STRINGIFY(GGEMM_SM100_DECODE_GEMV_KERNEL_NAME(EN, ON, TM, CTAS)), Arch::kSm100a,  \
              KernelFamily::kDecodeGemv, kDtype_##EN, kDtype_##ON, true, TM, CTAS},
#define GGEMM_SM100_ENTRY(E, EN, O, ON, L, LN, TM, CG, SUF)                                                  \
  KernelEntry{GGEMM_STRINGIFY(GGEMM_SM100_KERNEL_NAME(EN, ON, LN, TM, SUF)), Arch::kSm100a,                   \
              KernelFamily::kPersistent, kDtype_##EN, kDtype_##ON, kKMajor_##LN, TM, CG},

constexpr KernelEntry kEntries[] = {
    GGEMM_SM90_KERNELS(GGEMM_SM90_ENTRY)                          //
    GGEMM_SM90_KERNELS(GGEMM_SM90_STORE_ENTRY)                    //
    GGEMM_SM90_ACCUMULATE_KERNELS(GGEMM_SM90_ACCUMULATE_ENTRY)    //
    GGEMM_SM90_SHORT_K_KERNELS(GGEMM_SM90_SHORT_K_ENTRY)          //
    GGEMM_SM90_SHORT_K_SPLIT_KERNELS(GGEMM_SM90_SHORT_K_SPLIT_ENTRY)  //
    GGEMM_SM90_SWIGLU_KERNELS(GGEMM_SM90_SWIGLU_ENTRY)            //
    GGEMM_SM90_DECODE_GEMV_KERNELS(GGEMM_SM90_DECODE_GEMV_ENTRY)  //
    GGEMM_SM90_DECODE_GEMV_ROUTED_KERNELS(GGEMM_SM90_DECODE_GEMV_ROUTED_ENTRY)  //
    GGEMM_SM90_TOKEN_MAJOR_KERNELS(GGEMM_SM90_TOKEN_MAJOR_ENTRY)  //
    GGEMM_SM90_TOKEN_MAJOR_KERNELS(GGEMM_SM90_TOKEN_MAJOR_SWIGLU_ENTRY)  //
    GGEMM_SM100_KERNELS(GGEMM_SM100_ENTRY)                        //
    GGEMM_SM90_DECODE_GEMV_KERNELS(GGEMM_SM100_DECODE_GEMV_ENTRY)  //
};

bool is_persistent_of(const KernelEntry &e, Arch arch, ggemm_dtype out) {
  return e.arch == arch && e.family == KernelFamily::kPersistent && e.out == out;
}

}  // namespace

KernelTable kernel_table() { return {kEntries, uint32_t(sizeof kEntries / sizeof kEntries[0])}; }

const KernelEntry *find_kernel(Arch arch, KernelFamily family, ggemm_dtype in, ggemm_dtype out, bool kmajor,
                               uint32_t tile_m, uint32_t cluster) {
  for (const KernelEntry &e : kEntries)
    if (e.arch == arch && e.family == family && e.in == in && e.out == out && e.kmajor == kmajor &&
        e.tile_m == tile_m && e.cluster == cluster)
      return &e;
  return nullptr;
}

bool persistent_tile_exists(Arch arch, ggemm_dtype out, uint32_t tile_m, uint32_t cluster) {
  return std::any_of(std::begin(kEntries), std::end(kEntries), [&](const KernelEntry &e) {
    return is_persistent_of(e, arch, out) && e.tile_m == tile_m && e.cluster == cluster;
  });
}

uint32_t max_persistent_tile_m(Arch arch, ggemm_dtype out) {
  uint32_t m = 0;
  for (const KernelEntry &e : kEntries)
    if (is_persistent_of(e, arch, out)) m = std::max(m, e.tile_m);
  return m;
}

uint32_t min_cluster_tile_m(Arch arch, uint32_t cluster) {
  uint32_t m = 0;
  for (const KernelEntry &e : kEntries)
    if (e.arch == arch && e.family == KernelFamily::kPersistent && e.cluster == cluster)
      m = m == 0 ? e.tile_m : std::min(m, e.tile_m);
  return m;
}

bool accumulate_supported(Arch arch, uint32_t tile_m) {
  return arch == Arch::kSm100a || GGEMM_SM90_TILE_M_SUPPORTS_ACCUMULATE(tile_m);
}

uint32_t max_accumulate_tile_m(Arch arch) {
  uint32_t m = 0;
  for (const KernelEntry &e : kEntries)
    if (e.arch == arch && e.family == KernelFamily::kPersistent && accumulate_supported(arch, e.tile_m))
      m = std::max(m, e.tile_m);
  return m;
}

}  // namespace ggemm
