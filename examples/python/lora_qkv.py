#!/usr/bin/env python3
"""Multi-adapter LoRA on the Q/K/V projections, as an inference engine runs it, with ggemm.

    GGEMM_LIBRARY=build/libggemm.so PYTHONPATH=python python3 examples/python/lora_qkv.py

One attention layer's Q/K/V projections for a batch of requests that each use
their own LoRA adapter (Llama-3-8B-like shapes by default: hidden 4096, q 4096,
k and v 1024 each (grouped-query attention), rank 16, 8 adapters loaded), in bf16:

  batch     requests of random lengths, each with an adapter id, or -1 (no
            adapter: the base model); the scheduler orders the batch by
            adapter, so the tokens x [T, H] are sorted by adapter id and each
            adapter's tokens form one group (offsets, adapter ids and the
            largest group are built on the host with the batch, copied once)
  base      q_out = x @ Wq^T [T, q], kv_out = [x @ Wk^T; x @ Wv^T] [2T, kv]
            (K rows then V rows), by PyTorch
  shrink    P[s] = x @ A[a]_s^T for s = q, k, v: one ggemm launch, P [3, T, R]
  expand    q_out += (alpha / rank) * P[0] @ B[a]_q^T, K and V rows of kv_out
            likewise: one ggemm launch, the LoRA delta added in place into the
            base projections' outputs (accumulate=True), tokens with no
            adapter left exactly as the base model computed them

The result is checked against a plain PyTorch computation in fp32, and the two
ggemm launches are timed (CUDA events, mean of --iters runs) beside a
per-adapter PyTorch loop doing the same LoRA update. Exit status: 0 when the
check passes, and when there is no GPU or no PyTorch (it says so); 1 when
ggemm's output does not match.
"""

from __future__ import annotations

import argparse
import random
import sys

# Finds a checkout's package and build/libggemm.so when ggemm is not installed;
# also holds the GPU checks, timing and comparison both examples use.
import example_common
from example_common import cuda_ms, open_gpu

import ggemm


# ---- the batch ----------------------------------------------------------------


class Batch:
    """A scheduled batch: requests sorted by adapter id, one group per adapter present.

    lengths / adapters: per request, in batch order (sorted by adapter, -1 first).
    offsets / adapter_ids / usage_stats: ggemm's device arrays; groups / host_offsets:
    the same on the host, for the PyTorch versions.
    """

    def __init__(self, torch, device, tokens: int, requests: int, adapters: int, no_adapter: float,
                 rng: random.Random) -> None:
        # Request lengths: a random split of `tokens` into `requests` parts of >= 1 token.
        cuts = sorted(rng.sample(range(1, tokens), requests - 1)) if requests > 1 else []
        lengths = [b - a for a, b in zip([0] + cuts, cuts + [tokens])]
        without = min(requests, max(1, round(no_adapter * requests))) if no_adapter > 0 else 0
        ids = [-1] * without + [rng.randrange(adapters) for _ in range(requests - without)]
        rng.shuffle(ids)
        order = sorted(range(requests), key=lambda r: ids[r])  # the scheduler's adapter-sorted batch
        self.lengths = [lengths[r] for r in order]
        self.adapters = [ids[r] for r in order]
        # One group per adapter present, in sorted order.
        self.groups = []  # (adapter, first row, end row)
        row = 0
        for length, a in zip(self.lengths, self.adapters):
            if self.groups and self.groups[-1][0] == a:
                self.groups[-1] = (a, self.groups[-1][1], row + length)
            else:
                self.groups.append((a, row, row + length))
            row += length
        self.tokens = row
        self.host_offsets = [0] + [end for _, _, end in self.groups]
        rows = [end - start for _, start, end in self.groups]
        i32 = torch.int32
        self.offsets = torch.tensor(self.host_offsets, dtype=i32, device=device)
        self.adapter_ids = torch.tensor([a for a, _, _ in self.groups], dtype=i32, device=device)
        self.usage_stats = torch.tensor([max(rows), len(rows)], dtype=i32, device=device)
        self.max_rows = max(rows)

    def describe(self) -> str:
        parts = [f"{'none' if a < 0 else a}: {end - start}" for a, start, end in self.groups]
        return f"{len(self.lengths)} requests, {self.tokens} tokens; tokens per adapter: " + ", ".join(parts)


# ---- the layer, three ways -----------------------------------------------------


class Weights:
    """Base projections and the stacked LoRA adapters, bf16."""

    def __init__(self, torch, device, hidden, q_dim, kv_dim, rank, adapters, alpha) -> None:
        bf16 = torch.bfloat16

        def rand(*shape, fan_in):
            return (torch.randn(*shape, device=device) * fan_in ** -0.5).to(bf16)

        self.wq = rand(q_dim, hidden, fan_in=hidden)
        self.wk = rand(kv_dim, hidden, fan_in=hidden)
        self.wv = rand(kv_dim, hidden, fan_in=hidden)
        # Per adapter: A = [A_q; A_k; A_v] [3R, H] and B = [B_q; B_k; B_v] [q + 2 kv, R]. B is
        # random (not zero, as at the start of training) so that the delta is as large as the base.
        self.lora_a = rand(adapters, 3 * rank, hidden, fan_in=hidden)
        self.lora_b = rand(adapters, q_dim + 2 * kv_dim, rank, fan_in=rank)
        self.q_dim, self.kv_dim, self.rank = q_dim, kv_dim, rank
        self.scale = alpha / rank


def base_qkv(torch, x, w, q_out, kv_out):
    """The base model's projections into preallocated outputs: q [T, q], kv [2T, kv] (K rows, V rows)."""
    t = x.shape[0]
    torch.mm(x, w.wq.T, out=q_out)
    torch.mm(x, w.wk.T, out=kv_out[:t])
    torch.mm(x, w.wv.T, out=kv_out[t:])


def lora_ggemm(torch, x, w, batch, q_out, kv_out, p, handle):
    """The LoRA delta, added in place into q_out / kv_out: two ggemm launches."""
    ggemm.lora_shrink_qkv(x, w.lora_a, p, batch.offsets, batch.adapter_ids, batch.usage_stats,
                          max_rows_per_group=batch.max_rows, handle=handle)
    ggemm.lora_expand_qkv(p, w.lora_b, q_out, kv_out, batch.offsets, batch.adapter_ids, batch.usage_stats,
                          scale=w.scale, accumulate=True, max_rows_per_group=batch.max_rows, handle=handle)


def lora_torch_loop(torch, x, w, batch, q_out, kv_out):
    """The same update as a per-adapter PyTorch loop (what an engine without fused LoRA kernels does)."""
    t, q, kv, r = x.shape[0], w.q_dim, w.kv_dim, w.rank
    for a, lo, hi in batch.groups:
        if a < 0 or hi == lo:
            continue
        p = x[lo:hi] @ w.lora_a[a].T  # [rows, 3R]
        b = w.lora_b[a]
        q_out[lo:hi].addmm_(p[:, :r], b[:q].T, alpha=w.scale)
        kv_out[lo:hi].addmm_(p[:, r : 2 * r], b[q : q + kv].T, alpha=w.scale)
        kv_out[t + lo : t + hi].addmm_(p[:, 2 * r :], b[q + kv :].T, alpha=w.scale)


def qkv_reference(torch, x, w, batch):
    """Plain PyTorch in fp32: base + (alpha / rank) * (x A^T) B^T per adapter. Returns (q [T, q], kv [2T, kv])."""
    t, q, kv, r = x.shape[0], w.q_dim, w.kv_dim, w.rank
    xf = x.float()
    q_ref = xf @ w.wq.float().T
    kv_ref = torch.cat([xf @ w.wk.float().T, xf @ w.wv.float().T])
    for a, lo, hi in batch.groups:
        if a < 0 or hi == lo:
            continue
        a_w, b_w = w.lora_a[a].float(), w.lora_b[a].float()
        xa = xf[lo:hi]
        q_ref[lo:hi] += w.scale * (xa @ a_w[:r].T) @ b_w[:q].T
        kv_ref[lo:hi] += w.scale * (xa @ a_w[r : 2 * r].T) @ b_w[q : q + kv].T
        kv_ref[t + lo : t + hi] += w.scale * (xa @ a_w[2 * r :].T) @ b_w[q + kv :].T
    return q_ref, kv_ref


# ---- checking and timing -------------------------------------------------------------


def compare(torch, name, out, ref):
    """example_common.compare with this example's wider name column."""
    return example_common.compare(torch, name, out, ref, width=26)


def untouched_without_adapter(torch, batch, q_out, kv_out, q_base, kv_base):
    """Rows of requests with no adapter must hold the base projections bit for bit."""
    t = batch.tokens
    ok = True
    for a, lo, hi in batch.groups:
        if a < 0:
            ok &= bool(torch.equal(q_out[lo:hi], q_base[lo:hi]))
            ok &= bool(torch.equal(kv_out[lo:hi], kv_base[lo:hi]))
            ok &= bool(torch.equal(kv_out[t + lo : t + hi], kv_base[t + lo : t + hi]))
    return ok


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tokens", type=int, default=2048, help="tokens in the batch (all requests together)")
    p.add_argument("--requests", type=int, default=64)
    p.add_argument("--adapters", type=int, default=8, help="LoRA adapters loaded (G)")
    p.add_argument("--no-adapter", type=float, default=0.25, help="fraction of requests without an adapter")
    p.add_argument("--hidden", type=int, default=4096)
    p.add_argument("--q-dim", type=int, default=4096)
    p.add_argument("--kv-dim", type=int, default=1024, help="K and V width each (q-dim for plain multi-head)")
    p.add_argument("--rank", type=int, default=16)
    p.add_argument("--alpha", type=float, default=32.0, help="LoRA alpha: the delta is scaled by alpha / rank")
    p.add_argument("--iters", type=int, default=20, help="timed iterations (0: check only)")
    p.add_argument("--device", type=int, default=0)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    for flag in ("hidden", "q_dim", "kv_dim", "rank"):
        if getattr(args, flag) <= 0 or getattr(args, flag) % 8:
            p.error(f"--{flag.replace('_', '-')} must be a positive multiple of 8 (ggemm's dimensions are)")
    if not 1 <= args.requests <= args.tokens:
        p.error("--requests must be in [1, --tokens]")
    if args.adapters < 1 or not 0.0 <= args.no_adapter <= 1.0:
        p.error("--adapters must be >= 1 and --no-adapter in [0, 1]")

    opened = open_gpu(args.device, args.seed)
    if isinstance(opened, int):  # no library, PyTorch or usable GPU: the exit status
        return opened
    torch, handle, dev = opened
    batch = Batch(torch, dev, args.tokens, args.requests, args.adapters, args.no_adapter, random.Random(args.seed))
    w = Weights(torch, dev, args.hidden, args.q_dim, args.kv_dim, args.rank, args.adapters, args.alpha)
    t, bf16 = batch.tokens, torch.bfloat16
    x = torch.randn(t, args.hidden, device=dev, dtype=bf16)  # rows in the batch's (adapter-sorted) order
    print(f"multi-adapter LoRA Q/K/V on {torch.cuda.get_device_name(dev)}: hidden {args.hidden}, q {args.q_dim}, "
          f"k/v {args.kv_dim}, rank {args.rank}, alpha {args.alpha:g}, {args.adapters} adapters, bf16 "
          f"(PyTorch {torch.__version__})")
    print(f"  {batch.describe()}")

    q_out = torch.empty(t, args.q_dim, dtype=bf16, device=dev)
    kv_out = torch.empty(2 * t, args.kv_dim, dtype=bf16, device=dev)
    p_buf = torch.empty(3, t, args.rank, dtype=bf16, device=dev)

    def layer_ggemm():
        base_qkv(torch, x, w, q_out, kv_out)
        lora_ggemm(torch, x, w, batch, q_out, kv_out, p_buf, handle)

    def layer_torch():
        base_qkv(torch, x, w, q_out, kv_out)
        lora_torch_loop(torch, x, w, batch, q_out, kv_out)

    q_ref, kv_ref = qkv_reference(torch, x, w, batch)
    print("check against plain PyTorch in fp32 (base projections + a per-adapter loop):")
    base_qkv(torch, x, w, q_out, kv_out)
    q_base, kv_base = q_out.clone(), kv_out.clone()
    lora_ggemm(torch, x, w, batch, q_out, kv_out, p_buf, handle)
    torch.cuda.synchronize()
    ok = compare(torch, "ggemm q_out", q_out, q_ref)
    ok &= compare(torch, "ggemm kv_out (K and V)", kv_out, kv_ref)
    if any(a >= 0 for a, _, _ in batch.groups):  # the delta alone (what ggemm added), when there is one
        delta_ref = torch.cat([(q_ref - q_base.float()).flatten(), (kv_ref - kv_base.float()).flatten()])
        delta_got = torch.cat([(q_out.float() - q_base.float()).flatten(),
                               (kv_out.float() - kv_base.float()).flatten()])
        ok &= compare(torch, "ggemm LoRA delta", delta_got, delta_ref)
    if any(a < 0 for a, _, _ in batch.groups):
        same = untouched_without_adapter(torch, batch, q_out, kv_out, q_base, kv_base)
        print(f"  {'no-adapter rows':<26} {'equal to the base projections bit for bit' if same else 'CHANGED'}   "
              f"{'OK' if same else 'MISMATCH'}")
        ok &= same
    layer_torch()
    torch.cuda.synchronize()
    compare(torch, "torch loop q_out", q_out, q_ref)
    compare(torch, "torch loop kv_out", kv_out, kv_ref)
    if not ok:
        print("FAILED: ggemm's LoRA Q/K/V output does not match PyTorch's", file=sys.stderr)
        return 1

    if args.iters > 0:
        lora_runs = [
            ("ggemm (shrink + expand)", lambda: lora_ggemm(torch, x, w, batch, q_out, kv_out, p_buf, handle),
             layer_ggemm),
            ("per-adapter torch loop", lambda: lora_torch_loop(torch, x, w, batch, q_out, kv_out), layer_torch),
        ]
        active = sum(hi - lo for a, lo, hi in batch.groups if a >= 0)
        flops = 2.0 * active * args.rank * (3 * args.hidden + args.q_dim + 2 * args.kv_dim)
        base_ms = cuda_ms(torch, lambda: base_qkv(torch, x, w, q_out, kv_out), args.iters)
        print(f"time, mean of {args.iters} runs ({active} tokens with an adapter, LoRA {flops / 1e9:.2f} GFLOP; "
              f"base Q/K/V projections alone {base_ms:.3f} ms):")
        print(f"  {'':<26} {'LoRA update':>12} {'base + LoRA':>14}")
        times = []
        for name, lora_fn, layer_fn in lora_runs:
            lora_ms, layer_ms = cuda_ms(torch, lora_fn, args.iters), cuda_ms(torch, layer_fn, args.iters)
            times.append(lora_ms)
            print(f"  {name:<26} {lora_ms:>9.3f} ms {layer_ms:>11.3f} ms")
        print(f"  LoRA update: ggemm runs at {times[1] / times[0]:.2f}x the speed of the per-adapter loop "
              f"({len([g for g in batch.groups if g[0] >= 0])} adapters in the batch)")
    handle.close()
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
