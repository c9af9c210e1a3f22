#!/usr/bin/env python3
"""ggemm's grouped GEMM beside torch._grouped_mm, on the same tensors, in one process.

    GGEMM_LIBRARY=build/libggemm.so PYTHONPATH=python python3 bench/compare_torch.py \\
        [--data uniform,model] [--rows REGEX] [--modes cold,sustained,steady] [--json out.json]

Every MoE row of the C++ benchmark (bench/gpu_buffers.cpp's shapes) and
single- and few-token decode rows (1, 4 and 16 tokens of Qwen3-30B-A3B,
Qwen3-235B-A22B and Mixtral-8x7B, top-k routing, gate_up and down), bf16,
weights [E, N, K] (torch gets them as w.transpose(-2, -1), no copy), each
timed three ways (--modes picks):
  cold       one call after an L2 flush, between CUDA events; median of 20
             (after 0.5 s of an idle GPU, as sustained)
  sustained  20 calls back to back in one CUDA graph, warm L2, after 0.5 s
             of an idle GPU; per call, median of 10 replays (a burst, as one
             forward pass calls them)
  steady     the same graph timed after 1.5 s of its own replays: the clock
             the power cap holds under seconds of this call alone
             (bench/graph_timing.py)
on uniform data (in (-1, 1)) and/or model-like data (normal activations,
weights normal / sqrt(K)). Before timing, each row's ggemm output is checked
against torch's. Prints one table per mode and data, with ggemm's speed-up
(torch time / ggemm time) per row and their geometric mean; the decode rows
also show the weight-read floor (the routed experts' weights at the copy
bandwidth measured here).

With --dense, each row also times a dense cuBLAS call beside it:
  prefill rows (M >= 128 x experts): one dense GEMM of the same FLOPs and
    data (torch.mm of the M rows by one expert's [N, K]
    weights, as x @ w.T): the best-tuned kernel on the chip with no group
    edges and one expert's weights, an easier problem than the grouped
    one; torch._grouped_mm's time over it is about the most any grouped
    kernel can gain over torch._grouped_mm there.
  decode rows (at most 16 rows an expert): one batched GEMM (torch.bmm)
    of the routed experts' weights, copied into one [E_used, N, K] tensor,
    by [E_used, K, r] activations (r = the most rows an expert has): the
    same weight bytes read by cuBLAS's batched kernel with no empty groups
    to walk, a practical floor beside the copy-bandwidth one.
"""
import argparse
import json
import math
import re
import statistics
import zlib

import torch

import ggemm
from graph_timing import REST_S, STEADY_S, GpuMonitor, back_to_back, capture, pick_modes, rest  # noqa: F401 (capture: dev scripts' import)

DEV = "cuda"
MODES = ("cold", "sustained", "steady")

# (name, experts, routed rows, N, K, routing) as bench/gpu_buffers.cpp's kMoeShapes
PREFILL = [
    ("mixtral_gate_up_prefill", 8, 8192, 28672, 4096, "balanced"),
    ("mixtral_down_prefill", 8, 8192, 4096, 14336, "balanced"),
    ("deepseek_v3_ep8_gate_up_prefill", 32, 4096, 4096, 7168, "balanced"),
    ("deepseek_v3_ep8_down_prefill", 32, 4096, 7168, 2048, "balanced"),
    ("qwen3_30b_a3b_gate_up_prefill", 128, 32768, 1536, 2048, "balanced"),
    ("qwen3_30b_a3b_gate_up_prefill_zipf", 128, 32768, 1536, 2048, "zipf"),
    ("qwen3_30b_a3b_down_prefill", 128, 32768, 2048, 768, "balanced"),
    # The same prefill rows with each row routed to a uniformly random
    # expert: ragged groups, as a model's routing makes them.
    ("mixtral_gate_up_prefill_random", 8, 8192, 28672, 4096, "random"),
    ("mixtral_down_prefill_random", 8, 8192, 4096, 14336, "random"),
    ("deepseek_v3_ep8_gate_up_prefill_random", 32, 4096, 4096, 7168, "random"),
    ("deepseek_v3_ep8_down_prefill_random", 32, 4096, 7168, 2048, "random"),
    ("qwen3_30b_a3b_gate_up_prefill_random", 128, 32768, 1536, 2048, "random"),
    ("qwen3_30b_a3b_down_prefill_random", 128, 32768, 2048, 768, "random"),
    ("qwen3_30b_a3b_gate_up_decode", 128, 512, 1536, 2048, "balanced"),
    ("deepseek_v3_ep8_gate_up_decode", 32, 512, 4096, 7168, "balanced"),
    ("mixtral_gate_up_decode", 8, 128, 28672, 4096, "balanced"),
]
# (model, experts, hidden, moe ffn, top-k)
MODELS = [
    ("qwen3_30b_a3b", 128, 2048, 768, 8),
    ("qwen3_235b_a22b", 128, 4096, 1536, 8),
    ("mixtral", 8, 4096, 14336, 2),
]
DECODE_TOKENS = (1, 4, 16)


def rows_per_expert(experts, rows, routing, gen):
    if routing == "balanced":
        base = [rows // experts] * experts
        for e in range(rows - sum(base)):
            base[e] += 1
        return base
    if routing == "random":
        picks = torch.randint(0, experts, (rows,), generator=gen)
        return torch.bincount(picks, minlength=experts).tolist()
    # Zipf 1.2 over a random order of the experts, largest remainder rounding.
    weights = [1.0 / (r + 1) ** 1.2 for r in range(experts)]
    order = torch.randperm(experts, generator=gen).tolist()
    share = [0.0] * experts
    for rank, e in enumerate(order):
        share[e] = weights[rank] / sum(weights) * rows
    counts = [int(s) for s in share]
    for e in sorted(range(experts), key=lambda e: share[e] - counts[e], reverse=True)[: rows - sum(counts)]:
        counts[e] += 1
    return counts


def top_k_counts(experts, tokens, k, gen):
    """Rows per expert of `tokens` tokens each routed to k distinct random experts."""
    counts = [0] * experts
    for _ in range(tokens):
        for e in torch.randperm(experts, generator=gen)[:k].tolist():
            counts[e] += 1
    return counts


def rows_to_run():
    for name, e, m, n, k, routing in PREFILL:
        yield name, e, n, k, ("fixed", m, routing)
    for model, e, hidden, ffn, topk in MODELS:
        for t in DECODE_TOKENS:
            yield f"{model}_gate_up_{t}tok", e, 2 * ffn, hidden, ("topk", t, topk)
            yield f"{model}_down_{t}tok", e, hidden, ffn, ("topk", t, topk)


def random_bf16(shape, data, scale, gen):
    """Drawn on the GPU: uniform in (-1, 1), or normal times `scale` (model-like)."""
    if data == "model":
        t = torch.randn(shape, device=DEV, dtype=torch.bfloat16, generator=gen)
        return t.mul_(scale) if scale != 1.0 else t
    return torch.rand(shape, device=DEV, dtype=torch.bfloat16, generator=gen).mul_(2).sub_(1)


class Problem:
    def __init__(self, experts, n, k, counts, data, gen):
        m = sum(counts)
        self.m, self.n, self.k, self.experts = m, n, k, experts
        self.x = random_bf16((m, k), data, 1.0, gen)
        self.w = random_bf16((experts, n, k), data, 1.0 / math.sqrt(k), gen)
        ends = torch.tensor(counts, dtype=torch.int64).cumsum(0)
        self.offs = ends.to(DEV, torch.int32)  # torch: group ends
        self.a_offsets = torch.cat([torch.zeros(1, dtype=torch.int64), ends]).to(DEV, torch.int32)
        self.ids = torch.arange(experts, dtype=torch.int32, device=DEV)
        self.max_rows = max(counts)
        self.usage = torch.tensor([self.max_rows, experts], dtype=torch.int32, device=DEV)
        self.out = torch.empty(m, n, dtype=torch.bfloat16, device=DEV)
        self.routed_experts = sum(1 for c in counts if c)
        self.flops = 2.0 * m * n * k
        self.counts = counts

    def ggemm(self):
        ggemm.grouped_matmul(self.x, self.w, self.out, self.a_offsets, self.ids, self.usage,
                             max_rows_per_group=self.max_rows)
        return self.out

    def torch(self):
        return torch._grouped_mm(self.x, self.w.transpose(-2, -1), offs=self.offs)

    def check(self, what):
        """Exits unless ggemm's output matches torch._grouped_mm's on this problem."""
        got, want = self.ggemm().float(), self.torch().float()
        err = (got - want).abs().max().item()
        scale = want.abs().max().item() + 1e-6
        if not err <= 2e-2 * scale + 1e-2:
            raise SystemExit(f"{what}: ggemm differs from torch._grouped_mm by {err} (max |torch| {scale})")

    def dense_call(self):
        """The dense cuBLAS call beside this row (the module docstring's --dense)."""
        if self.m >= 128 * self.experts:  # prefill: the same FLOPs as one dense GEMM, expert 0's weights
            return lambda: torch.mm(self.x, self.w[0].transpose(0, 1), out=self.out)
        if max(self.counts) > 16:
            return None
        used = [e for e, c in enumerate(self.counts) if c]
        w_used = self.w[used].contiguous()  # the routed experts' weights, [E_used, N, K]
        x_used = torch.ones(len(used), self.k, max(self.counts), device=DEV, dtype=torch.bfloat16)
        out = torch.empty(len(used), self.n, max(self.counts), device=DEV, dtype=torch.bfloat16)
        return lambda: torch.bmm(w_used, x_used, out=out)


class L2Flush:
    def __init__(self):
        l2 = torch.cuda.get_device_properties(0).L2_cache_size
        self.buf = torch.empty(2 * max(l2, 1 << 20), dtype=torch.uint8, device=DEV)
        self.value = 0

    def __call__(self):
        self.value ^= 0x5A
        self.buf.fill_(self.value)


def cold_us(fn, flush, iters=20):
    """us of one call after an L2 flush, median of `iters`, after REST_S of an idle GPU
    (so that no row starts at the clock the previous row's load left)."""
    rest()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(iters):
        flush()
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) * 1e3)
    return statistics.median(times)


def sustained_us(fn, calls=20, replays=10):
    """us per call of fn back to back (sustained mode); the dev scripts' timer."""
    return back_to_back(fn, calls, replays)[0]


def copy_bandwidth():
    """Bytes read + written per second by a 1 GiB device-to-device copy."""
    src = torch.empty(1 << 30, dtype=torch.uint8, device=DEV)
    dst = torch.empty_like(src)
    dst.copy_(src)
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(5):
        start.record()
        dst.copy_(src)
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) * 1e-3)
    return 2 * src.numel() / statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default="uniform,model", help="uniform, model or both (comma-separated)")
    ap.add_argument("--rows", default=".", help="regex over the row names")
    ap.add_argument("--modes", default=",".join(MODES), help=f"which of {', '.join(MODES)} to time")
    ap.add_argument("--json", help="write every measurement here")
    ap.add_argument("--dense", action="store_true",
                    help="also time a dense cuBLAS call beside each row (see above)")
    args = ap.parse_args()
    modes = pick_modes(args.modes, MODES)
    if not modes:
        ap.error(f"--modes {args.modes}: a comma-separated list of {', '.join(MODES)}")
    torch.backends.cuda.matmul.allow_tf32 = False
    flush, monitor = L2Flush(), GpuMonitor()
    bandwidth = copy_bandwidth()
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, ggemm {ggemm.version()}, "
          f"copy bandwidth {bandwidth * 1e-9:.0f} GB/s (read + write)")
    results = []
    for data in args.data.split(","):
        for name, experts, n, k, spec in rows_to_run():
            if not re.search(args.rows, name):
                continue
            seed = zlib.crc32(name.encode())  # the same routing and data in every run
            routing_gen = torch.Generator().manual_seed(seed)
            if spec[0] == "fixed":
                counts = rows_per_expert(experts, spec[1], spec[2], routing_gen)
            else:
                counts = top_k_counts(experts, spec[1], spec[2], routing_gen)
            p = Problem(experts, n, k, counts, data, torch.Generator(device=DEV).manual_seed(seed))
            p.check(f"{name} ({data})")
            row = {"row": name, "data": data, "experts": experts, "m": p.m, "n": n, "k": k,
                   "routed_experts": p.routed_experts}
            dense = p.dense_call() if args.dense else None
            impls = [("ggemm", p.ggemm), ("torch", p.torch)] + ([("dense", dense)] if dense else [])
            for mode in modes:
                for impl, fn in impls:
                    if mode == "cold":
                        row[f"{impl}_cold_us"] = cold_us(fn, flush)
                        continue
                    us, mhz, _ = back_to_back(fn, 20, 10, monitor, steady=mode == "steady")
                    row[f"{impl}_{mode}_us"], row[f"{impl}_{mode}_sm_mhz"] = us, mhz
            del dense, impls
            # The weights the routed experts must read, at the copy bandwidth's read half.
            row["weight_floor_us"] = p.routed_experts * n * k * 2 / bandwidth * 1e6
            results.append(row)
            print(f"  {data:7s} {name:40s} " + "   ".join(
                f"{mode} {row[f'ggemm_{mode}_us']:9.1f} / {row[f'torch_{mode}_us']:9.1f} us"
                + (f" (dense {row[f'dense_{mode}_us']:9.1f})" if f"dense_{mode}_us" in row else "")
                for mode in modes), flush=True)

    for data in args.data.split(","):
        for mode in modes:
            rs = [r for r in results if r["data"] == data]
            if not rs:
                continue
            print(f"\n{mode}, {data} data: ggemm beside torch._grouped_mm\n")
            print("| row | experts used | M | N | K | ggemm us | torch us | ggemm speed-up | weight-read floor us "
                  "| dense cuBLAS us | torch / dense | SM MHz (ggemm / torch) |")
            print("|---|---|---|---|---|---|---|---|---|---|---|---|")
            for r in rs:
                g, t = r[f"ggemm_{mode}_us"], r[f"torch_{mode}_us"]
                d = r.get(f"dense_{mode}_us")
                dense = f"{d:.1f} | {t / d:.2f}x" if d else "- | -"
                clock = (f"{r[f'ggemm_{mode}_sm_mhz']:.0f} / {r[f'torch_{mode}_sm_mhz']:.0f}"
                         if f"ggemm_{mode}_sm_mhz" in r else "-")
                print(f"| {r['row']} | {r['routed_experts']} | {r['m']} | {r['n']} | {r['k']} | {g:.1f} | {t:.1f} | "
                      f"{t / g:.2f}x | {r['weight_floor_us']:.1f} | {dense} | {clock} |")
            geo = math.exp(sum(math.log(r[f"torch_{mode}_us"] / r[f"ggemm_{mode}_us"]) for r in rs) / len(rs))
            print(f"\ngeometric mean speed-up ({mode}, {data}): {geo:.2f}x over {len(rs)} rows")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "copy_bytes_per_s": bandwidth, "modes": list(modes),
                       "rest_seconds": REST_S, "steady_seconds": STEADY_S, "rows": results}, f, indent=1)


if __name__ == "__main__":
    main()
