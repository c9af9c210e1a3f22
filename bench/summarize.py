#!/usr/bin/env python3
"""Prints markdown tables from ggemm_bench's JSON (--benchmark_out=F.json):
per shape, the median time of ggemm and both cuBLAS baselines, ggemm's
fraction of the roofline floor and its speed-up over each baseline, cold
(one call after an L2 flush) and sustained (20 calls back to back in a CUDA
graph, with the SM clock and power over the row); then the LoRA, host-time
and harness rows.

    python3 bench/summarize.py bench.json
"""
import json
import sys
from collections import defaultdict


def main(path):
    data = json.load(open(path))
    ctx = data["context"]
    rows = defaultdict(dict)
    order = []
    for b in data["benchmarks"]:
        if b.get("aggregate_name") != "median":
            continue
        parts = b["run_name"].split("/")
        shape, impl = parts[:2]
        if len(parts) > 2 and parts[2] == "sustained":
            impl += "/sustained"
        if shape not in rows:
            order.append(shape)
        rows[shape][impl] = b
    # The dense rate measured again after every row (runs from v0.23 on):
    # context for the floor, which uses the rate measured at the start.
    end = [b for b in data["benchmarks"] if b.get("run_name", b["name"]).startswith("ceiling_dense")]
    at_end = f" (measured again at the run's end: {end[0]['tflops']:.1f})" if end else ""
    print(f"ceilings (same binary): dense bf16 {ctx.get('dense_bf16_tflops')} TFLOP/s{at_end}, "
          f"copy {ctx.get('copy_gbps')} GB/s; device {ctx.get('device')}\n")
    moe = [shape for shape in order if not shape.startswith(("lora_", "harness_", "host_call", "ceiling_"))]
    for mode, suffix in (("cold", ""), ("sustained", "/sustained")):
        shapes = [shape for shape in moe if rows[shape].get("ggemm" + suffix)]
        if not shapes:
            continue
        extra = " | SM MHz | W" if mode == "sustained" else ""
        print(f"\n{mode}:\n")
        print("| shape | ggemm us | TFLOP/s | GB/s | of floor | cuBLAS grouped us | cuBLAS loop (graph) us | "
              f"vs grouped | vs loop{extra} |")
        print("|---|---|---|---|---|---|---|---|---|" + ("---|---|" if extra else ""))
        fracs = []
        for shape in shapes:
            r = rows[shape]
            g = r["ggemm" + suffix]
            t = g["us_median"]
            fracs.append(g["frac_floor"])

            def other(name):
                o = r.get(name + suffix)
                return (f"{o['us_median']:.1f}", f"{o['us_median'] / t:.2f}x") if o else ("-", "-")

            cg, vg = other("cublas_grouped")
            cl, vl = other("cublas_loop_graph")
            power = (f" | {g.get('sm_mhz', 0):.0f} | {g.get('watts', 0):.0f}" if extra else "")
            print(f"| {shape} | {t:.1f} | {g['TFLOP/s']:.0f} | {g['GB/s']:.0f} | {g['frac_floor']:.2f} | "
                  f"{cg} | {cl} | {vg} | {vl}{power} |")
        geo = 1.0
        for f in fracs:
            geo *= f
        geo **= 1.0 / len(fracs)
        print(f"\ngeometric mean of ggemm's fraction of the floor ({mode}): {geo:.3f}")

    host = [shape for shape in order if shape == "host_call"]
    if host:
        print("\n| host time of one C call (host clock) | us |")
        print("|---|---|")
        for impl, b in rows["host_call"].items():
            print(f"| {impl} | {b['real_time']:.2f} |")

    lora = [shape for shape in order if shape.startswith("lora_")]
    if lora:
        # LoRA Q/K/V (bench_lora.cpp): memory-bound, so the fraction of copy
        # bandwidth is the figure of merit.
        # ggemm: one direct call (host cost included); ggemm graph: the same
        # call replayed from a CUDA graph, like the cuBLAS loop.
        print("\n| LoRA shape | ggemm us | ggemm graph us | GB/s (graph) | of copy bw (graph) | "
              "cuBLAS loop (graph) us | loop of copy bw | vs loop (graph vs graph) |")
        print("|---|---|---|---|---|---|---|---|")
        for shape in [s for s in lora if "_probe_" not in s]:
            r = rows[shape]
            g, gg, o = r.get("ggemm"), r.get("ggemm_graph"), r.get("cublas_loop_graph")
            best = gg or g
            gt = f"{g['us_median']:.1f}" if g else "-"
            ggt = f"{gg['us_median']:.1f} | {gg['GB/s']:.0f} | {gg['frac_copy']:.2f}" if gg else "- | - | -"
            ot = f"{o['us_median']:.1f} | {o['frac_copy']:.2f}" if o else "- | -"
            vs = f"{o['us_median'] / best['us_median']:.2f}x" if best and o else "-"
            print(f"| {shape} | {gt} | {ggt} | {ot} | {vs} |")
        # The same calls in a busy stream (timing.h, in_stream_ms): 20 calls
        # back to back, each after a flush, less the flushes alone; only in
        # runs that recorded it (v0.14 on).
        busy = [s for s in lora if "_probe_" not in s and "us_in_stream" in rows[s].get("ggemm_graph", {})]
        if busy:
            print("\n| LoRA shape, in a busy stream | ggemm graph us | of copy bw | "
                  "cuBLAS loop (graph) us | loop of copy bw | vs loop |")
            print("|---|---|---|---|---|---|")
            for shape in busy:
                gg, o = rows[shape]["ggemm_graph"], rows[shape].get("cublas_loop_graph")
                ot = (f"{o['us_in_stream']:.1f} | {o['frac_copy_in_stream']:.2f} | "
                      f"{o['us_in_stream'] / gg['us_in_stream']:.2f}x" if o and "us_in_stream" in o else "- | - | -")
                print(f"| {shape} | {gg['us_in_stream']:.1f} | {gg['frac_copy_in_stream']:.2f} | {ot} |")
        # Back to back (bench_lora.cpp's sustained rows): 20 calls in one
        # CUDA graph, warm L2, per call, with the SM clock and power.
        sustained = [s for s in lora if "_probe_" not in s and "ggemm/sustained" in rows[s]]
        if sustained:
            print("\n| LoRA shape, sustained | ggemm us | of copy bw | cuBLAS loop us | loop of copy bw | "
                  "vs loop | SM MHz | W |")
            print("|---|---|---|---|---|---|---|---|")
            for shape in sustained:
                g, o = rows[shape]["ggemm/sustained"], rows[shape].get("cublas_loop_graph/sustained")
                ot = (f"{o['us_median']:.1f} | {o['frac_copy']:.2f} | {o['us_median'] / g['us_median']:.2f}x"
                      if o else "- | - | -")
                print(f"| {shape} | {g['us_median']:.1f} | {g['frac_copy']:.2f} | {ot} | "
                      f"{g.get('sm_mhz', 0):.0f} | {g.get('watts', 0):.0f} |")
        # Probe rows (bench_lora.cpp, --benchmark_filter=probe): parts of a
        # call taken away, beside cudaMemsetAsync of the same outputs.
        probes = [shape for shape in lora if "_probe_" in shape]
        if probes:
            print("\n| probe | ggemm graph us | in a busy stream us | cudaMemsetAsync of the outputs us | "
                  "memset in a busy stream us |")
            print("|---|---|---|---|---|")

            def cells(b):
                if not b:
                    return "- | -"
                busy_t = f"{b['us_in_stream']:.1f}" if "us_in_stream" in b else "-"
                return f"{b['us_median']:.1f} | {busy_t}"
            for shape in probes:
                r = rows[shape]
                print(f"| {shape} | {cells(r.get('ggemm_graph'))} | {cells(r.get('memset_outputs'))} |")

    # The harness's own floor (bench_harness.cpp): kernels that do (next to)
    # nothing, and the streaming rows (bytes moved with nothing else to do),
    # timed like the LoRA rows.
    harness = [shape for shape in order if shape.startswith("harness_")]
    if harness:
        print("\n| harness row (graph; L2 flushed unless warm_l2) | us | in a busy stream us | GB/s |")
        print("|---|---|---|---|")
        for shape in harness:
            g = rows[shape].get("graph")
            if not g:
                print(f"| {shape} | - | - | - |")
                continue
            busy_t = f"{g['us_in_stream']:.2f}" if "us_in_stream" in g else "-"
            gbps = f"{g['GBps']:.0f}" if "GBps" in g else "-"
            print(f"| {shape} | {g['us_median']:.2f} | {busy_t} | {gbps} |")

if __name__ == "__main__":
    main(sys.argv[1])
