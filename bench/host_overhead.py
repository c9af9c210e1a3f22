#!/usr/bin/env python3
"""Host time per eager Python call: ggemm's entry points beside torch._grouped_mm.

    GGEMM_LIBRARY=build/libggemm.so PYTHONPATH=python python3 bench/host_overhead.py [--calls 2000]

A problem too small for the GPU to matter (8 experts of 8 rows, N 128,
K 128, bf16) is enqueued `calls` times in a loop with no synchronisation;
the host time of the loop over the calls is the host cost per call (the
GPU keeps up: each kernel takes a few microseconds). Rows, each the median
of 5 loops:
  torch.matmul                       a plain PyTorch op, for scale
  torch._grouped_mm                  the drop-in's anchor
  ggemm.torch.grouped_mm             the drop-in (torch's signature; torch's offs passed as group_ends)
  torch.ops.ggemm.grouped_matmul     the operator (torch.library dispatch, then the fast path)
  ggemm.grouped_matmul               the framework-neutral call; torch tensors take the fast path
and the split of the last one: the fast path's checks and struct (the C call
left out), the C call alone (ctypes, the struct by address: the library's
checks, plan, tensor maps and launch), and for comparison the general path
that other array types take (TensorInfo descriptions, a ctypes struct built
field by field, its C call).

The MoE layer, at one token of a layer too small for the GPU to matter
(8 experts, H 128, I 64, top-2; a decode step's call as an eager model
makes it):
  torch MoE layer                    the torch layer's glue around torch._grouped_mm
                                     (routing metadata as a model builds it each step:
                                     sort, bincount, cumsum, no host sync)
  ggemm.torch.moe_ffn                the torch entry point (eager: no operator dispatch)
  ggemm.moe_ffn                      the framework-neutral call (TensorInfo descriptions)
  the C call (ggemm_moe_ffn)         the library alone on a built struct: checks, plans,
                                     tensor maps, its launches
"""
import argparse
import ctypes
import statistics
import time

import torch

import ggemm
import ggemm.torch as gt
from ggemm import _core, _torch_args

E, ROWS, N, K = 8, 8, 128, 128
MOE_E, MOE_H, MOE_I, MOE_K = 8, 128, 64, 2


def per_call_us(fn, calls):
    """Median over 5 loops of the host time per call, in microseconds."""
    for _ in range(50):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        t1 = time.perf_counter()
        torch.cuda.synchronize()
        times.append((t1 - t0) / calls * 1e6)
    return statistics.median(times)


def torch_moe_layer(x, w_gate_up, w_down, ids, weights):
    """The torch layer's glue at one decode step, routing metadata included
    (no host sync: torch._grouped_mm takes the group ends on the device)."""
    t, k = ids.shape
    flat = ids.reshape(-1).long()
    order = torch.argsort(flat, stable=True)
    ends = torch.bincount(flat, minlength=w_gate_up.shape[0]).cumsum(0).to(torch.int32)
    i = w_down.shape[2]
    h = torch._grouped_mm(x.index_select(0, order // k), w_gate_up.transpose(-2, -1), offs=ends)
    a = torch.nn.functional.silu(h[:, :i]) * h[:, i:]
    y = torch._grouped_mm(a, w_down.transpose(-2, -1), offs=ends)
    y = (y.float() * weights.reshape(-1)[order, None]).to(x.dtype)
    out = torch.empty(t * k, x.shape[1], dtype=x.dtype, device=x.device).index_copy_(0, order, y)
    return out.view(t, k, -1).sum(1)


def moe_rows():
    """The MoE layer's rows (the module docstring)."""
    from ggemm import _capi, _moe

    dev = "cuda"
    x = torch.randn(1, MOE_H, device=dev, dtype=torch.bfloat16)
    w_gate_up = torch.randn(MOE_E, 2 * MOE_I, MOE_H, device=dev, dtype=torch.bfloat16)
    w_down = torch.randn(MOE_E, MOE_H, MOE_I, device=dev, dtype=torch.bfloat16)
    ids = torch.tensor([[1, 5]], dtype=torch.int32, device=dev)
    weights = torch.tensor([[0.75, 0.25]], dtype=torch.float32, device=dev)
    operands = (x, w_gate_up, w_down, ids, weights)
    stream = torch._C._cuda_getCurrentRawStream(0)
    built = _moe._build_moe_ffn_args(*operands, stream=stream, allocate=_moe._allocator(x, stream))
    keep = _moe.attach_workspace(built.args, _moe.backend_of(x), 0, stream)
    fn = _capi.require_function(_capi.load_library(), "ggemm_moe_ffn")
    handle = _core.default_handle(0).ptr
    args_ref = ctypes.byref(built.args)
    # The GPU's own time per call (20 calls in a CUDA graph): the host rows
    # mean host time only where they are above it.
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        for _ in range(3):
            gt.moe_ffn(*operands)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, stream=s):
            for _ in range(20):
                gt.moe_ffn(*operands)
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(50):
        g.replay()
    end.record()
    torch.cuda.synchronize()
    print(f"(ggemm.torch.moe_ffn on the GPU: {start.elapsed_time(end) * 1e3 / 1000:.1f} us a call, graph-replayed)")
    return {
        "torch MoE layer": lambda: torch_moe_layer(*operands),
        "ggemm.torch.moe_ffn": lambda: gt.moe_ffn(*operands),
        "ggemm.moe_ffn": lambda: ggemm.moe_ffn(*operands),
        "  the C call (ggemm_moe_ffn)": lambda: (keep, fn(handle, args_ref, stream)),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=2000)
    args = ap.parse_args()
    dev = "cuda"
    m = E * ROWS
    x = torch.randn(m, K, device=dev, dtype=torch.bfloat16)
    w = torch.randn(E, N, K, device=dev, dtype=torch.bfloat16)
    out = torch.empty(m, N, device=dev, dtype=torch.bfloat16)
    ends = torch.arange(1, E + 1, dtype=torch.int32, device=dev) * ROWS
    offsets = torch.arange(0, E + 1, dtype=torch.int32, device=dev) * ROWS
    ids = torch.arange(E, dtype=torch.int32, device=dev)
    usage = torch.tensor([ROWS, E], dtype=torch.int32, device=dev)
    wt = w.transpose(-2, -1)
    sq = torch.randn(m, K, device=dev, dtype=torch.bfloat16)
    sw = torch.randn(K, N, device=dev, dtype=torch.bfloat16)

    rows = {
        "torch.matmul": lambda: torch.matmul(sq, sw),
        "torch._grouped_mm": lambda: torch._grouped_mm(x, wt, offs=ends),
        "ggemm.torch.grouped_mm": lambda: gt.grouped_mm(x, wt, ends),
        "torch.ops.ggemm.grouped_matmul": lambda: torch.ops.ggemm.grouped_matmul(
            x, w, out, offsets, ids, usage, True, "store", None, 0),
        "ggemm.grouped_matmul": lambda: ggemm.grouped_matmul(x, w, out, offsets, ids, usage),
    }
    tensors = (x, w, out, offsets, ids, usage)
    # The fast path without its C call, and the C call alone on the struct
    # the fast path packed (this thread's).
    fast = _torch_args.grouped_matmul
    real_call = _torch_args._call

    def checks_and_struct():
        _torch_args._call = lambda address, device, stream, handle: True
        try:
            return fast(*tensors)
        finally:
            _torch_args._call = real_call

    assert fast(*tensors), "the torch fast path did not take the benchmark's call"
    handle_ptr, fn = _torch_args._default_entry(0)
    address = _torch_args._mine.address
    stream = torch._C._cuda_getCurrentRawStream(0)
    built = _core._build_args(*tensors, stream=stream)  # the general path's struct
    split = {
        "  checks and struct (fast path)": checks_and_struct,
        "  the C call (ctypes, by address)": lambda: fn(handle_ptr, address, stream),
        "general path (other array types)": lambda: _core._grouped_matmul_general(*tensors),
        "  resolve_stream": lambda: _core.resolve_stream(None, tensors),
        "  _build_args": lambda: _core._build_args(*tensors, stream=stream),
        "  its C call (ctypes)": lambda: _core._launch("ggemm_grouped_matmul", built, stream, None),
    }
    split.update(moe_rows())
    print(f"host time per call, median of 5 loops of {args.calls} calls "
          f"({torch.cuda.get_device_name()}, torch {torch.__version__})")
    results = {}
    for name, fn_ in {**rows, **split}.items():
        results[name] = per_call_us(fn_, args.calls)
        print(f"{name:34s} {results[name]:8.1f} us")
    anchor = results["torch._grouped_mm"]
    for name in ("ggemm.torch.grouped_mm", "torch.ops.ggemm.grouped_matmul", "ggemm.grouped_matmul"):
        print(f"{name} / torch._grouped_mm: {results[name] / anchor:.2f}")
    for name in ("ggemm.torch.moe_ffn", "ggemm.moe_ffn"):
        print(f"{name} / torch MoE layer: {results[name] / results['torch MoE layer']:.2f}")


if __name__ == "__main__":
    main()
