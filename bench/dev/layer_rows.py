#!/usr/bin/env python3
"""Grouped GEMM rows shaped as the MoE layer's at 4096 tokens: each of the
layer's T x k rows routed to a uniformly random local expert (so ~1024 rows
an expert on Mixtral and DeepSeek-V3 EP8, 256 on the Qwen3 models), bf16,
model-like data, the gate_up (store epilogue) and down products.
bench/compare_torch.py's prefill rows have the layer's N and K but not its
rows per expert (DeepSeek-V3's there are 128 an expert); these are the
calls `ggemm_moe_ffn` makes at prefill, where the tile walk's bands and
partial row blocks show.

    GGEMM_LIBRARY=build/libggemm.so PYTHONPATH=python python3 bench/dev/layer_rows.py \\
        [--rows REGEX] [--json out.json] [--once]

Timed as bench/compare_torch.py times (cold: one call after an L2 flush,
median of 20; sustained: a CUDA graph of 20 calls, median of 10 replays;
each after 0.5 s of an idle GPU; no steady mode),
beside torch._grouped_mm, after checking ggemm's output against it. With
--once each row is called once, untimed, with the bytes an ideal call
moves printed beside it: run it under
`ncu --clock-control none -k regex:ggemm --metrics dram__bytes_read.sum,dram__bytes_write.sum`
for the DRAM bytes each call moves.
"""
import argparse
import json
import re
import sys
import zlib

import torch

sys.path.insert(0, "bench")
import compare_torch as ct  # noqa: E402  (the same problem, check and timers)

# (name, local experts, rows = T x k at 4096 tokens, N, K)
ROWS = [
    ("qwen3_30b_a3b_gate_up_layer", 128, 32768, 1536, 2048),
    ("qwen3_30b_a3b_down_layer", 128, 32768, 2048, 768),
    ("qwen3_235b_a22b_gate_up_layer", 128, 32768, 3072, 4096),
    ("qwen3_235b_a22b_down_layer", 128, 32768, 4096, 1536),
    ("mixtral_gate_up_layer", 8, 8192, 28672, 4096),
    ("mixtral_down_layer", 8, 8192, 4096, 14336),
    ("deepseek_v3_ep8_gate_up_layer", 32, 32768, 4096, 7168),
    ("deepseek_v3_ep8_down_layer", 32, 32768, 7168, 2048),
]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", default=".", help="regex over the row names")
    ap.add_argument("--json", help="write every measurement here")
    ap.add_argument("--once", action="store_true", help="one untimed call a row (for ncu)")
    args = ap.parse_args()
    flush = None if args.once else ct.L2Flush()
    results = []
    for name, experts, m, n, k in ROWS:
        if not re.search(args.rows, name):
            continue
        seed = zlib.crc32(name.encode())  # the same routing and data in every run
        counts = ct.rows_per_expert(experts, m, "random", torch.Generator().manual_seed(seed))
        p = ct.Problem(experts, n, k, counts, "model", torch.Generator(device=ct.DEV).manual_seed(seed))
        read = (p.routed_experts * n * k + m * k) * 2  # each weight and row read once
        write = m * n * 2
        if args.once:
            torch.cuda.synchronize()
            p.ggemm()
            torch.cuda.synchronize()
            print(f"{name}: one call; ideal DRAM read {read * 1e-9:.3f} GB, write {write * 1e-9:.3f} GB", flush=True)
        else:
            p.check(name)
            row = {"row": name, "data": "model", "experts": experts, "m": m, "n": n, "k": k,
                   "ideal_read_bytes": read, "ideal_write_bytes": write}
            for mode, timer in (("cold", lambda f: ct.cold_us(f, flush)), ("sustained", ct.sustained_us)):
                row[f"ggemm_{mode}_us"] = timer(p.ggemm)
                row[f"torch_{mode}_us"] = timer(p.torch)
            results.append(row)
            print(f"  {name:32s} cold {row['ggemm_cold_us']:9.1f} / {row['torch_cold_us']:9.1f} us   "
                  f"sustained {row['ggemm_sustained_us']:9.1f} / {row['torch_sustained_us']:9.1f} us", flush=True)
        del p
        torch.cuda.empty_cache()
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "rows": results}, f, indent=1)


if __name__ == "__main__":
    main()
