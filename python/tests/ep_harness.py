"""Expert-parallel cases on N processes, for test_expert_parallel.py (CPU, gloo,
a pure-torch local layer) and test_gpu_expert_parallel.py (one GPU per rank,
NCCL, ggemm.moe_ffn). Imported after torch (the test modules skip without it).

Each rank runs every case of CASES: its own tokens and routing, the exchange of
examples/python/expert_parallel.py around a local layer, and the whole layer
on one device (every expert) on the same tokens. A rank records, per case and
local layer, whether the two agree within bf16's tolerance, the exchange's
counts and its routing; check_case() then checks it all in the test process.
Failures are recorded, not raised, so that no rank is left waiting in a
collective for one that stopped.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
import zlib

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from conftest import REPO
from moe_reference import assert_layer, reference

sys.path.insert(0, str(REPO / "examples" / "python"))
import expert_parallel as ep  # noqa: E402

HIDDEN, INTER, EXPERTS, TOP_K = 256, 128, 8, 3  # sizes ggemm takes (multiples of 8); 1 or 2 ranks (all_remote needs E / N >= k)
CASES = ("balanced", "skewed", "all_remote", "receives_none", "no_tokens", "ragged")
WAIT_S = 240  # the longest a run may take before its ranks are ended


def tokens_of(case: str, rank: int, world: int) -> int:
    """Different counts per rank (the exchange must not assume equal ones); none on the last rank for no_tokens."""
    return 0 if case == "no_tokens" and rank == world - 1 else 40 + 13 * rank


def routing(case: str, rank: int, world: int, tokens: int, gen: torch.Generator):
    """int32 ids and fp32 weights [T, k] of one case on one rank (CPU tensors):
    balanced       softmax top-k of random logits, renormalised
    skewed         the same with a steep prior (-3 log(1 + e)): most rows on experts 0 and 1, rank 0's
    all_remote     even tokens: all k experts on the next rank (the only rank for world 1); odd: balanced
    receives_none  every expert in rank 0's range: the other ranks receive nothing (for world 1: every
                   id -1, so rank 0 receives nothing)
    no_tokens      balanced, and the last rank has no tokens at all
    ragged         balanced, then -1 slots, a token with no expert, ids past E, a token naming one
                   expert twice, a NaN weight (the slot is dropped)"""
    logits = torch.randn(tokens, EXPERTS, generator=gen)
    if case == "skewed":
        logits = logits - 3.0 * torch.log1p(torch.arange(EXPERTS, dtype=torch.float32))
    local = EXPERTS // world
    if case == "receives_none" and world > 1:
        logits[:, local:] = float("-inf")
    w, ids = torch.topk(torch.softmax(logits, dim=-1), TOP_K, dim=-1)
    w = w / w.sum(-1, keepdim=True)
    ids = ids.to(torch.int32)
    if case == "all_remote":
        first = ((rank + 1) % world) * local
        pick = torch.stack([torch.randperm(local, generator=gen)[:TOP_K] for _ in range(0, tokens, 2)])
        ids[0::2] = (first + pick).to(torch.int32)
    elif case == "receives_none" and world == 1:
        ids.fill_(-1)
    elif case == "ragged" and tokens >= 6:
        ids[0, 1] = -1
        ids[1] = -1
        ids[2, 0] = EXPERTS + 3
        ids[3, 2] = ids[3, 0]
        w[4, 1] = float("nan")
    return ids, w.contiguous()


def weights(device):
    """The same on every rank (one seed): w_gate_up [E, 2I, H], w_down [E, H, I] bf16."""
    gen = torch.Generator().manual_seed(zlib.crc32(b"expert parallel weights"))
    w_gate_up = (torch.randn(EXPERTS, 2 * INTER, HIDDEN, generator=gen) * HIDDEN ** -0.5).to(torch.bfloat16)
    w_down = (torch.randn(EXPERTS, HIDDEN, INTER, generator=gen) * INTER ** -0.5).to(torch.bfloat16)
    return w_gate_up.to(device), w_down.to(device)


def _reference_ffn(x, w_gate_up, w_down, ids, w, first_expert=0, num_experts=None):
    """moe_reference.reference with ggemm.moe_ffn's keywords (num_experts only matters to ggemm's checked mode)."""
    return reference(x, w_gate_up, w_down, ids, w, first_expert=first_expert)


def _layers(kind: str, shard: ep.ExpertShard, w_gate_up, w_down):
    """(local layer over the shard's experts, the whole layer over all experts) of one kind."""
    lo, hi = shard.first_expert, shard.first_expert + shard.local_experts
    if kind == "ggemm":
        import ggemm

        return (ep.local_moe_ffn(ggemm.moe_ffn, w_gate_up[lo:hi], w_down[lo:hi], shard),
                lambda x, ids, w: ggemm.moe_ffn(x, w_gate_up, w_down, ids, w))
    whole = lambda x, ids, w: reference(x, w_gate_up, w_down, ids, w)  # noqa: E731
    if kind == "reference":
        return ep.local_moe_ffn(_reference_ffn, w_gate_up[lo:hi], w_down[lo:hi], shard), whole
    if kind == "torch":  # the example's torch local step (bench/moe_layer.py's torch layer)
        import moe_expert_parallel

        return moe_expert_parallel.torch_local_layer(w_gate_up[lo:hi], w_down[lo:hi], shard), whole
    raise ValueError(f"unknown local layer {kind!r}")


def _mismatch(got, want, what):
    """None when got matches want within bf16's tolerance, else the message."""
    try:
        assert_layer(got, want, what)
        return None
    except AssertionError as e:
        return str(e)


def _worker(rank, world, backend, init_method, kinds, result_dir):
    ep.disable_multicast()
    if backend == "nccl":
        device = torch.device("cuda", rank)
        torch.cuda.set_device(device)
        dist.init_process_group("nccl", init_method=init_method, rank=rank, world_size=world, device_id=device)
    else:
        device = torch.device("cpu")
        dist.init_process_group(backend, init_method=init_method, rank=rank, world_size=world)
    shard = ep.ExpertShard.of_group(EXPERTS)
    w_gate_up, w_down = weights(device)
    layers = {kind: _layers(kind, shard, w_gate_up, w_down) for kind in kinds}
    results = {}
    for case in CASES:
        gen = torch.Generator().manual_seed(zlib.crc32(f"{case} {rank} {world}".encode()))
        tokens = tokens_of(case, rank, world)
        x = torch.randn(tokens, HIDDEN, generator=gen).to(torch.bfloat16).to(device)
        ids, w = (t.to(device) for t in routing(case, rank, world, tokens, gen))
        sent = ep.dispatch(x, ids, w, shard).exchange
        row = {"tokens": tokens, "ids": ids.tolist(), "send_counts": sent.send_counts,
               "recv_counts": sent.recv_counts, "errors": {}, "local_only_matches": {}}
        for kind, (local, whole) in layers.items():
            want = whole(x, ids, w)
            got = ep.expert_parallel_layer(x, ids, w, shard, local)
            row["errors"][kind] = _mismatch(got, want, f"rank {rank} of {world}, {case}, {kind} local layer")
            # Whether this rank's experts alone would pass as well: if they would, the
            # comparison above could not tell a working exchange from none.
            row["local_only_matches"][kind] = _mismatch(local(x, ids, w), want, "") is None
        results[case] = row
    dist.destroy_process_group()
    with open(os.path.join(result_dir, f"rank{rank}.json"), "w") as f:
        json.dump(results, f)


def run_ranks(world: int, backend: str, kinds):
    """Every case on `world` processes; returns [rank] -> {case: what the rank recorded}.
    An exception in a rank is raised here with its traceback; a run past WAIT_S is ended."""
    with tempfile.TemporaryDirectory() as tmp:
        ctx = mp.start_processes(_worker, args=(world, backend, f"file://{tmp}/store", tuple(kinds), tmp),
                                 nprocs=world, join=False, start_method="spawn")
        deadline = time.monotonic() + WAIT_S
        while not ctx.join(timeout=5):
            if time.monotonic() > deadline:
                for p in ctx.processes:
                    if p.is_alive():
                        p.terminate()
                raise TimeoutError(f"{world} {backend} ranks did not finish in {WAIT_S} s (a collective waiting "
                                   "for a rank that never joined it?)")
        out = []
        for rank in range(world):
            with open(os.path.join(tmp, f"rank{rank}.json")) as f:
                out.append(json.load(f))
        return out


def expected_sends(ids, world):
    """Rows a rank sends to each rank, counted without the exchange's code: token t goes
    once to each rank owning one of its ids in [0, E)."""
    local = EXPERTS // world
    counts = [0] * world
    for row in ids:
        for dest in {e // local for e in row if 0 <= e < EXPERTS}:
            counts[dest] += 1
    return counts


def check_case(results, case: str):
    """Asserts that every rank of a run_ranks() result got case `case` right, and that
    the case routed as it claims (so that it tests what it names)."""
    world = len(results)
    rows = [r[case] for r in results]
    for rank, row in enumerate(rows):
        for kind, err in row["errors"].items():
            assert err is None, err
        assert row["send_counts"] == expected_sends(row["ids"], world), f"rank {rank}: rows sent per rank"
        # What rank s sent to this rank is what this rank received from s.
        assert row["recv_counts"] == [rows[s]["send_counts"][rank] for s in range(world)], f"rank {rank}"
        assert row["tokens"] == len(row["ids"]) == tokens_of(case, rank, world)
    local = EXPERTS // world
    if case == "receives_none":
        for rank in range(1 if world > 1 else 0, world):
            assert sum(rows[rank]["recv_counts"]) == 0, f"rank {rank} received rows"
    elif case == "all_remote":
        for rank, row in enumerate(rows):
            nxt = (rank + 1) % world
            assert all(e // local == nxt for ids in row["ids"][0::2] for e in ids)
            if world > 1:
                assert row["send_counts"][nxt] >= len(row["ids"][0::2])
    elif case == "no_tokens":
        assert rows[-1]["tokens"] == 0 and sum(rows[-1]["send_counts"]) == 0
    if world > 1 and case in ("balanced", "all_remote"):
        for rank, row in enumerate(rows):
            assert not any(row["local_only_matches"].values()), \
                f"rank {rank}: its own experts alone match the whole layer: the check cannot see the exchange"
