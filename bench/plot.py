#!/usr/bin/env python3
"""Plots ggemm_bench's JSON: per shape, the fraction of the roofline floor
reached by ggemm and the two cuBLAS baselines (higher is better).

    python3 bench/plot.py bench.json docs/perf_h200.png
"""
import json
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

IMPLS = [("ggemm", "ggemm", "#1f6f3f"), ("cublas_grouped", "cuBLAS grouped", "#999999"),
         ("cublas_loop_graph", "cuBLAS loop (graph)", "#5a7fb5")]


def short_label(shape):
    for long, short in (("qwen3_30b_a3b", "Qwen3"), ("deepseek_v3_ep8", "DSv3"), ("mixtral", "Mixtral")):
        shape = shape.replace(long, short)
    return shape.replace("_prefill", "\nprefill").replace("_decode", "\ndecode").replace("_", " ")


def main(src, dst):
    data = json.load(open(src))
    frac = defaultdict(dict)
    order = []
    for b in data["benchmarks"]:
        if b.get("aggregate_name") != "median":
            continue
        shape, impl = b["run_name"].split("/")[:2]
        if shape.startswith("lora_") or shape.startswith("harness_"):
            continue  # the MoE rows only; summarize.py tables the LoRA and harness rows
        if shape not in frac:
            order.append(shape)
        frac[shape][impl] = b["frac_floor"]
    fig, ax = plt.subplots(figsize=(12, 4.8))
    width = 0.27
    for i, (key, label, color) in enumerate(IMPLS):
        xs = [j + (i - 1) * width for j in range(len(order))]
        ax.bar(xs, [frac[s].get(key, 0) for s in order], width, label=label, color=color)
    ax.axhline(0.9, color="black", linewidth=0.8, linestyle="--")
    ax.set_xticks(range(len(order)))
    ax.set_xticklabels([short_label(s) for s in order], fontsize=8)
    ax.set_ylabel("fraction of roofline floor")
    ax.set_ylim(0, 1.05)
    ctx = data["context"]
    ax.set_title(f"{ctx.get('device', 'GPU')}: bf16 grouped GEMM, MoE shapes "
                 f"(ceilings {float(ctx.get('dense_bf16_tflops', 0)):.0f} TFLOP/s, "
                 f"{float(ctx.get('copy_gbps', 0)):.0f} GB/s, measured in-binary)", fontsize=9)
    ax.legend(fontsize=8, loc="lower left")
    fig.tight_layout()
    fig.savefig(dst, dpi=110)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
