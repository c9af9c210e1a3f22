#!/usr/bin/env python3
"""A Mixtral-style Mixture-of-Experts feed-forward on ggemm: the whole layer in one call (ggemm.moe_ffn).

    GGEMM_LIBRARY=build/libggemm.so PYTHONPATH=python python3 examples/python/moe_ffn.py

The layer (Mixtral 8x7B shapes by default: hidden 4096, ffn 14336, 8 experts,
top-2), for T tokens x [T, H] in bf16:

  router    logits = x @ Wr^T; softmax; the top-k experts of each token, their
            probabilities renormalised to sum to 1 (the routing weights)   PyTorch
  the layer out = ggemm.moe_ffn(x, W13, W2, ids, weights): one call that     ggemm
            sorts the (token, expert) pairs by expert, runs gate_up with
            W13 [E, 2F, H] on the gathered tokens and SwiGLU fused, down with
            W2 [E, H, F] and the routing weight fused, and sums each token's k rows

Routing stays on the device: nothing on the ggemm path synchronises with the
host, so the call can be captured in a CUDA graph.

The output is checked against a plain PyTorch version (a loop over experts)
and timed beside the same layer built from torch._grouped_mm when PyTorch has
it (sort, gather, two grouped GEMMs, SwiGLU, weights, un-permute, sum).
Exit status: 0 when the check passes, and when there is no GPU or no PyTorch
(it says so); 1 when ggemm's output does not match.
"""

from __future__ import annotations

import argparse
import sys
import time

# Finds a checkout's package and build/libggemm.so when ggemm is not installed;
# also holds the GPU checks, timing and comparison both examples use.
from example_common import compare, cuda_ms, open_gpu

import ggemm


# ---- the layer, three ways ----------------------------------------------------


def top_k_routing(torch, logits, top_k: int):
    """Mixtral's router: softmax over all experts in fp32, keep the top k,
    renormalise. Returns fp32 weights [T, k] and int64 expert ids [T, k]."""
    probs = torch.softmax(logits.float(), dim=-1)
    weights, experts = torch.topk(probs, top_k, dim=-1)
    return weights / weights.sum(dim=-1, keepdim=True), experts


class Routing:
    """Where each (token, slot) pair goes, computed on the device without host sync."""

    def __init__(self, torch, logits, top_k: int, num_experts: int) -> None:
        t = logits.shape[0]
        self.weights, self.experts = top_k_routing(torch, logits, top_k)
        flat = self.experts.reshape(-1)  # pair p = token p // k, slot p % k
        self.order = torch.argsort(flat, stable=True)  # pairs sorted by expert
        self.token_of_row = self.order // top_k  # token of each sorted row
        self.weight_of_row = self.weights.reshape(-1)[self.order].contiguous()  # fp32 [T*k]
        counts = torch.zeros(num_experts, dtype=torch.int32, device=logits.device)
        counts.index_add_(0, flat, torch.ones_like(flat, dtype=torch.int32))  # bincount would sync
        self.counts = counts
        self.ends = torch.cumsum(counts, 0, dtype=torch.int32)  # torch._grouped_mm's offs: group ends
        self.offsets = torch.cat([self.ends.new_zeros(1), self.ends])  # ggemm: [E + 1] prefix sums
        self.expert_ids = torch.arange(num_experts, dtype=torch.int32, device=logits.device)
        # ggemm's device-read counts: [max rows in a group, groups walked].
        self.usage_stats = torch.cat([counts.max().view(1), counts.new_full((1,), num_experts)])
        self.rows = t * top_k
        self.max_rows = t  # a token picks an expert at most once: no group exceeds T rows
        self.top_k = top_k

    def unpermute(self, torch, y_sorted):
        """[T*k, H] rows in expert order -> [T, H]: each token's k rows summed (in fp32)."""
        y_pairs = torch.empty_like(y_sorted)
        y_pairs[self.order] = y_sorted
        t = self.rows // self.top_k
        return y_pairs.view(t, self.top_k, -1).float().sum(dim=1)


def moe_ggemm(torch, x, w_router, w13, w2, top_k, handle, routing=None):
    """The MoE layer on ggemm: the router in PyTorch, the rest one ggemm.moe_ffn call;
    returns out [T, H] bf16. ggemm wants int32 ids."""
    if routing is not None:
        weights, experts = routing.weights, routing.experts
    else:
        weights, experts = top_k_routing(torch, x @ w_router.T, top_k)
    return ggemm.moe_ffn(x, w13, w2, experts.to(torch.int32), weights, handle=handle)


def moe_grouped_mm(torch, x, w_router, w13, w2, top_k, routing=None):
    """The same pipeline on torch._grouped_mm (b as [E, K, N]: the weights transposed, a view)."""
    e, two_f, _ = w13.shape
    f = two_f // 2
    r = routing or Routing(torch, x @ w_router.T, top_k, e)
    x_sorted = x[r.token_of_row]
    h = torch._grouped_mm(x_sorted, w13.transpose(-2, -1), offs=r.ends)
    act = torch.nn.functional.silu(h[:, :f]) * h[:, f:]
    y = torch._grouped_mm(act, w2.transpose(-2, -1), offs=r.ends)
    y = y.float() * r.weight_of_row[:, None]
    return r.unpermute(torch, y).to(x.dtype), r


def moe_reference(torch, x, w_router, w13, w2, top_k, routing=None):
    """Plain PyTorch: one matmul pair per expert, the routing weight applied in fp32."""
    e, two_f, _ = w13.shape
    f = two_f // 2
    r = routing or Routing(torch, x @ w_router.T, top_k, e)
    out = torch.zeros(x.shape[0], x.shape[1], dtype=torch.float32, device=x.device)
    for expert in range(e):
        tokens, slots = torch.where(r.experts == expert)
        if tokens.numel() == 0:
            continue
        h = x[tokens] @ w13[expert].T
        act = torch.nn.functional.silu(h[:, :f]) * h[:, f:]
        y = act @ w2[expert].T
        out.index_add_(0, tokens, y.float() * r.weights[tokens, slots, None])
    return out.to(x.dtype), r


# ---- checking and timing -------------------------------------------------------------


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tokens", type=int, default=4096)
    p.add_argument("--hidden", type=int, default=4096)
    p.add_argument("--ffn", type=int, default=14336)
    p.add_argument("--experts", type=int, default=8)
    p.add_argument("--top-k", type=int, default=2)
    p.add_argument("--iters", type=int, default=20, help="timed iterations (0: check only)")
    p.add_argument("--device", type=int, default=0)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    if args.hidden % 8 or args.ffn % 8:
        p.error("--hidden and --ffn must be multiples of 8 (ggemm's n and k are)")
    if not 1 <= args.top_k <= args.experts:
        p.error("--top-k must be in [1, --experts]")

    opened = open_gpu(args.device, args.seed)
    if isinstance(opened, int):  # no library, PyTorch or usable GPU: the exit status
        return opened
    torch, handle, dev = opened
    t, hdim, f, e, k = args.tokens, args.hidden, args.ffn, args.experts, args.top_k
    bf16 = torch.bfloat16
    x = torch.randn(t, hdim, device=dev, dtype=bf16)
    w_router = torch.randn(e, hdim, device=dev, dtype=bf16) * hdim ** -0.5
    w13 = torch.randn(e, 2 * f, hdim, device=dev, dtype=bf16) * hdim ** -0.5  # [w1 (gate); w3 (up)]
    w2 = torch.randn(e, hdim, f, device=dev, dtype=bf16) * f ** -0.5
    print(f"Mixtral-style MoE FFN on {torch.cuda.get_device_name(dev)}: {t} tokens, hidden {hdim}, ffn {f}, "
          f"{e} experts, top-{k}, bf16 (PyTorch {torch.__version__})")

    ref, routing = moe_reference(torch, x, w_router, w13, w2, k)
    counts = routing.counts.tolist()
    print(f"  rows per expert: {counts} (min {min(counts)}, max {max(counts)}, total {sum(counts)})")

    print("check against the plain PyTorch version (one matmul pair per expert):")
    out = moe_ggemm(torch, x, w_router, w13, w2, k, handle, routing)
    torch.cuda.synchronize()
    ok = compare(torch, "ggemm", out, ref)
    grouped_mm = getattr(torch, "_grouped_mm", None)
    gmm_error = None
    if grouped_mm is not None:
        try:
            out_gmm, _ = moe_grouped_mm(torch, x, w_router, w13, w2, k, routing)
            torch.cuda.synchronize()
            compare(torch, "torch._grouped_mm", out_gmm, ref)
        except Exception as err:  # e.g. a GPU without its fast path
            gmm_error = f"{type(err).__name__}: {err}"
            print(f"  torch._grouped_mm      unavailable here: {gmm_error}")
    else:
        gmm_error = f"PyTorch {torch.__version__} has no torch._grouped_mm"
        print(f"  torch._grouped_mm      {gmm_error}")
    if not ok:
        print("FAILED: ggemm's MoE output does not match PyTorch's", file=sys.stderr)
        return 1

    if args.iters > 0:
        # The two grouped GEMMs alone, on the same inputs, outputs preallocated.
        r = routing
        x_sorted = x[r.token_of_row]
        h = torch.empty(r.rows, 2 * f, dtype=bf16, device=dev)
        act = torch.randn(r.rows, f, dtype=bf16, device=dev)
        y = torch.empty(r.rows, hdim, dtype=bf16, device=dev)

        def gemms_ggemm():
            ggemm.grouped_matmul(x_sorted, w13, h, r.offsets, r.expert_ids, r.usage_stats,
                                 max_rows_per_group=r.max_rows, handle=handle)
            ggemm.grouped_matmul(act, w2, y, r.offsets, r.expert_ids, r.usage_stats, epilogue="row_scale",
                                 row_scale=r.weight_of_row, max_rows_per_group=r.max_rows, handle=handle)

        def gemms_grouped_mm():
            torch._grouped_mm(x_sorted, w13.transpose(-2, -1), offs=r.ends)
            torch._grouped_mm(act, w2.transpose(-2, -1), offs=r.ends)

        flops = 2.0 * r.rows * hdim * 2 * f + 2.0 * r.rows * f * hdim
        rows = [("ggemm", cuda_ms(torch, gemms_ggemm, args.iters),
                 cuda_ms(torch, lambda: moe_ggemm(torch, x, w_router, w13, w2, k, handle), args.iters))]
        if gmm_error is None:
            rows.append(("torch._grouped_mm", cuda_ms(torch, gemms_grouped_mm, args.iters),
                         cuda_ms(torch, lambda: moe_grouped_mm(torch, x, w_router, w13, w2, k), args.iters)))
        t0 = time.perf_counter()
        loops = max(1, min(args.iters, 5))
        for _ in range(loops):
            moe_reference(torch, x, w_router, w13, w2, k)
        torch.cuda.synchronize()
        ref_ms = (time.perf_counter() - t0) * 1e3 / loops

        print(f"time, mean of {args.iters} runs (grouped GEMMs: gate_up + down, {flops / 1e9:.1f} GFLOP):")
        print(f"  {'':<22} {'grouped GEMMs':>28} {'whole layer':>14}")
        for name, gemm_ms, layer_ms in rows:
            print(f"  {name:<22} {gemm_ms:>9.3f} ms {flops / gemm_ms / 1e9:>7.1f} TFLOP/s {layer_ms:>11.3f} ms")
        print(f"  {'per-expert loop':<22} {'':>28} {ref_ms:>11.3f} ms (host-synchronising, wall clock)")
        if gmm_error is None:
            print(f"  grouped GEMMs: ggemm runs at {rows[1][1] / rows[0][1]:.2f}x the speed of torch._grouped_mm")
    handle.close()
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
