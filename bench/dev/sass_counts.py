#!/usr/bin/env python3
"""Compares where two builds' kernels spend instructions, from Nsight
Compute's source page (per-SASS-instruction counters of one launch each):

    ncu --clock-control none --cache-control all -k regex:ggemm_sm90 --launch-skip 5 --launch-count 1 \\
        --section SourceCounters --section WarpStateStats -o rep ./build/bench/ggemm_bench --benchmark_filter=ROW
    ncu -i rep.ncu-rep --page source --csv --print-source sass > a.csv
    python3 bench/dev/sass_counts.py a.csv b.csv [--hot N]

(`bench/dev/run.sh ncu_source ROW BUILD OUT.csv` runs the first two.)
Per file: warp instructions executed, the PCs executed, the stall samples,
those of "no instruction" (instruction fetch) and the samples by reason. Then each file's
instructions grouped by how often each PC ran, which names the role that
ran it: a PC run once per CTA (the grid) is prologue, once per tile (the
tiles) the producer or walker, tiles x 8 a consumer warp's per-tile code
(two warpgroups of 4 warps). Last, the opcodes whose executions, summed
over the PCs run at least --hot times, differ between the files: what a
change added to or took from the hot loop. How it found the LoRA
expand's regression: docs/performance.md, "Cold, against
e409675". `--self-test` checks the arithmetic on a synthetic page.
"""
import collections
import csv
import io
import sys

BUCKETS = (200, 500, 1000, 1500, 2500)  # upper bounds of the execution-count classes


def number(text):
    text = text.replace(",", "").strip()
    return float(text) if text not in ("", "-") else 0.0


def load(stream, reasons=None):
    """[(source, executed, stall samples, no-instruction samples)], one per SASS instruction; with a
    dict `reasons`, the stall samples summed per reason (the stall_* columns) into it."""
    rows = list(csv.reader(stream))
    start = next(i for i, r in enumerate(rows) if "Source" in r and "Instructions Executed" in r)
    head = rows[start]
    src, ex = head.index("Source"), head.index("Instructions Executed")
    samples = head.index("Warp Stall Sampling (All Samples)") if "Warp Stall Sampling (All Samples)" in head else None
    no_inst = head.index("stall_no_inst") if "stall_no_inst" in head else None
    stalls = [i for i, h in enumerate(head) if h.startswith("stall_") and "(Not Issued)" not in h]
    out = []
    for r in rows[start + 1:]:
        if len(r) < len(head):
            continue
        out.append((r[src].strip(), number(r[ex]), number(r[samples]) if samples is not None else 0.0,
                    number(r[no_inst]) if no_inst is not None else 0.0))
        if reasons is not None:
            for i in stalls:
                reasons[head[i][len("stall_"):]] = reasons.get(head[i][len("stall_"):], 0.0) + number(r[i])
    return out


def opcode(source):
    """The instruction's opcode without modifiers or predicate: '@!P0 BRA 0x..' -> 'BRA'."""
    words = source.split()
    if words and words[0].startswith("@"):
        words = words[1:]
    return words[0].split(".")[0] if words else ""


def bucket(executed):
    for bound in BUCKETS:
        if executed < bound:
            return f"<{bound}"
    return f">={BUCKETS[-1]}"


def summary(page):
    executed = [x for x in page if x[1] > 0]
    totals = (sum(x[1] for x in page), len(executed), sum(x[2] for x in page), sum(x[3] for x in page))
    classes = collections.defaultdict(lambda: [0, 0.0])
    for _, ex, _, _ in executed:
        c = classes[bucket(ex)]
        c[0] += 1
        c[1] += ex
    return totals, dict(classes)


def opcodes(page, hot):
    counts = collections.Counter()
    for source, ex, _, _ in page:
        if ex >= hot:
            counts[opcode(source)] += ex
    return counts


def report(pages, names, hot, out=sys.stdout, reasons=None):
    for k, (name, page) in enumerate(zip(names, pages)):
        (ex, pcs, samples, no_inst), classes = summary(page)
        print(f"{name}: {ex:.0f} warp instructions executed, {pcs} PCs executed, {samples:.0f} stall samples "
              f"({no_inst:.0f} no instruction)", file=out)
        if reasons:
            top = sorted(((v, r) for r, v in reasons[k].items() if v > 0), reverse=True)[:8]
            print("  stall samples by reason: " + ", ".join(f"{r} {v:.0f}" for v, r in top), file=out)
        for key in sorted(classes, key=lambda k: (k[0] != "<", int(k.lstrip("<>=")))):
            n, e = classes[key]
            print(f"  PCs executed {key:>6} times: {n:5d} PCs, {e:10.0f} instructions", file=out)
    if len(pages) == 2:
        a, b = (opcodes(p, hot) for p in pages)
        print(f"opcodes over PCs executed >= {hot} times, {names[1]} - {names[0]}:", file=out)
        for op in sorted(set(a) | set(b), key=lambda o: b[o] - a[o]):
            if b[op] != a[op]:
                print(f"  {op:10s} {a[op]:10.0f} -> {b[op]:10.0f}  ({b[op] - a[op]:+.0f})", file=out)


def self_test():
    head = '"Address","Source","Warp Stall Sampling (All Samples)","Instructions Executed","stall_no_inst"\n'

    def page(rows):
        return io.StringIO('"Kernel Name","k",\n' + head + "".join(
            f'"0x{i:x}","{s}","{smp}","{ex:,}","{ni}"\n' for i, (s, ex, smp, ni) in enumerate(rows)))

    why = {}
    a = load(page([("S2R R0, SR_TID.X", 132, 1, 1), ("ISETP.NE.AND P0, PT, R0, RZ, PT", 3072, 2, 0),
                   ("@P0 BRA 0x10", 3072, 0, 0), ("FMUL R1, R2, R3", 3072, 5, 3), ("EXIT", 0, 0, 0)]), why)
    assert why == {"no_inst": 4.0}, why
    b = load(page([("S2R R0, SR_TID.X", 132, 1, 1), ("ISETP.NE.AND P0, PT, R0, RZ, PT", 3072, 2, 0),
                   ("ISETP.NE.AND P1, PT, R0, 0x2, PT", 3072, 1, 1), ("@!P1 BRA 0x20", 3072, 0, 0),
                   ("@P0 BRA 0x10", 3072, 0, 0), ("FMUL R1, R2, R3", 3072, 5, 3), ("EXIT", 0, 0, 0)]))
    (ex, pcs, samples, no_inst), classes = summary(b)
    assert (ex, pcs, samples, no_inst) == (132 + 5 * 3072, 6, 9, 5), (ex, pcs, samples, no_inst)
    assert classes == {"<200": [1, 132.0], ">=2500": [5, 5 * 3072.0]}, classes
    delta = opcodes(b, 2000)
    delta.subtract(opcodes(a, 2000))
    assert +delta == collections.Counter({"ISETP": 3072, "BRA": 3072}), delta
    assert opcode("@!P1 BRA 0x20") == "BRA" and opcode("LDG.E.128 R4, desc[UR4][R2.64]") == "LDG"
    text = io.StringIO()
    report([a, b], ["a", "b"], 2000, text)
    assert "ISETP" in text.getvalue() and "FMUL" not in text.getvalue().split("opcodes")[1], text.getvalue()
    print("sass_counts self-test passed")


def main(args):
    if args == ["--self-test"]:
        self_test()
        return 0
    hot = 2000
    if "--hot" in args:
        i = args.index("--hot")
        hot = int(args[i + 1])
        args = args[:i] + args[i + 2:]
    if not 1 <= len(args) <= 2:
        print(__doc__, file=sys.stderr)
        return 2
    pages, reasons = [], []
    for path in args:
        reasons.append({})
        with open(path, newline="") as f:
            pages.append(load(f, reasons[-1]))
    report(pages, args, hot, reasons=reasons)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
