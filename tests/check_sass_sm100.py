#!/usr/bin/env python3
"""Disassembles sm_100a cubins/fatbins and checks every kernel for the tcgen05
instructions as nvdisasm (CUDA 13) prints them, and for no local memory:

  tcgen05.mma .kind::f16            -> UTCHMMA gdesc[..], gdesc[..], tmem[..], ..., idesc[..]
                                       (UTCHMMA.2CTA with cta_group::2)
  tcgen05.ld                        -> LDTM.xN (32x32b), LDTM.16dp256bit, LDTM.x2.PACK16BIT, ...
  tcgen05.alloc                     -> UTCATOMSWS.FIND_AND_SET.ALIGN (the allocator's
                                       atomic on the tensor-memory column mask;
                                       UTCATOMSWS.2CTA.FIND_AND_SET.ALIGN with cta_group::2)
  tcgen05.commit (mbarrier arrive)  -> UTCBAR (UTCBAR.2CTA.MULTICAST with cta_group::2)
  tcgen05.dealloc                   -> UTCATOMSWS.AND
  local memory (spills, stack)      -> no LDL / STL, and LOCAL:0 STACK:0 in cuobjdump -res-usage

and, in the grouped-GEMM kernels (ggemm_sm100_grouped_*), the MoE layer's
parts by the kernels that compile them (ptx/sm100/grouped_gemm.cuh, kSwiglu
and kGather):

  gather on load (TMA .tile::gather4) -> UTMALDG.2D.GATHER4 in every cta_group 1
                                       kernel, none in the pair (_cta2) kernels
  SwiGLU epilogue                   -> UTMALDG.5D (the interleaved weights' 5-D view),
                                       SHFL.BFLY (gate and up lanes 8 apart) and
                                       MUFU.EX2 (silu's exp) in the cta_group 1,
                                       K-major, 16-bit-output kernels; no UTMALDG.5D
                                       in the others
  row-scale epilogue                -> SHFL.IDX (the routing weights from registers)

Usage:
  check_sass_sm100.py CUOBJDUMP FILE...
  check_sass_sm100.py CUOBJDUMP --table CXX KERNEL_TABLE_H FILE...

With --table, the kernels the files must hold are the entries of
ptx/sm100/kernel_table.h (GGEMM_SM100_KERNELS, expanded by CXX's
preprocessor): every one must be present, and no other ggemm_sm100_grouped_
kernel. Exit 0 = pass, 1 = fail, 77 = skipped (no cuobjdump; ctest reports SKIP).
"""
import re
import shutil
import subprocess
import sys
from pathlib import Path

# (label, what, regex over one function's opcodes). Matched against opcodes
# (after the optional predicate), so operand text cannot satisfy them.
REQUIRED = [
    ("mma", "tensor-core MMA (tcgen05.mma kind::f16)", r"UTCHMMA(\.[A-Z0-9_]+)*"),
    ("ld", "tensor-memory load (tcgen05.ld)", r"LDTM(\.[A-Za-z0-9_]+)*"),
    ("alloc", "tensor-memory alloc (tcgen05.alloc)", r"UTCATOMSWS(\.2CTA)?\.FIND_AND_SET\.ALIGN"),
    ("commit", "MMA completion to mbarrier (tcgen05.commit)", r"UTCBAR(\.[A-Z0-9_]+)*"),
    ("dealloc", "tensor-memory dealloc (tcgen05.dealloc)", r"UTCATOMSWS(\.2CTA)?\.AND"),
]
# The grouped-GEMM kernels' names: ggemm_sm100_grouped_<in>_<out>_<layout>_m<tile_m>[_cta2].
GROUPED = re.compile(r"ggemm_sm100_grouped_(bf16|fp16)_(bf16|fp16|fp32)_(kmajor|mnmajor)_m(\d+)(_cta2)?")


def pair(m):
    return m.group(5) is not None


def swiglu_kernel(m):
    return not pair(m) and m.group(3) == "kmajor" and m.group(2) != "fp32"


# (label, what, regex, which grouped kernels must have it, which must not).
GROUPED_RULES = [
    ("gather4", "TMA gather4 (gather on load)", r"UTMALDG\.2D\.GATHER4", lambda m: not pair(m), pair),
    ("swiglu-load", "the SwiGLU weights' 5-D TMA load", r"UTMALDG\.5D", swiglu_kernel,
     lambda m: not swiglu_kernel(m)),
    ("swiglu-shfl", "the SwiGLU gate/up exchange (shfl.bfly)", r"SHFL\.BFLY", swiglu_kernel, None),
    ("swiglu-exp", "silu's exponential (MUFU.EX2)", r"MUFU\.EX2", swiglu_kernel, None),
    ("scale-shfl", "the row scales' broadcast (shfl.idx)", r"SHFL\.IDX", lambda m: True, None),
]
# The decode GEMV (ptx/sm90/decode_gemv.cuh, built for sm_100a too) has no
# tensor-core instruction: it must hold its 16-byte weight loads that bypass
# L1 and its fp32 FMAs instead of the tcgen05 set.
GEMV = re.compile(r"ggemm_sm100_decode_gemv_(bf16|fp16)_(bf16|fp16|fp32)_kmajor_m(\d+)_c(\d+)")
GEMV_REQUIRED = [
    ("weight-ld", "16-byte loads past L1 (ld.global.nc.L1::no_allocate.v4)", r"LDG\.E\.NA\.128(\.[A-Z0-9_]+)*"),
    ("ffma", "fp32 FMA", r"FFMA(\.[A-Z0-9_]+)*"),
]
OPCODE = re.compile(r"^\s*/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P(?:\d|T)\s+)?([A-Z][A-Za-z0-9_.]*)", re.M)
LOCAL_OPCODE = re.compile(r"(LDL|STL)(\..*)?")
# Opcodes of a kernel whose body is only `trap;` (the stub before the kernel is written).
STUB_OPCODES = {"LDC", "BPT.TRAP", "BRA", "NOP", "EXIT"}


def run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True,
                          env={"PATH": str(Path(cmd[0]).parent) + ":/usr/bin:/bin"})


def table_kernels(cxx, header):
    """The entry points ptx/sm100/kernel_table.h declares, named as
    kernels_entry.cuh names them: ggemm_sm100_grouped_<in>_<out>_<layout>_m<tile_m><suffix>."""
    snippet = ('#include "kernel_table.h"\n'
               "#define GGEMM_CHECK_NAME(E, EN, O, ON, L, LN, TM, ...) GGEMM_KERNEL EN ON LN TM __VA_ARGS__ ;\n"
               "GGEMM_SM100_KERNELS(GGEMM_CHECK_NAME)\n")
    out = subprocess.run([cxx, "-E", "-P", "-x", "c++", "-std=c++17", "-I", str(Path(header).parent), "-"],
                         input=snippet, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"expanding {header} with {cxx} failed:\n{out.stderr}")
    names = []
    for en, on, ln, tm, rest in re.findall(r"GGEMM_KERNEL\s+(\w+)\s+(\w+)\s+(\w+)\s+(\d+)\s*([^;]*);", out.stdout):
        # rest: "" (X of 7 arguments) or "<cta_group>, <suffix>" (9).
        suffix = rest.split(",", 1)[1].strip() if "," in rest else ""
        names.append(f"ggemm_sm100_grouped_{en}_{on}_{ln}_m{tm}{suffix}")
    if not names:
        raise RuntimeError(f"no kernels found expanding GGEMM_SM100_KERNELS of {header}")
    return names


def resource_usage(cuobjdump, f):
    """{function: (LOCAL bytes, STACK bytes)} from cuobjdump -res-usage."""
    out = run([cuobjdump, "-res-usage", f])
    usage = {}
    for name, stack, local in re.findall(r"Function (\S+):\s*\n\s*REG:\d+ STACK:(\d+) SHARED:\d+ LOCAL:(\d+)",
                                         out.stdout):
        usage[name] = (int(local), int(stack))
    return usage


def main():
    args = sys.argv[1:]
    cuobjdump = args.pop(0) if args else ""
    expected = None
    if args[:1] == ["--table"]:
        cxx, header = args[1], args[2]
        args = args[3:]
        try:
            expected = table_kernels(cxx, header)
        except (RuntimeError, OSError) as e:
            print(f"FAIL: {e}")
            return 1
    files = args
    if not cuobjdump or not shutil.which(cuobjdump):
        print("SKIP: cuobjdump not found (scripts/setup.sh installs it into .tools/)")
        return 77

    failures, found = [], []
    lacking = {what: [] for _, what, _ in REQUIRED}
    for f in files:
        out = run([cuobjdump, "-sass", f])
        if out.returncode != 0:
            print(f"cuobjdump failed on {f}:\n{out.stderr}")
            return 1
        if "sm_100a" not in out.stdout:
            failures.append(f"{f}: no sm_100a code")
        usage = resource_usage(cuobjdump, f)
        for name, body in re.findall(r"Function : (\S+)\n(.*?)(?=\n\s+Function : |\Z)", out.stdout, re.S):
            found.append(name)
            opcodes = OPCODE.findall(body)
            problems = []
            counts = []
            gemv = GEMV.fullmatch(name) is not None
            for label, what, pattern in GEMV_REQUIRED if gemv else REQUIRED:
                n = sum(1 for op in opcodes if re.fullmatch(pattern, op))
                counts.append(f"{n} {label}")
                if n == 0:
                    problems.append(f"no {what}")
                    if not gemv:
                        lacking[what].append(name)
            grouped = GROUPED.fullmatch(name)
            if grouped:
                for label, what, pattern, needed, forbidden in GROUPED_RULES:
                    n = sum(1 for op in opcodes if re.fullmatch(pattern, op))
                    if needed(grouped):
                        counts.append(f"{n} {label}")
                        if n == 0:
                            problems.append(f"lacks {what}: {pattern}")
                    elif forbidden and forbidden(grouped) and n:
                        problems.append(f"{n} {what} where the kernel should not compile it: {pattern}")
            local = [op for op in opcodes if LOCAL_OPCODE.fullmatch(op)]
            if local:
                problems.append(f"{len(local)} local-memory instructions ({', '.join(sorted(set(local)))}): "
                                "spills or stack arrays")
            local_bytes, stack_bytes = usage.get(name, (0, 0))
            if local_bytes or stack_bytes:
                problems.append(f"uses local memory (cuobjdump -res-usage: LOCAL:{local_bytes} STACK:{stack_bytes})")
            if opcodes and set(opcodes) <= STUB_OPCODES and "BPT.TRAP" in opcodes:
                problems.append("its body is only a trap (the kernel is still the stub)")
            if problems:
                failures.append(f"{name}: " + "; ".join(problems))
            else:
                print(f"ok   {name}: {', '.join(counts)}")

    if expected is not None:
        present = set(found)
        missing = [n for n in expected if n not in present]
        extra = sorted(n for n in present if n.startswith("ggemm_sm100_grouped_") and n not in set(expected))
        for n in missing:
            failures.append(f"{n}: in ptx/sm100/kernel_table.h but not in the fatbins")
        for n in extra:
            failures.append(f"{n}: in the fatbins but not in ptx/sm100/kernel_table.h")
        print(f"kernel table: {len(expected)} kernels, {len(expected) - len(missing)} found")

    print(f"checked {len(found)} kernel(s) in {len(files)} file(s)")
    for _, what, pattern in REQUIRED:
        if lacking[what]:
            print(f"{len(lacking[what])} of {len(found)} kernel(s) lack {what}: {pattern}")
    for f in failures:
        print("FAIL", f)
    if not found:
        print("FAIL: no kernels found")
        return 1
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
