#!/usr/bin/env python3
"""Disassembles sm_100a cubins/fatbins and checks every kernel for the tcgen05
instructions as nvdisasm (CUDA 13) prints them, and for no local memory:

  tcgen05.mma .kind::f16            -> UTCHMMA gdesc[..], gdesc[..], tmem[..], ..., idesc[..]
  tcgen05.ld.32x32b.xN              -> LDTM.xN
  tcgen05.alloc                     -> UTCATOMSWS.FIND_AND_SET.ALIGN (the allocator's
                                       atomic on the tensor-memory column mask)
  tcgen05.commit (mbarrier arrive)  -> UTCBAR
  tcgen05.dealloc                   -> UTCATOMSWS.AND
  local memory (spills, stack)      -> LDL / STL: must be absent

Usage: check_sass_sm100.py CUOBJDUMP FILE...
Exit 0 = pass, 1 = fail, 77 = skipped (no cuobjdump; ctest reports SKIP).
"""
import re
import shutil
import subprocess
import sys
from pathlib import Path

# (what, regex over one function's SASS). Matched against opcodes (after the
# optional predicate), so operand text cannot satisfy them.
REQUIRED = [
    ("tensor-core MMA (tcgen05.mma kind::f16)", r"UTCHMMA"),
    ("tensor-memory load (tcgen05.ld)", r"LDTM(\.x\d+)?"),
    ("tensor-memory alloc (tcgen05.alloc)", r"UTCATOMSWS\.FIND_AND_SET\.ALIGN"),
    ("MMA completion to mbarrier (tcgen05.commit)", r"UTCBAR"),
    ("tensor-memory dealloc (tcgen05.dealloc)", r"UTCATOMSWS\.AND"),
]
OPCODE = re.compile(r"^\s*/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P(?:\d|T)\s+)?([A-Z][A-Za-z0-9_.]*)", re.M)


def main():
    cuobjdump, files = sys.argv[1], sys.argv[2:]
    if not cuobjdump or not shutil.which(cuobjdump):
        print("SKIP: cuobjdump not found (scripts/setup.sh installs it into .tools/)")
        return 77
    failures, checked = [], 0
    for f in files:
        out = subprocess.run([cuobjdump, "-sass", f], capture_output=True, text=True,
                             env={"PATH": str(Path(cuobjdump).parent) + ":/usr/bin:/bin"})
        if out.returncode != 0:
            print(f"cuobjdump failed on {f}:\n{out.stderr}")
            return 1
        if "sm_100a" not in out.stdout:
            failures.append(f"{f}: no sm_100a code")
        for name, body in re.findall(r"Function : (\S+)\n(.*?)(?=\n\s+Function : |\Z)", out.stdout, re.S):
            checked += 1
            opcodes = OPCODE.findall(body)
            for what, pattern in REQUIRED:
                n = sum(1 for op in opcodes if re.fullmatch(pattern, op))
                print(f"{name}: {n:3d} x {pattern:34s} {what}")
                if n == 0:
                    failures.append(f"{name}: no {what} ({pattern})")
            local = [op for op in opcodes if re.fullmatch(r"(LDL|STL)(\..*)?", op)]
            if local:
                failures.append(f"{name}: {len(local)} local-memory instructions (spills or stack arrays)")
    print(f"checked {checked} kernel(s) in {len(files)} file(s)")
    for f in failures:
        print("FAIL", f)
    if checked == 0:
        print("FAIL: no kernels found")
        return 1
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
