#!/usr/bin/env python3
"""Disassembles the kernel fatbins and checks every sm_90a kernel for its
tensor-core instruction (HGMMA: wgmma; the short-K kernels HMMA: mma.sync;
the decode GEMV and the MoE layer's decode down projection, which have none,
their 16-byte weight loads past L1 and fp32 FMAs; the decode down, that
before griddepcontrol.wait it only prefetches into L2 and loads relaxed)
and for no local-memory traffic (LDL/STL: spills or stack arrays).

Exit 0 = pass, 1 = fail, 77 = skipped (no cuobjdump; ctest reports SKIP).
"""
import re
import shutil
import subprocess
import sys
from pathlib import Path


def main():
    cuobjdump, fatbins = sys.argv[1], sys.argv[2:]
    if not cuobjdump or not shutil.which(cuobjdump):
        print("SKIP: cuobjdump not found (scripts/setup.sh installs it into .tools/)")
        return 77
    failures = []
    checked = 0
    decode_down = 0
    for fatbin in fatbins:
        out = subprocess.run([cuobjdump, "-sass", fatbin], capture_output=True, text=True,
                             env={"PATH": str(Path(cuobjdump).parent) + ":/usr/bin:/bin"})
        if out.returncode != 0:
            print(f"cuobjdump failed on {fatbin}:\n{out.stderr}")
            return 1
        # Split the listing into functions.
        for name, body in re.findall(r"Function : (\S+)\n(.*?)(?=\n\s+Function : |\Z)", out.stdout, re.S):
            checked += 1
            if name.startswith("ggemm_sm90_short_k_"):
                if not re.search(r"\bHMMA\.16816\.F32", body):
                    failures.append(f"{name}: no HMMA.16816.F32 (mma.sync m16n8k16) instruction")
            elif name.startswith("ggemm_sm90_decode_gemv_"):
                # fp32 FMAs on weight rows streamed past L1 by 16-byte loads.
                if not re.search(r"\bLDG\.E\.NA\.128\b", body) or "FFMA" not in body:
                    failures.append(f"{name}: no 16-byte weight loads or no FFMA")
            elif name.startswith("ggemm_moe_decode_down_"):
                decode_down += 1
                # The MoE layer's decode down projection (both architectures'
                # fatbins): the same streamed weight loads and fp32 FMAs.
                if not re.search(r"\bLDG\.E\.NA\.128\b", body) or "FFMA" not in body:
                    failures.append(f"{name}: no 16-byte weight loads or no FFMA")
                # Before griddepcontrol.wait (ACQBULK; the listing's order,
                # which is the code's here: no branch crosses the wait) it
                # prefetches its first weights into L2 and touches memory
                # outside the SM only so: relaxed loads of the ids (hints,
                # past L1) and L2 prefetches; no plain load, no L1 prefetch
                # (either could leave a stale L1 line), no store, atomic,
                # async copy or TMA (ptx/moe/decode_down.cuh,
                # decode_down_prefetch; ptx/instr/grid_dependency.h).
                wait = body.find("ACQBULK")
                before = body[:wait] if wait >= 0 else ""
                memory_ops = (r"\b(LDGSTS|LDG|LD|STG|ST|REDG|RED|ATOMG|ATOM|CCTL|SULD|SUST|TLD|"
                              r"UTMALDG|UTMAPF|UTMASTG|UBLKCP|UBLKPF|UBLKRED)(\.[\w.]+)?(?=\s)")
                accesses = [m.group(0) for m in re.finditer(memory_ops, before)]
                allowed = {"LDG.E.STRONG.GPU", "CCTL.E.PF2"}
                if wait < 0 or "CCTL.E.PF2" not in accesses:
                    failures.append(f"{name}: no L2 prefetch (CCTL.E.PF2) before griddepcontrol.wait (ACQBULK)")
                elif any(a not in allowed for a in accesses):
                    failures.append(f"{name}: memory accesses before griddepcontrol.wait other than relaxed loads "
                                    f"and L2 prefetches: {sorted(set(accesses) - allowed)}")
            elif name.startswith("ggemm_sm90_") and "HGMMA" not in body:
                failures.append(f"{name}: no HGMMA (wgmma) instruction")
            local = re.findall(r"\b(LDL|STL)(\.\S+)?\b", body)
            if local:
                failures.append(f"{name}: {len(local)} local-memory instructions (spills or stack arrays)")
    print(f"checked {checked} kernels in {len(fatbins)} fatbin(s)")
    for f in failures:
        print("FAIL", f)
    if checked == 0:
        print("FAIL: no kernels found")
        return 1
    if decode_down < 2 * sum("kernels_moe" in f for f in fatbins):
        print(f"FAIL: {decode_down} decode down kernels (bf16 and fp16 in each MoE fatbin)")
        return 1
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
