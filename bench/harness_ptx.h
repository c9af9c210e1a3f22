// The PTX of the benchmark harness's kernels (bench_harness.cpp; the
// streaming kernel also makes the L2 flush's read sweep in timing.h), as
// text the driver JIT-compiles at run time: the empty kernels, the load
// chain and the streaming kernel. Its own header, with no CUDA in it, so a CPU test
// (tests/check_harness_ptx.sh, through tests/print_harness_ptx.cpp) can
// assemble every one with ptxas: a slip in this text would otherwise show
// only on a GPU, as a load error at run time.
#pragma once
#include <string>

namespace ggemm::bench {

// Plain sm_90 (not sm_90a) PTX, so the driver also JIT-compiles it for later
// architectures.
#define GGEMM_HARNESS_PTX_HEADER ".version 8.0\n.target sm_90\n.address_size 64\n"
inline constexpr char kHarnessPtxHeader[] = GGEMM_HARNESS_PTX_HEADER;
inline constexpr char kNullPtx[] = GGEMM_HARNESS_PTX_HEADER
    ".visible .entry ggemm_bench_null_kernel()\n"
    "{\n"
    "  ret;\n"
    "}\n";
// The bytes of ggemm's sm_90a kernel parameters (sizeof(Sm90GroupedParams),
// ptx/sm90/params.h; tests/test_plan_runtime.cpp holds the two equal), which the
// params row's empty kernel takes.
#define GGEMM_HARNESS_PARAM_BYTES 1664
#define GGEMM_HARNESS_STR2(x) #x
#define GGEMM_HARNESS_STR(x) GGEMM_HARNESS_STR2(x)
inline constexpr unsigned kHarnessParamBytes = GGEMM_HARNESS_PARAM_BYTES;
inline constexpr char kParamsPtx[] = GGEMM_HARNESS_PTX_HEADER
    ".visible .entry ggemm_bench_params_kernel(.param .align 64 .b8 p_block["
    GGEMM_HARNESS_STR(GGEMM_HARNESS_PARAM_BYTES) "])\n"
    "{\n"
    "  ret;\n"
    "}\n";
// Thread 0 loads the pointer at p_start, then the one that points to, and
// so on, p_links times; the last value is stored only if it is 0 (it is
// not), so no load can be dropped.
inline constexpr char kLoadChainPtx[] = GGEMM_HARNESS_PTX_HEADER
    ".visible .entry ggemm_bench_load_chain(.param .u64 p_start, .param .u32 p_links, .param .u64 p_sink)\n"
    "{\n"
    "  .reg .pred %p<3>;\n"
    "  .reg .b32 %r<3>;\n"
    "  .reg .b64 %rd<3>;\n"
    "  mov.u32 %r1, %tid.x;\n"
    "  setp.ne.u32 %p1, %r1, 0;\n"
    "  @%p1 bra END;\n"
    "  ld.param.u64 %rd1, [p_start];\n"
    "  ld.param.u32 %r2, [p_links];\n"
    "  ld.param.u64 %rd2, [p_sink];\n"
    "LOOP:\n"
    "  setp.eq.u32 %p2, %r2, 0;\n"
    "  @%p2 bra DONE;\n"
    "  ld.global.u64 %rd1, [%rd1];\n"
    "  sub.u32 %r2, %r2, 1;\n"
    "  bra LOOP;\n"
    "DONE:\n"
    "  setp.ne.u64 %p1, %rd1, 0;\n"
    "  @%p1 bra END;\n"
    "  st.global.u64 [%rd2], %rd1;\n"
    "END:\n"
    "  ret;\n"
    "}\n";
#undef GGEMM_HARNESS_PTX_HEADER

// Streams p_vectors 16-byte vectors of p_buf (reading, or with p_write
// storing zeros): thread i takes vectors i, i + S, ..., i + (F - 1) S (S the
// grid's threads, F = in_flight) per step, all F in flight at once, then
// moves on by F S. The loads' XOR is stored only if it equals a constant no
// buffer here holds, so no load can be dropped.
inline std::string stream_ptx(int in_flight) {
  std::string p = kHarnessPtxHeader;
  p += ".visible .entry ggemm_bench_stream(.param .u64 p_buf, .param .u64 p_vectors, .param .u32 p_write, "
       ".param .u64 p_sink)\n{\n";
  p += "  .reg .pred %p<" + std::to_string(in_flight + 4) + ">;\n";
  p += "  .reg .b32 %r<" + std::to_string(4 * in_flight + 16) + ">;\n";
  p += "  .reg .b64 %rd<" + std::to_string(in_flight + 12) + ">;\n";
  p += "  mov.u32 %r1, %ctaid.x;\n  mov.u32 %r2, %ntid.x;\n  mov.u32 %r3, %tid.x;\n  mov.u32 %r4, %nctaid.x;\n"
       "  mad.lo.u32 %r5, %r1, %r2, %r3;\n  mul.lo.u32 %r6, %r4, %r2;\n"
       "  cvt.u64.u32 %rd1, %r5;\n  cvt.u64.u32 %rd2, %r6;\n"  // i, S
       "  mul.lo.u64 %rd7, %rd2, " + std::to_string(in_flight) + ";\n"  // F S
       "  ld.param.u64 %rd3, [p_buf];\n  ld.param.u64 %rd4, [p_vectors];\n  ld.param.u32 %r7, [p_write];\n"
       "  ld.param.u64 %rd5, [p_sink];\n  setp.ne.u32 %p1, %r7, 0;\n  mov.u32 %r8, 0;\n  mov.u32 %r9, 0;\n"
       "LOOP:\n  setp.ge.u64 %p2, %rd1, %rd4;\n  @%p2 bra DONE;\n  mov.u64 %rd6, %rd1;\n";
  auto reg = [](const char *kind, int n) { return std::string("%") + kind + std::to_string(n); };
  for (int f = 0; f < in_flight; ++f) {  // predicate %p(4+f), address %rd(12+f), values %r(16+4f..)
    const std::string pr = reg("p", 4 + f), ad = reg("rd", 12 + f);
    p += "  setp.lt.u64 " + pr + ", %rd6, %rd4;\n  shl.b64 " + ad + ", %rd6, 4;\n  add.u64 " + ad + ", %rd3, " + ad +
         ";\n  add.u64 %rd6, %rd6, %rd2;\n";
    for (int e = 0; e < 4; ++e) p += "  mov.u32 " + reg("r", 16 + 4 * f + e) + ", 0;\n";
  }
  p += "  @%p1 bra STORE;\n";
  for (int f = 0; f < in_flight; ++f)
    p += "  @" + reg("p", 4 + f) + " ld.global.v4.u32 {" + reg("r", 16 + 4 * f) + ", " + reg("r", 17 + 4 * f) + ", " +
         reg("r", 18 + 4 * f) + ", " + reg("r", 19 + 4 * f) + "}, [" + reg("rd", 12 + f) + "];\n";
  for (int f = 0; f < in_flight; ++f)
    for (int e = 0; e < 4; ++e) p += "  xor.b32 %r8, %r8, " + reg("r", 16 + 4 * f + e) + ";\n";
  p += "  bra NEXT;\nSTORE:\n";
  for (int f = 0; f < in_flight; ++f)
    p += "  @" + reg("p", 4 + f) + " st.global.v4.u32 [" + reg("rd", 12 + f) + "], {%r9, %r9, %r9, %r9};\n";
  p += "NEXT:\n  add.u64 %rd1, %rd1, %rd7;\n  bra LOOP;\n"
       "DONE:\n  setp.ne.u32 %p3, %r8, 0x9E3779B9;\n  @%p3 bra END;\n  st.global.u32 [%rd5], %r8;\nEND:\n  ret;\n}\n";
  return p;
}

}  // namespace ggemm::bench
