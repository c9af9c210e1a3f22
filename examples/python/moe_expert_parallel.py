#!/usr/bin/env python3
"""Expert parallelism: ggemm's MoE layer on N GPUs, tokens exchanged with torch.distributed (NCCL all-to-all).

    GGEMM_LIBRARY=build/libggemm.so PYTHONPATH=python python3 examples/python/moe_expert_parallel.py --ranks 2
    # or: torchrun --nproc-per-node 2 examples/python/moe_expert_parallel.py
    # smaller: --tokens 512 --model small; check only: --check-only; skewed routing: --routing zipf

N ranks (one GPU each) hold E / N experts each. Every rank has its own
tokens (--tokens per rank) and routes them with the same router (a linear
layer over all E experts, softmax, top-k, renormalised); then
examples/python/expert_parallel.py dispatches each token to the ranks owning
its experts, runs the local layer over the rank's expert range on what it
received, and combines the partial outputs back on the token's rank.

Local layer, two ways:
  ggemm  ggemm.moe_ffn(..., first_expert=, num_experts=): one call; other
         ranks' ids stay in the top-k and add nothing
  torch  bench/moe_layer.py's torch layer (index_select, torch._grouped_mm,
         silu * mul, torch._grouped_mm, weighted combine), its sorted-row
         metadata built on every call (the received tokens change every call;
         that build syncs with the host twice)

Check: on every rank, the expert-parallel output against the whole layer on
one GPU (ggemm.moe_ffn with all E experts, first_expert 0) on the same
tokens; each rank holds all E experts' weights for that (and uses its slice
for the parallel layer). Timing (unless --check-only): CUDA events split
each call into dispatch (the routing bookkeeping, the counts exchange and its
host sync, the rows, ids and weights exchange), local layer and combine
(reverse exchange, fp32 sum); median over --iters calls, each after a
barrier; the slowest rank's median per phase is reported.

NVLink multicast is turned off (NCCL_NVLS_ENABLE=0,
TORCH_SYMM_MEM_DISABLE_MULTICAST=1, NVSHMEM_DISABLE_NVLS=1) before any
process group exists. Exit status: 0 when the checks pass, and (saying
SKIPPED) without PyTorch or a GPU; 1 when a check fails or too few GPUs.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import tempfile
import zlib

# Finds a checkout's package and build/libggemm.so when ggemm is not installed.
from example_common import REPO, compare, open_gpu, torch_with_cuda

try:
    import torch  # noqa: F401  (the exchange, expert_parallel.py, is torch.distributed)
except ImportError:
    print("SKIPPED: PyTorch is not installed; this example runs torch.distributed (NCCL) around ggemm on GPUs")
    sys.exit(0)

import expert_parallel as ep
import ggemm

# name: (hidden, moe ffn, experts, top-k)
MODELS = {
    "deepseek_v3": (7168, 2048, 256, 8),
    "qwen3_30b_a3b": (2048, 768, 128, 8),
    "small": (1024, 512, 32, 4),
}
PHASES = ("dispatch", "local", "combine", "total")
# mark() names around each phase (expert_parallel.expert_parallel_layer)
PHASE_EVENTS = {"dispatch": ("start", "dispatched"), "local": ("dispatched", "computed"),
                "combine": ("computed", "combined"), "total": ("start", "combined")}


def model_sizes(spec: str):
    """(hidden, ffn, experts, top_k) of a MODELS name or of "H,I,E,k"."""
    if spec in MODELS:
        return MODELS[spec]
    try:
        h, i, e, k = (int(v) for v in spec.split(","))
    except ValueError:
        raise ValueError(f"--model: {spec!r} is neither one of {', '.join(MODELS)} nor H,I,E,k") from None
    return h, i, e, k


# ---- the problem, the same on every rank but for the tokens ---------------------------


def make_weights(torch, hidden, inter, experts, seed, dev):
    """w_gate_up [E, 2I, H], w_down [E, H, I] bf16 (randn / sqrt(K)), the router [E, H] and, for
    skewed routing, a Zipf 1.2 prior over a random order of the experts: from `seed` alone,
    so every rank makes the same ones. One expert at a time: no fp32 copy of all the weights."""
    gen = torch.Generator(device=dev).manual_seed(seed)
    w_gate_up = torch.empty(experts, 2 * inter, hidden, device=dev, dtype=torch.bfloat16)
    w_down = torch.empty(experts, hidden, inter, device=dev, dtype=torch.bfloat16)
    for e in range(experts):
        w_gate_up[e] = torch.randn(2 * inter, hidden, device=dev, generator=gen) / math.sqrt(hidden)
        w_down[e] = torch.randn(hidden, inter, device=dev, generator=gen) / math.sqrt(inter)
    w_router = torch.randn(experts, hidden, device=dev, generator=gen) / math.sqrt(hidden)
    rank = torch.empty(experts, device=dev)
    rank[torch.randperm(experts, device=dev, generator=gen)] = torch.arange(experts, dtype=torch.float32, device=dev)
    zipf_prior = -1.2 * torch.log1p(rank)
    return w_gate_up, w_down, w_router, zipf_prior


def route(torch, x, w_router, top_k, prior=None):
    """The router: logits over all experts (plus a prior), softmax, top-k, renormalised;
    int32 ids and fp32 weights [T, k]."""
    logits = x.float() @ w_router.T
    if prior is not None:
        logits = logits + prior
    w, ids = torch.topk(torch.softmax(logits, dim=-1), top_k, dim=-1)
    return ids.to(torch.int32), (w / w.sum(-1, keepdim=True)).contiguous()


def torch_local_layer(w_gate_up, w_down, shard: ep.ExpertShard):
    """bench/moe_layer.py's torch layer over this rank's experts, imported rather than copied."""
    sys.path.insert(0, os.path.join(REPO, "bench"))
    from moe_layer import SortedRows, torch_layer

    def layer(x, topk_ids, topk_weights):
        rows = SortedRows(topk_ids, topk_weights, shard.local_experts, shard.first_expert)
        return torch_layer(x, w_gate_up, w_down, rows)

    return layer


# ---- one rank ------------------------------------------------------------------------------


def time_phases(torch, dist, layer, iters: int, warmup: int = 3):
    """{phase: median ms} of this rank over `iters` calls of layer(mark), each after a barrier."""
    samples = {p: [] for p in PHASES}
    for i in range(warmup + iters):
        torch.cuda.synchronize()
        dist.barrier()
        events = {}

        def mark(name):
            events[name] = torch.cuda.Event(enable_timing=True)
            events[name].record()

        layer(mark)
        events["combined"].synchronize()
        if i >= warmup:
            for p, (a, b) in PHASE_EVENTS.items():
                samples[p].append(events[a].elapsed_time(events[b]))
    return {p: statistics.median(v) for p, v in samples.items()}


def run_rank(rank: int, world: int, args, init_method: str, local_rank: int) -> int:
    """One rank's whole run; returns the exit status (the same on every rank)."""
    ep.disable_multicast()  # again here: under torchrun this is the first code that runs
    opened = open_gpu(local_rank, args.seed + rank)
    if isinstance(opened, int):
        return opened
    torch, handle, dev = opened
    import torch.distributed as dist

    dist.init_process_group("nccl", init_method=init_method, rank=rank, world_size=world, device_id=dev)
    try:
        return _run(torch, dist, handle, dev, rank, world, args)
    finally:
        dist.destroy_process_group()


def _run(torch, dist, handle, dev, rank, world, args) -> int:
    hidden, inter, experts, top_k = model_sizes(args.model)
    shard = ep.ExpertShard(experts, world, rank)
    lo, hi = shard.first_expert, shard.first_expert + shard.local_experts
    w_gate_up, w_down, w_router, zipf_prior = make_weights(
        torch, hidden, inter, experts, zlib.crc32(f"{args.model} {args.seed}".encode()), dev)
    x = torch.randn(args.tokens, hidden, device=dev).to(torch.bfloat16)  # seeded by rank: each has its own
    ids, weights = route(torch, x, w_router, top_k, zipf_prior if args.routing == "zipf" else None)
    locals_ = {
        "ggemm": ep.local_moe_ffn(ggemm.moe_ffn, w_gate_up[lo:hi], w_down[lo:hi], shard, handle=handle),
        "torch": torch_local_layer(w_gate_up[lo:hi], w_down[lo:hi], shard),
    }
    if rank == 0:
        print(f"{world} rank(s) x {torch.cuda.get_device_name(dev)}: hidden {hidden}, moe ffn {inter}, "
              f"{experts} experts ({shard.local_experts} per rank), top-{top_k}, {args.tokens} tokens per rank, "
              f"{args.routing} routing, bf16 (PyTorch {torch.__version__})", flush=True)

    # The check: every rank against the whole layer on one GPU, on its own tokens.
    single = ggemm.moe_ffn(x, w_gate_up, w_down, ids, weights, handle=handle)
    ok = True
    for name, local in locals_.items():
        out = ep.expert_parallel_layer(x, ids, weights, shard, local)
        torch.cuda.synchronize()
        ok &= compare(torch, f"rank {rank}: {name} local", out, single, width=20)
    received = ep.dispatch(x, ids, weights, shard).x.shape[0]
    flags = torch.tensor([0 if ok else 1], device=dev)
    dist.all_reduce(flags)  # every rank learns whether any failed, so all exit alike
    rows = [torch.zeros(1, dtype=torch.int64, device=dev) for _ in range(world)]
    dist.all_gather(rows, torch.tensor([received], device=dev))
    rows = [int(r) for r in rows]
    if rank == 0:
        print(f"tokens received per rank: {rows}", flush=True)
    if flags.item():
        if rank == 0:
            print(f"FAILED: the expert-parallel layer differs from the single-GPU layer on {flags.item()} "
                  f"rank(s)", file=sys.stderr)
        return 1
    if args.check_only:
        if rank == 0:
            print(f"OK: {world} rank(s) match the single-GPU layer (ggemm and torch local layers)")
        return 0

    results = {}
    for name, local in locals_.items():
        mine = time_phases(torch, dist, lambda mark: ep.expert_parallel_layer(x, ids, weights, shard, local,
                                                                             mark=mark), args.iters)
        slowest = torch.tensor([mine[p] for p in PHASES], device=dev)
        dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
        results[name] = dict(zip(PHASES, slowest.tolist()))
    if rank == 0:
        report(results, rows, world, args)
    return 0


def report(results, rows, world, args):
    print(f"\nper call, ms (median of {args.iters}; each phase the slowest rank's):")
    print(f"  {'phase':<10}" + "".join(f"{n + ' local':>14}" for n in results) + f"{'torch / ggemm':>15}")
    for p in PHASES:
        cells = "".join(f"{results[n][p]:>14.3f}" for n in results)
        print(f"  {p:<10}{cells}{results['torch'][p] / results['ggemm'][p]:>14.2f}x")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"ranks": world, "model": args.model, "sizes": model_sizes(args.model), "tokens_per_rank":
                       args.tokens, "routing": args.routing, "iters": args.iters, "received_rows": rows,
                       "ms": results}, f, indent=1)
    print(f"OK: {world} rank(s) match the single-GPU layer; times above")


def _spawned(rank, world, args, init_method):
    """A rank started by torch.multiprocessing.spawn: its status as the exit code."""
    status = run_rank(rank, world, args, init_method, local_rank=rank)
    if status:
        sys.exit(status)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--ranks", type=int, default=None,
                   help="processes to spawn, one GPU each (default 1; under torchrun its world size)")
    p.add_argument("--tokens", type=int, default=4096, help="tokens per rank")
    p.add_argument("--model", default="deepseek_v3", help=f"{', '.join(MODELS)}, or H,I,E,k")
    p.add_argument("--routing", choices=("balanced", "zipf"), default="balanced")
    p.add_argument("--iters", type=int, default=20, help="timed calls")
    p.add_argument("--check-only", action="store_true", help="check, do not time")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", help="rank 0 writes the times here")
    args = p.parse_args(argv)
    try:
        hidden, inter, experts, top_k = model_sizes(args.model)
    except ValueError as e:
        p.error(str(e))
    if args.tokens < 1 or args.iters < 1 or not 1 <= top_k <= experts:
        p.error("--tokens and --iters must be >= 1, and top-k in [1, experts]")

    ep.disable_multicast()  # before any process group, and inherited by spawned ranks
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:  # under torchrun: this process is one rank
        world = int(os.environ["WORLD_SIZE"])
        if args.ranks not in (None, world):
            p.error(f"--ranks {args.ranks} disagrees with torchrun's world size {world}")
        return run_rank(int(os.environ["RANK"]), world, args, "env://", int(os.environ.get("LOCAL_RANK", 0)))

    world = args.ranks or 1
    if world < 1 or experts % world:
        p.error(f"--ranks {world}: the {experts} experts must split evenly over the ranks")
    torch = torch_with_cuda("runs ggemm under torch.distributed on GPUs")
    if torch is None:
        return 0
    if torch.cuda.device_count() < world:
        print(f"error: {world} ranks need {world} GPUs (one each: NCCL refuses two ranks on one GPU); "
              f"this machine has {torch.cuda.device_count()}", file=sys.stderr)
        return 1
    import torch.multiprocessing as mp

    with tempfile.TemporaryDirectory() as tmp:  # a file store: no port to pick or collide on
        try:
            mp.spawn(_spawned, args=(world, args, f"file://{tmp}/store"), nprocs=world)
        except mp.ProcessExitedException as e:
            return e.exit_code if e.exit_code and e.exit_code > 0 else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
