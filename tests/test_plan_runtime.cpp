// What the runtime holds around the plans: which devices get which kernels,
// the fatbins libggemm embeds, the kernel registry generated from the kernel
// tables (each entry in its architecture's fatbins), the process-wide plan
// request the forced-plan GPU runs use, the MoE routing's chunks, and the
// GGEMM_DEBUG switch.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <set>
#include <string>
#include <utility>

#include "bench/harness_ptx.h"
#include "plan_test_support.h"
#include "ptx/sm90/params.h"
#include "runtime/debug.h"
#include "runtime/driver.h"
#include "runtime/launch_moe.h"
#include "runtime/moe_kernel_names.h"

// The fatbin table libggemm embeds (cmake/fatbins.S.in); the internal tests
// link the same objects.
extern "C" const void *const ggemm_fatbin_table[];
extern "C" const uint32_t ggemm_fatbin_arch[];
extern "C" const uint32_t ggemm_fatbin_count;

namespace ggemm::testing {
namespace {

TEST(PlanRequest, TheProcessWideRequestCarriesEveryField) {
  // The forced-plan GPU runs reach the plan through these two calls only.
  const PlanRequest before = plan_request_for_testing();
  PlanRequest r;
  r.sm90_short_k = PlanRequest::Sm90ShortK::kNever;
  r.decode_gemv = PlanRequest::DecodeGemv::kWherePossible;
  r.sm90_k_slices = 2;
  set_plan_request_for_testing(r);
  const PlanRequest got = plan_request_for_testing();
  set_plan_request_for_testing(before);
  EXPECT_EQ(got.sm90_short_k, r.sm90_short_k);
  EXPECT_EQ(got.decode_gemv, r.decode_gemv);
  EXPECT_EQ(got.sm90_k_slices, r.sm90_k_slices);
  r.sm90_token_major = PlanRequest::TokenMajor::kWherePossible;
  set_plan_request_for_testing(r);
  const PlanRequest got2 = plan_request_for_testing();
  set_plan_request_for_testing(before);
  EXPECT_EQ(got2.sm90_token_major, r.sm90_token_major);
}

TEST(DeviceArch, OnlyComputeCapability90And100HaveKernels) {
  Arch arch = Arch::kSm90a;
  ASSERT_TRUE(arch_for_compute_capability(9, 0, &arch));
  EXPECT_EQ(arch, Arch::kSm90a);
  ASSERT_TRUE(arch_for_compute_capability(10, 0, &arch));
  EXPECT_EQ(arch, Arch::kSm100a);
  // 'a' code runs on its own compute capability only: not on B300 (10.3),
  // Thor (11.0), RTX Blackwell (12.0), nor on Ampere or Ada.
  for (auto cc : {std::pair<int, int>{8, 0}, {8, 6}, {8, 9}, {9, 1}, {10, 1}, {10, 3}, {11, 0}, {12, 0}, {12, 1}})
    EXPECT_FALSE(arch_for_compute_capability(cc.first, cc.second, &arch)) << cc.first << "." << cc.second;
  EXPECT_EQ(arch_number(Arch::kSm90a), 90u);
  EXPECT_EQ(arch_number(Arch::kSm100a), 100u);
  EXPECT_STREQ(arch_name(Arch::kSm90a), "sm_90a");
  EXPECT_STREQ(arch_name(Arch::kSm100a), "sm_100a");
}

TEST(EmbeddedFatbins, EachArchitectureHasItsOwnFatbins) {
  // One fatbin per operand dtype per architecture (sm_90a: three, the
  // store-only and accumulate-only persistent kernels apart:
  // kernels_store_<dtype>.cu, kernels_accumulate_<dtype>.cu), and one
  // of the MoE layer's routing and combine kernels (ptx/<arch>/
  // kernels_moe.cu), each tagged with the one architecture it holds, so a
  // device loads only its own.
  std::map<uint32_t, int> per_arch;
  for (uint32_t i = 0; i < ggemm_fatbin_count; ++i) {
    EXPECT_NE(ggemm_fatbin_table[i], nullptr);
    ++per_arch[ggemm_fatbin_arch[i]];
  }
  EXPECT_EQ(per_arch.size(), 2u);
  EXPECT_EQ(per_arch[arch_number(Arch::kSm90a)], 7);
  EXPECT_EQ(per_arch[arch_number(Arch::kSm100a)], 3);
}

// The fatbin wrapper's header (what nvcc -fatbin writes): magic, version,
// header size, then the size of what follows it.
struct FatbinHeader {
  uint32_t magic;  // 0xBA55ED50
  uint16_t version, header_bytes;
  uint64_t body_bytes;
};

// Whether `name`, NUL-terminated, is in an embedded fatbin of `arch` (each
// entry point's name is in its cubin's string table).
bool fatbin_names(Arch arch, const std::string &name) {
  const std::string needle = name + '\0';
  for (uint32_t i = 0; i < ggemm_fatbin_count; ++i) {
    if (ggemm_fatbin_arch[i] != arch_number(arch)) continue;
    const auto *header = static_cast<const FatbinHeader *>(ggemm_fatbin_table[i]);
    EXPECT_EQ(header->magic, 0xBA55ED50u);
    const char *begin = static_cast<const char *>(ggemm_fatbin_table[i]);
    const char *end = begin + header->header_bytes + header->body_bytes;
    if (std::search(begin, end, needle.begin(), needle.end()) != end) return true;
  }
  return false;
}

// The benchmark harness's params row launches an empty kernel with ggemm's
// parameter bytes (bench/harness_ptx.h), so its time is a launch's of this
// size.
static_assert(bench::kHarnessParamBytes == sizeof(Sm90GroupedParams),
              "bench/harness_ptx.h's GGEMM_HARNESS_PARAM_BYTES is sizeof(Sm90GroupedParams)");

TEST(KernelRegistry, OneEntryPerInstantiationEachInItsArchitecturesFatbins) {
  // The registry is generated from the kernel tables (runtime/kernel_registry.cpp):
  // every entry unique, named by its family, and present in the fatbins the
  // runtime loads for its architecture.
  std::set<std::string> names;
  std::map<std::pair<Arch, KernelFamily>, int> per_family;
  for (const KernelEntry &e : kernel_table()) {
    const std::string name = e.name;
    EXPECT_TRUE(names.insert(name).second) << name << " twice";
    ++per_family[{e.arch, e.family}];
    const bool sm90_persistent = e.family == KernelFamily::kPersistent || e.family == KernelFamily::kPersistentStore ||
                                 e.family == KernelFamily::kPersistentAccumulate ||
                                 e.family == KernelFamily::kPersistentSwiglu;
    const bool gemv = e.family == KernelFamily::kDecodeGemv;
    const char *prefix = e.arch == Arch::kSm100a ? (gemv ? "ggemm_sm100_decode_gemv_" : "ggemm_sm100_grouped_")
                         : sm90_persistent        ? "ggemm_sm90_grouped_"
                         : gemv                   ? "ggemm_sm90_decode_gemv_"
                         : e.family == KernelFamily::kDecodeGemvRouted ? "ggemm_sm90_decode_gemv_routed_"
                         : e.family == KernelFamily::kTokenMajor || e.family == KernelFamily::kTokenMajorSwiglu
                             ? "ggemm_sm90_token_major_"
                             : "ggemm_sm90_short_k_";
    const bool swiglu_family = e.family == KernelFamily::kPersistentSwiglu || e.family == KernelFamily::kTokenMajorSwiglu;
    EXPECT_EQ(swiglu_family, name.size() > 7 && name.substr(name.size() - 7) == "_swiglu") << name;
    EXPECT_EQ(name.rfind(prefix, 0), 0u) << name;
    EXPECT_EQ(e.family == KernelFamily::kShortKSplit, name.size() > 7 && name.substr(name.size() - 7) == "_split8")
        << name;
    EXPECT_EQ(e.family == KernelFamily::kPersistentStore, name.size() > 6 && name.substr(name.size() - 6) == "_store")
        << name;
    EXPECT_EQ(e.family == KernelFamily::kPersistentAccumulate,
              name.size() > 11 && name.substr(name.size() - 11) == "_accumulate")
        << name;
    EXPECT_TRUE(fatbin_names(e.arch, name)) << name << " is in no embedded " << arch_name(e.arch) << " fatbin";
  }
  // sm_90a: 76 persistent, their 76 store-only and 60 accumulate-only twins
  // (test_plan_sm90_kernels.cpp), 2 operand x 3 output dtypes x 3
  // short-K tiles, x 2 split tiles; sm_100a: 2 x 3 dtypes x 2 layouts x 9.
  EXPECT_EQ((per_family[{Arch::kSm90a, KernelFamily::kPersistent}]), 76);
  EXPECT_EQ((per_family[{Arch::kSm90a, KernelFamily::kPersistentStore}]), 76);
  EXPECT_EQ((per_family[{Arch::kSm90a, KernelFamily::kPersistentAccumulate}]), 60);
  EXPECT_EQ((per_family[{Arch::kSm90a, KernelFamily::kShortK}]), 18);
  EXPECT_EQ((per_family[{Arch::kSm90a, KernelFamily::kShortKSplit}]), 12);
  // SwiGLU-only: 2 operand x 2 16-bit output dtypes, tile_m 256.
  EXPECT_EQ((per_family[{Arch::kSm90a, KernelFamily::kPersistentSwiglu}]), 4);
  // Decode GEMV: 2 operand x 3 output dtypes x tiles 1 (at three and four
  // CTAs an SM), 2, 4, on each architecture.
  EXPECT_EQ((per_family[{Arch::kSm90a, KernelFamily::kDecodeGemv}]), 24);
  EXPECT_EQ((per_family[{Arch::kSm100a, KernelFamily::kDecodeGemv}]), 24);
  // The MoE layer's routed twins (sm_90a): 2 dtypes x the four tiles.
  EXPECT_EQ((per_family[{Arch::kSm90a, KernelFamily::kDecodeGemvRouted}]), 8);
  // Token-major: 2 operand x 2 16-bit output dtypes.
  EXPECT_EQ((per_family[{Arch::kSm90a, KernelFamily::kTokenMajor}]), 4);
  EXPECT_EQ((per_family[{Arch::kSm90a, KernelFamily::kTokenMajorSwiglu}]), 4);
  EXPECT_EQ((per_family[{Arch::kSm100a, KernelFamily::kPersistent}]), 108);
}

// The MoE layer's kernels, launched by name (runtime/moe_kernel_names.h):
// each in an embedded fatbin of both architectures, the sm_100a one never
// loaded by any test that runs here or on the H200.
TEST(KernelRegistry, EveryMoeKernelIsInBothArchitecturesFatbins) {
  std::set<std::string> names;
  for (const char *name : moe_kernel::kAll) {
    EXPECT_TRUE(names.insert(name).second) << name << " twice";
    for (Arch arch : {Arch::kSm90a, Arch::kSm100a})
      EXPECT_TRUE(fatbin_names(arch, name)) << name << " is in no embedded " << arch_name(arch) << " fatbin";
  }
  EXPECT_EQ(names.size(), 12u);
}

// A fatbin the driver refuses (runtime/device.cpp): with a driver of an
// older major version than the toolkit that built the kernels, the message
// names both versions and the remedy; within one major version (minor
// version compatibility) or with a newer driver it says nothing (the cause
// is another, and driver_error names the CUresult).
TEST(DriverVersion, AnOlderMajorDriverIsNamedWithTheRemedy) {
  const std::string why = driver_older_than_build(12040, 13000);
  EXPECT_NE(why.find("supports CUDA 12.4"), std::string::npos) << why;
  EXPECT_NE(why.find("built with CUDA 13.0"), std::string::npos) << why;
  EXPECT_NE(why.find("for CUDA 13.0 or newer"), std::string::npos) << why;
  EXPECT_NE(driver_older_than_build(12090, 13010).find("built with CUDA 13.1"), std::string::npos);
  EXPECT_EQ(driver_older_than_build(12080, 12090), "");
  EXPECT_EQ(driver_older_than_build(13000, 13000), "");
  EXPECT_EQ(driver_older_than_build(13010, 13000), "");
  EXPECT_EQ(driver_older_than_build(13000, 12080), "");
}

// The routing's chunks (runtime/launch_moe.cpp): kRouteThreads x a power of
// two slots (each scatter warp a whole run), at most kMaxChunkSlots (its
// 16-bit counters); one slot a scatter thread, so one chunk and one launch
// up to 512 slots, until there would be more than 128 chunks; then no more
// than 128 while a chunk can still grow; every slot in a chunk; and a
// workspace holding the count matrix, never empty.
TEST(MoeRouteChunks, WholeRunsFewChunksEverySlotCovered) {
  for (int64_t slots : std::initializer_list<int64_t>{0, 1, 33, 511, 512, 513, 4096, 32768, 65536, 65537, 2097152,
                                                      2097153, int64_t(1) << 30}) {
    SCOPED_TRACE("slots " + std::to_string(slots));
    const RouteChunks c = route_chunks(slots);
    const uint32_t per_thread = c.chunk_slots / moe::kRouteThreads;
    EXPECT_EQ(c.chunk_slots % moe::kRouteThreads, 0u);
    EXPECT_EQ(per_thread & (per_thread - 1), 0u);
    EXPECT_LE(c.chunk_slots, moe::kMaxChunkSlots);
    EXPECT_EQ(int64_t(c.num_chunks), (slots + c.chunk_slots - 1) / c.chunk_slots);
    if (slots <= 128 * int64_t(moe::kRouteThreads)) EXPECT_EQ(c.chunk_slots, moe::kRouteThreads);
    if (c.chunk_slots < moe::kMaxChunkSlots) EXPECT_LE(c.num_chunks, 128u);
    const RouteScratchLayout w = route_scratch_layout(slots, 128);
    EXPECT_GE(w.bytes, size_t(4) * 128 * std::max<uint32_t>(c.num_chunks, 1));
  }
}

// GGEMM_DEBUG's values (docs/debugging.md): on for any value but empty,
// "0", "false", "off" or "no", in any case.
TEST(DebugSwitch, OnForAnyValueButTheOffWords) {
  EXPECT_FALSE(debug_value_enables(nullptr));
  for (const char *off : {"", "0", "false", "FALSE", "Off", "off", "no", "NO"}) EXPECT_FALSE(debug_value_enables(off)) << off;
  for (const char *on : {"1", "yes", "true", "on", "2", "00", "verbose"}) EXPECT_TRUE(debug_value_enables(on)) << on;
}

}  // namespace
}  // namespace ggemm::testing
