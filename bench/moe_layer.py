#!/usr/bin/env python3
"""The whole MoE feed-forward layer: ggemm.moe_ffn beside the best torch glue, on the same tensors, in one process.

    GGEMM_LIBRARY=build/libggemm.so PYTHONPATH=python python3 bench/moe_layer.py \\
        [--models REGEX] [--tokens 1,4,16,64,512,4096] [--routing balanced,zipf]
        [--modes sustained,cold,steady] [--quick] [--json out.json]

Models (bf16; hidden, moe ffn, experts, top-k): Qwen3-30B-A3B (2048, 768,
128, 8), Qwen3-235B-A22B (4096, 1536, 128, 8), Mixtral-8x7B (4096, 14336, 8,
2), DeepSeek-V3 EP8 local (7168, 2048, 32 local experts, top-8 over the 32).
Data as a model's: activations randn, weights randn / sqrt(K); routing the
softmax top-k of random router logits (balanced), or of logits plus a Zipf
1.2 prior over a random order of the experts (skewed), renormalised.

Three implementations, on the same tensors:
  layer   ggemm.moe_ffn: routing, gather, gate_up with SwiGLU, down with the
          routing weight, combine (one call)
  torch   the best torch glue, its routing metadata (rows sorted by expert)
          built once outside the timing: x.index_select(0, token_of_row),
          torch._grouped_mm gate_up (offs = int32 group ends, B = W.transpose(-2, -1)),
          silu(h[:, :I]) * h[:, I:], torch._grouped_mm down, rows times their
          routing weight in fp32 then rounded, index_copy_ back to (token,
          slot) order, sum over the k slots
  gemms   ggemm's two grouped GEMMs alone (store epilogue) on rows already
          gathered and sorted, routing built outside: what the layer costs
          beyond its GEMMs is layer / gemms
Three modes (docs/performance.md):
  sustained  a CUDA graph of 20 back-to-back calls, warm L2, after 0.5 s of an
             idle GPU; per call, median over the replays; the SM clock and
             board power read through NVML while the replays run
  cold       the L2 flushed, then one call replayed from a one-call CUDA graph
             (so the host's launch time is not timed), between CUDA events; median;
             after 0.5 s of an idle GPU, as sustained
  steady     the same graph timed after 1.5 s of its own replays: the clock the
             power cap holds under seconds of this implementation alone
             (bench/graph_timing.py)
Before timing, each row checks the layer against the torch layer (max |a - b|
/ max |b|, which must stay under 2e-2, bf16's tolerance in compare_torch.py);
a mismatch stops the run.
"""
from __future__ import annotations

import argparse
import json
import math
import re
import statistics
import sys
import zlib

import torch
from compare_torch import L2Flush  # the grouped GEMM comparison's flush
from graph_timing import REST_S, STEADY_S, GpuMonitor, back_to_back, capture, pick_modes, rest

DEV = "cuda"
CALLS = 20  # calls per sustained graph

# name: (hidden, moe ffn, local experts, top-k)
MODELS = {
    "qwen3_30b_a3b": (2048, 768, 128, 8),
    "qwen3_235b_a22b": (4096, 1536, 128, 8),
    "mixtral_8x7b": (4096, 14336, 8, 2),
    "deepseek_v3_ep8": (7168, 2048, 32, 8),  # the 32 experts of one rank of 8, top-8 among them
}
TOKENS = (1, 4, 16, 64, 512, 4096)
MAX_REL_ERR = 2e-2


# ---- the problem ----------------------------------------------------------------------


def router(tokens: int, experts: int, top_k: int, routing: str, gen: torch.Generator, device=DEV):
    """int32 ids [T, k] and fp32 weights [T, k]: softmax top-k of random logits, renormalised;
    'zipf' adds log of a Zipf 1.2 prior over a random order of the experts."""
    logits = torch.randn(tokens, experts, generator=gen, device="cpu")
    if routing == "zipf":
        rank = torch.empty(experts)
        rank[torch.randperm(experts, generator=gen)] = torch.arange(experts, dtype=torch.float32)
        logits += -1.2 * torch.log1p(rank)
    probs = torch.softmax(logits, dim=-1)
    w, ids = torch.topk(probs, top_k, dim=-1)
    return ids.to(device, torch.int32), (w / w.sum(-1, keepdim=True)).to(device)


class SortedRows:
    """The routing metadata the torch layer and the two-GEMM baseline use,
    built once (with host syncs) outside the timing: the (token, slot) pairs
    with a local expert and a finite weight, sorted by expert (stable)."""

    def __init__(self, ids, weights, local_experts: int, first_expert: int = 0):
        t, k = ids.shape
        flat = ids.reshape(-1).long() - first_expert
        usable = (flat >= 0) & (flat < local_experts) & torch.isfinite(weights.reshape(-1))
        order = torch.argsort(torch.where(usable, flat, local_experts), stable=True)
        rows = int(usable.sum())
        counts = torch.bincount(flat[usable], minlength=local_experts)
        self.tokens, self.top_k, self.rows = t, k, rows
        self.pair_of_row = order[:rows].contiguous()  # t * k + slot of sorted row m
        self.token_of_row = (self.pair_of_row // k).contiguous()
        self.row_weight = weights.reshape(-1)[self.pair_of_row].contiguous()
        self.ends = counts.cumsum(0).to(torch.int32)  # torch._grouped_mm's offs
        self.all_routed = rows == t * k  # then every (token, slot) row is written: no zero fill
        # ggemm's routing of the same groups
        self.a_offsets = torch.cat([self.ends.new_zeros(1), self.ends])
        self.expert_ids = torch.arange(local_experts, dtype=torch.int32, device=ids.device)
        self.max_rows = int(counts.max()) if local_experts else 0
        self.usage = torch.tensor([self.max_rows, local_experts], dtype=torch.int32, device=ids.device)


def torch_layer(x, w_gate_up, w_down, r: SortedRows):
    """The best torch glue around torch._grouped_mm (the module docstring)."""
    i = w_down.shape[2]
    xs = x.index_select(0, r.token_of_row)
    h = torch._grouped_mm(xs, w_gate_up.transpose(-2, -1), offs=r.ends)
    a = torch.nn.functional.silu(h[:, :i]) * h[:, i:]
    y = torch._grouped_mm(a, w_down.transpose(-2, -1), offs=r.ends)
    y = (y.float() * r.row_weight[:, None]).to(x.dtype)
    pairs = (x.new_empty if r.all_routed else x.new_zeros)(r.tokens * r.top_k, x.shape[1])
    pairs.index_copy_(0, r.pair_of_row, y)
    # H spelled out, not -1: with no tokens (a rank that received none) -1 would be ambiguous.
    return pairs.view(r.tokens, r.top_k, x.shape[1]).sum(dim=1)


class Problem:
    def __init__(self, model: str, tokens: int, routing: str):
        import ggemm

        self.ggemm = ggemm
        hidden, inter, experts, top_k = MODELS[model]
        seed = zlib.crc32(f"{model} {tokens} {routing}".encode())
        gen = torch.Generator(device=DEV).manual_seed(seed)
        self.x = torch.randn(tokens, hidden, device=DEV, generator=gen).to(torch.bfloat16)
        self.ids, self.weights = router(tokens, experts, top_k, routing, torch.Generator().manual_seed(seed))
        self.w_gate_up, self.w_down = model_weights(model)
        self.r = SortedRows(self.ids, self.weights, experts)
        self.out = torch.empty_like(self.x)
        # The two-GEMM baseline's rows: gathered and sorted already; its activation a stand-in.
        rows = self.r.rows
        self.xs = self.x.index_select(0, self.r.token_of_row)
        self.h = torch.empty(rows, 2 * inter, device=DEV, dtype=torch.bfloat16)
        self.act = torch.randn(rows, inter, device=DEV, generator=gen).to(torch.bfloat16)
        self.y = torch.empty(rows, hidden, device=DEV, dtype=torch.bfloat16)
        self.experts_used = int((torch.diff(self.r.a_offsets) > 0).sum())

    def layer(self):
        return self.ggemm.moe_ffn(self.x, self.w_gate_up, self.w_down, self.ids, self.weights, self.out)

    def torch(self):
        return torch_layer(self.x, self.w_gate_up, self.w_down, self.r)

    def gemms(self):
        r, g = self.r, self.ggemm
        g.grouped_matmul(self.xs, self.w_gate_up, self.h, r.a_offsets, r.expert_ids, r.usage,
                         max_rows_per_group=r.max_rows)
        g.grouped_matmul(self.act, self.w_down, self.y, r.a_offsets, r.expert_ids, r.usage,
                         max_rows_per_group=r.max_rows)


_weights = {}


def model_weights(model: str):
    """w_gate_up [E, 2I, H], w_down [E, H, I] bf16, randn / sqrt(K); one model's at a time."""
    if model not in _weights:
        _weights.clear()
        torch.cuda.empty_cache()
        hidden, inter, experts, _ = MODELS[model]
        gen = torch.Generator(device=DEV).manual_seed(zlib.crc32(model.encode()))
        w_gate_up = torch.empty(experts, 2 * inter, hidden, device=DEV, dtype=torch.bfloat16)
        w_down = torch.empty(experts, hidden, inter, device=DEV, dtype=torch.bfloat16)
        for e in range(experts):  # one expert at a time: no fp32 copy of all the weights
            w_gate_up[e] = torch.randn(2 * inter, hidden, device=DEV, generator=gen) / math.sqrt(hidden)
            w_down[e] = torch.randn(hidden, inter, device=DEV, generator=gen) / math.sqrt(inter)
        _weights[model] = (w_gate_up, w_down)
    return _weights[model]


# ---- timing ---------------------------------------------------------------------------


def cold(fn, flush, iters: int):
    """us of one call replayed from a graph after an L2 flush; median of `iters`, after
    REST_S of an idle GPU (no row starts at the clock the previous row's load left)."""
    graph = capture(fn, 1)
    rest()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(iters):
        flush()
        start.record()
        graph.replay()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) * 1e3)
    return statistics.median(times)


def max_rel_err(got, want) -> float:
    scale = want.float().abs().max().item()
    return (got.float() - want.float()).abs().max().item() / max(scale, 1e-30)


# ---- the run ------------------------------------------------------------------------------


IMPLS = ("layer", "torch", "gemms")


MODES = ("sustained", "cold", "steady")
BACK_TO_BACK = ("sustained", "steady")  # the modes with a clock and power reading


def run_row(model, tokens, routing, impls, modes, replays, iters, flush, monitor):
    p = Problem(model, tokens, routing)
    hidden, inter, experts, top_k = MODELS[model]
    row = {"model": model, "tokens": tokens, "routing": routing, "hidden": hidden, "intermediate": inter,
           "experts": experts, "top_k": top_k, "rows": p.r.rows, "experts_used": p.experts_used}
    if "layer" in impls and "torch" in impls:
        got, want = p.layer().clone(), p.torch()
        torch.cuda.synchronize()
        row["max_rel_err"] = err = max_rel_err(got, want)
        if not (err <= MAX_REL_ERR and torch.isfinite(got).all().item()):
            raise SystemExit(f"{model} T={tokens} {routing}: ggemm.moe_ffn differs from the torch layer: "
                             f"max |a - b| / max |b| = {err:.3g} (limit {MAX_REL_ERR})")
    for impl in impls:
        fn = getattr(p, impl)
        for mode in modes:
            if mode == "cold":
                row[f"{impl}_cold_us"] = cold(fn, flush, iters)
                continue
            us, mhz, watts = back_to_back(fn, CALLS, replays, monitor, steady=mode == "steady")
            row[f"{impl}_{mode}_us"], row[f"{impl}_{mode}_sm_mhz"], row[f"{impl}_{mode}_watts"] = us, mhz, watts
    for mode in modes:
        if "layer" in impls and "torch" in impls:
            row[f"speedup_{mode}"] = row[f"torch_{mode}_us"] / row[f"layer_{mode}_us"]
        if "layer" in impls and "gemms" in impls:
            row[f"layer_over_gemms_{mode}"] = row[f"layer_{mode}_us"] / row[f"gemms_{mode}_us"]
    return row


def table(rows, impls, mode) -> str:
    cols = [f"{i} us" for i in impls]
    extra = []
    if "layer" in impls and "torch" in impls:
        extra.append("layer speed-up vs torch")
    if "layer" in impls and "gemms" in impls:
        extra.append("layer / two GEMMs")
    head = ["model", "tokens", "routing", "rows"] + cols + extra + ["SM MHz", "W", "max rel err"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [r["model"], str(r["tokens"]), r["routing"], str(r["rows"])]
        cells += [f"{r[f'{i}_{mode}_us']:.1f}" for i in impls]
        if "layer speed-up vs torch" in extra:
            cells.append(f"{r[f'speedup_{mode}']:.2f}x")
        if "layer / two GEMMs" in extra:
            cells.append(f"{r[f'layer_over_gemms_{mode}']:.2f}")
        first = impls[0]
        cells += ([f"{r[f'{first}_{mode}_sm_mhz']:.0f}", f"{r[f'{first}_{mode}_watts']:.0f}"]
                  if mode in BACK_TO_BACK else ["", ""])
        cells.append(f"{r['max_rel_err']:.1e}" if "max_rel_err" in r else "")
        lines.append("| " + " | ".join(cells) + " |")
    if "layer speed-up vs torch" in extra and rows:
        geo = math.exp(sum(math.log(r[f"speedup_{mode}"]) for r in rows) / len(rows))
        lines.append(f"\ngeometric mean layer speed-up vs torch ({mode}): {geo:.2f}x over {len(rows)} rows")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=".", help=f"regex over {', '.join(MODELS)}")
    ap.add_argument("--tokens", default=",".join(map(str, TOKENS)), help="comma-separated token counts")
    ap.add_argument("--routing", default="balanced", help="balanced, zipf or both (comma-separated)")
    ap.add_argument("--impls", default=",".join(IMPLS), help="which of layer, torch, gemms to run")
    ap.add_argument("--modes", default=",".join(MODES), help=f"which of {', '.join(MODES)} to time")
    ap.add_argument("--quick", action="store_true", help="fewer replays and iterations (a smoke run)")
    ap.add_argument("--json", help="write every measurement here")
    args = ap.parse_args(argv)
    impls = tuple(i for i in IMPLS if i in args.impls.split(","))
    modes = pick_modes(args.modes, MODES)
    models = [m for m in MODELS if re.search(args.models, m)]
    tokens = [int(t) for t in args.tokens.split(",")]
    if not impls or not modes or not models or any(t < 1 for t in tokens):
        ap.error("nothing to run: check --impls, --modes, --models and --tokens (token counts >= 1)")
    if not torch.cuda.is_available():
        print("SKIPPED: no CUDA device")
        return 0
    # Replays and iterations sized so that the default run (4 models x 6 token counts)
    # takes about two minutes on an H200, plus ~2.5 s a row and implementation for the
    # rests and the steady mode.
    replays, iters = (3, 5) if args.quick else (10, 20)
    torch.backends.cuda.matmul.allow_tf32 = False
    import ggemm

    try:
        version = ggemm.version()
    except ggemm.LibraryNotFoundError as e:
        if impls != ("torch",):
            raise SystemExit(f"error: {e}")
        version = None  # the torch layer alone needs no libggemm
    flush, monitor = L2Flush(), GpuMonitor()
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, ggemm {version}; "
          f"{'NVML' if monitor.dev is not None else 'no NVML (clock and power not read)'}", flush=True)
    rows = []
    for model in models:
        for routing in args.routing.split(","):
            for t in tokens:
                row = run_row(model, t, routing, impls, modes, replays, iters, flush, monitor)
                rows.append(row)
                print("  " + "  ".join(f"{k}={v:.1f}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items()
                                       if k.endswith("_us") or k in ("model", "tokens", "routing")), flush=True)
    for mode in modes:
        print(f"\n{mode}: the MoE layer (bf16)\n")
        print(table(rows, impls, mode))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                       "ggemm": version, "calls_per_graph": CALLS, "replays": replays, "cold_iters": iters,
                       "modes": list(modes), "rest_seconds": REST_S, "steady_seconds": STEADY_S,
                       "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
